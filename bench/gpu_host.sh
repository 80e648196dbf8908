#!/usr/bin/env bash
# Everything measured on a GPU host in one call (see the notes in bench/README.md):
#   source .gpu-host/unpack.sh; bash bench/gpu_host.sh [bench|test|all]
# Writes at most 7 files under $OUT (or ./out): the device can return 8. Peers come from the
# bundles in .peers/ (made by `deno run -A scripts/bundle_peers.ts .peers`); tests need
# fast-check in .denodir/ (made by `bash bench/cache_tests.sh`).
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
# Vulkan only: wgpu's GL backend loads libEGL, whose exit-time destructor races test threads
# (bench/README.md, "An abort at exit on lavapipe").
export DENO_WEBGPU_BACKEND=${DENO_WEBGPU_BACKEND:-vulkan}
# A test file whose runtime finds no GPU fails instead of running its WASM tests alone.
export GYRE_REQUIRE_GPU=1
what=${1:-all}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$out/host.txt"
if [ "$what" = bench ] || [ "$what" = all ]; then
  deno run -A scripts/demo.ts 2>&1 | tee -a "$out/host.txt"
  deno run -A bench/kernels.ts --scale full --out "$out" 2>>"$out/logs.txt" | head -12
  deno run -A bench/compare.ts --peers .peers --scale full --out "$out" 2>>"$out/logs.txt" | head -20
fi
if [ "$what" = test ] || [ "$what" = all ]; then
  # Type-checked where it was built; here only run, with the cached fast-check and no lockfile
  # (it names the peers' packages, which are not cached here).
  DENO_DIR=${DENO_DIR:-.denodir} deno test -A --cached-only --no-check --no-lock tests/ 2>&1 |
    tee "$out/test.log" | grep -E "FAILED|passed" | tail -25
fi
