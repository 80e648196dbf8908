#!/usr/bin/env bash
# Everything measured on a GPU host in one call (see NOTES in bench/README.md):
#   source .gpu-host/unpack.sh; bash bench/gpu_host.sh [bench|test|all]
# Writes logs and results under $OUT (or ./out). Peers come from the bundles in .peers/
# (made here by `deno run -A scripts/bundle_peers.ts .peers`).
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
what=${1:-all}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$out/gpu.txt"
if [ "$what" = test ] || [ "$what" = all ]; then
  # DENO_DIR=.denodir carries fast-check, cached here by `DENO_DIR=.denodir deno cache tests/*.ts`.
  # Type-checked where it was built; here only run (--no-check), with the cached fast-check.
  DENO_DIR=${DENO_DIR:-.denodir} deno test -A --cached-only --no-check tests/ 2>&1 | tee "$out/test.log" | grep -E "FAILED|passed" | tail -25
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  deno run -A scripts/demo.ts 2>&1 | tee "$out/demo.txt"
  deno run -A bench/kernels.ts --scale full --out "$out" 2>"$out/kernels.err" | head -12
  deno run -A bench/compare.ts --peers .peers --scale full --out "$out" 2>"$out/compare.err" | head -20
fi
