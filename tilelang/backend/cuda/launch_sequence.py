"""CUDA prim_funcs with several `with T.Kernel` blocks or T.alloc_global workspaces.

Takes the function split by transform.split_kernels: each kernel goes through the
ordinary single-kernel pass list and codegen on its own (its own threads, shared memory,
pipelining and warp specialization); the sources are joined into one module, compiled
once (one `extern "C" __global__` per kernel) and launched in program order on one
stream, so a kernel sees everything the kernels before it wrote. The workspaces are
allocated by the caller per call (JITKernel, through ArgBinder.workspaces) and passed
to every kernel after the function's own parameters.
"""
from __future__ import annotations

import warnings

from ...transform.pass_config import get as config
from ...transform.pass_manager import PassContext
from ...transform.split_kernels import split_kernels
from .nvrtc import parse_ptxas_log_by_entry, spilled
from .pipeline import (
    CUDAArtifact,
    PerformanceWarning,
    compile_cached,
    device_options,
    lower_to_source,
    swizzle_panel,
)


class _SharedModule:
    """Loads the sequence's cubin once, on first launch, for all of its kernels."""

    def __init__(self, cubin: bytes):
        self.cubin = cubin
        self.module = None

    def __call__(self):
        if self.module is None:
            from . import driver

            self.module = driver.CudaModule(self.cubin)
        return self.module


def join_sources(texts: list[str]) -> str:
    """One translation unit: the union of the kernels' leading #include lines, then each kernel."""
    includes, bodies = [], []
    for text in texts:
        lines = text.split("\n")
        n = 0
        while n < len(lines) and (lines[n].startswith("#include") or not lines[n].strip()):
            if lines[n].startswith("#include") and lines[n] not in includes:
                includes.append(lines[n])
            n += 1
        bodies.append("\n".join(lines[n:]).rstrip("\n"))
    return "\n".join(includes) + "\n\n" + "\n\n".join(bodies) + "\n"


class CUDASequence:
    """The compiled kernels of one prim_func, launched in order by `launch_params`."""

    def __init__(self, func, ctx: PassContext):
        self.target = ctx.target
        self.plan = split_kernels(func)
        parts, notes = [], []
        for sub in self.plan.kernels:
            sctx = PassContext(target=ctx.target, pass_configs=ctx.pass_configs, dump_dir=ctx.dump_dir)
            parts.append(lower_to_source(sub, sctx, swizzle_panel(sub)))
            notes.append(sctx.warnings)
        options = tuple(device_options(ctx.pass_configs)[0])
        self.source = join_sources([c.text for _, c in parts])
        self.compiled = compile_cached(self.source, ctx.target.arch, options)
        # a kernel that spills: again with fresh copy indices (fresh_index.py), kept where it spills less
        spills = {name: spilled(info) for name, info in parse_ptxas_log_by_entry(self.compiled.log).items()}
        if any(spills.values()) and config(ctx.pass_configs, "tl.fresh_copy_index", None) is None:
            fresh = {**ctx.pass_configs, "tl.fresh_copy_index": True}
            tried = list(parts)
            for i, sub in enumerate(self.plan.kernels):
                if spills.get(parts[i][1].entry):
                    tried[i] = lower_to_source(sub, PassContext(target=ctx.target, pass_configs=fresh,
                                                                dump_dir=ctx.dump_dir), swizzle_panel(sub))
            source = join_sources([c.text for _, c in tried])
            compiled = compile_cached(source, ctx.target.arch, options)
            now = {name: spilled(info) for name, info in parse_ptxas_log_by_entry(compiled.log).items()}
            grew = any(c.smem_bytes > c0.smem_bytes for (_, c), (_, c0) in zip(tried, parts))
            if sum(now.values()) < sum(spills.values()) and not grew:
                parts, self.source, self.compiled, spills = tried, source, compiled, now
        for sub, ms, (_, c) in zip(self.plan.kernels, notes, parts):
            for m in dict.fromkeys(ms):
                warnings.warn(f"{sub.name}: {m}", PerformanceWarning, stacklevel=5)
            if spills.get(c.entry):
                warnings.warn(f"{sub.name}: ptxas spills {spills[c.entry]} bytes per thread to local memory",
                              PerformanceWarning, stacklevel=5)
        self.ptx = self.compiled.ptx
        module = _SharedModule(self.compiled.cubin)
        self.kernels = [CUDAArtifact.in_module(lowered, csource, self.compiled, ctx.target, module)
                        for lowered, csource in parts]
        self.lowered = [k.lowered for k in self.kernels]
        self._steps = [self._arg_steps(k, sub) for k, sub in zip(self.kernels, self.plan.kernels)]

    @staticmethod
    def _arg_steps(k: CUDAArtifact, sub) -> tuple:
        """Per C argument of kernel `k`: where its value comes from in the call's values."""
        index = {id(p): i for i, p in enumerate(sub.params)}
        steps = []
        for kind, obj in k.csource.arg_kinds:
            if kind == "buffer":
                steps.append(("t", index[id(obj)]))
            elif kind == "scalar":
                steps.append(("v", index[id(obj)]))
            elif kind == "dim":
                steps.append(("d", obj))
            else:  # tensor maps, the assert flag, stream-K workspaces: the kernel's own
                steps.append(("x", kind, obj))
        return tuple(steps), index

    def launch_params(self, values: list, env: dict, ws: dict | None, stream=None) -> None:
        """Launch every kernel in order. `values`: one per parameter of the function (tensors and
        scalars), `env`: the symbolic dims, `ws`: {uid: tensor} of the T.alloc_global buffers."""
        full = list(values) + [ws[b.uid] for b in self.plan.workspaces]
        if stream is None:
            from .driver import current_stream

            stream = current_stream()
        for k, (steps, index) in zip(self.kernels, self._steps):
            cvals = []
            for st in steps:
                tag = st[0]
                if tag == "t":
                    t = full[st[1]]
                    cvals.append(0 if t is None else t.data_ptr())  # None: a tensor no kernel uses
                elif tag == "v":
                    cvals.append(full[st[1]])
                elif tag == "d":
                    if st[1] not in env:
                        raise ValueError(f"symbolic dim {st[1].name!r} is not bound by any argument")
                    cvals.append(env[st[1]])
                else:
                    cvals.append(k.arg_value(st[1], st[2], full, index))
            k.launch(cvals, stream=stream)

    def sass(self) -> str:
        from .sass import disassemble

        return disassemble(self.compiled.cubin)
