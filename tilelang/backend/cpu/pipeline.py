"""The CPU target: pass list, C codegen, compile, and a ctypes launcher."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from ...errors import TileLangError
from ..artifact import LowersOnDemand

if TYPE_CHECKING:  # compiling imports them; a kernel from the kernel cache needs neither
    from ...ir.stmt import PrimFunc
    from ...transform.pass_manager import PassContext


def passes() -> list:
    """The CPU pass list, (name, pass) in order; imported on first use so that a kernel
    loaded from the kernel cache never imports the passes."""
    from ...transform.check_dtypes import check_dtypes_pass
    from ...transform.cluster_cpu import cluster_cpu_pass
    from ...transform.check_index_ranges import check_index_ranges_pass
    from ...transform.global_layouts import global_layouts_pass
    from ...transform.widen_fragments import widen_fragments_pass
    from ...transform.cpu_threads import cpu_threads_pass
    from ...transform.legalize_negative_index import legalize_negative_index
    from ...transform.legalize_safe_memory import legalize_safe_memory
    from ...transform.lower_gemm_sp import lower_gemm_sp
    from ...transform.lower_tile_ops_cpu import lower_tile_ops_cpu
    from ...transform.parallel_barriers import split_parallel_barriers
    from ...transform.pass_manager import simplify_pass
    from ...transform.thread_scopes import thread_scopes_pass

    return [
        ("cluster_cpu", cluster_cpu_pass),
        ("legalize_negative_index", legalize_negative_index),
        ("check_dtypes", check_dtypes_pass),
        ("widen_fragments", widen_fragments_pass),
        ("check_index_ranges", check_index_ranges_pass),
        ("global_layouts", global_layouts_pass),
        ("simplify", simplify_pass),
        ("parallel_barriers", split_parallel_barriers),
        ("thread_scopes", thread_scopes_pass),
        ("lower_gemm_sp", lower_gemm_sp),
        ("legalize_safe_memory", legalize_safe_memory),
        ("cpu_threads", cpu_threads_pass),
        ("lower_tile_ops_cpu", lower_tile_ops_cpu),
        ("simplify_lowered", simplify_pass),
    ]


def run_passes(func: PrimFunc, passes_: list, ctx: PassContext) -> PrimFunc:
    """The pass manager's run_passes, imported on first compile (tests wrap this name)."""
    from ...transform.pass_manager import run_passes as run

    return run(func, passes_, ctx)


def __getattr__(name):
    if name == "PASSES":
        return passes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_CTYPE = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
          "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
          "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
          "float64": ctypes.c_double}


class CPUArtifact(LowersOnDemand):
    """A compiled CPU kernel: `launch(values)` takes one value per C argument."""

    def __init__(self, func: PrimFunc, ctx: PassContext):
        from ...codegen.c import codegen_c
        from .compile import compile_c

        self.lowered = run_passes(func, passes(), ctx)
        self.csource = codegen_c(self.lowered)
        from ...engine.callback import postprocess

        self.source = postprocess("c", self.csource.text, ctx.target)  # register_c_postproc callbacks
        self.lib = compile_c(self.source, ctx.compile_flags)
        self._bind()

    def record(self) -> dict:
        """What `from_record` needs to rebuild this artifact in another process (kernel cache)."""
        return {"backend": "cpu", "csource": self.csource, "source": self.source, "lib_path": str(self.lib.path),
                "lib_key": self.lib.key, "flags": self.lib.flags}

    @classmethod
    def from_record(cls, rec: dict) -> "CPUArtifact | None":
        """The artifact of a kernel-cache record, or None when its library is gone."""
        import time
        from pathlib import Path

        from .compile import CLibrary

        path = Path(rec["lib_path"])
        t0 = time.perf_counter()
        try:
            cdll = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
        except OSError:
            return None
        dt = time.perf_counter() - t0
        self = cls.__new__(cls)
        self.csource, self.source = rec["csource"], rec["source"]
        self.lib = CLibrary(path=path, cdll=cdll, key=rec["lib_key"], cache_hit=True, compile_seconds=0.0,
                            load_seconds=dt, total_seconds=dt, flags=tuple(rec["flags"]))
        self._bind()
        return self

    def _bind(self) -> None:
        argtypes = []
        for kind, obj in self.csource.arg_kinds:
            if kind in ("buffer", "alloc_global"):
                argtypes.append(ctypes.c_void_p)
            elif kind == "dim":
                argtypes.append(ctypes.c_int64)
            else:
                ct = _CTYPE.get(obj.dtype.name)
                if ct is None:
                    raise TileLangError(f"scalar parameter {obj.name} of dtype {obj.dtype} is not supported on CPU")
                argtypes.append(ct)
        self.fn = self.lib.function(self.csource.entry, ctypes.c_int32, argtypes)
        self.tracer = None  # tilelang.tools.cuda.iket: the kernel records events, read after each launch
        if "__tilelang_iket_tool__" in self.source:
            from ...tools.cuda.iket.runtime import attach

            self.tracer = attach(self.source, self.csource.entry, "cpu")

    def launch(self, values: list):
        rc = self.fn(*values)
        if self.tracer is not None:
            self.tracer.collect_cpu(self.lib.cdll, *self.tracer.static_launch_dims(self.lowered))
        if rc != 0:
            msg = self.csource.asserts[rc - 1] if 0 < rc <= len(self.csource.asserts) else f"code {rc}"
            if msg.startswith("T.sync_grid:"):  # a cooperative launch the machine could not run (codegen/c.py)
                raise RuntimeError(f"kernel {self.csource.entry}: {msg}")
            from ...codegen.c import EMPTY_GRID

            if msg.startswith(EMPTY_GRID):
                raise ValueError(f"kernel {self.csource.entry}: {msg}")
            raise RuntimeError(f"T.device_assert failed in kernel {self.csource.entry}: {msg}")
