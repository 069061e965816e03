"""Emitters that write per-warp tensor-core code into the kernel being parsed."""
from .mma_macro_generator import TensorCoreIntrinEmitter  # noqa: F401
