"""compute-sanitizer (memcheck, racecheck, synccheck) over every project example and a subset of
the peer suite's kernels, in parallel, within a wall-clock budget (issue 12, item 4).

    python scripts/sanitize.py OUTDIR [--jobs 12] [--budget 450] [--timeout 240]
        [--peer-folders gemm,norm,...|all] [--every-test] [--fast-first] [--tilelang PATH]
        [--only SUBSTRING,...] [--skip SUBSTRING,...] [--check-library] [--no-canary] [--dry-run]

Programs: each examples/*.py run as `python ex.py --target cuda` (their default sizes are
small; quickstart also at an aligned size, which takes the sm_90a TMA / warp-specialized
path), and per peer folder the first test that passes on the public TileLang
(baseline-examples-public-h200.txt), run unchanged with pytest from a copy of the peer
examples. Kernels are ours (NVRTC in-process, loaded with cuModuleLoadData; the sanitizer
intercepts the driver API, so no toolkit compile is involved) and torch's own.
Each (program, tool) writes OUTDIR/logs/<program>.<tool>.log; OUTDIR/sanitize.json holds per
run: the tool's error count ("ERROR SUMMARY: N errors", racecheck's hazards too), rc, seconds,
status (ok | errors | failed | timeout | not-run: started after the budget). A table is
printed last; the exit status is 0 only when every run that ran is ok.
SANITIZE_KERNEL_REGEX limits checking to kernels whose names match; SANITIZE_LAUNCH_COUNT=N makes
racecheck (or the tools in SANITIZE_LAUNCH_TOOLS, comma-separated) check only each program's first N
kernel launches (compute-sanitizer --launch-count), for peer tests whose timing loops make a full run
past its timeout; the kernels a test checks come first, its benchmark repeats after them.
Under memcheck and synccheck, library kernels (cuBLAS, cuDNN, torch's own: the tests' references
and timing baselines) are excluded from instrumentation (compute-sanitizer --kernel-name-exclude,
LIBRARY_EXCLUDE below), so they run at full speed and only our kernels are checked; --check-library
checks them too. racecheck always instruments every kernel (see EXCLUDE_TOOLS). Before
anything else each tool runs scripts/sanitize_canary.py, a kernel of ours (extern "C", NVRTC,
loaded like every TileLang kernel) with one planted bug, under the same filters: a canary the tool
does not flag means the filters hide our kernels, and the run stops there (exit 3). Programs that
fail under the tool with no report (parallel load) are run once more, alone, when time is left.
racecheck and partial barriers (H200, 2026-12-03): `sanitize_canary.py control`, a correctly
synchronised scan over 256 of 1024 threads ordered by `bar.sync 3, 256`, gets a racecheck report
(and its right answer), so hazards racecheck reports across a partial named barrier are the tool's
(the peer example deepseek_v32/topk_selector gets 50 such reports, in the public build too).
Every run has TILELANG_BENCH_MAX_CALLS=3 (unless set): each tilelang do_bench pass makes at most 3
calls, since a budget of device milliseconds meant tens of thousands of launches under a tool (the
session-25 racecheck timeouts of tiny peer tests).
Caution (H200, 2026-12-03): with --launch-count, racecheck failed in 9 of 37 peer tests with "Internal
Sanitizer Error: failed to handle a hardware exception" and an illegal address in the program; the
same 9 ran clean without it. Treat such a run as the tool's failure, not a finding; prefer
--fast-first and a longer budget split over several calls (--only) to SANITIZE_LAUNCH_COUNT.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAN = os.environ.get("COMPUTE_SANITIZER", "/usr/local/cuda/bin/compute-sanitizer")
TOOLS = ("memcheck", "racecheck", "synccheck")
_P = Path(os.environ.get("PEER", ROOT / ".peer"))  # like .peer/suite.sh: PEER=/path/to/.peer
PEER = _P / "tilelang-examples"
BASELINE = _P / "baseline-examples-public-h200.txt"
# folders whose first baseline test runs in well under a minute on the H200 (racecheck is the slow
# tool: it serialises every shared-memory access); `--peer-folders all` takes one from every folder
DEFAULT_PEER = ("elementwise", "gemm", "gemm_splitk", "gemm_streamk", "gemv", "norm", "cast", "topk",
                "convolution", "warp_specialize", "gemm_fp8", "flash_attention", "flash_decoding",
                "dequantize_gemm", "blocksparse_gemm", "grouped_gemm", "online_softmax")


def programs(peer_folders, every_test: bool = False) -> list:
    """(name, argv, cwd) for every program to sanitize: the examples, then per peer folder its
    first baseline-passing test, or (every_test) every test that passes on the public TileLang."""
    py = sys.executable
    out = []
    for ex in sorted((ROOT / "examples").glob("*.py")):
        out.append((f"example_{ex.stem}", [py, str(ex), "--target", "cuda"], str(ROOT)))
    out.append(("example_quickstart_tma", [py, str(ROOT / "examples" / "quickstart.py"), "--target", "cuda",
                                           "--m", "1024", "--n", "768", "--k", "512"], str(ROOT)))
    if not BASELINE.exists():
        return out
    passing: dict = {}
    for ln in BASELINE.read_text().splitlines():
        parts = ln.split("\t")
        if len(parts) >= 2 and parts[0] == "PASS" and "/" in parts[1]:
            passing.setdefault(parts[1].split("/")[0], []).append(parts[1])
    folders = sorted(passing) if peer_folders == ["all"] else peer_folders
    for fd in folders:
        for t in passing.get(fd, [])[:None if every_test else 1]:
            path, _, test = t.partition("::")
            name = f"peer_{fd}" + (f"__{test.removeprefix('test_')}" if every_test else "")
            out.append((name, [py, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               f"{Path(path).name}::{test}"], str(Path(path).parent)))
    return out


_SUMMARY = re.compile(r"(?:ERROR|RACECHECK) SUMMARY:\s*(\d+)\s+(?:error|hazard)", re.I)


# kernels that are not ours: cuBLAS/cuDNN/torch's own, launched by the tests' references
_LIBRARY = re.compile(r"^(nvjet|cutlass|cublas|cudnn|sm\d+_xmma|ampere_|volta_|turing_|gemv|gemmk|"
                      r"void at::|at::|void \(anonymous namespace\)|triton_|std::)", re.I)
# what --kernel-name-exclude skips: C++ (mangled `_Z...` or demangled `void ...`) kernels and the
# vendor libraries' extern "C" ones. Every TileLang kernel is an unmangled extern "C" symbol named
# after its prim_func, which the canary stands in for.
LIBRARY_EXCLUDE = r"^(_Z|void |nvjet|sm[0-9]+_xmma|cutlass|cublas|cudnn|at::)"
# racecheck is left whole: with library kernels excluded it failed in 28 of 79 peer tests on the H200
# (2026-12-03) with "Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception" and
# an illegal address in the program, as with --launch-count; memcheck and synccheck ran all 79 clean.
EXCLUDE_TOOLS = ("memcheck", "synccheck")
FILTER_KEY = os.environ.get("SANITIZE_FILTER_KEY", "regex=")  # compute-sanitizer's filter syntax
CANARY = ROOT / "scripts" / "sanitize_canary.py"
_AT = re.compile(r"\b(?:at|in)\s+(.+?)\+0x[0-9a-f]+")


def count_errors(text: str):
    """The tool's own count (the largest SUMMARY line: racecheck prints errors and hazards)."""
    found = [int(m.group(1)) for m in _SUMMARY.finditer(text)]
    return max(found) if found else None


