"""JITKernel: a compiled kernel callable on torch tensors.

What only compiling needs (the IR statements, the pass manager, kernel splitting) is
imported where a kernel is compiled, so that a kernel loaded from the kernel cache
(`from_record`) imports none of it.
"""
from __future__ import annotations

import operator
import time
from typing import TYPE_CHECKING

from .. import env
from ..backend.target import resolve
from ..errors import TileLangError, hide_internal_frames, user_facing
from .args import ArgBinder
from .fast_call import MISS as _FAST_MISS

if TYPE_CHECKING:
    from ..backend.target import Target
    from ..ir.stmt import PrimFunc


_MISSING = object()


def _normalize_out_idx(out_idx, n: int) -> list[int]:
    if out_idx is None:
        return []
    if isinstance(out_idx, int):
        out_idx = [out_idx]
    out = []
    for i in out_idx:
        if not isinstance(i, int) or not -n <= i < n:
            raise TileLangError(f"out_idx: {i!r} is not a parameter index of a kernel with {n} parameters")
        j = i % n
        out.append(j)
    return out


def _with_func_out_idx(func: PrimFunc, out_idx):
    """The body's returned T.empty outputs (PrimFunc attr `tilelang_out_idx`) are the kernel's
    out_idx; an out_idx given as well is a conflict (ValueError), as in the public TileLang."""
    from ..frontend.declarations import OUT_IDX

    own = func.attr(OUT_IDX)
    if own is None:
        return out_idx
    if out_idx is not None:
        raise ValueError(f"Out index conflict: out_idx={out_idx!r} is given, but {func.name} returns T.empty "
                         f"tensors (its out_idx is {list(own)}); drop out_idx")
    return list(own)


def _flags(compile_flags) -> tuple:
    """compile_flags as a tuple of strings ("-O1 -DX" and ["-O1", "-DX"] alike)."""
    if compile_flags is None:
        return ()
    if isinstance(compile_flags, str):
        return tuple(compile_flags.split())
    if not all(isinstance(f, str) for f in compile_flags):
        raise TypeError(f"compile_flags: expected a string or a list of strings, got {compile_flags!r}")
    return tuple(compile_flags)


def _with_func_annotations(func: PrimFunc, pass_configs, compile_flags):
    """T.annotate_pass_configs / T.annotate_compile_flags of the kernel: configs under the caller's,
    flags before the caller's."""
    from ..language.annotations import COMPILE_FLAGS, PASS_CONFIGS

    own = func.attr(PASS_CONFIGS)
    if own:
        pass_configs = {**dict(own), **(pass_configs or {})}
    flags = func.attr(COMPILE_FLAGS)
    if flags:
        compile_flags = tuple(flags) + _flags(compile_flags)
    return pass_configs, compile_flags


def build(func: PrimFunc, target: Target, pass_configs: dict | None, compile_flags=None):
    """compile_flags reach the CPU backend's C compiler (less nvcc-only ones, backend/cpu/compile.host_flags);
    CUDA gets them through tl.device_compile_flags."""
    from pathlib import Path

    from ..transform.pass_config import get as config
    from ..transform.pass_config import with_overrides
    from ..transform.pass_manager import PassContext
    from ..transform.split_kernels import is_multi_kernel

    configs = with_overrides(pass_configs or {}, env.pass_config_overrides())  # TILELANG_PASS_CONFIGS wins
    dump_dir = env.dump_ir_dir()
    if config(configs, "tl.enable_dump_ir", False):
        dump_dir = Path(config(configs, "tl.dump_ir_path", None) or "./dump_ir")
    ctx = PassContext(target=target, pass_configs=configs, dump_dir=dump_dir,
                      compile_flags=_flags(compile_flags) if target.kind == "cpu" else ())
    if target.kind == "cpu":
        from ..backend.cpu.pipeline import CPUArtifact

        return CPUArtifact(func, ctx)
    if target.kind == "cuda":
        if is_multi_kernel(func):
            from ..backend.cuda.launch_sequence import CUDASequence

            return CUDASequence(func, ctx)
        from ..backend.cuda.pipeline import CUDAArtifact

        return CUDAArtifact(func, ctx)
    raise TileLangError(f"no backend for target {target}")


