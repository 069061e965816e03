"""A differential fuzzer: random valid TileLang programs, run on the CPU backend against a
float64 torch reference derived from the program's description (never from our compiler),
compiled for sm_80 and sm_90a with NVRTC (with --host-cuda that CUDA source also runs on the
host through testing.host_cuda: host_exec), and on a GPU (`--device cuda`) run there too.

    python -m tilelang.testing.fuzz --seed 0 --n 300 [--device cuda] [--jobs 2]
    python -m tilelang.testing.fuzz --seed 0 --n 40 --host-cuda   # + the CUDA source run on the host
    python -m tilelang.testing.fuzz --bad 200          # bad calls and DSL misuse

Modules: spec (the description), generator/families/families_ext/families_attn/gen_base (random programs), source
(description -> TileLang source), reference (the float64 oracle), runner (compile, run,
compare), shrinker (delta debugging of a failure), bad_inputs (errors that must be clear),
cli (the command line). A failure prints as a runnable file: `python that_file.py` replays it.
"""
from __future__ import annotations

import importlib

# Loaded on first use (PEP 562), so a pool worker that only imports `pool` starts without torch.
_LAZY = {"FAMILIES": "generator", "generate": "generator", "Result": "runner", "check": "runner",
         "to_source": "source", "Program": "spec", "from_json": "spec", "to_json": "spec"}

__all__ = ["FAMILIES", "generate", "check", "Result", "to_source", "Program", "from_json", "to_json",
           "replay_file"]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def replay_file(path: str, device: str | None = None, host_cuda: bool | None = None):
    """Re-run the program a fuzz source file describes (its DESC) and print the verdict.
    device: "cpu" or "cuda"; by default `--device D` from the command line, else "cpu".
    host_cuda: also run its CUDA source on the host; by default when the file says HOST_CUDA
    or the command line has --host-cuda."""
    import sys

    if device is None:
        argv = sys.argv[1:]
        device = argv[argv.index("--device") + 1] if "--device" in argv[:-1] else "cpu"
    import runpy

    from .runner import check
    from .spec import from_json

    ns = runpy.run_path(path, run_name="tl_fuzz_replay")
    if host_cuda is None:
        host_cuda = bool(ns.get("HOST_CUDA", False)) or "--host-cuda" in sys.argv[1:]
    res = check(from_json(ns["DESC"]), device=device, full_opt=bool(ns.get("FULL_OPT", False)), host_cuda=host_cuda)
    print("PASS" if res.status == "pass" else f"{res.status.upper()} [{res.step}] {res.message}")
    return res
