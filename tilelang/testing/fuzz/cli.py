"""The command line: `python -m tilelang.testing.fuzz --seed S --n N [--device cuda] [--jobs J]
[--time-budget SECONDS] [--out DIR] [--json FILE] [--progress SECONDS] [--dry-run] [--family F] ...`.

Programs seed S .. S+N-1 run in J spawned worker processes (never forked; a crash or a
hang costs one worker, not the run: it counts as a failure with its seed and the worker is
replaced; a worker whose CUDA context broke is replaced too). This process never touches
CUDA: each worker sets its own device (CUDA_VISIBLE_DEVICES, round robin over the GPUs).
--family F draws every seed's program from family F (generate(seed, F), which is not the
program that seed has in the mix).
A failure prints one line as it happens, a progress line every --progress seconds, and
with --time-budget no program starts after 80% of it (all of it with --no-shrink); what is
still running when the budget ends is killed and counted as `cut`, not as a verdict.
The first failure of each distinct signature is shrunk; every failure is printed as a
runnable TileLang file with its seed, and with --out DIR written there (fuzz_seed_S.py).
SIGTERM / Ctrl-C stop the run and still print the summary. The last line is always
`N passed, M failed` (programs the oracle itself rejects, `invalid`, count as failed:
they are fuzzer bugs).

--device cuda compiles the device's arch once (with NVRTC's fast-compile flags, so one
compile serves the sm_90a check and the run; --full-opt-every K compiles every K-th seed
at full optimisation instead) and compares CUDA with float64 and with the CPU result.
--host-cuda also runs each program's sm_80 and sm_90a CUDA source on the host
(testing.host_cuda: g++, each block thread a host thread; an identical source runs once)
and compares it like the GPU run. Kernels host_cuda cannot emulate count as host-refused
(no verdict; the program stands on its other executions); the line before the last says
`host-cuda: K ran (per arch), R refused (reasons), F failed, X not reached; sources refused: (per arch)`. Off by default:
g++ costs ~2 s per program and source.
--dry-run (with --device cuda) goes as far as a machine without a GPU can: the sm_90a
compile of the kernel that would run, no CUDA calls.

`--bad N` instead tries N bad calls and bad programs (bad_inputs.py; with --device cuda the
calls go to a CUDA kernel) and ends with `tried T, clear C, crashes X, hangs H, wrong W, ...`.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import time

from .gen_base import FAMILIES

__all__ = ["main", "run_seed", "run_bad", "default_jobs", "worker_env"]


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


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
    """Worker task: check one seed. arg = (seed, options dict; see _options)."""
    import warnings

    warnings.simplefilter("ignore")
    from .generator import generate
    from .runner import check
    from .source import to_source
    from .spec import to_json

    seed, o = arg
    if seed in o.get("inject", {}):  # the pool's self-test: this seed's worker dies or hangs
        from .pool import selftest_task

        selftest_task(o["inject"][seed])
    prog = generate(seed, o.get("family"), single_thread=o["single"])
    full = bool(o["full_opt_every"]) and seed % o["full_opt_every"] == 0
    res = check(prog, device=o["device"], nvrtc=o["nvrtc"], dry=o["dry"], full_opt=full, archs=o["archs"],
                host_cuda=o["host_cuda"])
    out = {"seed": seed, "family": prog.family, "status": res.status, "step": res.step,
           "message": res.message, "seconds": res.seconds, "timings": res.timings, "host": res.host}
    if res.status != "pass":
        out["source"] = to_source(prog, full_opt=full, host_cuda=res.step.startswith("host-"))
        out["desc"] = to_json(prog)
        out["full_opt"] = full
        out["signature"] = res.signature if res.status == "fail" else f"invalid:{res.message[:60]}"
        if res.step.startswith("cuda-run") and not o["dry"] and _cuda_broken():
            out["retire"] = True
    return out


def run_shrink_seed(arg) -> dict:
    """Worker task: shrink one failure. arg = (desc JSON, options, seconds from now, seed)."""
    import warnings

    warnings.simplefilter("ignore")
    from .runner import check
    from .shrinker import shrink
    from .source import to_source
    from .spec import from_json

    desc, o, seconds, _seed, full = arg
    prog = from_json(desc)
    kw = {"dry": o["dry"], "full_opt": full, "host_cuda": o["host_cuda"]}  # the failing run's checks
    res = check(prog, device=o["device"], **kw)
    host = res.step.startswith("host-")
    if res.status != "fail":  # flaky, or only fails beside other programs: keep it as it is
        return {"source": to_source(prog, full_opt=full, host_cuda=host),
                "message": f"(not shrunk: alone it gave {res.status})"}
    small, sres = shrink(prog, res, device=o["device"], deadline=time.monotonic() + seconds, **kw)
    out = {"source": to_source(small, full_opt=full, host_cuda=host), "message": sres.message}
    if o["device"] == "cuda" and not o["dry"] and _cuda_broken():
        out["retire"] = True
    return out


def run_bad(arg) -> dict:
    from .bad_inputs import run_case

    return run_case(arg)


def _gpu_ids() -> list:
    """The GPUs workers spread over, found without initialising CUDA in this process."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return [v for v in vis.split(",") if v.strip()]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, ln in enumerate(ln for ln in out.splitlines() if ln.startswith("GPU "))]


