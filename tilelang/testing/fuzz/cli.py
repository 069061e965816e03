"""The command line: `python -m tilelang.testing.fuzz --seed S --n N [--device cuda] [--jobs J]
[--time-budget SECONDS] [--out DIR] [--no-thread-family]`.

Programs seed S .. S+N-1 run in J worker processes (a crash or a hang costs one worker, not
the run; a worker whose CUDA context broke is replaced). With --time-budget no program starts
after 80% of it (all of it with --no-shrink) and the summary counts the programs that ran.
The first failure of each distinct signature is shrunk; every failure is printed as a
runnable TileLang file with its seed, and with --out DIR written there (fuzz_seed_S.py).
The last line is `N passed, M failed` (programs the oracle itself rejects, `invalid`, count
as failed: they are fuzzer bugs).

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


def _cuda_broken() -> bool:
    """After a failed CUDA run: is this process's context unusable (a sticky error)?"""
    import torch

    try:
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001 - any error means the context is gone
        return True


def run_seed(arg) -> dict:
    """Worker task: check one seed. arg = (seed, device, nvrtc, single_thread)."""
    import warnings

    warnings.simplefilter("ignore")
    from .generator import generate
    from .runner import check
    from .source import to_source
    from .spec import to_json

    seed, device, nvrtc, single = arg
    prog = generate(seed, single_thread=single)
    res = check(prog, device=device, nvrtc=nvrtc)
    out = {"seed": seed, "family": prog.family, "status": res.status, "step": res.step,
           "message": res.message, "seconds": res.seconds}
    if res.status != "pass":
        out["source"] = to_source(prog)
        out["desc"] = to_json(prog)
        out["signature"] = res.signature if res.status == "fail" else f"invalid:{res.message[:60]}"
        if res.step.startswith("cuda-run") and _cuda_broken():
            out["retire"] = True
    return out


def run_shrink(arg) -> dict:
    """Worker task: shrink one failure. arg = (desc JSON, device, deadline seconds from now)."""
    import warnings

    warnings.simplefilter("ignore")
    from .runner import check
    from .shrinker import shrink
    from .source import to_source
    from .spec import from_json

    desc, device, seconds = arg
    prog = from_json(desc)
    res = check(prog, device=device)
    if res.status != "fail":  # flaky, or only fails beside other programs: keep it as it is
        return {"source": to_source(prog), "message": f"(not shrunk: alone it gave {res.status})"}
    small, sres = shrink(prog, res, device=device, deadline=time.monotonic() + seconds)
    out = {"source": to_source(small), "message": sres.message}
    if device == "cuda" and _cuda_broken():
        out["retire"] = True
    return out


def run_bad(arg) -> dict:
    from .bad_inputs import run_case

    return run_case(arg)


def _report(r: dict, out_dir: str | None, note: str = "") -> None:
    print(f"--- seed {r['seed']} ({r['family']}): {r['status'].upper()} at {r['step']}{note}")
    print(r["message"][:2000])
    if "source" in r:
        print(r["source"].split("\nDESC = ")[0])
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
            path = os.path.join(out_dir, f"fuzz_seed_{r['seed']}.py")
            with open(path, "w") as f:
                f.write(f"# {r['status'].upper()} at {r['step']}{note}\n" + r["source"])
            print(f"(written to {path})")
    sys.stdout.flush()


def _fuzz(a) -> int:
    """Phase 1 checks every seed (until --time-budget); phase 2 shrinks the first failure of
    each distinct signature (the others print as they are, naming that seed)."""
    from .pool import Pool

    t0 = time.monotonic()
    budget = a.time_budget or float("inf")
    shrink = not a.no_shrink
    gen_end = t0 + (0.8 * budget if shrink else budget)
    seeds = [(s, a.device, not a.no_nvrtc, a.no_thread_family) for s in range(a.seed, a.seed + a.n)]
    counts, steps = collections.Counter(), collections.Counter()
    fails: list = []
    with Pool(a.jobs) as pool:
        for arg, (kind, value) in pool.map_unordered("tilelang.testing.fuzz.cli:run_seed", seeds, a.timeout,
                                                     deadline=gen_end):
            if kind != "ok":
                value = {"seed": arg[0], "family": "?", "status": "fail", "step": kind, "signature": kind,
                         "message": f"the worker {'died (exit code %s)' % value if kind == 'crash' else 'hung'} "
                                    f"on seed {arg[0]}"}
            counts["passed" if value["status"] == "pass" else "failed"] += 1
            if value["status"] != "pass":
                steps[f"{value['status']}:{value['step']}"] += 1
                fails.append(value)
        first: dict = {}
        for v in sorted(fails, key=lambda v: v["seed"]):
            first.setdefault(v["signature"], v)
        todo = [(v["desc"], a.device, max(5.0, min(120.0, t0 + budget - time.monotonic())), v["seed"])
                for v in first.values() if shrink and "desc" in v and v["status"] == "fail"]
        shrunk = {}
        for arg, (kind, value) in pool.map_unordered("tilelang.testing.fuzz.cli:run_shrink_seed", todo,
                                                     a.timeout + 130, deadline=t0 + budget):
            if kind == "ok":
                shrunk[arg[3]] = value
    for v in sorted(fails, key=lambda v: v["seed"]):
        lead = first[v["signature"]]
        if lead is v:
            if v["seed"] in shrunk:
                v = {**v, **shrunk[v["seed"]]}
                note = " (shrunk)"
            else:
                note = " (not shrunk)" if shrink and "desc" in v else ""
        else:
            note = f" (same failure as seed {lead['seed']}; not shrunk)"
        _report(v, a.out, note)
    ran = counts["passed"] + counts["failed"]
    if steps:
        print("by step: " + ", ".join(f"{k} {v}" for k, v in sorted(steps.items())))
        print(f"distinct failures: {len(first)}")
    stop = f", stopped by --time-budget after {ran} of {a.n}" if ran < a.n else ""
    print(f"({ran} programs in {time.monotonic() - t0:.0f} s, {a.jobs} jobs, device {a.device}{stop})")
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    return 1 if counts["failed"] else 0


def run_shrink_seed(arg) -> dict:
    """run_shrink with the seed riding along in arg (so the parent can match results)."""
    return run_shrink(arg[:3])


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
    p.add_argument("--jobs", type=int, default=None,
                   help="worker processes (default: the CPU count; 0 runs in this process, no isolation)")
    p.add_argument("--bad", type=int, default=0, help="try this many bad calls/programs instead")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per program before it is a hang")
    p.add_argument("--no-nvrtc", action="store_true", help="skip the sm_80/sm_90a compile-only checks")
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--out", default=None, help="write each failing program here (fuzz_seed_S.py)")
    p.add_argument("--time-budget", type=float, default=0.0,
                   help="seconds for the whole run: no program starts after it (shrinking gets the last 20%%)")
    p.add_argument("--no-thread-family", action="store_true",
                   help="thread-family programs use one thread per block (a backend without a thread model)")
    a = p.parse_args(argv)
    if a.jobs is None:
        a.jobs = os.cpu_count() or 1
    return _bad(a) if a.bad else _fuzz(a)