def classify(text: str) -> dict:
    """The tool's reports split by where they come from: `ours` (a TileLang kernel), `library`
    (cuBLAS, cuDNN, torch kernels the reference code launched) and `api` (a CUDA API call that
    returned an error, e.g. cuda-bindings probing driver entry points with cuGetProcAddress;
    our driver checks every call it makes itself and raises). Keeps the first of ours as text."""
    out = {"ours": 0, "library": 0, "api": 0, "ours_reports": []}
    for rec in re.split(r"\n=+ ?\n", text):
        body = [ln.lstrip("= ").rstrip() for ln in rec.splitlines() if ln.startswith("=")]
        head = next((ln for ln in body if ln and not ln.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY",
                                                                         "RACECHECK SUMMARY", "Saved host",
                                                                         "Host Frame", "Device Frame"))), "")
        if not head or not re.match(r"(Error|Warning|Invalid|Program hit|Race|Barrier|Divergent|Misaligned|"
                                    r"Out-of-range|Uninitialized|Malloc|Leaked|Cuda API)", head):
            continue
        if head.startswith("Error: process didn't terminate"):
            continue  # the program failed (its own output says why): status "failed", not a report
        if head.startswith("Program hit") and "API call" in head:
            out["api"] += 1
            continue
        kernel = next((m.group(1) for ln in body for m in [_AT.search(ln)] if m), "")
        if kernel and _LIBRARY.match(kernel.strip()):
            out["library"] += 1
        else:
            out["ours"] += 1
            if len(out["ours_reports"]) < 3:
                out["ours_reports"].append("\n".join(body[:12]))
    return out


def _peer_site(target: Path, dry: bool) -> str:
    """Install the peer's reference wheels (fla-core, which the linear-attention tests compare
    against; not on the GPU image) into `target`, as .peer/suite.sh does; '' when there are none."""
    wheels = sorted((_P / "wheels").glob("*.whl"))
    if not wheels:
        return ""
    if not dry and not target.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--target", str(target)] + [str(w) for w in wheels],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return str(target)


