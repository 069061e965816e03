#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck and synccheck over every project example and a subset of the
# peer suite's kernels (one test per folder; scripts/sanitize.py lists them), in parallel.
# Usage: scripts/sanitize.sh OUTDIR [extra sanitize.py args, e.g. --peer-folders all --budget 600]
# Writes OUTDIR/sanitize.json and OUTDIR/logs/*.log; prints a table of error counts last.
# About 8 minutes at most on the H200 machine (the budget stops new runs after 420 s).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/sanitize.sh OUTDIR [args]}
shift
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "${PYTHON:-python3}" scripts/sanitize.py "$OUT" --jobs "${JOBS:-12}" --budget 420 --timeout 200 "$@"
