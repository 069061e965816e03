"""Packed tiles read once per unpacked element: P[i, j // k] in a T.Parallel over (i, j).

A dequantizing loop reads a byte tile at half its column (`B_local[i, j // 2]`, two 4-bit weights a
byte) while writing an unpacked tile laid out for a gemm. When the loop's driver gives each thread
runs of k consecutive columns of one row, k-aligned (an accumulator's column pairs, a flat layout's
vectors: fragment.column_run), the k elements of a run read one element of P, which no other thread
reads: P stays in registers as a PackedFragment of the driver (a flat driver: the flat layout with
vectors k times narrower, so the copy into P keeps vector loads) instead of going to shared memory
(where the copy into it and the reads out of it need two block barriers a k-step).

Takes: (layout inference) a load, the loop's variables and extents; (lowering) the loop's driver
layout, P's layout, the load's indices and the slot variable. Gives: the packing factor of such a
read (`packed_read`), the layout P needs (`packed_layout`) and the register slot it reads
(`packed_slot`):

    B_local (128, 64) uint8 read as B_local[i, j // 2] over a wgmma A tile (128, 128)
    -> B_local: PackedFragment(WgmmaAccFragment((128, 128), 2, 1), 2), 32 registers a thread
       B_local[i, j // 2] in slot l  ->  B_local_reg[l // 2]
"""
from __future__ import annotations

from ...arith.simplify import const_int
from ...ir import expr as E
from ...layout.fragment import FlatFragment, PackedFragment, column_run


def _packed_index(idx, var):
    """k when idx is `var // k` (or `var >> log2 k`), k >= 2; else None."""
    if not isinstance(idx, E.Binary) or idx.a is not var:
        return None
    c = const_int(idx.b)
    if c is None:
        return None
    if idx.op == "//" and c >= 2:
        return c
    if idx.op == ">>" and 1 <= c < 16:
        return 1 << c
    return None


def packed_read(ld, vars_, exts) -> int | None:
    """The k of a load P[v0, ..., v_{n-2}, v_{n-1} // k] in a T.Parallel over vars_ with extents exts,
    P of shape exts[:-1] + (exts[-1] // k,); else None."""
    if not isinstance(ld, E.BufferLoad) or len(ld.indices) != len(vars_) or not vars_:
        return None
    idx = tuple(ld.indices)
    if any(a is not v for a, v in zip(idx[:-1], vars_[:-1])):
        return None
    k = _packed_index(idx[-1], vars_[-1])
    if k is None or any(e is None for e in exts) or exts[-1] % k:
        return None
    shape = tuple(const_int(s) for s in ld.buffer.shape)
    return k if shape == tuple(exts[:-1]) + (exts[-1] // k,) else None


def packed_layout(driver, k: int):
    """The layout a tile read as P[..., j // k] needs in a loop driven by `driver`, or None."""
    if driver is None or not getattr(driver, "exact", False) or getattr(driver, "replicated", False):
        return None
    if len(driver.shape) < 1 or driver.shape[-1] % k or column_run(driver) % k or driver.nlocal % k:
        return None
    if isinstance(driver, FlatFragment):  # its runs are its vectors: P is dealt flat, vec // k at a time
        return FlatFragment(tuple(driver.shape[:-1]) + (driver.shape[-1] // k,), driver.threads, driver.vec // k)
    return PackedFragment(driver, k)


def packed_slot(driver, lay, indices, cvars, l):
    """Register slot of a read P[cvars[:-1], cvars[-1] // k] in the driver's slot loop, or None."""
    if lay is None or len(indices) != len(cvars) or any(a is not v for a, v in zip(tuple(indices)[:-1], tuple(cvars)[:-1])):
        return None
    k = _packed_index(indices[-1], cvars[-1])
    if k is None or packed_layout(driver, k) != lay:
        return None
    return l // k  # slot s of P holds the element of the driver's slots s * k ... s * k + k - 1
