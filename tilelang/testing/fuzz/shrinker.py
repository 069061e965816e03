"""Delta-debug a failing program description down to a small one that fails the same way.

Moves, tried greedily until none helps (each candidate must still be a valid program, i.e.
its reference runs without NaN, and fail with the same `Result.signature`):
  * drop one statement (nested bodies too), or unwrap an `if` / a one-trip T.Pipelined
  * shrink a named or symbolic dim (halve it, or take one off), or make a symbolic dim a literal
  * drop an output tensor no statement writes any more
  * lower the thread count (while the warp split stays valid is the generator's job: a
    candidate the public rules reject fails differently and is not kept)

    small = shrink(prog, result, budget=60)      # at most 60 candidate runs
"""
from __future__ import annotations

import time
from dataclasses import replace

from .runner import Result, check
from .spec import If, Pipelined, Program, walk

__all__ = ["shrink"]


def _drops(body: tuple):
    """Every body with one statement removed or one block unwrapped (recursively)."""
    for i, s in enumerate(body):
        yield body[:i] + body[i + 1:]
        if isinstance(s, (If, Pipelined)):
            if isinstance(s, If):
                yield body[:i] + s.body + body[i + 1:]
            for inner in _drops(s.body):
                yield body[:i] + (replace(s, body=inner),) + body[i + 1:]


def _written(prog: Program) -> set:
    names = set()
    for s in walk(prog.body):
        for attr in ("dst", "c", "var", "buf"):
            v = getattr(s, attr, None)
            names.add(getattr(v, "buf", v))
    return names


def _candidates(p: Program):
    for body in _drops(p.body):
        yield p.with_(body=body)
    written, read = _written(p), repr(p.body)
    outs = [t for t in p.tensors if t.role == "out" and t.name not in written]
    if outs:
        yield p.with_(tensors=tuple(t for t in p.tensors if t not in outs))
    unused = [t for t in p.tensors if repr(t.name) not in read and f"'{t.name}'" not in read]
    if unused:
        yield p.with_(tensors=tuple(t for t in p.tensors if t not in unused))
    for name, v in {**p.consts, **p.dims}.items():
        for nv in {v // 2, v - 1}:
            if nv >= 1:
                key = "consts" if name in p.consts else "dims"
                yield p.with_(**{key: {**getattr(p, key), name: nv}})
    if p.threads > 32:
        yield p.with_(threads=p.threads // 2)


def shrink(prog: Program, result: Result, budget: int = 40, device: str = "cpu",
           deadline: float | None = None, **check_kw) -> tuple[Program, Result]:
    """A smaller program failing with result's signature, and its result (or the input's).
    At most `budget` candidate runs, none started after `deadline` (a time.monotonic() value).
    check_kw (dry, full_opt, host_cuda) go to every `check`; the host execution only where the
    failure is one of its steps (host-*), as it costs a g++ build per candidate."""
    sig = result.signature
    check_kw = {**check_kw, "host_cuda": bool(check_kw.get("host_cuda")) and result.step.startswith("host-")}
    best, best_res, tries = prog, result, 0
    progress = True
    while progress and tries < budget:
        progress = False
        for cand in _candidates(best):
            if tries >= budget or (deadline is not None and time.monotonic() > deadline):
                return best, best_res
            tries += 1
            res = check(cand, device=device, nvrtc=result.step.startswith("nvrtc"), **check_kw)
            if res.status == "fail" and res.signature == sig:
                best, best_res, progress = cand, res, True
                break
    return best, best_res
