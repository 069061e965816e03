"""The CUDA lowering rules of the tile ops, one module per op family; importing this package
registers them (op/registry.py) for transform/cuda/lower_tile_ops.py to dispatch on.

Takes: nothing. Gives: the registrations of fill (T.fill / T.clear), copy (T.copy), gemm
(T.gemm / T.wgmma_gemm), im2col (T.im2col into a shared tile), reduce (T.reduce_*), reducer (T.finalize_reducer), cumsum (T.cumsum / T.cummax), atomic (tile
T.atomic_*) and annotations (T.use_swizzle, T.annotate_layout, inline PTX calls).
"""
from . import annotations, atomic, copy, cumsum, fill, gemm, im2col, reduce, reducer  # noqa: F401
