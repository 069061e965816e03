#!/usr/bin/env bash
# A/B of pass-config switches on the peer regression cases, with the public wheel in the same call:
# each regression file matching FILTER is timed through the public TileLang, ours as is, and ours
# under each VARIANT (TILELANG_PASS_CONFIGS='key=value,...'), one process at a time.
# Usage (GPU machine, project root, .peer carried):
#   scripts/ab_regress.sh FILTER VARIANT [VARIANT...]      e.g.
#   TL_PERF_REGRESSION_ONLY=nsa_fwd scripts/ab_regress.sh ./deepseek_nsa/ tl.disable_x=true
# FILTER is a substring of the file's path (./NAME/ for one folder). Prints per case public/ours for
# ours and each variant (AB_NO_PUBLIC=1: the public wheel is not run, and each variant's latency is
# shown over ours': > 1 means the switched-off change was faster); rows go to $AB_JSONL (default $OUT/ab.jsonl, emptied first). PER_FILE_S (150) limits each process.
set -u
FILTER=${1:?usage: scripts/ab_regress.sh FILTER VARIANT...}; shift
ROOT=$PWD; P=$ROOT/.peer; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
J=${AB_JSONL:-$OUT/ab.jsonl}; : > "$J"  # this invocation's rows (AB_JSONL names another file)
W=/tmp/ab; rm -rf "$W"; mkdir -p "$W"; cp -r "$P/tilelang-examples" "$W/ex"
mkdir -p /tmp/tlsite; [ -d /tmp/tlsite/tilelang ] || tar -xJf "$P/tl-site.tar.xz" -C /tmp/tlsite
mkdir -p /tmp/peer-site && python3 -m pip install -q --no-index --no-deps --target /tmp/peer-site "$P"/wheels/*.whl >/dev/null 2>&1
export TL_PERF_REGRESSION_FORMAT=json PYTHONUNBUFFERED=1
files=$(cd "$W/ex" && find . -name "regression_*.py" | grep -F -- "$FILTER" | sed 's#^\./##' | sort)
for f in $files; do
  for v in $([ -z "${AB_NO_PUBLIC:-}" ] && echo public) ours "$@"; do
    case $v in public) pp=/tmp/tlsite; cfg=;; ours) pp=$ROOT; cfg=;; *) pp=$ROOT; cfg=$v;; esac
    t0=$(date +%s)
    log=$(cd "$W/ex/$(dirname "$f")" && PYTHONPATH=$pp:/tmp/peer-site TILELANG_PASS_CONFIGS=$cfg \
          TILELANG_CACHE_DIR=/tmp/tlcache-reg-$([ "$v" = public ] && echo public || echo ours) \
          timeout "${PER_FILE_S:-150}" python3 "$(basename "$f")" 2>&1); rc=$?
    res=$(echo "$log" | grep "__TILELANG_PERF_RESULTS_JSON__=" | tail -1 | sed 's/.*__TILELANG_PERF_RESULTS_JSON__=//')
    err=$(echo "$log" | grep -E "Error|error:" | tail -1 | cut -c1-240)
    python3 -c 'import json,sys; print(json.dumps({"variant": sys.argv[1], "file": sys.argv[2], "rc": int(sys.argv[3]), "s": int(sys.argv[4]), "results": json.loads(sys.argv[5]) if sys.argv[5] else None, "err": sys.argv[6]}))' \
      "$v" "$f" "$rc" "$(( $(date +%s) - t0 ))" "$res" "$err" >> "$J"
    echo "$v $f rc=$rc $(( $(date +%s) - t0 ))s"
  done
done
python3 - "$J" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
lat, variants = {}, []
for r in rows:
    if r["variant"] not in variants:
        variants.append(r["variant"])
    for c in r["results"] or []:
        lat[(r["variant"], r["file"], c["name"])] = c["latency"]
    if not r["results"]:
        print("did not run:", r["variant"], r["file"], "rc", r["rc"], r["err"][:160])
others = [v for v in variants if v != "public"]
if "public" not in variants:  # AB_NO_PUBLIC: variant latency / ours
    print(f"{'case':56s} {'ours ms':>10s} " + " ".join(f"{'v' + str(i) + '/ours':>9s}" for i in range(1, len(others))))
    for (v, f, case) in sorted(k for k in lat if k[0] == "ours"):
        o = lat[(v, f, case)]
        cells = [f"{lat[(x, f, case)] / o:9.3f}" if (x, f, case) in lat else f"{'-':>9s}" for x in others[1:]]
        print(f"{f.split('/')[0] + ':' + case:56s} {o:10.4f} " + " ".join(cells))
    for i, v in enumerate(others[1:], 1):
        print(f"v{i} = TILELANG_PASS_CONFIGS={v}")
    sys.exit(0)
print(f"{'case':56s} {'public ms':>10s} " + " ".join(f"{'p/' + (v if v == 'ours' else 'v' + str(i)):>9s}" for i, v in enumerate(others)))
for (v, f, case) in sorted(k for k in lat if k[0] == "public"):
    p = lat[(v, f, case)]
    cells = []
    for o in others:
        x = lat.get((o, f, case))
        cells.append(f"{p / x:9.3f}" if x else f"{'-':>9s}")
    print(f"{f.split('/')[0] + ':' + case:56s} {p:10.4f} " + " ".join(cells))
for i, v in enumerate(others):
    if v != "ours":
        print(f"v{i} = TILELANG_PASS_CONFIGS={v}")
PY
