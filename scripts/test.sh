#!/usr/bin/env bash
# Set up the test stack, then run the test suite (arguments pass through to pytest: a path, -k,
# -x). GPU tests are skipped without a GPU. How long: about 25 minutes on an idle 2-core CPU box
# (most of it compiling C++, torch.compile baselines and starting sandboxed workers); it says so
# before it starts.
# Exit 5 ("no tests collected") is an error here: a run that tests nothing must not pass.
set -uo pipefail
cd "$(dirname "$0")/.."
echo "[setup] .venv with cuda-agent and the test stack (first time: installs the [test] extra)"
bash scripts/setup.sh test || exit 1
. .venv/bin/activate
if [ "$#" -eq 0 ]; then
  echo "[test] the whole suite: about 22 minutes on an idle 2-core CPU box (collection alone ~20 s);" \
       "a dot per passed test, s skipped, F failed; the slowest 15 are listed at the end"
fi
python -m pytest -q -p no:cacheprovider --durations=15 "$@"
code=$?
if [ "$code" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$code"
