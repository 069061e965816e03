"""`tilelang.lower(func, target)`: compile a prim_func and return what compiling produced.

The result bundles the generated source, our lowered IR and the compiled kernel, under the
public TileLang's field names:

    art = tilelang.lower(func, target="cpu")
    art.kernel_source      # the C / CUDA source
    art.device_mod         # the lowered PrimFunc (print it)
    art.params             # the kernel's parameters (Buffers and scalar Vars)
    art.rt_mod(a, b, c)    # the compiled kernel (a JITKernel), callable on tensors
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import TileLangError
from ..ir.stmt import PrimFunc

__all__ = ["CompiledArtifact", "lower"]


@dataclass
class CompiledArtifact:
    """host_mod: None (the host side is our Python launcher); device_mod: the lowered PrimFunc;
    rt_mod: the JITKernel; target / target_host: the resolved target and None."""

    host_mod: object
    device_mod: PrimFunc
    params: list
    kernel_source: str
    rt_mod: object = None
    target: object = None
    target_host: object = None


def lower(func_or_mod, target="auto", target_host=None, runtime_only: bool = False,
          enable_host_codegen: bool = False, enable_device_compile: bool = False,
          pass_configs: dict | None = None) -> CompiledArtifact:
    """Compile `func_or_mod` (a T.prim_func, or a dict/module holding exactly one) for `target`.

    The device code is always compiled here (NVRTC / the C compiler), so `enable_device_compile`
    and `enable_host_codegen` change nothing; `runtime_only=True` leaves `params` as None.
    """
    from ..jit.kernel import JITKernel

    func = _the_func(func_or_mod)
    kernel = JITKernel(func, target=target, pass_configs=pass_configs)
    return CompiledArtifact(host_mod=None, device_mod=kernel.artifact.lowered,
                            params=None if runtime_only else list(func.params),
                            kernel_source=kernel.get_kernel_source(), rt_mod=kernel, target=kernel.target,
                            target_host=None)


def _the_func(obj) -> PrimFunc:
    if isinstance(obj, PrimFunc):
        return obj
    funcs = list(obj.values()) if isinstance(obj, dict) else list(getattr(obj, "functions", {}).values())
    prims = [f for f in funcs if isinstance(f, PrimFunc)]
    if len(prims) != 1:
        raise TileLangError(f"tilelang.lower: expected a T.prim_func (or a module with exactly one), got "
                            f"{type(obj).__name__} with {len(prims)} prim_funcs")
    return prims[0]
