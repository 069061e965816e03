"""`tilelang.engine`: lowering entry point and source post-processing callbacks.

    artifact = tilelang.lower(func, target="cuda -arch=sm_90a")
    artifact.kernel_source       # the generated CUDA (or C) source
    artifact.device_mod          # our lowered PrimFunc (printable)
"""
from .callback import (  # noqa: F401
    register_c_postproc,
    register_cuda_postproc,
    register_hip_postproc,
    register_metal_postproc,
)


def __getattr__(name):
    # lower imports the JIT (and so the backends, which import .callback): load it on first use
    if name in ("lower", "CompiledArtifact"):
        from . import lowering as _lower_mod

        return getattr(_lower_mod, name)
    raise AttributeError(f"module 'tilelang.engine' has no attribute {name!r}")
