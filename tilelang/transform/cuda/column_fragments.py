"""Register fragments read along a column of a flat element loop (mhc_post:
`x[i, j] += a[k, i] * b[k, j]` over `for k in T.serial(4)`, `x[i, j] = c[i] * d[j]`).

A T.Parallel(H, W) loop driven by a flat fragment layout whose rows are whole multiples of one
pass of the block (W % (threads * vec) == 0) gives each thread the same columns in every row.
So does one whose passes are whole rows (threads * vec % W == 0: each row dealt to W / vec
threads), for the rows each thread holds: there a 1-d D[j] is kept as a LaneColFragment (every
group of W / vec threads holds a copy), F[x, j] goes to shared memory.
A fragment F of the loop's shape and layout, read as F[x, j] (j the loop's column, x free of the
loop's variables), and a 1-d fragment D over the columns, read as D[j] and laid out flat with
the same threads and vector width, are then read by the thread that holds them: they stay in
registers instead of going to shared memory.

Takes: (layout inference) a load, the loop's variables and extents; (lowering) the loop's driver
layout, the slot variable and the load's indices. Gives: whether the load is such a column read
(`column_read`), the layout its fragment needs (`column_layout`) and the register slot it reads
(`column_slot`):

    FlatFragment((4, 512), 128, 4): slot l holds row (l // 4) // 1, column tid*4 + l % 4
    F[k, j] in slot l's iteration   ->  F_reg[l + (k - (l // 4)) * 4]
    D[j]                            ->  D_reg[l % 4]
    1-d loop over j, driver FlatFragment((512,), 64, 4): F (4, 512) takes FlatFragment((4, 512), 64, 4)
    F[k, j] in slot l's iteration   ->  F_reg[l + k * 8]
"""
from __future__ import annotations

from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import collect
from ...layout.fragment import AccColumnFragment, FlatFragment, LaneColFragment, ReshapedFragment, acc_of_rows


def column_read(ld, vars_, exts, body) -> bool:
    """`ld` (a load in a 2-d T.Parallel over vars_ with extents exts) reads F[x, j] or D[j]; in a
    1-d T.Parallel over j, F[x, j] (mhc_pre: `ol[j] += pre * xl[i_hc, j]` under `for i_hc in T.serial(4)`)."""
    if not isinstance(ld, E.BufferLoad) or len(vars_) not in (1, 2):
        return False
    buf, idx = ld.buffer, tuple(ld.indices)
    shape = tuple(const_int(s) for s in buf.shape)
    if len(vars_) == 1:
        if buf.ndim != 2 or shape[1] != exts[0] or shape[0] is None or idx[1] is not vars_[0]:
            return False
    elif buf.ndim == 1:
        return idx == (vars_[1],) and shape == (exts[1],)
    elif buf.ndim != 2 or shape != tuple(exts) or idx[1] is not vars_[1]:
        return False
    bound = {st.var for st in collect(body, lambda n: isinstance(n, S.LetStmt))}
    used = set(collect(idx[0], lambda n: isinstance(n, E.Var)))
    return not (used & (set(vars_) | bound))


def _columns_stable(lay) -> bool:
    return isinstance(lay, FlatFragment) and len(lay.shape) == 2 and lay.shape[-1] % (lay.threads * lay.vec) == 0


def _rows_dealt(lay) -> bool:
    """A flat 2-d layout whose passes cover whole rows, each row dealt to W / vec threads: each
    thread has the same columns in every row it holds (but not every row)."""
    return isinstance(lay, FlatFragment) and len(lay.shape) == 2 and lay.exact and lay.shape[-1] % lay.vec == 0 \
        and (lay.threads * lay.vec) % lay.shape[-1] == 0


def _row_of_columns(driver, shape) -> bool:
    """A 1-d flat driver over W columns, whole passes of the block (W % (threads * vec) == 0), and
    an (R, W) fragment: laid out flat with the same threads and width, row x holds in slots
    [x * W / threads, (x + 1) * W / threads) the columns the driver's slots hold."""
    return isinstance(driver, FlatFragment) and len(driver.shape) == 1 and len(shape) == 2 and \
        shape[1] == driver.shape[0] and driver.shape[0] % (driver.threads * driver.vec) == 0


