#!/usr/bin/env bash
# Fills .denodir/ with what the test suite needs offline on a GPU host (fast-check and its
# pure-rand), small enough to carry (a device call carries at most 64 MiB).
#   bash bench/cache_tests.sh      # then carry .denodir; bench/gpu_host.sh test uses it
# --no-lock: only then does Deno write pure-rand's registry.json, without which the host's
# `--cached-only --no-lock` run cannot resolve it. The peers' packages (bundled into .peers/) and
# the build's (assemblyscript) are dropped: the tests do not load them.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qxF "/.denodir/" .git/info/exclude 2>/dev/null || echo "/.denodir/" >> .git/info/exclude
DENO_DIR=.denodir deno cache --no-lock tests/*.ts
registry=.denodir/npm/registry.npmjs.org
for package in "$registry"/* "$registry"/@*/*; do
  case "${package#"$registry"/}" in
    fast-check | pure-rand) ;;
    @*/*) rm -rf "$package" ;;
    @*) ;;
    *) rm -rf "$package" ;;
  esac
done
find "$registry" -mindepth 1 -maxdepth 1 -type d -empty -delete
[ -f "$registry/pure-rand/registry.json" ] || { echo "cache_tests: pure-rand unresolved" >&2; exit 1; }
du -sh .denodir
