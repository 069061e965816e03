"""TileLang: a tile-level DSL for GPU and CPU kernels, with its own compiler in Python.

    import tilelang
    import tilelang.language as T
"""
from .errors import TileLangError  # noqa: F401
from .jit import jit, compile, JITKernel  # noqa: F401
from .jit import par_compile  # noqa: F401

__version__ = "0.1.0"

from .tvm_finder import install as _install_tvm_finder  # noqa: E402

_install_tvm_finder()  # `import tvm` -> tilelang.tvm where no real TVM is installed (tvm_finder.py)


def set_log_level(level) -> None:
    """Level of the "tilelang" logger (autotuner progress and the like): "INFO", logging.DEBUG..."""
    import logging

    logging.getLogger("tilelang").setLevel(level.upper() if isinstance(level, str) else level)


def __getattr__(name):
    # Heavier modules load on first use so `import tilelang` stays fast.
    if name == "language":
        import importlib

        return importlib.import_module(".language", __name__)
    if name == "autotune":
        from .autotuner import autotune

        return autotune
    if name == "autotuner":
        import importlib

        return importlib.import_module(".autotuner", __name__)
    if name == "TensorSupplyType":
        from .profiler.supply import TensorSupplyType

        return TensorSupplyType
    if name == "DataType":
        from .dtypes import DType

        return DType
    if name == "tvm":
        import importlib

        return importlib.import_module(".tvm", __name__)
    if name in ("PassConfigKey",):
        from .transform.pass_config import PassConfigKey

        return PassConfigKey
    if name in ("cdiv", "next_power_of_2"):
        from . import math as _math

        return getattr(_math, name)
    if name in ("lower",):
        from .engine import lower

        return lower
    if name in ("register_cuda_postproc", "register_c_postproc"):
        from .engine import callback

        return getattr(callback, name)
    if name in ("testing", "tools", "profiler", "layout", "math", "utils", "engine", "carver", "contrib",
                "transform", "env"):
        import importlib

        return importlib.import_module("." + name, __name__)
    if name in ("Layout", "Fragment"):
        from . import layout

        return getattr(layout, name)
    if name == "Profiler":
        from .profiler import Profiler

        return Profiler
    if name in ("disable_cache", "enable_cache", "is_cache_enabled", "clear_cache"):
        from . import cache

        return getattr(cache, name)
    raise AttributeError(f"module 'tilelang' has no attribute {name!r}")