def worker_env(device: str, dry: bool):
    """Worker i's environment: one OpenMP thread (J workers share the cores), its own NVRTC
    precompiled-header folder, and on CUDA one GPU (round robin)."""
    gpus = _gpu_ids() if device == "cuda" and not dry else []

    def env(i: int) -> dict:
        e = {"OMP_NUM_THREADS": "1", "TILELANG_FUZZ_WORKER": str(i)}
        if gpus:
            e["CUDA_VISIBLE_DEVICES"] = gpus[i % len(gpus)]
        return e

    return env


_PRELOAD = ("tilelang", "tilelang.testing.fuzz.runner", "tilelang.testing.fuzz.generator",
            "tilelang.testing.fuzz.bad_inputs")


class _Stop(Exception):
    """SIGTERM arrived: stop starting work and print the summary."""


def _on_term(signum, frame):
    raise _Stop()


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


def _lost(seed: int, o: dict, kind: str, message: str) -> dict:
    """The record of a seed whose worker died or hung: its program, so it can be replayed."""
    from .generator import generate
    from .source import to_source
    from .spec import to_json

    prog = generate(seed, o.get("family"), single_thread=o["single"])
    return {"seed": seed, "family": prog.family, "status": "fail", "step": kind, "signature": kind,
            "message": message, "source": to_source(prog), "desc": to_json(prog)}


def _options(a) -> dict:
    inject = {}
    for item in a.inject_crash or ():
        seed, _, kind = item.partition(":")
        inject[int(seed)] = kind or "segv"
    return {"device": a.device, "nvrtc": not a.no_nvrtc, "single": a.no_thread_family, "dry": a.dry_run,
            "family": a.family, "full_opt_every": a.full_opt_every, "inject": inject, "host_cuda": a.host_cuda,
            "archs": tuple(a.nvrtc_archs.split(",")) if a.nvrtc_archs else None}


class _Progress:
    def __init__(self, every: float, total: int, t0: float, jobs: int):
        self.every, self.total, self.t0, self.jobs = every, total, t0, jobs
        self.last = t0

    def maybe(self, counts, busy=None, force=False):
        now = time.monotonic()
        if not force and (not self.every or now - self.last < self.every):
            return
        self.last = now
        done = counts["passed"] + counts["failed"]
        el = now - self.t0
        run = f", {busy} running" if busy is not None else ""
        print(f"[fuzz] {el:.0f} s: {done} of {self.total} done, {counts['passed']} passed, "
              f"{counts['failed']} failed, {done / max(el, 1e-9):.2f}/s{run}", flush=True)


