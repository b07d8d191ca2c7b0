"""The agent: tools, policies, the ReAct loop, trajectories and batch runs."""
