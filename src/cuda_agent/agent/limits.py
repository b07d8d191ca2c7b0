"""Turns per episode, in one light module: the CLIs' defaults import it without the agent."""

EVAL_MAX_TURNS = 200
"""Turns per episode when evaluating (SPEC §2: up to 200 at evaluation, 150 in training)."""
TRAIN_MAX_TURNS = 150
"""Turns per episode in training (shorter rollouts; SPEC §2)."""
