#!/usr/bin/env bash
# One device-tool call: bench/round_noise.py on the KernelBench tasks whose rounds were noisiest in issue 23's
# acceptance runs (carry `.carry`).   run: bash bench/round_noise.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
KB=.carry/KernelBench
python3 bench/round_noise.py --out "$OUT/round_noise.jsonl" ${VARIANTS:+--variants $VARIANTS} \
  $KB/level1/73_conv_transposed_3D_asymmetric_input_square_kernel__strided_padded__grouped.py \
  $KB/level1/83_conv_depthwise_2D_square_input_asymmetric_kernel.py \
  $KB/level1/10_3D_tensor_matrix_multiplication.py \
  $KB/level1/65_conv_transposed_2D__square_input__asymmetric_kernel.py \
  $KB/level1/1_Square_matrix_multiplication_.py \
  $KB/level3/11_VGG16.py 2>&1 | tee "$OUT/round_noise.log"
