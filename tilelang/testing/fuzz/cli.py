"""The command line: `python -m tilelang.testing.fuzz --seed S --n N [--device cuda] [--jobs J]`.

Programs seed S .. S+N-1 run in J worker processes (a crash or a hang costs one worker, not
the run). Each failure is shrunk and printed as a runnable TileLang file with its seed; with
--out DIR the files are written there too. The last line is `N passed, M failed` (programs
the oracle itself rejects, `invalid`, count as failed: they are fuzzer bugs).

`--bad N` instead tries N bad calls and bad programs (bad_inputs.py) and reports
tried / clear errors / crashes / hangs / wrong.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time

__all__ = ["main", "run_seed", "run_bad"]


def run_seed(arg) -> dict:
    """Worker task: check one seed (and shrink a failure). arg = (seed, device, nvrtc, shrink)."""
    import warnings

    warnings.simplefilter("ignore")
    from .generator import generate
    from .runner import check
    from .shrinker import shrink
    from .source import to_source

    seed, device, nvrtc, do_shrink = arg
    prog = generate(seed)
    res = check(prog, device=device, nvrtc=nvrtc)
    out = {"seed": seed, "family": prog.family, "status": res.status, "step": res.step,
           "message": res.message, "seconds": res.seconds}
    if res.status == "fail":
        small, sres = shrink(prog, res, device=device) if do_shrink else (prog, res)
        out["source"] = to_source(small)
        out["message"] = sres.message
    elif res.status == "invalid":
        out["source"] = to_source(prog)
    return out


def run_bad(arg) -> dict:
    from .bad_inputs import run_case

    return run_case(arg)


def _report(r: dict, out_dir: str | None) -> None:
    print(f"--- seed {r['seed']} ({r['family']}): {r['status'].upper()} at {r['step']}")
    print(r["message"][:2000])
    if "source" in r:
        print(r["source"].split("\nDESC = ")[0])
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
            path = os.path.join(out_dir, f"fuzz_seed_{r['seed']}.py")
            with open(path, "w") as f:
                f.write(r["source"])
            print(f"(written to {path})")
    sys.stdout.flush()


def _fuzz(a) -> int:
    from .pool import Pool

    seeds = [(s, a.device, not a.no_nvrtc, not a.no_shrink) for s in range(a.seed, a.seed + a.n)]
    counts, steps = collections.Counter(), collections.Counter()
    t0 = time.monotonic()
    with Pool(a.jobs) as pool:
        for arg, (kind, value) in pool.map_unordered("tilelang.testing.fuzz.cli:run_seed", seeds, a.timeout):
            if kind != "ok":
                value = {"seed": arg[0], "family": "?", "status": "fail", "step": kind,
                         "message": f"the worker {'died (exit code %s)' % value if kind == 'crash' else 'hung'} "
                                    f"on seed {arg[0]}"}
            counts["passed" if value["status"] == "pass" else "failed"] += 1
            if value["status"] != "pass":
                steps[f"{value['status']}:{value['step']}"] += 1
                _report(value, a.out)
    if steps:
        print("by step: " + ", ".join(f"{k} {v}" for k, v in sorted(steps.items())))
    print(f"({a.n} programs in {time.monotonic() - t0:.0f} s, {a.jobs} jobs)")
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    return 1 if counts["failed"] else 0


def _bad(a) -> int:
    from .bad_inputs import case_ids
    from .pool import Pool

    counts = collections.Counter()
    with Pool(a.jobs) as pool:
        for cid, (kind, value) in pool.map_unordered("tilelang.testing.fuzz.cli:run_bad",
                                                     case_ids(a.seed, a.bad), a.timeout):
            counts["tried"] += 1
            verdict = value["verdict"] if kind == "ok" else kind
            counts[verdict] += 1
            if verdict != "clear":
                what = value.get("case", cid) if kind == "ok" else cid
                print(f"--- bad case {what}: {verdict.upper()}: {value.get('message', '') if kind == 'ok' else value}")
    print(f"tried {counts['tried']}, clear {counts['clear']}, crashes {counts['crash']}, "
          f"hangs {counts['hang']}, wrong {counts['wrong']}, unclear {counts['unclear']}")
    bad = counts["tried"] - counts["clear"]
    print(f"{counts['clear']} passed, {bad} failed")
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tilelang.testing.fuzz", description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--bad", type=int, default=0, help="try this many bad calls/programs instead")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per program before it is a hang")
    p.add_argument("--no-nvrtc", action="store_true", help="skip the sm_80/sm_90a compile-only checks")
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--out", default=None, help="write each failing program here")
    a = p.parse_args(argv)
    return _bad(a) if a.bad else _fuzz(a)
