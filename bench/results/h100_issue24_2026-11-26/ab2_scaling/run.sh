#!/usr/bin/env bash
# A/B on one machine: warm latency of swish (6 evaluations, twice) for four versions of src
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/whl/*.whl >/dev/null 2>&1
export PYTHONUNBUFFERED=1
for v in new oldscale oldarena old new oldscale; do
  src=.ab/$v/src; [ $v = new ] && src=src
  d=$OUT/$v.$SECONDS; mkdir -p $d
  PYTHONPATH=/tmp/site:$PWD/$src timeout 80 python3 bench/gpu_acceptance.py --out $d --steps latency --budget-s 60 > $d/log.txt 2>&1
  echo "$v: $(grep ACCEPTANCE $d/log.txt | tail -1 | cut -c1-200)"
done
