"""Per-case public/ours latency ratios and their geometric mean from rows written by
`.peer/regress.sh` (regress.jsonl, or the all.jsonl that scripts/peer_round.sh appends to).

    python scripts/regress_summary.py all.jsonl [more.jsonl ...]

Where a (file, case) appears more than once, the last row of each implementation counts.
"""
import json
import math
import sys


def main(paths):
    lat, ran, failed = {}, set(), {}
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            ran.add(r["file"])
            if r["impl"] == "ours" and not r["results"]:
                failed[r["file"]] = (r["rc"], r["err"][:160])
            for c in r["results"] or []:
                lat[(r["impl"], r["file"], c["name"])] = c["latency"]
                if r["impl"] == "ours":
                    failed.pop(r["file"], None)
    ratios = []
    for (impl, f, case) in sorted(k for k in lat if k[0] == "public"):
        o, p = lat.get(("ours", f, case)), lat[("public", f, case)]
        ratio = p / o if o else float("nan")
        if o:
            ratios.append(ratio)
        print(f"{f.split('/')[0] + ':' + case:64s} {o or float('nan'):9.4f} {p:9.4f} {ratio:7.3f}"
              + ("  <0.95" if ratio < 0.95 else ""))
    for f, (rc, err) in sorted(failed.items()):
        print("ours did not run", f, "rc", rc, err)
    if ratios:
        g = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"{len(ratios)} cases on both; geomean public/ours {g:.4f}; min {min(ratios):.3f}; "
              f"below 0.95: {sum(r < 0.95 for r in ratios)}")


if __name__ == "__main__":
    main(sys.argv[1:])
