"""T.Parallel reads of a register tile at a sub-block offset that an enclosing loop moves.

Expects: a T.Parallel nest (its variables, constant extents) driven by exact fragments (indexed
by the loop variables, of the loop's shape), reading another fragment F at `F[v0 + o0, ...]`: each
index a loop variable plus an offset that is an affine function of one enclosing serial / unroll
loop of constant extent (u), the same function at every read of F in the loop:

    for jj in T.serial(64):                       x: MmaAFragment((32, 256), 2, 2) (gemm_rs's A)
        for i, j in T.Parallel(32, 4):            s: SliceFragment(x at (0, 0), slots 0, 1)
            s[i, j] += x[i, jj * 4 + j] ** 2  ->  s_reg[l] += x_reg[l + 2 * jj] ** 2   (jj unrolled)

Guarantees: `offset_read` describes such a read (None for any other); `slice_driver(layout of F,
read, extents)` is the driver's layout -- F's layout restricted to the slice at u's first value
(layout/operand_fragments.SliceFragment) -- when, for every value of u, each thread owns the same
elements of the slice (the restriction does not depend on u) in slots moved by a constant step;
None otherwise (layout inference then keeps today's fallback: F in shared memory).
`read_slot` gives the register index of such a read inside the driver's slot loop.
Off switch: pass_config `tl.disable_fragment_slice_offsets`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir.visitor import collect, substitute
from ...layout.operand_fragments import SliceFragment

MAX_VALUES = 1024  # values of the loop variable (each one's slots are checked numerically)


@dataclass(frozen=True)
class OffsetRead:
    buffer: object
    var: object  # the enclosing loop variable u the offsets follow
    start: int
    extent: int
    offsets0: tuple  # the offsets at u = start
    delta: tuple  # offsets per unit of u


def _vars(e) -> dict:
    return {v.uid: v for v in collect(e, lambda n: isinstance(n, E.Var))}


def offset_read(ld, vars_, exts, loops) -> OffsetRead | None:
    """The description of F[v + o(u)] in a T.Parallel over vars_ (loops: the enclosing
    [(var, start, extent)], start None for loops that cannot carry an offset), else None."""
    if not isinstance(ld, E.BufferLoad) or len(ld.indices) != len(vars_) or ld.buffer.ndim != len(vars_):
        return None
    if any(n is None for n in exts):
        return None
    offs = [simplify(idx - v) for idx, v in zip(ld.indices, vars_)]
    free: dict = {}
    for o in offs:
        free.update(_vars(o))
    if len(free) != 1 or set(free) & {v.uid for v in vars_}:
        return None
    loop = next(((v, s, n) for v, s, n in loops if v.uid in free), None)
    if loop is None or loop[1] is None:
        return None
    var, start, n = loop[0], const_int(loop[1]), const_int(loop[2])
    if start is None or n is None or not 1 < n <= MAX_VALUES:
        return None
    at = [tuple(const_int(substitute(o, {var: E.as_expr(start + k)})) for o in offs) for k in range(n)]
    if any(c is None for vals in at for c in vals):
        return None
    delta = tuple(b - a for a, b in zip(at[0], at[1]))
    if any(at[k] != tuple(a + k * d for a, d in zip(at[0], delta)) for k in range(n)):
        return None  # not affine in u
    return OffsetRead(ld.buffer, var, start, n, at[0], delta)


@lru_cache(maxsize=64)
def _table(layout) -> np.ndarray:
    """coords[tid, slot, dim] of a layout, as python ints."""
    return np.array([[layout.coords(t, l) for l in range(layout.nlocal)] for t in range(layout.threads)],
                    dtype=np.int64)


def _pattern(slots: list):
    """slots == [first + (s // run) * stride + s % run]: (first, run, stride), else None."""
    first, run = slots[0], 1
    while run < len(slots) and slots[run] == first + run:
        run += 1
    stride = slots[run] - first if run < len(slots) else run
    want = [first + (s // run) * stride + s % run for s in range(len(slots))]
    return (first, run, stride) if want == slots and len(slots) % run == 0 else None


@lru_cache(maxsize=256)
def _driver(layout, offsets0: tuple, delta: tuple, start: int, n: int, exts: tuple) -> SliceFragment | None:
    if not hasattr(layout, "threads") or tuple(layout.shape).__len__() != len(exts):
        return None
    try:
        table = _table(layout)
    except (TypeError, ValueError):  # coordinates that are not plain integers
        return None
    ext = np.array(exts, dtype=np.int64)
    base = None
    for k in range(n):
        offs = np.array([o + k * d for o, d in zip(offsets0, delta)], dtype=np.int64)
        inside = np.all((table >= offs) & (table < offs + ext), axis=2)  # [tid, slot]
        if not (inside == inside[0]).all():
            return None  # some slot is in the slice on some threads only
        slots = [int(x) for x in np.nonzero(inside[0])[0]]
        if not slots:
            return None
        rel = table[:, slots, :] - offs  # the elements of the slice each thread owns, slot by slot
        if base is None:
            pat = _pattern(slots)
            if pat is None:
                return None
            base, slots0, step = rel, slots, 0
            owned = {tuple(x) for x in rel.reshape(-1, len(exts))}
            if len(owned) != int(np.prod(ext)):
                return None  # the slice is not covered
            continue
        if k == 1:
            step = slots[0] - slots0[0]
        if slots != [s + k * step for s in slots0] or not (rel == base).all():
            return None  # the restriction moves with the offset
    first, run, stride = _pattern(slots0)
    return SliceFragment(layout, tuple(exts), tuple(offsets0), first, run, stride, len(slots0),
                         start, step, tuple(delta))


def slice_driver(layout, rd: OffsetRead, exts) -> SliceFragment | None:
    """The driver layout of a loop reading rd (module docstring), or None."""
    if layout is None:
        return None
    return _driver(layout, rd.offsets0, rd.delta, rd.start, rd.extent, tuple(int(e) for e in exts))


def read_slot(driver, indices, cvars, l):
    """(register index, loop variable) of a read F[cvars + o(u)] in the slot loop of a SliceFragment
    driver over F's layout, when o(u) is the driver's offset function; else None."""
    if not isinstance(driver, SliceFragment) or len(indices) != len(cvars):
        return None
    offs = [simplify(i - c) for i, c in zip(indices, cvars)]
    free: dict = {}
    for o in offs:
        free.update(_vars(o))
    if len(free) != 1 or set(free) & {c.uid for c in cvars}:
        return None
    u = next(iter(free.values()))
    for o, o0, d in zip(offs, driver.offsets, driver.delta):
        if const_int(simplify(o - (o0 + (u - driver.v0) * d))) != 0:
            return None
    slot = driver.base_slot(l)
    if driver.step:
        slot = slot + (u - driver.v0) * driver.step
    return simplify(slot), u
