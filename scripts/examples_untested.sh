#!/usr/bin/env bash
# The peer examples that no test_*.py of the peer suite runs (each script's own `__main__`, which checks its
# result against a torch reference where it has one), through ours and through the public wheel, on the
# GPU machine. The suite (`.peer/suite.sh`) only covers the examples its test files import; these are
# the rest of the public TileLang's real programs (dsa_*, iket, bitnet kernels, gemm_int4, rand, ...).
# Run from the project's root on the device after `bash ../shared/peer/prepare.sh --public` here (carry .peer):
#   bash scripts/examples_untested.sh [PER_FILE_S (240)] [JOBS (4)] [FILTER]     (DRY=1: list the scripts only)
# 74 scripts, both implementations: about three 600-s calls at JOBS=8 PER_FILE_S=120 with PART=1/3, 2/3, 3/3.
# Prints one line a file: `<ours rc> <public rc> <file> <ours' last error line>`, then how many run on the
# public wheel and how many of those run here. rc 124 is a timeout. Logs: $OUT/untested/{ours,public}-*.log.
set -u
TMO=${1:-240}; JOBS=${2:-4}; FILTER=${3:-}
ROOT=$PWD; P=$ROOT/.peer; OUT=${OUT:-/tmp/out}; L=$OUT/untested; mkdir -p "$L"
EX=$P/tilelang-examples
[ -d "$EX" ] || { echo "no .peer: run bash ../shared/peer/prepare.sh --public and carry .peer"; exit 2; }
mkdir -p /tmp/tlsite; [ -d /tmp/tlsite/tilelang ] || tar -xJf "$P/tl-site.tar.xz" -C /tmp/tlsite
mkdir -p /tmp/peer-site && python3 -m pip install -q --no-index --no-deps --target /tmp/peer-site "$P"/wheels/*.whl >/dev/null 2>&1
W=/tmp/untested; rm -rf "$W"; mkdir -p "$W"
for impl in ours public; do cp -r "$EX" "$W/$impl"; done
# every script with a __main__ that no test file names (by module name), outside the plotting / sm_100 folders
cd "$EX"
grep -rlE "^if __name__ == .__main__.:" --include="*.py" . | sed 's#^\./##' | grep -v "/test_\|^test_\|regression_" \
  | grep -vE "^(plot_layout|visual_layout_inference|amd|flash_attention_sm100|gemm_tcgen05|blockscaled_gemm_sm100|gemm_sm120|bitnet-1.58b/(eval|benchmark|load|maint|vllm))" \
  | grep -e "$FILTER" | sort > "$W/all.txt"
: > "$W/files.txt"
while read -r f; do
  m=$(basename "$f" .py)
  tests=$(find "$(dirname "$f")" -name "test_*.py")
  { [ -n "$tests" ] && grep -qsE "(import|from) +\.?$m\b|import_module\(.$m" $tests < /dev/null; } || echo "$f" >> "$W/files.txt"
done < "$W/all.txt"
if [ -n "${PART:-}" ]; then  # PART=i/n: every n-th script from the i-th (1-based), to spread the list over calls
  awk -v i="${PART%/*}" -v n="${PART#*/}" 'NR % n == i % n' "$W/files.txt" > "$W/part.txt" && mv "$W/part.txt" "$W/files.txt"
fi
echo "$(wc -l < "$W/files.txt") untested example scripts"
[ -n "${DRY:-}" ] && { cat "$W/files.txt"; exit 0; }  # DRY=1: the list only
run_one() {  # $1 impl, $2 file
  impl=$1; f=$2; tag=$(echo "$impl-$f" | tr '/.' '__')
  if [ "$impl" = public ]; then pp=/tmp/tlsite; else pp=$ROOT; fi
  (cd "$W/$impl/$(dirname "$f")" && PYTHONPATH=$pp:/tmp/peer-site TILELANG_CACHE_DIR=/tmp/tlcache-untested-$impl \
     timeout "$TMO" python3 "$(basename "$f")" > "$L/$tag.log" 2>&1; echo "rc=$?" >> "$L/$tag.log")
}
export -f run_one; export W L TMO ROOT
for impl in ours public; do
  sed "s#^#$impl #" "$W/files.txt"
done | xargs -P "$JOBS" -L 1 bash -c 'run_one $0 $1'
both=0; pub=0
while read -r f; do
  to=$(echo "ours-$f" | tr '/.' '__'); tp=$(echo "public-$f" | tr '/.' '__')
  ro=$(tail -1 "$L/$to.log" | sed 's/rc=//'); rp=$(tail -1 "$L/$tp.log" | sed 's/rc=//')
  err=$(grep -E "Error|error:|Exception" "$L/$to.log" | tail -1 | cut -c1-150)
  [ "$rp" = 0 ] && pub=$((pub + 1)) && [ "$ro" = 0 ] && both=$((both + 1))
  printf '%4s %4s  %-70s %s\n' "$ro" "$rp" "$f" "$([ "$ro" = 0 ] || echo "$err")"
done < "$W/files.txt"
echo "untested examples: $pub run on the public wheel; $both of those run here"
