"""Process isolation shared by every layer that runs untrusted or long-lived code.

processes (hygiene), sandbox (what a process may touch), worker (a watched child), channel (framed
JSON over a pipe), confine (the bash tool's launcher), paths (the trusted cache). It sits at the
bottom of the layers: evaluation, the agent's bash tool and data synthesis isolate through it, so
there is one set of rules.
"""
