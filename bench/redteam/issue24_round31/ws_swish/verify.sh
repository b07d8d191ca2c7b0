#!/bin/sh
# FIXED FILE (protected). Runs the cuda-agent environment on this workspace.
py=/work/main/.venv/bin/python
if [ ! -x "$py" ]; then
  py=python3
  "$py" -c "import cuda_agent" 2>/dev/null || {
    echo "error: the Python that made this workspace is gone and the python3 on PATH has no cuda_agent:" \
         "activate the .venv of a cuda-agent clone" >&2; exit 3; }
fi
exec "$py" -m cuda_agent evaluate --no-timing "$(dirname "$0")" "$@"
