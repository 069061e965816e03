"""CUDA lowering of the tile ops that only annotate: T.use_swizzle, T.annotate_layout, and the
inline-PTX calls of op/ptx.py.

Takes: Swizzle (handled by the codegen's block remap: lowers to nothing), AnnotateLayout (a
shared tile annotated with make_swizzled_layout becomes swizzled on the pass, row-major needs
nothing, anything else is reported and ignored), PtxCall (its CUDA text, as a Raw statement).
"""
from __future__ import annotations

from ....ir import stmt as S
from ....layout.layout import Layout
from ....layout.swizzle import make_swizzled_layout
from ....op import tile_ops as O
from ....op.ptx import PtxCall, cuda_text
from ....op.registry import register_lowering
from ..raw import Raw


@register_lowering("cuda", PtxCall)
def lower_ptx_call(low, op):
    fmt, args, reads = cuda_text(op)
    return Raw(fmt, tuple(low.visit(a) for a in args), reads=reads, span=op.span)


@register_lowering("cuda", O.Swizzle)
def lower_swizzle(low, op):
    return S.seq()


@register_lowering("cuda", O.AnnotateLayout)
def lower_annotate_layout(low, op):
    """T.annotate_layout: a shared tile annotated with make_swizzled_layout is swizzled
    (indexed through tl::swizzle_offset); row-major needs nothing; any other layout is not
    implemented here and is reported (the tile stays row-major, results are unchanged)."""
    for buf, lay in op.layouts:
        what = f"T.annotate_layout of {buf.name}"
        if buf.scope not in ("shared", "shared.dyn"):
            low.warn(f"{what} is ignored: layouts are honoured for shared tiles only ({buf.name} is "
                     f"{buf.scope}; register fragments are laid out by layout inference)")
            continue
        shape = buf.static_shape
        if not isinstance(lay, Layout) or shape is None or len(shape) != 2 or tuple(lay.shape) != shape:
            low.warn(f"{what} is ignored: only a 2-d layout of the tile's shape {tuple(buf.shape)} "
                     f"(make_swizzled_layout) is implemented, got {lay}")
            continue
        if lay == Layout(shape, lambda i, j: (i, j)):
            continue
        if lay == make_swizzled_layout(buf) or _same_offsets(lay, make_swizzled_layout(buf)):
            low.swizzled.add(buf.uid)
            low.annotated[buf.uid] = buf
            continue
        low.warn(f"{what} is ignored: only row-major and make_swizzled_layout are implemented for "
                 f"shared tiles on CUDA; {buf.name} stays row-major")
    return S.seq()


def _same_offsets(a, b) -> bool:
    """Both layouts put every element at the same flat (row-major over the output shape) offset,
    e.g. a (col_tile, row, col) swizzle whose tiles are whole rows and our (row, col) one."""
    import numpy as np

    def flat(lay):
        t, shape = lay.table(), lay.output_shape()
        return np.ravel_multi_index(tuple(np.moveaxis(t, -1, 0)), shape)
    try:
        return bool((flat(a) == flat(b)).all())
    except Exception:  # noqa: BLE001 - a layout that cannot be enumerated is not this one
        return False
