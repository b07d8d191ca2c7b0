#!/bin/bash
# FIXED FILE (protected). Builds kernels/ (run from the workspace root, as in the paper).
cd "$(dirname "$0")/.." && exec python3 -m utils.compile "$@"
