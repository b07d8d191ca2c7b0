"""Process isolation shared by every layer that runs untrusted or long-lived code.

- `processes`: process-group hygiene (die with the parent, run locks, SIGTERM handling);
- `sandbox`: what a process may touch (scrubbed environment, scratch dirs, Landlock,
  seccomp, rlimits, namespaces);
- `worker`: a watched child process (its tree, memory, death reason, kill);
- `channel`: length-prefixed JSON frames (and raw tensor bytes) over a private pipe;
- `confine`: a tiny launcher that applies write confinement, then execs a command.

It sits at the bottom of the layers (beside `tasks` and `backends`): evaluation, the agent's
bash tool and data synthesis all isolate through this API, so there is one set of rules.
"""