class _HostTally:
    """The --host-cuda counts: per program, whether some arch's CUDA source ran on the host,
    all were refused (and why), the host step failed, or an earlier step stopped it first."""

    def __init__(self):
        self.c, self.arch, self.why = collections.Counter(), collections.Counter(), collections.Counter()
        self.seeds: dict = {}  # reason -> the seeds refused for it (the JSON summary)
        self.shared = 0  # sm_90a sources equal to the sm_80 one but for tl/ includes: one run serves both
        self.arch_refused, self.arch_why = collections.Counter(), collections.Counter()  # per arch's source

    def add(self, r: dict) -> None:
        h = r.get("host") or {}
        for arch, v in h.items():
            if v.startswith("ran"):
                self.arch[arch] += 1
                self.shared += v != "ran"
            elif v.startswith("refused"):
                self.arch_refused[arch] += 1
                self.arch_why[f"{arch}: {v.split(': ', 1)[1]}"] += 1
        if r["status"] != "pass" and r["step"].startswith("host-"):
            self.c["failed"] += 1
        elif any(v.startswith("ran") for v in h.values()):
            self.c["ran"] += 1
        elif h:
            self.c["refused"] += 1
            for why in dict.fromkeys(v.split(": ", 1)[1] for v in h.values() if v.startswith("refused")):
                self.why[why] += 1
                self.seeds.setdefault(why, []).append(r["seed"])
        else:
            self.c["not reached"] += 1

    def line(self) -> str:
        arch = ", ".join(f"{k} {v}" for k, v in sorted(self.arch.items()))
        if self.shared:
            arch += f"; {self.shared} of them one source for both"
        why = ", ".join(f"{k} {v}" for k, v in self.why.most_common())
        srcs = ", ".join(f"{k} {v}" for k, v in sorted(self.arch_refused.items()))
        srcs_why = ", ".join(f"{k} {v}" for k, v in self.arch_why.most_common())
        return (f"host-cuda: {self.c['ran']} ran ({arch or 'none'}), {self.c['refused']} refused"
                f" ({why or 'none'}), {self.c['failed']} failed, {self.c['not reached']} not reached; sources refused:"
                f" {srcs or 'none'}" + (f" ({srcs_why})" if srcs_why else ""))

    def summary(self) -> dict:
        return {"ran": self.c["ran"], "refused": self.c["refused"], "failed": self.c["failed"],
                "not_reached": self.c["not reached"], "per_arch": dict(self.arch), "one_source_for_both": self.shared, "reasons": dict(self.why),
                "sources_refused": dict(self.arch_refused), "source_reasons": dict(self.arch_why),
                "reason_seeds": {k: sorted(v) for k, v in self.seeds.items()}}


