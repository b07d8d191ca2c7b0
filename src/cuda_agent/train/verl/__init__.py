"""The verl engine (a Ray cluster): the four-stage `recipe.py` and what it names; `loop.py` imports verl."""
