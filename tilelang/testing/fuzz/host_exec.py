"""The fuzzer's host execution: a program's CUDA build run on the host by testing.host_cuda.

Takes a compiled CUDA JITKernel (the sm_80 or sm_90a build the NVRTC check made) and the
program's inputs; gives the outputs the generated CUDA source computes when g++ builds it
against host_cuda.h (each block thread a host thread). Multi-kernel programs run kernel by
kernel in launch order on the same tensors, with the T.alloc_global workspaces allocated as
the JIT does (`binder.workspaces`) and filled with NaN (floats) or a marker value (ints), so a
kernel that reads a workspace element no earlier kernel wrote shows in the result.

A kernel host_cuda cannot emulate (NotImplementedError: tensor cores, TMA, mbarriers, ...)
or whose source g++ rejects (a tl:: helper host_cuda.h lacks; NVRTC accepted the same
source) raises `HostRefused` with a short `category` for the summary; a crash, an
out-of-bounds access, a barrier not every thread reaches or a timeout raises HostRunError.

    outs = run_on_host(jit_kernel, {"A": a, "O": o}, order=["A", "O"])   # or HostRefused
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

import torch

from ...ir.expr import Var
from ..host_cuda import HERE, HostProgram, available

__all__ = ["HostRefused", "HostRunError", "run_on_host", "refusal_category", "available", "build", "unaligned_call",
           "source_key"]

RUN_TIMEOUT = 60.0  # seconds per kernel launch on the host


class HostRefused(Exception):
    """host_cuda cannot run this kernel: `category` says why in a few words."""

    def __init__(self, category: str, message: str):
        super().__init__(message)
        self.category = category


class HostRunError(Exception):
    """The host run of the generated source crashed, hung or broke a barrier."""


@dataclass
class _Part:
    """What HostProgram reads of a kernel: its CUDA artifact and its prim_func's params."""
    artifact: object
    prim_func: object


def refusal_category(exc: Exception, source: str = "", defined=()) -> str:
    """A few words for why host_cuda refused: the unsupported markers it named, the limit, or
    for a g++ failure the tl names `source` uses that host_cuda.h does not define (else the
    first g++ error); `defined`: names the source defines itself (its kernels' entries)."""
    msg = str(exc)
    if isinstance(exc, NotImplementedError):
        names = re.findall(r"'([^']+)'", msg)
        if names:
            return "+".join(sorted(set(names)))
        if "shared memory" in msg:
            return "shared memory size"
        if "args" in msg:
            return "kernel args (TMA / workspace)"
        return msg.split(":", 1)[-1].strip()[:40]
    own = set(re.findall(r"\b(?:void|struct|class|using|define)\s+(\w+)", source)) | _header_names() | set(defined)
    missing = sorted({m for m in re.findall(r"\btl(?:::|_)\w+", source) if m.split("::")[-1] not in own})
    if missing:
        return f"g++: {'+'.join(missing[:3])} missing"
    m = re.search(r"error: (.{0,60})", msg)
    return f"g++: {m.group(1).strip()}" if m else "g++ failed"


_HEADER: set = set()


def _header_names() -> set:
    """Every identifier host_cuda.h mentions (read once; its tl:: helpers sit in namespace tl)."""
    if not _HEADER:
        with open(os.path.join(HERE, "host_cuda.h")) as f:
            _HEADER.update(re.findall(r"\w+", f.read()))
    return _HEADER


def _parts(kernel) -> list:
    """(name, _Part) per kernel launch, in order."""
    art = kernel.artifact
    if hasattr(art, "launch_params"):  # a launch sequence: its kernels share the parameters + workspaces
        return [(sub.name, _Part(k, sub)) for k, sub in zip(art.kernels, art.plan.kernels)]
    return [(kernel.prim_func.name, _Part(art, kernel.prim_func))]


