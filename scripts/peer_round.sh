#!/usr/bin/env bash
# One device round on the GPU machine, from the project's root, after
# `bash ../shared/peer/prepare.sh --public` here (carry .peer):
#   phase A, all at once: `pytest -m cuda` in 3 shards (test files dealt round-robin), the peer
#     example suite through ours (6 jobs), and a compile prewarm of the regression files of FOLDERS
#     (each file once per implementation, PW_JOBS at a time, into the caches regress.sh uses;
#     output discarded except the exit status and the last lines of stderr);
#   phase B: the timed `.peer/regress.sh` per folder in FOLDERS (one file at a time, ours then the
#     public wheel), every row appended to $OUT/all.jsonl.
# A full run fits a session's 30 device minutes as three chained calls on one warm machine (a call
# has 600 s; each printed line also goes to $OUT, so a call cut off at its limit keeps what ran):
#   1. NOREGRESS=1 PW_JOBS=12 bash scripts/peer_round.sh          (~280 s: tests, suite, prewarm)
#   2. NOTEST=1 NOPREWARM=1 FOLDERS="<first 12 folders>" ...      (~400 s)
#   3. NOTEST=1 NOPREWARM=1 FOLDERS="<the other 11>" ...          (~370 s)
# then python scripts/regress_summary.py over the calls' all.jsonl files. Session 23 put 11 timed
# folders into call 1 and it was cut off after 6.
# Environment: FOLDERS (space-separated folder filters; default: every folder with a regression
# file; "./NAME/" is passed to regress.sh so gemm does not also take blocksparse_gemm), RFOLDERS (the
# folders phase B times, default FOLDERS), NOTEST=1 (skip pytest and the suite), NOPREWARM=1, NOREGRESS=1, PW_JOBS (8),
# PW_LIMIT (s per prewarm file, 240), LIMIT (s per timed file, 150), TESTS (pytest paths instead
# of the cuda-marked files), EXTRA (a command run beside phase A).
set -u
ROOT=$PWD; P=$ROOT/.peer; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
EX=$P/tilelang-examples
[ -d "$EX" ] || { echo "no .peer: run bash ../shared/peer/prepare.sh --public and carry .peer"; exit 2; }
FOLDERS=${FOLDERS:-$(cd "$EX" && find . -name "regression_*.py" | cut -d/ -f2 | sort -u | tr '\n' ' ')}
echo "folders: $FOLDERS"
mkdir -p /tmp/tlsite; [ -d /tmp/tlsite/tilelang ] || tar -xJf "$P/tl-site.tar.xz" -C /tmp/tlsite
mkdir -p /tmp/peer-site && python3 -m pip install -q --no-index --no-deps --target /tmp/peer-site "$P"/wheels/*.whl >/dev/null 2>&1
t0=$(date +%s)

prewarm_one() {  # $1 impl, $2 file relative to the examples folder
  impl=$1; f=$2; tag=$(echo "$impl-$f" | tr '/.' '__')
  if [ "$impl" = public ]; then pp=/tmp/tlsite; else pp=$ROOT; fi
  s=$(date +%s)
  (cd "/tmp/pw-$impl/$(dirname "$f")" && PYTHONFAULTHANDLER=1 PYTHONPATH=$pp:/tmp/peer-site \
     TILELANG_CACHE_DIR=/tmp/tlcache-reg-$impl TL_PERF_REGRESSION_FORMAT=json \
     timeout "$PW_LIMIT" python3 "$(basename "$f")" > /dev/null 2> "$OUT/prewarm-$tag.err"); rc=$?
  echo "prewarm $impl $f rc=$rc $(( $(date +%s) - s ))s"
  [ "$rc" = 0 ] && rm -f "$OUT/prewarm-$tag.err"
}
export -f prewarm_one; export ROOT OUT PW_LIMIT=${PW_LIMIT:-240}

pids=""
if [ -z "${NOTEST:-}" ]; then
  if [ -n "${TESTS:-}" ]; then
    files="$TESTS"
  else
    files=$(grep -rl "mark.cuda\|requires_cuda\|requires_hopper" tests --include="*.py" | xargs ls -S)
  fi
  i=0; : > /tmp/shard0; : > /tmp/shard1; : > /tmp/shard2
  for f in $files; do echo "$f" >> /tmp/shard$((i % 3)); i=$((i + 1)); done
  for s in 0 1 2; do
    [ -s /tmp/shard$s ] || continue
    (PYTHONPATH=$ROOT timeout 560 python3 -m pytest -q -m cuda -p no:cacheprovider $(cat /tmp/shard$s) \
       > "$OUT/pytest$s.log" 2>&1; echo "pytest shard $s rc=$? $(tail -1 "$OUT/pytest$s.log")") &
    pids="$pids $!"
  done
  (bash "$P/suite.sh" ours 6 300 > "$OUT/suite.log" 2>&1; echo "suite: $(tail -1 "$OUT/suite.log")") &
  pids="$pids $!"
fi
if [ -n "${EXTRA:-}" ]; then  # another command for phase A (its output in $OUT/extra.log)
  (bash -c "$EXTRA" > "$OUT/extra.log" 2>&1; echo "extra rc=$?") &
  pids="$pids $!"
fi
if [ -z "${NOPREWARM:-}" ]; then
  for impl in ours public; do rm -rf "/tmp/pw-$impl"; cp -r "$EX" "/tmp/pw-$impl"; done
  : > /tmp/pw-list
  for fo in $FOLDERS; do
    for f in $(cd "$EX" && find "$fo" -name "regression_*.py" | sort); do
      echo "ours $f" >> /tmp/pw-list; echo "public $f" >> /tmp/pw-list
    done
  done
  xargs -a /tmp/pw-list -P "${PW_JOBS:-8}" -L 1 bash -c 'prewarm_one "$0" "$1"'
fi
for p in $pids; do wait "$p"; done
echo "phase A done $(( $(date +%s) - t0 ))s" | tee -a "$OUT/regress.log"
if [ -z "${NOREGRESS:-}" ]; then
  for fo in ${RFOLDERS:-$FOLDERS}; do
    bash "$P/regress.sh" "./$fo/" "${LIMIT:-150}" 2>&1 | grep -E "^ours|^public|cases ran|did not run|^[a-z_0-9]+:" \
      | tee -a "$OUT/regress.log"
    cat /tmp/pr/regress.jsonl >> "$OUT/all.jsonl"
  done
fi
echo "round done $(( $(date +%s) - t0 ))s"
