"""Fixed layouts the public TileLang builds by name: the 8x8 ldmatrix/stmatrix fragment (and its
transpose), a row-major linear layout, and a fragment every thread holds whole.

`make_gemm_fragment_8x8()`: the 8x8 tile of one ldmatrix / stmatrix matrix over a warp, 16-bit
elements: lane t holds row t // 4, columns 2 * (t % 4) and 2 * (t % 4) + 1 (register slots 0, 1).
`make_gemm_fragment_8x8_transposed()`: the same with rows and columns swapped (lane t holds column
t // 4, rows 2 * (t % 4) + {0, 1}). Both grow with `Fragment.repeat` to larger tiles.
"""
from __future__ import annotations

from ..errors import DSLTypeError
from .fragment_layout import Fragment
from .layout import Layout


def make_gemm_fragment_8x8() -> Fragment:
    """8x8 over 32 lanes: lane 4 * i + j // 2 holds (i, j) in slot j % 2."""
    return Fragment((8, 8), forward_thread_fn=lambda i, j: j // 2 + 4 * i, forward_index_fn=lambda i, j: j % 2)


def make_gemm_fragment_8x8_transposed() -> Fragment:
    """8x8 over 32 lanes, transposed: lane 4 * j + i // 2 holds (i, j) in slot i % 2."""
    return Fragment((8, 8), forward_thread_fn=lambda i, j: i // 2 + 4 * j, forward_index_fn=lambda i, j: i % 2)


def _static_shape(obj, what: str) -> tuple:
    """The constant shape of a buffer (or region / load of one) or of a shape tuple."""
    buf = getattr(obj, "buffer", obj)
    shape = getattr(buf, "shape", buf)
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise DSLTypeError(f"{what} needs a buffer of constant shape or a shape tuple, got {obj!r}") from None
    if not shape or any(s < 1 for s in shape):
        raise DSLTypeError(f"{what}: shape must be non-empty with positive extents, got {shape}")
    return shape


def make_linear_layout(buffer_or_shape) -> Layout:
    """The row-major identity layout of a buffer's shape (any rank)."""
    return Layout(_static_shape(buffer_or_shape, "make_linear_layout"), lambda *idx: idx)


def make_fully_replicated_layout_fragment(buffer_or_shape, threads: int) -> Fragment:
    """Every one of `threads` threads holds the whole tile, row-major in its registers."""
    shape = _static_shape(buffer_or_shape, "make_fully_replicated_layout_fragment")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise DSLTypeError(f"make_fully_replicated_layout_fragment: threads must be a positive int, got {threads!r}")

    def slot(*idx):
        flat = 0
        for i, extent in zip(idx, shape):
            flat = flat * extent + i
        return flat

    if threads == 1:
        return Fragment(shape, forward_thread_fn=lambda *idx: 0, forward_index_fn=slot)
    return Fragment(shape, forward_thread_fn=lambda *idx_rep: idx_rep[-1], forward_index_fn=slot, replicate=threads)
