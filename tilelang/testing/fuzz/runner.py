"""Run one program description: compile its TileLang source, run it, compare with the oracle.

Steps (the first that goes wrong is the verdict):
  frontend     importing the source (parsing the @T.prim_func) raised
  compile-cpu  tilelang.compile(..., target="cpu") raised
  run-cpu      calling the CPU kernel raised
  mismatch     the CPU result differs from the float64 reference beyond the dtype tolerance
  nvrtc-sm_80 / nvrtc-sm_90a   compiling for that arch with NVRTC raised (compile only)
  path-<arch>  the program names a pipeline path (spec.Program.path) that the source lacks
  smem-<arch>  a kernel of that build asks for more shared memory than one block of the arch may
               have: it could not launch there (the generator keeps programs' own tiles well under)
  host-*       (host_cuda=True) the sm_80 / sm_90a CUDA source run on the host by
               testing.host_cuda (host_exec.py) and compared like the GPU run: host-build-<arch>,
               host-run-<arch> (a crash, an out-of-bounds access, a barrier not every thread
               reaches), host-mismatch-<arch>; a kernel host_cuda cannot emulate is recorded in
               Result.host as "refused: <why>" and is no verdict
  cuda-*       (device="cuda") compiling for the device, running, or comparing the CUDA result
               with the float64 reference and with the CPU result
With device="cuda" the device's own arch is compiled once (that kernel is the one run), with
the compile-only flags unless full_opt (NVRTC's full optimisation costs up to a minute for
some GEMMs); dry=True stops right before CUDA is needed (compiles for sm_90a, runs nothing),
so the GPU path is exercised on a machine without one.
A reference that raises or gives NaN marks the description `invalid` (a generator bug).

    res = check(generate(7))          # Result(status="pass"|"fail"|"invalid", step, message)
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field

import torch

from .reference import TORCH_DTYPES, ReferenceError_, run_reference
from .source import to_source
from .spec import Program

__all__ = ["Result", "check", "load_kernel", "make_inputs", "TOLERANCE", "tolerance", "path_error", "PATH_MARKS"]

TOLERANCE = {"float32": 1e-4, "tfloat32": 5e-3, "float16": 1e-2, "bfloat16": 4e-2, "float8_e4m3fn": 0.13,
             "float8_e5m2": 0.26, "int8": 0.0, "int32": 0.0}
ARCHS = ((80, "sm_80"), (90, "sm_90a"))


def nvrtc_flags() -> tuple:
    """Compile-only checks need NVRTC's verdict, not fast code: fast-compile cuts a GEMM's 5 s
    to under 1 s, and a precompiled header of tl/*.h halves what is left."""
    return ("--Ofast-compile=mid", "--pch", f"--pch-dir={pch_dir()}")


def pch_dir() -> str:
    """One precompiled-header folder per pool worker (TILELANG_FUZZ_WORKER): NVRTC writes its
    PCH files there, and processes writing one folder at once could read a half-written one."""
    d = os.path.join(_src_dir(), "pch", f"w{os.environ.get('TILELANG_FUZZ_WORKER', 'main')}")
    os.makedirs(d, exist_ok=True)
    return d


@dataclass
class Result:
    status: str  # pass | fail | invalid
    step: str = ""
    message: str = ""
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)
    host: dict = field(default_factory=dict)  # arch -> "ran" [(the sm_80 source)] | "refused: <why>" | "error"

    @property
    def signature(self) -> str:
        """What a shrunk program must keep failing with: the step, the error type and the first
        `error` line with paths and numbers blanked (they change as the program shrinks)."""
        if self.step.endswith("mismatch"):
            return self.step
        kind = self.message.split(":", 1)[0]
        line = next((ln for ln in self.message.splitlines()[1:] if "error:" in ln.lower()),
                    self.message.splitlines()[0] if self.message else "")
        line = re.sub(r"\S*/\S*|\d+", "#", line.split(": ", 1)[-1])[:80]
        return f"{self.step}:{kind}:{line}"


