#!/usr/bin/env bash
# The fuzzer's GPU tier in one command (issue 12): >= 3000 generated programs, CUDA against the
# CPU backend against float64, then the bad-input generator against CUDA kernels.
# Usage: scripts/fuzz_gpu.sh OUTDIR [N_PROGRAMS] [SECONDS]     (defaults 3200 programs, 330 s)
# Writes OUTDIR/fuzz.log, fuzz.json, failures/fuzz_seed_S.py (each failure, runnable), bad.log,
# bad.json; prints both summaries last. About 6-7 minutes on the H200 machine (16 cores, 1 GPU).
#   JOBS=16       worker processes (each compiles on a core; CUDA runs in the workers, never here)
#   SEED=0        first seed
#   DRY=1         no GPU: compile the kernels the GPU would run (sm_90a) and call no CUDA
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/fuzz_gpu.sh OUTDIR [N] [SECONDS]}
N=${2:-3200}
BUDGET=${3:-330}
JOBS=${JOBS:-16}
SEED=${SEED:-0}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# a fresh compile cache per run, so every kernel in the count was compiled in this run
export TILELANG_CACHE_DIR="${TILELANG_CACHE_DIR:-$OUT/cache}"
PY=${PYTHON:-python3}
DEV=(--device cuda)
[ "${DRY:-0}" = 1 ] && DEV+=(--dry-run)

echo "== fuzz: $N programs from seed $SEED, $JOBS jobs, budget ${BUDGET}s" | tee "$OUT/fuzz.log"
# sm_90a (the H200's arch) is compiled once, for the run; the sm_80 compile-only check is the
# CPU tier's (CI); every 50th seed compiles at NVRTC's full optimisation instead of fast-compile
timeout -s TERM $((BUDGET + 90)) "$PY" -m tilelang.testing.fuzz --seed "$SEED" --n "$N" "${DEV[@]}" \
    --jobs "$JOBS" --time-budget "$BUDGET" --timeout 150 --nvrtc-archs sm_90a --full-opt-every 50 \
    --progress 20 --out "$OUT/failures" --json "$OUT/fuzz.json" 2>>"$OUT/fuzz.stderr" | tee -a "$OUT/fuzz.log"
rc_fuzz=${PIPESTATUS[0]}

echo "== bad inputs on CUDA" | tee "$OUT/bad.log"
timeout -s TERM 150 "$PY" -m tilelang.testing.fuzz --bad 300 "${DEV[@]}" --jobs 4 --time-budget 100 \
    --timeout 60 --json "$OUT/bad.json" 2>>"$OUT/bad.stderr" | tee -a "$OUT/bad.log"
rc_bad=${PIPESTATUS[0]}

echo
echo "==== fuzz_gpu summary (rc fuzz $rc_fuzz, bad $rc_bad) ===="
grep -E "^\(|by step|by family" "$OUT/fuzz.log" | tail -4
tail -n 1 "$OUT/fuzz.log"
tail -n 1 "$OUT/bad.log"
[ "$rc_fuzz" = 0 ] && [ "$rc_bad" = 0 ]
