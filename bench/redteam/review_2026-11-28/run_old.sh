#!/bin/sh
# the same cases on the judge at b1d113d (before the change): PYTHONPATH puts the old src first
cd /work/main && PYTHONPATH=bench/redteam/review_2026-11-28/old_src/src .venv/bin/python -c "import cuda_agent,sys; print(cuda_agent.__file__, file=sys.stderr)" && \
PYTHONPATH=bench/redteam/review_2026-11-28/old_src/src .venv/bin/python bench/redteam/review_2026-11-28/cases.py "$@"
