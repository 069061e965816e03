#!/usr/bin/env bash
# Run the GPU tier (tests marked cuda, examples on CUDA, sanitizers, benchmarks) on a GPU machine.
# Usage: scripts/gpu_check.sh OUT_DIR [--quick]
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec python3 scripts/gpu_check.py "$@"