def tolerance(prog: Program) -> float:
    """The loosest tolerance among every dtype the program stores."""
    dts = {t.dtype for t in prog.tensors + prog.workspaces} | {a.dtype for k in prog.launches() for a in k.allocs}
    return max(TOLERANCE.get(d, 1e-4) for d in dts)


def _src_dir() -> str:
    d = os.path.join(tempfile.gettempdir(), f"tilelang-fuzz-{os.getuid()}")
    os.makedirs(d, exist_ok=True)
    return d


def load_kernel(prog: Program, path: str | None = None):
    """Write the program's source to a file and import it; return (prim_func, path)."""
    src = to_source(prog)
    if path is None:
        h = hashlib.sha1(src.encode()).hexdigest()[:16]
        path = os.path.join(_src_dir(), f"fz_{prog.seed}_{h}.py")
        if not os.path.exists(path):
            with open(path + ".tmp", "w") as f:
                f.write(src)
            os.replace(path + ".tmp", path)
    spec = importlib.util.spec_from_file_location(f"tl_fuzz_{os.path.basename(path)[:-3]}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main, path


def _rand(shape, dtype, g: torch.Generator) -> torch.Tensor:
    """Values every dtype holds exactly: small multiples of 1/4 (floats) or small ints."""
    if dtype in ("int8", "int32"):
        hi = 4 if dtype == "int8" else 8
        return torch.randint(-hi, hi + 1, shape, generator=g).to(TORCH_DTYPES[dtype])
    v = torch.randint(-8, 9, shape, generator=g).to(torch.float32) / 4
    return v.to(TORCH_DTYPES[dtype])


def make_inputs(prog: Program) -> dict:
    """Fresh inputs and initial outputs (random too, so unwritten elements must stay as they were)."""
    g = torch.Generator().manual_seed(prog.seed * 1000003 + 17)
    out = {}
    for t in prog.tensors:
        shape = prog.shape_of(t.name)
        if t.name.startswith("Flag"):
            out[t.name] = torch.randint(-1, 2, shape, generator=g).to(torch.int32)
        else:
            out[t.name] = _rand(shape, t.dtype, g)
    return out


def _compare(prog, got: dict, ref: dict, what: str) -> str:
    tol = tolerance(prog)
    for name, r in ref.items():
        x = got[name].detach().to("cpu", torch.float64)
        fin = r[torch.isfinite(r)]
        scale = max(1.0, float(fin.abs().max())) if fin.numel() else 1.0
        bad = ~((x == r) | ((x - r).abs() <= tol * scale + tol * r.abs()))  # x == r: equal infs
        bad |= torch.isnan(x) != torch.isnan(r)
        if bool(bad.any()):
            idx = bad.nonzero()[:4].tolist()
            pairs = ", ".join(f"{tuple(i)}: got {x[tuple(i)].item():g} want {r[tuple(i)].item():g}" for i in idx)
            return (f"{what}: output {name} differs from the float64 reference in {int(bad.sum())} of "
                    f"{r.numel()} elements (tol {tol:g} x scale {scale:g}); {pairs}")
    return ""


def _fail(step, exc=None, msg="", t0=0.0, timings=None) -> Result:
    if exc is not None:
        msg = f"{type(exc).__name__}: {exc}"
        from ...errors import TileLangError

        if not isinstance(exc, TileLangError):  # an internal error: where it was raised
            msg += "\n" + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])
    return Result("fail", step, msg, time.perf_counter() - t0, timings or {})


def device_arch(dry: bool) -> tuple:
    """(sm number, arch name) of this process's CUDA device; sm_90a when dry."""
    if dry:
        return 90, "sm_90a"
    from ...backend.cuda import driver

    arch = driver.arch_of(0)
    return int(arch[3:].rstrip("af")), arch


