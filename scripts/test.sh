#!/usr/bin/env bash
# Set up, then run the test suite. GPU tests are skipped without a GPU. Exit 5 ("no tests
# collected") is an error here: a run that tests nothing must not pass.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
. .venv/bin/activate
python -m pytest -q -p no:cacheprovider "$@"
code=$?
if [ "$code" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$code"