def column_layout(driver, shape: tuple):
    """The layout a fragment of `shape` needs for its column reads in a loop driven by `driver`, or None."""
    if _row_of_columns(driver, tuple(shape)):
        return FlatFragment(tuple(shape), driver.threads, driver.vec)
    if _rows_dealt(driver) and not _columns_stable(driver):
        return LaneColFragment(driver.shape[-1], driver.threads, driver.vec) if len(shape) == 1 else None
    if not _columns_stable(driver):
        return None
    if len(shape) == 1:
        return FlatFragment((driver.shape[-1],), driver.threads, driver.vec)
    return driver if tuple(shape) == driver.shape else None


def column_slot(driver, lay, indices, cvars, l):
    """The register slot of a column read in slot l's iteration (None: not a column read)."""
    shape = tuple(getattr(lay, "shape", ()))
    if len(cvars) == 1 and len(indices) == 2 and indices[1] is cvars[0] and _row_of_columns(driver, shape) \
            and column_layout(driver, shape) == lay:
        return simplify(l + indices[0] * driver.nlocal)
    if tuple(indices) == tuple(cvars) or len(cvars) != 2 or column_layout(driver, getattr(lay, "shape", ())) != lay:
        return None
    per_row = max(1, driver.shape[-1] // (driver.threads * driver.vec))  # slot groups of one row
    vec = driver.vec
    if len(indices) == 1 and indices[0] is cvars[1]:
        return simplify(((l // vec) % per_row) * vec + l % vec)
    if len(indices) == 2 and indices[1] is cvars[1]:
        return simplify(l + (indices[0] - (l // vec) // per_row) * (per_row * vec))
    return None



# Accumulator-driven loops: a T.Parallel over an mma/wgmma accumulator, or over a (rows, Q, H)
# reshape of one, gives each thread the same columns in every row it holds, so a tile over the
# columns alone (D[j]; W[q, h] of the reshape) read there is kept as an AccColumnFragment:
#     for i, q, h in T.Parallel(256, 4, 32): S3[i, q, h] = S3[i, q, h] * W[q, h]
#     W: ReshapedFragment(AccColumnFragment(acc), (4, 32))  ->  W_reg[acc slot l's column slot]


def acc_column_read(ld, vars_, exts) -> bool:
    """`ld` reads a tile over the loop's non-row dims with exactly those variables (D[j], W[q, h])."""
    if not isinstance(ld, E.BufferLoad) or len(vars_) < 2:
        return False
    shape = tuple(const_int(s) for s in ld.buffer.shape)
    return tuple(ld.indices) == tuple(vars_[1:]) and shape == tuple(exts[1:])


def acc_column_layout(driver, shape: tuple):
    """The AccColumnFragment (seen with `shape`) a column tile needs in a loop driven by `driver`."""
    acc = acc_of_rows(driver)
    if acc is None or not shape:
        return None
    n = 1
    for s in shape:
        n *= s
    if n != acc.shape[1] or tuple(driver.shape[1:]) != tuple(shape):
        return None
    return ReshapedFragment.of(AccColumnFragment(acc), shape)


def acc_column_slot(driver, lay, l):
    """Register slot of a column tile read in accumulator slot l's iteration, or None."""
    acc = acc_of_rows(driver)
    if acc is None or lay is None or acc_column_layout(driver, tuple(lay.shape)) != lay:
        return None
    return simplify(AccColumnFragment(acc).slot_of_acc(l))


def loop_permutation(indices, vars_):
    """p with indices[k] == vars_[p[k]] (all the loop's variables, in another order), or None."""
    if len(indices) != len(vars_) or len(vars_) < 2:
        return None
    pos = {id(v): n for n, v in enumerate(vars_)}
    p = tuple(pos.get(id(x)) for x in indices)
    if None in p or sorted(p) != list(range(len(vars_))) or p == tuple(range(len(vars_))):
        return None
    return p
