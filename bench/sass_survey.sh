#!/bin/bash
# Machine code (bench/sass.ts) of the main kernels, one expression after another. On the device:
# source .gpu-host/unpack.sh; PATH=$PATH:/usr/local/cuda/bin DENO_DIR=.denodir bash bench/sass_survey.sh
R="gyre.random.uniform"
ops=(
  "gyre.add($R([1 << 24]), $R([1 << 24]))"
  "gyre.softmax($R([4096, 4096]))"
  "gyre.layerNorm($R([4096, 4096]))"
  "gyre.rmsNorm($R([4096, 4096]))"
  "gyre.cumsum($R([1 << 26]))"
  "gyre.cumsum($R([16384, 4096]))"
  "gyre.maxPool2d($R([32, 64, 224, 224]), {kernelSize: 2})"
  "gyre.adaptiveAvgPool2d($R([32, 64, 224, 224]), 7)"
  "gyre.adaptiveMaxPool2d($R([32, 64, 224, 224]), 7)"
  "gyre.matmul($R([4096, 4096]), $R([4096, 4096]))"
  "gyre.argmax($R([1 << 24]))"
  "gyre.logsumexp($R([4096, 4096]), {axis: 1})"
)
for o in "${ops[@]}"; do deno run -A --no-lock --cached-only bench/sass.ts --op "$o" 2>&1 | grep -v "^| [012] |" ; echo; done
