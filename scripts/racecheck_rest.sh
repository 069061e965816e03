#!/usr/bin/env bash
# racecheck of the programs that did not finish under it (docs/racecheck.md): every program of a group
# starts at once and gets the whole ~9.5-minute call (sanitize.py caps a run's timeout at the budget
# left when it starts). Groups a and b were session 24's 18 leftovers (run in session 25); group c is
# what session 25 left: 6 timeouts and fusedmoe, which failed under the tool with no report.
# Usage (GPU machine, project root, .peer carried): GROUP=c scripts/racecheck_rest.sh
# Writes $OUT/race-$GROUP.txt, $OUT/race-$GROUP.json and $OUT/race-$GROUP-logs.tgz (the tool's logs).
set -u
OUT=${OUT:-/tmp/out}; GROUP=${GROUP:?GROUP=a or GROUP=b}
case $GROUP in
  a) only="flash_attention__,mha_inference,fusedmoe" ;;
  b) only="gqa_sink_bwd_bhsd,gqa_sink_varlen,blocksparse_gemm,deepgemm_fp8_2xAcc,mhc_p,sparse_mla_bwd,topk_selector" ;;
  c) only="mha_fwd_bhsd,fusedmoe,gqa_sink_varlen,deepgemm_fp8_2xAcc,mhc_p,sparse_mla_bwd" ;;
  *) echo "GROUP must be a, b or c"; exit 2 ;;
esac
TMPDIR=/tmp/race-$GROUP timeout 590 python3 scripts/sanitize.py /tmp/race-$GROUP-out --every-test --peer-folders all \
  --tools racecheck --only "$only" --jobs 9 --budget 560 --timeout 560 > "$OUT/race-$GROUP.txt" 2>&1
cp /tmp/race-$GROUP-out/sanitize.json "$OUT/race-$GROUP.json" 2>/dev/null
tar -czf "$OUT/race-$GROUP-logs.tgz" -C /tmp/race-$GROUP-out logs 2>/dev/null
tail -15 "$OUT/race-$GROUP.txt"
