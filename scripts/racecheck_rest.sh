#!/usr/bin/env bash
# racecheck of the 18 programs that did not finish under it in session 24 (docs/racecheck.md), in two
# device calls of about 9.5 minutes each: every program of a group starts at once and gets the whole
# call (sanitize.py caps a run's timeout at the budget left when it starts).
# Usage (GPU machine, project root, .peer carried): GROUP=a scripts/racecheck_rest.sh; then GROUP=b.
# Writes $OUT/race-$GROUP.txt and $OUT/race-$GROUP.json.
set -u
OUT=${OUT:-/tmp/out}; GROUP=${GROUP:?GROUP=a or GROUP=b}
case $GROUP in
  a) only="flash_attention__,mha_inference,fusedmoe" ;;
  b) only="gqa_sink_bwd_bhsd,gqa_sink_varlen,blocksparse_gemm,deepgemm_fp8_2xAcc,mhc_p,sparse_mla_bwd,topk_selector" ;;
  *) echo "GROUP must be a or b"; exit 2 ;;
esac
TMPDIR=/tmp/race-$GROUP timeout 590 python3 scripts/sanitize.py /tmp/race-$GROUP-out --every-test --peer-folders all \
  --tools racecheck --only "$only" --jobs 9 --budget 560 --timeout 560 > "$OUT/race-$GROUP.txt" 2>&1
cp /tmp/race-$GROUP-out/sanitize.json "$OUT/race-$GROUP.json" 2>/dev/null
tail -15 "$OUT/race-$GROUP.txt"