def kill_group(p: subprocess.Popen) -> None:
    """SIGKILL `p`'s whole process group (compute-sanitizer and the program it runs)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_one(job, out: Path, peer_copy: Path, timeout: float, end: float, dry: bool, env: dict,
            exclude_library: bool = True) -> dict:
    name, argv, cwd, tool = job
    if not os.path.isabs(cwd):  # a peer test: its folder in the copy
        cwd = str(peer_copy / cwd)
    row = {"program": name, "tool": tool, "cmd": " ".join(argv)}
    left = end - time.monotonic()
    if left < 10:
        return {**row, "status": "not-run", "errors": None, "rc": None, "seconds": 0.0}
    cmd = [SAN, "--tool", tool, "--error-exitcode", "9", "--print-limit", "50"]
    if os.environ.get("SANITIZE_KERNEL_REGEX"):
        cmd += ["--kernel-name", f"{FILTER_KEY}{os.environ['SANITIZE_KERNEL_REGEX']}"]
    if exclude_library and tool in EXCLUDE_TOOLS:
        cmd += ["--kernel-name-exclude", f"{FILTER_KEY}{LIBRARY_EXCLUDE}"]
    launches = os.environ.get("SANITIZE_LAUNCH_COUNT")  # check only the first N launches (the benchmark
    if launches and tool in os.environ.get("SANITIZE_LAUNCH_TOOLS", "racecheck").split(","):  # repeats
        cmd += ["--launch-count", launches]                                                 # run unchecked
        row["launch_count"] = int(launches)
    cmd += argv
    log = out / "logs" / f"{name}.{tool}.log"
    t0 = time.monotonic()
    if dry:
        log.write_text(" ".join(cmd) + "\n")
        return {**row, "status": "dry-run", "errors": None, "rc": None, "seconds": 0.0, "cwd": cwd}
    # its own process group: on a timeout the program under the tool goes too (killing only the
    # sanitizer left a racecheck'd test running on the GPU, which slowed the timings after it)
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, errors="replace", start_new_session=True)
    try:
        text, _ = p.communicate(timeout=min(timeout, left))
        rc = p.returncode
    except subprocess.TimeoutExpired:
        kill_group(p)
        text, _ = p.communicate()
        rc = "timeout"
    log.write_text(" ".join(cmd) + "\n" + text)
    n = count_errors(text)
    kinds = classify(text)
    summarised = n is not None
    if rc == "timeout":
        status = "timeout"
    elif kinds["ours"]:
        status = "errors"  # (a program our kernel's error made fail is here too)
    elif "process didn't terminate successfully" in text:
        status = "failed"  # the program itself failed under the tool; no report of a hazard
    elif summarised and (rc == 0 or (rc == 9 and n == kinds["library"] + kinds["api"])):
        status = "ok"  # every report is a library kernel's or an API return code (counted apart)
    else:
        status = "failed"  # the program failed on its own, or the tool never summarised
    return {**row, "status": status, "errors": kinds["ours"] if summarised else None, "tool_count": n,
            "library": kinds["library"], "api": kinds["api"], "ours_reports": kinds["ours_reports"],
            "rc": rc, "seconds": round(time.monotonic() - t0, 1), "tail": text[-600:] if status != "ok" else ""}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--budget", type=float, default=450.0,
                    help="seconds; nothing starts after it, and a run still going then is stopped as a timeout "
                         "(each run's timeout is min(--timeout, the budget left when it starts))")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per (program, tool)")
    ap.add_argument("--peer-folders", default=",".join(DEFAULT_PEER))
    ap.add_argument("--every-test", action="store_true",
                    help="every test of those folders that passes on the public TileLang, not the first")
    ap.add_argument("--tilelang", default=str(ROOT),
                    help="the folder `import tilelang` comes from (another implementation, side by side)")
    ap.add_argument("--only", default="", help="only programs whose name holds one of these (comma-separated)")
    ap.add_argument("--skip", default="", help="not the programs whose name holds one of these (comma-separated)")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--fast-first", action="store_true",
                    help="memcheck and synccheck of every program before any racecheck")
    ap.add_argument("--check-library", action="store_true",
                    help="instrument cuBLAS / cuDNN / torch kernels too (slow; not ours)")
    ap.add_argument("--no-canary", action="store_true", help="skip the planted-bug canaries")
    ap.add_argument("--dry-run", action="store_true", help="write the commands, run nothing")
    a = ap.parse_args(argv)
    out = Path(a.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    if not a.dry_run and not Path(SAN).exists():
        print(f"compute-sanitizer not found at {SAN} (set COMPUTE_SANITIZER)")
        return 2
    end = time.monotonic() + a.budget
    if os.environ.get("TMPDIR"):  # compute-sanitizer exits at once (rc 13) when TMPDIR does not exist
        os.makedirs(os.environ["TMPDIR"], exist_ok=True)
    # a copy of its own per invocation (two concurrent runs once shared one and the second failed)
    work = Path(tempfile.mkdtemp(prefix="tl-sanitize-")) if not a.dry_run else Path("/tmp/tl-sanitize-dry")
    peer_copy = work / "peer"
    if PEER.exists() and not a.dry_run:
        shutil.copytree(PEER, peer_copy)  # the peer folder stays read-only
    site = _peer_site(work / "site", a.dry_run)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(a.tilelang), site,
                                                                     os.environ.get("PYTHONPATH", "")))),
               PYTHONUNBUFFERED="1", TILELANG_CACHE_DIR=str(out / "cache"))
    # the programs' timing loops size themselves by device time, which the tools barely slow while
    # each launch's host-side checking costs milliseconds: cap each do_bench pass (profiler/bench.py)
    env.setdefault("TILELANG_BENCH_MAX_CALLS", "3")
    skip = [s for s in a.skip.split(",") if s]
    progs = [p for p in programs(a.peer_folders.split(","), a.every_test) if any(o in p[0] for o in a.only.split(","))
             and not any(s in p[0] for s in skip)]
    # racecheck first (slowest), so the budget cuts the fast tools last; --fast-first: memcheck and
    # synccheck of every program before any racecheck (racecheck of a peer test takes 40-160 s)
    order = {"memcheck": 0, "synccheck": 1, "racecheck": 2} if a.fast_first else \
        {"racecheck": 0, "memcheck": 1, "synccheck": 2}
    jobs = sorted([(n, av, cwd, t) for n, av, cwd in progs for t in a.tools.split(",")],
                  key=lambda j: (order.get(j[3], 3), j[0]))
    excl = not a.check_library
    if not a.no_canary:
        canaries = [run_one((f"canary_{t}", [sys.executable, str(CANARY), t], str(ROOT), t), out, peer_copy,
                            120.0, end, a.dry_run, env, excl) for t in a.tools.split(",")]
        for r in canaries:
            if r["status"] == "dry-run":
                continue
            seen = r["status"] == "errors"
            print(f"[canary {'flagged' if seen else 'MISSED'}] {r['tool']}: {r['errors']} report(s) in our "
                  f"kernel, status {r['status']}", flush=True)
            if not seen:
                print(f"the {r['tool']} canary's planted bug was not reported: the kernel filters hide our "
                      f"kernels, so this run would check nothing. Log: {out / 'logs'}")
                print(r.get("tail", ""))
                return 3
    with ThreadPoolExecutor(max(1, a.jobs)) as ex:
        futs = [ex.submit(run_one, j, out, peer_copy, a.timeout, end, a.dry_run, env, excl) for j in jobs]
        rows = []
        for f in futs:
            r = f.result()
            rows.append(r)
            print(f"[{r['status']}] {r['program']} {r['tool']} errors={r['errors']} rc={r['rc']} {r['seconds']}s",
                  flush=True)
    # a program that failed under the tool with no report: once more, alone (parallel load, memory)
    by_job = {(j[0], j[3]): j for j in jobs}
    for i, r in enumerate(rows):
        if r["status"] == "failed" and not a.dry_run:
            again = run_one(by_job[(r["program"], r["tool"])], out, peer_copy, a.timeout, end, False, env, excl)
            if again["status"] != "not-run":
                rows[i] = {**again, "first_try": "failed"}
                print(f"[retry {again['status']}] {r['program']} {r['tool']} errors={again['errors']} "
                      f"{again['seconds']}s", flush=True)
    (out / "sanitize.json").write_text(json.dumps(rows, indent=1))
    if not a.dry_run:
        shutil.rmtree(work, ignore_errors=True)
    names = [p[0] for p in progs]
    tools = a.tools.split(",")
    cell = {(r["program"], r["tool"]): r for r in rows}
    print("\n==== compute-sanitizer: errors per tool (status when not ok) ====")
    W = max([34] + [len(n) + 1 for n in names])
    print(f"{'program':{W}s}" + "".join(f"{t:>16s}" for t in tools))
    for n in names:
        cells = []
        for t in tools:
            r = cell[(n, t)]
            cells.append(f"{r['errors']}" if r["status"] == "ok" else f"{r['status']}({r['errors']})")
        print(f"{n:{W}s}" + "".join(f"{c:>16s}" for c in cells))
    ran = [r for r in rows if r["status"] not in ("not-run", "dry-run")]
    bad = [r for r in ran if r["status"] != "ok"]
    errs = sum(r["errors"] or 0 for r in ran)
    print(f"{len(ran)} runs, {len(ran) - len(bad)} ok, {len(bad)} not ok, {errs} sanitizer errors, "
          f"{sum(r['status'] == 'not-run' for r in rows)} not run (budget)")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