def source_key(kernel) -> str:
    """What the host build of `kernel` depends on: its source less the tl/ #include lines
    (host_cuda.h stands in for them), so sm_80 and sm_90a builds that differ only there
    are one host run."""
    return "\n".join(ln for ln in kernel.get_kernel_source().splitlines() if not ln.startswith('#include "tl/'))


def _poison(t: torch.Tensor) -> torch.Tensor:
    if t.dtype.is_floating_point:
        return t.fill_(float("nan"))
    return t.fill_(-7 if t.dtype.is_signed else 7)


def build(kernel) -> HostProgram:
    """One g++ build of every kernel of `kernel`; HostRefused when host_cuda cannot run one."""
    try:
        return HostProgram(dict(_parts(kernel)))
    except NotImplementedError as e:
        raise HostRefused(refusal_category(e), str(e)) from None
    except RuntimeError as e:
        if "g++ failed" not in str(e):
            raise
        cs = [p.artifact.csource for _, p in _parts(kernel)]
        raise HostRefused(refusal_category(e, "\n".join(c.text for c in cs), [c.entry for c in cs]),
                          str(e)[:4000]) from None


def _env(kernel, values: list) -> dict:
    """{Var: int} of the dynamic dims, read off the tensors (the binder would insist on CUDA ones)."""
    env = {}
    for p, v in zip(kernel.prim_func.params, values):
        for d, s in enumerate(getattr(p, "shape", ()) if isinstance(v, torch.Tensor) else ()):
            if isinstance(s, Var):
                env.setdefault(s, int(v.shape[d]))
    return env


def unaligned_call(kernel, tensors: dict, order: list) -> bool:
    """Would the JIT run this call on its unaligned fallback (a dynamic dim that breaks the
    16-byte row assumption)? Then the host run needs the build with
    tl.disable_dynamic_alignment, the program the fallback compiles."""
    aligned = getattr(kernel, "aligned", None)
    if aligned is None:
        return False
    return not aligned.holds(_env(kernel, [tensors[n] for n in order]))


@contextlib.contextmanager
def _scratch():
    """HostProgram's build folders (made even for a kernel it refuses) go in one folder that
    is removed afterwards: a fuzz run builds two per program."""
    old, d = tempfile.tempdir, tempfile.mkdtemp(prefix="tl_fuzz_host_")
    tempfile.tempdir = d
    try:
        yield
    finally:
        tempfile.tempdir = old
        shutil.rmtree(d, ignore_errors=True)


def run_on_host(kernel, tensors: dict, order: list, program: HostProgram | None = None) -> dict:
    """Run `kernel`'s CUDA source on the host on copies of `tensors` (name -> CPU tensor; `order`:
    the prim_func's parameter order); return the updated copies by name. Without `program`
    it is built here (in a scratch folder removed afterwards)."""
    if program is None:
        with _scratch():
            return _run(kernel, tensors, order, build(kernel))
    return _run(kernel, tensors, order, program)


def _run(kernel, tensors: dict, order: list, program: HostProgram) -> dict:
    args = {k: v.clone().contiguous() for k, v in tensors.items()}
    values = [args[n] for n in order]
    env = _env(kernel, values)
    full = list(values)
    ws_bufs = getattr(getattr(kernel.artifact, "plan", None), "workspaces", ())
    if ws_bufs:
        ws = kernel.binder.workspaces(ws_bufs, values, env)
        full += [_poison(ws[b.uid]) for b in ws_bufs]
    for name, part in _parts(kernel):
        by_id = {id(p): i for i, p in enumerate(part.prim_func.params)}
        assert len(by_id) == len(full), f"{name}: {len(by_id)} params, {len(full)} values"
        try:
            program.run(name, full, timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise HostRunError(f"host_cuda: kernel {name} ran over {RUN_TIMEOUT:.0f} s (a hang?)") from None
        except AssertionError as e:
            raise HostRunError(str(e)) from None
    return args