def check(prog: Program, device: str = "cpu", nvrtc: bool = True, dry: bool = False,
          full_opt: bool = False, archs=None, host_cuda: bool = False) -> Result:
    """Run every step for `prog` (see the module docstring); archs: the compile-only NVRTC
    checks (names from ARCHS; default all of them); host_cuda: also run the sm_80 and sm_90a
    CUDA sources on the host (the verdict's Result.host says which ran)."""
    import tilelang

    t0 = time.perf_counter()
    tm: dict = {}
    inputs = make_inputs(prog)
    try:
        ref = run_reference(prog, inputs)
    except (ReferenceError_, IndexError, RuntimeError) as e:
        return Result("invalid", "reference", f"{type(e).__name__}: {e}", time.perf_counter() - t0)
    if any(bool(torch.isnan(v).any()) for v in ref.values()):
        return Result("invalid", "reference", "the reference read an uninitialized tile (NaN)",
                      time.perf_counter() - t0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            func, _ = load_kernel(prog)
        except Exception as e:  # noqa: BLE001 - any exception is the verdict
            return _fail("frontend", e, t0=t0)
        t = time.perf_counter()
        try:
            kern = tilelang.compile(func, target="cpu", pass_configs=dict(prog.pass_configs))
        except Exception as e:  # noqa: BLE001
            return _fail("compile-cpu", e, t0=t0)
        tm["cpu"] = time.perf_counter() - t
        args = {k: v.clone() for k, v in inputs.items()}
        try:
            kern(*[args[t.name] for t in prog.tensors])
        except Exception as e:  # noqa: BLE001
            return _fail("run-cpu", e, t0=t0)
        msg = _compare(prog, args, ref, "cpu")
        if msg:
            return _fail("mismatch", msg=msg, t0=t0, timings=tm)
        dev_sm, dev_arch = device_arch(dry) if device == "cuda" else (0, None)
        built = {}
        if nvrtc:
            for sm, arch in ARCHS:
                if sm < prog.arch_min or arch == dev_arch or (archs is not None and arch not in archs):
                    continue
                t = time.perf_counter()
                try:
                    ck = tilelang.compile(func, target=f"cuda -arch={arch}", compile_flags=nvrtc_flags(),
                                          pass_configs=dict(prog.pass_configs))
                except Exception as e:  # noqa: BLE001
                    return _fail(f"nvrtc-{arch}", e, t0=t0, timings=tm)
                tm[arch] = time.perf_counter() - t
                msg = path_error(prog, sm, ck.get_kernel_source())
                if msg:
                    return _fail(f"path-{arch}", msg=msg, t0=t0, timings=tm)
                msg = smem_error(ck, sm)
                if msg:
                    return _fail(f"smem-{arch}", msg=msg, t0=t0, timings=tm)
                built[arch] = ck
        host: dict = {}
        if host_cuda:
            res = _check_host(prog, func, built, inputs, ref, args, t0, tm, host)
            if res is not None:
                res.host = host
                return res
        if device == "cuda" and dev_sm >= prog.arch_min:
            res = _check_cuda(prog, func, inputs, ref, args, t0, tm, dev_arch, dry, full_opt)
            if res is not None:
                return res
    return Result("pass", "", "", time.perf_counter() - t0, tm, host)


def _check_host(prog, func, built, inputs, ref, cpu_out, t0, tm, host):
    """The host_cuda execution of each arch's CUDA build (reusing the NVRTC check's compile);
    a failing Result, or None with `host` filled in. Sources that differ only in their tl/
    #include lines (host_cuda drops them; sm_90a adds gemm_sm90.h) run once."""
    import tilelang

    from . import host_exec

    order = [t.name for t in prog.tensors]
    seen: dict = {}
    for sm, arch in ARCHS:
        if sm < prog.arch_min:
            continue
        t = time.perf_counter()
        cfg = dict(prog.pass_configs)
        try:
            ck = built.get(arch) or tilelang.compile(func, target=f"cuda -arch={arch}", compile_flags=nvrtc_flags(),
                                                     pass_configs=cfg)
            if host_exec.unaligned_call(ck, inputs, order):  # the JIT would run its unaligned fallback
                ck = tilelang.compile(func, target=f"cuda -arch={arch}", compile_flags=nvrtc_flags(),
                                      pass_configs={**cfg, "tl.disable_dynamic_alignment": True})
        except Exception as e:  # noqa: BLE001
            return _fail(f"nvrtc-{arch}", e, t0=t0, timings=tm)
        src = host_exec.source_key(ck)
        if src in seen:
            prev = host[seen[src]]
            host[arch] = f"ran (the {seen[src]} source)" if prev == "ran" else prev
            continue
        seen[src] = arch
        try:
            out = host_exec.run_on_host(ck, inputs, order)
        except host_exec.HostRefused as e:
            host[arch] = f"refused: {e.category}"
            tm[f"host-{arch}"] = time.perf_counter() - t
            continue
        except host_exec.HostRunError as e:
            host[arch] = "ran"
            return _fail(f"host-run-{arch}", e, t0=t0, timings=tm)
        except Exception as e:  # noqa: BLE001 - writing, building or reading back the host program
            host[arch] = "error"
            return _fail(f"host-build-{arch}", e, t0=t0, timings=tm)
        tm[f"host-{arch}"] = time.perf_counter() - t
        host[arch] = "ran"
        msg = _compare(prog, out, ref, f"host-cuda {arch} vs float64")
        if not msg:
            msg = _compare(prog, out, {k: cpu_out[k].double() for k in ref}, f"host-cuda {arch} vs cpu")
        if msg:
            return _fail(f"host-mismatch-{arch}", msg=msg, t0=t0, timings=tm)
    return None


# What each pipeline lowering leaves in the CUDA source: (must contain all, must contain none).
PATH_MARKS = {"ws": (("tma_load", "setmaxnreg", "mbarrier"), ("cp_async",)),
              "cp_async": (("cp_async",), ("tma_load", "setmaxnreg"))}


def smem_error(kernel, sm: int) -> str:
    """Why a CUDA build could not launch for its shared memory, or "": each kernel's bytes (a
    launch sequence has several) against the arch's per-block limit."""
    from ...backend.target import smem_per_block

    art = kernel.artifact
    parts = getattr(art, "kernels", None) or [art]
    limit = smem_per_block(sm)
    over = [(getattr(p, "name", "") or kernel.prim_func.name, p.csource.smem_bytes) for p in parts
            if p.csource.smem_bytes > limit]
    if not over:
        return ""
    return "; ".join(f"kernel {n} needs {b} bytes of shared memory, over sm_{sm}'s {limit} a block" for n, b in over)


def path_error(prog: Program, sm: int, src: str) -> str:
    """Why the generated source did not take the program's intended pipeline path, or "".
    The intent names sm_90's choice; below sm_90 every pipelined copy is a cp.async one."""
    if not prog.path:
        return ""
    path = prog.path if sm >= 90 else "cp_async"
    need, bad = PATH_MARKS[path]
    missing = [m for m in need if m not in src]
    present = [m for m in bad if m in src]
    if not missing and not present:
        return ""
    return (f"the {path} pipeline was intended on sm_{sm} (num_stages per the program), but the source "
            f"lacks {missing} and has {present}; a silent change of lowering path")


def _check_cuda(prog, func, inputs, ref, cpu_out, t0, tm, arch, dry, full_opt):
    import tilelang

    t = time.perf_counter()
    try:
        kern = tilelang.compile(func, target=f"cuda -arch={arch}" if dry else "cuda",
                                compile_flags=() if full_opt else nvrtc_flags(), pass_configs=dict(prog.pass_configs))
    except Exception as e:  # noqa: BLE001
        return _fail(f"cuda-compile-{arch}", e, t0=t0, timings=tm)
    sm = int(arch[3:].rstrip("af"))
    msg = path_error(prog, sm, kern.get_kernel_source())
    if msg:
        return _fail(f"path-{arch}", msg=msg, t0=t0, timings=tm)
    tm[f"cuda-{arch}"] = time.perf_counter() - t
    if dry:
        return None
    t = time.perf_counter()
    args = {k: v.clone().cuda() for k, v in inputs.items()}
    try:
        kern(*[args[t.name] for t in prog.tensors])
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        return _fail("cuda-run", e, t0=t0, timings=tm)
    tm["cuda-run"] = time.perf_counter() - t
    msg = _compare(prog, args, ref, "cuda vs float64")
    if not msg:
        msg = _compare(prog, args, {k: cpu_out[k].double() for k in ref}, "cuda vs cpu")
    return _fail("cuda-mismatch", msg=msg, t0=t0, timings=tm) if msg else None
