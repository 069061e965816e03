"""Validation and timing of compiled kernels: `Profiler`, `do_bench`, `TensorSupplyType`.

Nothing here imports torch until it is used, so `import tilelang` stays fast.
"""
from .bench import do_bench
from .compare import torch_assert_close
from .profiler import Profiler
from .supply import TensorSupplyType

__all__ = ["Profiler", "do_bench", "torch_assert_close", "TensorSupplyType"]