class JITKernel:
    """A kernel compiled for one target. Call it with torch tensors.

    Parameters listed in `out_idx` are allocated per call and returned (one tensor, or a
    list when there are several).
    """

    @user_facing()
    def __init__(self, func: PrimFunc, out_idx=None, target="auto", pass_configs=None, verbose=False,
                 execution_backend="auto", target_host=None, compile_flags=None):
        from ..arith.divisibility import assume_divisors
        from ..frontend.declarations import POINTER_PARAMS
        from ..frontend.host_checks import HOST_ASSERTS
        from ..ir.buffer import Buffer
        from ..ir.stmt import PrimFunc
        from ..transform.grid_barrier import split_grid_barriers
        from ..transform.split_kernels import is_multi_kernel, workspaces
        from .aligned_dims import AlignedDims

        if not isinstance(func, PrimFunc):
            raise TileLangError(f"expected a @T.prim_func, got {type(func).__name__}; a @tilelang.jit factory "
                                "must return the prim_func it defines")
        self._prim_func, self._params, self._name, self._rebuild = func, func.params, func.name, None
        out_idx = _with_func_out_idx(func, out_idx)
        self.target = resolve(target)
        # T.sync_grid at a kernel's top level: one launch per part; a kernel that cannot be split there
        # stays whole and is launched cooperatively (CPU: a thread per block; CUDA: every block resident)
        func = split_grid_barriers(func)
        self.out_idx = _normalize_out_idx(out_idx, len(func.params))
        for i in self.out_idx:
            if not isinstance(func.params[i], Buffer):
                raise TileLangError(f"out_idx: parameter {i} ({func.params[i].name}) is a scalar, not a tensor")
        t0 = time.perf_counter()
        pass_configs, compile_flags = _with_func_annotations(func, pass_configs, compile_flags)
        if compile_flags and self.target.kind != "cpu":  # nvcc-style flags: NVRTC gets them through tl.device_compile_flags
            from ..transform.pass_config import merge_device_flags

            pass_configs = merge_device_flags(dict(pass_configs or {}), compile_flags)
        self.aligned = None if is_multi_kernel(func) else AlignedDims.plan(func, self.target, pass_configs)
        self._build_args = (pass_configs, compile_flags)
        with assume_divisors(self.aligned.divisors if self.aligned else {}):
            self.artifact = build(func, self.target, pass_configs, compile_flags)
        self.compile_seconds = time.perf_counter() - t0
        device_type = "cpu" if self.target.kind == "cpu" else "cuda"
        self.binder = ArgBinder(func.name, func.params, self.out_idx, device_type, func.attr(HOST_ASSERTS, ()),
                                func.attr(POINTER_PARAMS, ()), *_untouched_tensors(func))
        self.workspaces = workspaces(func)  # T.alloc_global buffers, allocated per call
        if verbose:
            print(f"[tilelang] compiled {func.name} for {self.target} in {self.compile_seconds:.3f}s")

    @property
    def params(self):
        return self._params

    @property
    def prim_func(self) -> PrimFunc:
        """The T.prim_func compiled (a kernel from the kernel cache re-runs its factory for it)."""
        if self._prim_func is None:
            self._prim_func = self._rebuild()
        return self._prim_func

    def record(self) -> dict | None:
        """This kernel as a picklable dict for the kernel cache, or None where it cannot be."""
        art = getattr(self.artifact, "record", None)
        art = art() if art is not None else None
        if art is None:
            return None
        return {"artifact": art, "params": self._params, "name": self._name, "out_idx": self.out_idx,
                "target": self.target, "workspaces": self.workspaces, "compile_seconds": self.compile_seconds,
                "aligned": self.aligned, "build_args": self._build_args, "host_checks": self.binder.host_checks,
                "pointer_params": self.binder.pointer_params, "nullable": tuple(self.binder.nullable),
                "body_dims": None if self.binder.body_dims is None else tuple(self.binder.body_dims)}

    @classmethod
    def from_record(cls, rec: dict, rebuild, options: dict) -> JITKernel | None:
        """The kernel of a kernel-cache record (None if its compiled code is gone); `rebuild()`
        gives the T.prim_func when someone asks for it, and `artifact.lowered` compiles it
        again with `options` (the JITKernel arguments) on first use."""
        t0 = time.perf_counter()
        art = rec["artifact"]
        if art["backend"] == "cpu":
            from ..backend.cpu.pipeline import CPUArtifact

            artifact = CPUArtifact.from_record(art)
        else:
            from ..backend.cuda.pipeline import CUDAArtifact

            artifact = CUDAArtifact.from_record(art)
        if artifact is None:
            return None
        self = cls.__new__(cls)
        self._prim_func, self._params, self._name, self._rebuild = None, rec["params"], rec["name"], rebuild
        self.target, self.out_idx, self.artifact = rec["target"], rec["out_idx"], artifact
        self.workspaces = rec["workspaces"]
        self.aligned, self._build_args = rec.get("aligned"), rec.get("build_args", (None, None))
        self.compile_seconds = time.perf_counter() - t0
        self.binder = ArgBinder(self._name, self._params, self.out_idx, "cpu" if self.target.kind == "cpu" else "cuda",
                                rec.get("host_checks", ()), rec.get("pointer_params", ()), rec.get("nullable", ()),
                                rec.get("body_dims"))
        artifact.relower = lambda: JITKernel(self.prim_func, **options).artifact.lowered
        return self

    _fast = False  # the FastCall (None where it does not apply), made on the first call
    aligned = None  # AlignedDims: dynamic dims assumed to be 16-byte row multiples (jit/aligned_dims.py)
    _build_args = (None, None)  # (pass_configs, compile_flags), to build the unaligned fallback

    # kernel(*inputs, stream=None, **inputs_by_name) calls `self._launcher`: the method below
    # until the CUDA fast path stores its generated launcher (same signature) on the instance.
    # attrgetter is C, so the call runs one Python frame, not a __call__ frame plus the launcher's.
    __call__ = property(operator.attrgetter("_launcher"))

    def _launcher(self, *args, stream=None, **kwargs):
        fast = self._fast
        if fast is False:
            fast = self._fast_call()
        if fast is not None and not kwargs:
            got = fast.call(args, stream)
            if got is not _FAST_MISS:
                return got
        return self._general_call(args, stream, kwargs)

    def _general_call(self, args: tuple, stream, kwargs: dict):
        """The full binder's call: every argument form, every check with its precise error."""
        try:
            if kwargs:
                args = self._merge_kwargs(args, kwargs)
            values, env_, outs = self.binder.bind(args)
            ws = self.binder.workspaces(self.workspaces, values, env_) if self.workspaces else None
        except (TypeError, ValueError, AssertionError) as e:
            raise hide_internal_frames(e) from None
        if hasattr(self.artifact, "launch_params"):  # a launch sequence binds each kernel's arguments itself
            self.artifact.launch_params(values, env_, ws, stream=stream)
        elif self.target.kind == "cuda":
            art = self.artifact if self.aligned is None or self.aligned.holds(env_) else self._unaligned(env_)
            art.launch(self._c_values(values, env_, ws, art), stream=stream)
        else:
            self.artifact.launch(self._c_values(values, env_, ws))
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    def _fast_call(self):
        """The static-shape CUDA fast path (built on first call), or None where it does not apply."""
        fast = self._fast
        if fast is False:
            fast = None
            configs = self._build_args[0]
            if configs and self.target.kind == "cuda":  # imported here only: warm processes skip tilelang.transform
                from ..transform.pass_config import PassConfigKey, get

                if get(configs, PassConfigKey.TL_DISABLE_LAUNCH_KERNEL_EX, False):
                    self.artifact.launch_ex = False  # fast path and artifact launches keep cuLaunchKernel
            if self.target.kind == "cuda" and not hasattr(self.artifact, "launch_params"):
                from .fast_call import FastCall

                try:
                    fast = FastCall(self)
                except ValueError:
                    fast = None
                if fast is not None and configs:
                    from ..transform.pass_config import PassConfigKey, get

                    fast.lean = not get(configs, PassConfigKey.TL_DISABLE_LEAN_LAUNCHER, False)
            self._fast = fast
        return fast

    def _merge_kwargs(self, args: tuple, kwargs: dict) -> tuple:
        """Inputs may also be passed by parameter name: kernel(A=a, B=b)."""
        names = [self._params[i].name for i in self.binder.inputs]
        merged = list(args) + [_MISSING] * (len(names) - len(args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"{self._name}() got an unexpected keyword argument {k!r}; its inputs are "
                                f"{', '.join(names)}" + (" (outputs in out_idx are allocated for you)"
                                                         if any(p.name == k for p in self._params) else ""))
            j = names.index(k)
            if j < len(args):
                raise TypeError(f"{self._name}() got multiple values for argument {k!r}")
            merged[j] = v
        missing = [n for n, v in zip(names, merged) if v is _MISSING]
        if missing:
            raise TypeError(f"{self._name}() is missing argument(s) {', '.join(missing)}")
        return tuple(merged)

    def _unaligned(self, env_):
        """The kernel compiled without assumed divisors of dynamic dims (built on first need)."""
        art = getattr(self, "_unaligned_artifact", None)
        if art is None:
            self.aligned.warn_fallback(self.prim_func.name, env_)
            art = self._unaligned_artifact = build(self.prim_func, self.target, *self._build_args)
        return art

    def _c_values(self, values, env_, ws=None, art=None):
        out = []
        art = self.artifact if art is None else art
        index = {id(p): i for i, p in enumerate(self._params)}
        for kind, obj in art.csource.arg_kinds:
            if kind == "buffer":
                t = values[index[id(obj)]]
                out.append(0 if t is None else t.data_ptr())  # None: a tensor the kernel never uses
            elif kind == "scalar":
                out.append(values[index[id(obj)]])
            elif kind == "dim":
                if obj not in env_:
                    raise self.binder.null_dim_error(obj, values) or \
                        ValueError(f"symbolic dim {obj.name!r} is not bound by any argument")
                out.append(env_[obj])
            elif kind == "alloc_global":
                out.append(ws[obj.uid].data_ptr())
            else:
                out.append(art.arg_value(kind, obj, values, index))
        return out

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        return self.artifact.source

    def get_host_source(self) -> str:
        return ""

    def get_profiler(self, tensor_supply_type=None, dynamic_symbolic_constraints: dict | None = None):
        """A `Profiler` generating inputs per `tensor_supply_type` (default Auto).

        Symbolic dims need sizes: `dynamic_symbolic_constraints={"m": 1024}`.
        """
        from ..profiler import Profiler

        return Profiler(self, tensor_supply_type, dynamic_symbolic_constraints)

    def run_once(self, func=None):
        """Call the kernel (or `func`) once on inputs the default profiler makes; its result."""
        return self.get_profiler().run_once(func)

    def show_source(self, which: str = "kernel") -> None:
        """Print the generated source: "kernel", "host" or "both" (under a heading each).
        An unknown `which` is logged as an error, not raised (nothing is printed then)."""
        if which == "kernel":
            print(self.get_kernel_source())
        elif which == "host":
            print(self.get_host_source())
        elif which == "both":
            print("===== Kernel Source =====")
            print(self.get_kernel_source())
            print("===== Host Source =====")
            print(self.get_host_source())
        else:
            import logging

            logging.getLogger("tilelang").error("show_source: which must be 'kernel', 'host' or 'both', got %r",
                                                which)

    # Hopper inspection helpers (CUDA only)
    def timeline(self, stream=None):
        """The last launch's timestamps of a kernel compiled with
        pass_configs={"tl.debug_timeline": True}: int64 [blocks, units, 4] (unit start, k-loop
        end, unit end in globaltimer ns; the tile's linear index). `tilelang.tools.timeline`
        summarizes it per wave."""
        if not hasattr(self.artifact, "timeline"):
            raise ValueError(f"{self.target.kind} kernels record no timeline (CUDA only)")
        return self.artifact.timeline(stream)

    def show_sass(self):
        print(self.export_sass())

    def export_sass(self, path=None) -> str:
        text = self.artifact.sass() if hasattr(self.artifact, "sass") else ""
        if not text:
            raise TileLangError(f"SASS is only available for CUDA kernels (this one targets {self.target})")
        if path is not None:
            with open(path, "w") as f:
                f.write(text)
        return text

    def export_ptx(self, path=None) -> str:
        text = getattr(self.artifact, "ptx", "") or ""
        if not text:
            raise TileLangError(f"PTX is only available for CUDA kernels (this one targets {self.target})")
        if path is not None:
            with open(path, "w") as f:
                f.write(text)
        return text


def _untouched_tensors(func: PrimFunc) -> tuple:
    """(names of the tensor parameters `func`'s body never references: None may be passed for
    them; names of the variables the body uses, for the symbolic dims of such tensors)."""
    from ..ir.buffer import Buffer
    from ..ir.expr import Var
    from ..ir.visitor import buffers_used, collect

    used = buffers_used(func.body)
    uids = {b.uid for b in used}
    names = {v.name for v in collect(func.body, lambda n: isinstance(n, Var))}
    for b in used:  # a used buffer's own dims are read through its shape
        names |= {d.name for d in tuple(b.shape) + tuple(b.strides or ()) if isinstance(d, Var)}
    return tuple(p.name for p in func.params if isinstance(p, Buffer) and p.uid not in uids), tuple(names)


def kind_value(kind, obj, values, index):
    """Extra argument kinds a backend may add (CUDA tensor maps) are filled by the artifact."""
    raise TileLangError(f"internal: unknown argument kind {kind}")