def _fuzz(a) -> int:
    """Phase 1 checks every seed (until --time-budget); phase 2 shrinks the first failure of
    each distinct signature (the others print as they are, naming that seed)."""
    from .pool import Pool

    t0 = time.monotonic()
    budget = a.time_budget or float("inf")
    shrink = not a.no_shrink
    gen_end = t0 + (0.8 * budget if shrink else budget)
    gen_cut = t0 + (0.9 * budget if shrink else budget)
    o = _options(a)
    seeds = [(s, o) for s in range(a.seed, a.seed + a.n)]
    counts, steps, fams = collections.Counter(), collections.Counter(), collections.Counter()
    fails: list = []
    first: dict = {}
    shrunk: dict = {}
    timing = collections.defaultdict(float)
    host = _HostTally() if a.host_cuda else None
    prog = _Progress(a.progress, a.n, t0, a.jobs)
    stopped = ""
    old = signal.signal(signal.SIGTERM, _on_term)
    pool = Pool(a.jobs, worker_env=worker_env(a.device, a.dry_run), preload=_PRELOAD)
    try:
        for arg, (kind, value) in pool.map_unordered("tilelang.testing.fuzz.cli:run_seed", seeds, a.timeout,
                                                     deadline=gen_end, hard_deadline=gen_cut, tick=a.progress):
            if kind == "tick":
                prog.maybe(counts, value)
                continue
            if kind == "cut":
                counts["cut"] += 1
                continue
            if kind != "ok":
                what = f"died ({value})" if kind == "crash" else f"hung (over {a.timeout:.0f} s)"
                value = _lost(arg[0], o, kind, f"the worker {what} on seed {arg[0]}")
            ok = value["status"] == "pass"
            counts["passed" if ok else "failed"] += 1
            fams[f"{value['family']}:{'pass' if ok else 'fail'}"] += 1
            for k, v in value.get("timings", {}).items():
                timing[k] += v
            if host is not None and kind == "ok":
                host.add(value)
            if not ok:
                steps[f"{value['status']}:{value['step']}"] += 1
                fails.append(value)
                print(f"FAIL seed {value['seed']} ({value['family']}) at {value['step']}: "
                      f"{value['message'].splitlines()[0][:300] if value['message'] else ''}", flush=True)
            prog.maybe(counts)
        for v in sorted(fails, key=lambda v: v["seed"]):
            first.setdefault(v["signature"], v)
        left = t0 + budget - time.monotonic()
        todo = [(v["desc"], o, max(5.0, min(120.0, left - 10)), v["seed"], v.get("full_opt", False))
                for v in first.values() if shrink and "desc" in v and v["status"] == "fail"
                and v["step"] not in ("crash", "hang")]
        if todo and left > 15:
            print(f"[fuzz] shrinking {len(todo)} distinct failure(s)", flush=True)
            for arg, (kind, value) in pool.map_unordered("tilelang.testing.fuzz.cli:run_shrink_seed", todo,
                                                         a.timeout + 130, deadline=t0 + budget,
                                                         hard_deadline=t0 + budget, tick=a.progress):
                if kind == "ok":
                    shrunk[arg[3]] = value
    except (KeyboardInterrupt, _Stop):
        stopped = ", interrupted"
        for v in sorted(fails, key=lambda v: v["seed"]):
            first.setdefault(v["signature"], v)
    finally:
        pool.close()
        signal.signal(signal.SIGTERM, old)
    for v in sorted(fails, key=lambda v: v["seed"]):
        lead = first[v["signature"]]
        if lead is v:
            if v["seed"] in shrunk:
                v = {**v, **shrunk[v["seed"]]}
                note = " (shrunk)"
            else:
                note = " (not shrunk)" if shrink and "desc" in v and v["step"] not in ("crash", "hang") else ""
        else:
            note = f" (same failure as seed {lead['seed']}; not shrunk)"
        _report(v, a.out, note)
    ran = counts["passed"] + counts["failed"]
    if steps:
        print("by step: " + ", ".join(f"{k} {v}" for k, v in sorted(steps.items())))
        print(f"distinct failures: {len(first)}")
    print("by family: " + ", ".join(f"{k} {v}" for k, v in sorted(fams.items())))
    if ran:
        print("mean seconds per program: " + ", ".join(f"{k} {v / ran:.2f}" for k, v in sorted(timing.items())))
    if host is not None:
        print(host.line())
    wall = time.monotonic() - t0
    if ran < a.n and not stopped:
        stopped = f", stopped by --time-budget after {ran} of {a.n}"
    cut = f", {counts['cut']} cut at the budget's end" if counts["cut"] else ""
    print(f"({ran} programs in {wall:.0f} s, {a.jobs} jobs, device {a.device}"
          f"{' (dry run)' if a.dry_run else ''}{stopped}{cut})")
    if a.json:
        summary = {"passed": counts["passed"], "failed": counts["failed"], "cut": counts["cut"], "ran": ran,
                   "asked": a.n, "seed": a.seed, "device": a.device, "dry_run": a.dry_run, "jobs": a.jobs,
                   "wall_s": round(wall, 1), "per_step": dict(steps), "per_family": dict(fams),
                   "mean_s": {k: round(v / max(ran, 1), 3) for k, v in timing.items()},
                   "failures": [{k: v[k] for k in ("seed", "family", "status", "step", "message") if k in v}
                                for v in sorted(fails, key=lambda v: v["seed"])],
                   "shrunk": {str(k): v["source"] for k, v in shrunk.items()}, "family": a.family}
        if host is not None:
            summary["host_cuda"] = host.summary()
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    print(f"{counts['passed']} passed, {counts['failed']} failed", flush=True)
    return 1 if counts["failed"] or stopped == ", interrupted" else 0


