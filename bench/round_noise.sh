#!/usr/bin/env bash
# One device-tool call: bench/round_noise.py on the KernelBench tasks whose rounds were noisiest in issue 23's
# acceptance runs (carry `.carry`), as the judge is and with the timed clients' core kept for them alone.
#   run: bash bench/round_noise.sh        (VARIANTS overrides the variants)
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
KB=.carry/KernelBench
TASKS="$KB/level1/73_conv_transposed_3D_asymmetric_input_square_kernel__strided_padded__grouped.py
  $KB/level1/83_conv_depthwise_2D_square_input_asymmetric_kernel.py $KB/level1/10_3D_tensor_matrix_multiplication.py
  $KB/level1/65_conv_transposed_2D__square_input__asymmetric_kernel.py $KB/level3/16_DenseNet201.py"
for reserve in "" "--reserve-core"; do
  timeout 140 python3 bench/round_noise.py --out "$OUT/round_noise.jsonl" --variants "${VARIANTS:-as_is,gc_off,as_is,gc_off}" \
    $reserve $TASKS 2>&1 | tee -a "$OUT/round_noise.log"
done