def _bad(a) -> int:
    from .bad_inputs import case_ids
    from .pool import Pool

    t0 = time.monotonic()
    counts = collections.Counter()
    kinds = collections.Counter()
    failures = []
    old = signal.signal(signal.SIGTERM, _on_term)
    pool = Pool(a.jobs, worker_env=worker_env(a.device, a.dry_run), preload=_PRELOAD)
    cases = [c + (a.device, a.dry_run) for c in case_ids(a.seed, a.bad)]
    try:
        for cid, (kind, value) in pool.map_unordered("tilelang.testing.fuzz.cli:run_bad", cases, a.timeout,
                                                     deadline=t0 + a.time_budget if a.time_budget else None):
            if kind == "cut":
                continue
            counts["tried"] += 1
            verdict = value["verdict"] if kind == "ok" else kind
            counts[verdict] += 1
            kinds[f"{cid[1]}:{verdict}"] += 1
            if verdict != "clear":
                msg = value.get("message", "") if kind == "ok" else f"the worker {kind}: {value}"
                failures.append({"case": list(cid[:3]), "verdict": verdict, "message": msg})
                print(f"--- bad case {cid[:3]}: {verdict.upper()}: {msg}", flush=True)
    except (KeyboardInterrupt, _Stop):
        print("(interrupted)")
    finally:
        pool.close()
        signal.signal(signal.SIGTERM, old)
    print("by case: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    bad = counts["tried"] - counts["clear"]
    print(f"({counts['tried']} bad inputs in {time.monotonic() - t0:.0f} s, device {a.device}"
          f"{' (dry run)' if a.dry_run else ''}; {counts['clear']} passed, {bad} failed)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tried": counts["tried"], "clear": counts["clear"], "crashes": counts["crash"],
                       "hangs": counts["hang"], "wrong": counts["wrong"], "unclear": counts["unclear"],
                       "device": a.device, "per_case": dict(kinds), "failures": failures}, f, indent=1)
    print(f"tried {counts['tried']}, clear {counts['clear']}, crashes {counts['crash']}, "
          f"hangs {counts['hang']}, wrong {counts['wrong']}, unclear {counts['unclear']}", flush=True)
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tilelang.testing.fuzz", description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--dry-run", action="store_true",
                   help="with --device cuda: compile the kernel the GPU would run (sm_90a), call no CUDA")
    p.add_argument("--jobs", type=int, default=None,
                   help="worker processes (default min(CPU count, 8); 0 runs in this process, no isolation)")
    p.add_argument("--bad", type=int, default=0, help="try this many bad calls/programs instead")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per program before it is a hang")
    p.add_argument("--no-nvrtc", action="store_true", help="skip the sm_80/sm_90a compile-only checks")
    p.add_argument("--nvrtc-archs", default=None, metavar="LIST",
                   help="compile-only NVRTC checks, e.g. sm_80,sm_90a (the default; with --device cuda the "
                        "device's arch is compiled once for the run and not again)")
    p.add_argument("--full-opt-every", type=int, default=0, metavar="K",
                   help="--device cuda: every K-th seed compiles at NVRTC's full optimisation (0: none)")
    p.add_argument("--host-cuda", action="store_true",
                   help="also run the sm_80/sm_90a CUDA source on the host (testing.host_cuda, needs g++)")
    p.add_argument("--no-shrink", action="store_true")
    p.add_argument("--out", default=None, help="write each failing program here (fuzz_seed_S.py)")
    p.add_argument("--json", default=None, help="write a JSON summary here")
    p.add_argument("--progress", type=float, default=15.0, help="seconds between progress lines (0: none)")
    p.add_argument("--time-budget", type=float, default=0.0,
                   help="seconds for the whole run: no program starts after it (shrinking gets the last 20%%)")
    p.add_argument("--family", default=None, choices=FAMILIES,
                   help="every seed draws a program of this family (its own programs, not the mix's seeds)")
    p.add_argument("--no-thread-family", action="store_true",
                   help="thread-family programs use one thread per block (a backend without a thread model)")
    p.add_argument("--inject-crash", action="append", metavar="SEED:KIND",
                   help="self-test: the worker running SEED dies (KIND segv|abort|exit) or hangs (hang)")
    a = p.parse_args(argv)
    if a.jobs is None:
        a.jobs = default_jobs()
    if a.dry_run and a.device != "cuda":
        p.error("--dry-run goes with --device cuda")
    if a.host_cuda and not a.bad:
        from .host_exec import available

        if not available():
            p.error("--host-cuda needs g++ on the PATH")
    from .runner import ARCHS

    known = [name for _, name in ARCHS]
    if a.nvrtc_archs and not set(a.nvrtc_archs.split(",")) <= set(known):
        p.error(f"--nvrtc-archs takes a comma list of {', '.join(known)}, got {a.nvrtc_archs!r}")
    return _bad(a) if a.bad else _fuzz(a)
