"""CUDA lowering of T.reduce_sum / max / min / abssum / absmax / bitand / bitor / bitxor (O.Reduce).

Takes: a Reduce over one dim of a tile. Gives, for the rows of an mma/wgmma accumulator (dim 1,
float): a fold of each thread's columns, then an xor-shuffle over its quad (tl_quad_<op>).
- Rows whole in one warp (warps_n / wg_n == 1) into a row fragment: that is the result, kept
  in the row fragment's registers.
- Otherwise (the columns split over G warps / warpgroups, or the destination not a row
  fragment): each quad's leader stores its partial to a small shared scratch
  `<src>_rows<n>[rows, G]`, a barrier (thread_sync) follows, and every element of the
  destination, wherever it lives, folds the G partials of its row in a fixed order (so the
  copies of a replicated row fragment agree bit for bit).
The last dim of a (rows, Q, H) reshape of such an accumulator (H % 8 == 0; columns unsplit, or
split into column groups of whole segments) folds, per row and segment of the thread's group, the
thread's columns of the segment and its quad, into a RowBlockFragment (segment_reduce); where each
column group lies inside one segment, the groups' partials meet in a `<src>_segs<n>[rows, G]` shared
scratch (spanned_segment_reduce). A flat (H, W) register tile whose layout deals each row to L
threads (LaneRowFragment), over dim 1 into that row layout (lane_row_reduce): each thread folds its
slots of a row, an xor-shuffle all-reduce over min(L, 32) lanes combines the row's lanes in a warp,
and where a row spans L / 32 > 1 warps, lane 0 of each warp stores its partial to a shared scratch
`<src>_lanes<n>[rows, L / 32]` that every copy folds in warp order after a barrier. Other reductions: a register source is stored to a flat shared scratch (`<src>_red`, one per register
storage, so a T.reshape view and its base share it) and each destination element runs a serial loop
over the reduced dim.

    T.reduce_max(S, m, dim=1)   ->   racc = S_reg[0]; racc = max(racc, S_reg[1]) ...; racc = tl_quad_max(racc); m_reg[s] = racc
    (S 64x64 over 2 warpgroups)      ... rpart[s] = racc; if (tid % 4 == 0) S_rows[row, tid / 128] = rpart[s];
                                     <barrier>; m_reg[s] = max(S_rows[row, 0], S_rows[row, 1])
"""
from __future__ import annotations

from .... import dtypes as dt
from ....arith.simplify import const_int
from ....ir import expr as E
from ....ir import stmt as S
from ....ir.buffer import Buffer, storage_root
from ....layout.fragment import (FlatFragment, LaneRowFragment, MmaAccFragment, RowBlockFragment, RowFragment,
                                 WgmmaAccFragment, acc_ni, acc_of_rows, column_groups_of, segment_rows)
from ....op import tile_ops as O
from ....op.reduce_rules import BIT_KINDS, KINDS, NAN_KINDS, combiner, identity
from ....op.registry import register_lowering
from .base import is_local

_COMB = {k: combiner(k) for k in KINDS}
_QUAD = {"sum": "sum", "abssum": "sum", "max": "max", "absmax": "max", "min": "min",
         **{k: k for k in BIT_KINDS}}


def column_groups(acc) -> tuple[int, object]:
    """(G, group(tid)): how many warps (mma) / warpgroups (wgmma) split each row's columns, and
    which of them thread tid is in."""
    if isinstance(acc, MmaAccFragment):
        return column_groups_of(acc), lambda tid: (tid // 32) // acc.warps_m
    return column_groups_of(acc), lambda tid: (tid // 128) // acc.wg_m


TREE_WAYS = 4  # independent partial folds per row (tree_fold)
TREE_MIN = 16  # columns a thread holds of a row before its fold is split


def fold_rows(low, op: O.Reduce, sreg: Buffer, rows: RowFragment, src_lay, store):
    """Per row slot s: fold this thread's columns of the row, then its quad; store(s, value).
    With low.reduce_tree (tl.disable_reduce_tree off) and at least TREE_MIN columns, the fold is
    split into TREE_WAYS independent chains joined pairwise (tree_fold)."""
    if getattr(low, "reduce_tree", False) and \
            min(len(rows.acc_slots(s, src_lay)) for s in range(rows.nlocal)) >= TREE_MIN:
        return tree_fold(low, op, sreg, rows, src_lay, store)
    dt_ = op.dst.dtype
    comb = _COMB[op.kind]
    low.nreduce = getattr(low, "nreduce", 0) + 1
    tmp = Buffer(f"racc{low.nreduce}", (1,), dt_, "local.var")
    out = [S.Allocate(tmp)]
    zero = (E.as_expr(0),)
    for s in range(rows.nlocal):
        for n, l in enumerate(rows.acc_slots(s, src_lay)):  # one statement per column: no nested ternaries
            v = E.cast(dt_, E.BufferLoad(sreg, (E.as_expr(l),), sreg.dtype))
            if op.kind in ("abssum", "absmax"):
                v = E.call("abs", v)
            out.append(S.BufferStore(tmp, zero, v if n == 0 else comb(tmp[0], v)))
        # NOTE: the shuffle is a statement of its own, executed by every lane: inside a
        # select (T.max prints as a ternary) only some lanes would reach it and hang.
        out.append(S.BufferStore(tmp, zero, E.Call(f"tl_quad_{_QUAD[op.kind]}", (tmp[0],), dt_)))
        out.append(store(s, tmp[0]))
    return out


def tree_fold(low, op: O.Reduce, sreg: Buffer, rows: RowFragment, src_lay, store):
    """fold_rows with a short dependence chain: column n of a row slot goes to partial n % TREE_WAYS,
    every row slot's partials are folded in one interleaved pass (column by column, slot by slot),
    then the partials of each slot join pairwise ((p0 op p1) op (p2 op p3)), then its quad.
    Max / min are the same values in any order; a sum is the same terms in another order (fp
    rounding only). A 64-column wgmma row (32 columns a thread) folds in 8 + 2 dependent steps,
    not 31, and the two row slots of a thread interleave."""
    dt_ = op.dst.dtype
    comb = _COMB[op.kind]
    low.nreduce = getattr(low, "nreduce", 0) + 1
    w = TREE_WAYS
    # one partials buffer a row slot: passes that split the rows into blocks (row_block_fission)
    # see which slot a statement touches, so the slots' folds do not chain the blocks together
    tmps = [Buffer(f"racc{low.nreduce}_{s}", (w,), dt_, "local") for s in range(rows.nlocal)]
    out = [S.Allocate(t) for t in tmps]
    slots = [rows.acc_slots(s, src_lay) for s in range(rows.nlocal)]

    def val(l):
        v = E.cast(dt_, E.BufferLoad(sreg, (E.as_expr(l),), sreg.dtype))
        return E.call("abs", v) if op.kind in ("abssum", "absmax") else v

    def at(p):
        return (E.as_expr(p),)

    for n in range(max(len(x) for x in slots)):
        for s, cols in enumerate(slots):
            if n < len(cols):
                p = n % w
                v = val(cols[n])
                out.append(S.BufferStore(tmps[s], at(p), v if n < w else comb(E.BufferLoad(tmps[s], at(p), dt_), v)))
    step = 1
    while step < w:
        for s in range(rows.nlocal):
            for p in range(0, w, 2 * step):
                out.append(S.BufferStore(tmps[s], at(p), comb(E.BufferLoad(tmps[s], at(p), dt_),
                                                              E.BufferLoad(tmps[s], at(p + step), dt_))))
        step *= 2
    for s in range(rows.nlocal):
        total = E.BufferLoad(tmps[s], at(0), dt_)
        out.append(S.BufferStore(tmps[s], at(0), E.Call(f"tl_quad_{_QUAD[op.kind]}", (total,), dt_)))
        out.append(store(s, E.BufferLoad(tmps[s], at(0), dt_)))
    return out


def row_reduce(low, op: O.Reduce, sreg: Buffer, dreg: Buffer, lay: RowFragment):
    """Rows of an accumulator whose rows stay in one warp, into its row fragment."""
    comb = _COMB[op.kind]

    def store(s, total):
        if not op.clear:
            total = comb(E.BufferLoad(dreg, (E.as_expr(s),), op.dst.dtype), total)
        return S.BufferStore(dreg, (E.as_expr(s),), total)

    return S.seq(*fold_rows(low, op, sreg, lay, low.plan.layout(op.src), store))


def split_row_reduce(low, op: O.Reduce, sreg: Buffer, src_lay):
    """Rows of an accumulator into any destination, combining the column groups in shared."""
    src, dst, dt_ = op.src, op.dst, op.dst.dtype
    comb = _COMB[op.kind]
    rows = RowFragment.of(src_lay)
    groups, group_of = column_groups(src_lay)
    part = Buffer(f"rpart{getattr(low, 'nreduce', 0) + 1}", (rows.nlocal,), dt_, "local")
    scratch = Buffer(f"{src.name}_rows{getattr(low, 'nreduce', 0) + 1}", (rows.rows, groups), dt_, "shared.dyn")
    out = [S.Allocate(part), S.Allocate(scratch)]
    out += fold_rows(low, op, sreg, rows, src_lay,
                     lambda s, v: S.BufferStore(part, (E.as_expr(s),), v))
    grp = group_of(low.tid)
    leader = E.binop("==", low.tid % 4, E.as_expr(0))  # the quad's lanes hold copies: one stores
    out.append(low.slot_loop(rows, lambda l, cv: S.IfThenElse(
        leader, S.BufferStore(scratch, (cv[0], grp), E.BufferLoad(part, (l,), dt_)))))

    def gather(i, ref):
        """ref = (ref op) p[i, 0] op p[i, 1] ...: group order, the same on every thread."""
        tmp = Buffer("rsum", (1,), dt_, "local.var")
        zero = (E.as_expr(0),)
        body = [S.Allocate(tmp, (E.BufferLoad(scratch, (i, E.as_expr(0)), dt_),))]
        for g in range(1, groups):
            body.append(S.BufferStore(tmp, zero, comb(tmp[0], E.BufferLoad(scratch, (i, E.as_expr(g)), dt_))))
        body.append(S.BufferStore(ref.buffer, ref.indices, tmp[0] if op.clear else comb(ref, tmp[0])))
        return S.seq(*body)

    dreg = low.reg(dst)
    if dreg is not None:
        out.append(low.slot_loop(low.plan.layout(dst), lambda l, cv: gather(cv[0], E.BufferLoad(dreg, (l,), dt_))))
    else:
        loop = low.per_thread_loop if is_local(dst) else low.flat_loop
        out.append(loop((dst.shape[0],), lambda cv: gather(cv[0], E.BufferLoad(dst, (cv[0],), dt_))))
    return S.seq(*out)


def accumulator_rows(low, op: O.Reduce):
    """The accumulator layout of op's source when op reduces its rows in registers, else None."""
    src, dst = op.src, op.dst
    lay = low.plan.layout(src) if low.reg(src) is not None else None
    if not isinstance(lay, (MmaAccFragment, WgmmaAccFragment)) or lay.threads != low.T:
        return None
    if src.ndim != 2 or op.dim != 1 or dst.ndim != 1 or const_int(dst.shape[0]) != lay.shape[0]:
        return None
    if not dst.dtype.is_float or dst.dtype.bits > 32:  # the quad shuffles move 32-bit floats
        return None
    return lay


def segment_reduce(low, op: O.Reduce, sreg: Buffer, dreg: Buffer, lay: RowBlockFragment, acc):
    """The last dim of a (rows, Q, H) reshape of an accumulator into its RowBlockFragment: per row
    slot and segment q of the thread's column group, a fold of this thread's columns in
    [q*H, (q+1)*H) of the group's column tile, then its quad."""
    if lay.span > 1:
        return spanned_segment_reduce(low, op, sreg, dreg, lay, acc)
    dt_ = op.dst.dtype
    comb = _COMB[op.kind]
    h = const_int(op.src.shape[2])
    low.nreduce = getattr(low, "nreduce", 0) + 1
    tmp = Buffer(f"racc{low.nreduce}", (1,), dt_, "local.var")
    out = [S.Allocate(tmp)]
    zero = (E.as_expr(0),)
    wq = lay.per_group  # segments of this thread's column group (all of them without a column split)
    for s in range(lay.row.nlocal):
        slots = lay.row.acc_slots(s, acc)  # (mi * NI + n) * 4 + r: column 8 n + 2 (lane % 4) + r % 2 of the group's
        for q in range(wq):
            mine = [l for l in slots if ((l // 4) % acc_ni(acc)) * 8 // h == q]
            for n, l in enumerate(mine):
                v = E.cast(dt_, E.BufferLoad(sreg, (E.as_expr(l),), sreg.dtype))
                if op.kind in ("abssum", "absmax"):
                    v = E.call("abs", v)
                out.append(S.BufferStore(tmp, zero, v if n == 0 else comb(tmp[0], v)))
            out.append(S.BufferStore(tmp, zero, E.Call(f"tl_quad_{_QUAD[op.kind]}", (tmp[0],), dt_)))
            slot = (E.as_expr(s * wq + q),)
            total = tmp[0] if op.clear else comb(E.BufferLoad(dreg, slot, dt_), tmp[0])
            out.append(S.BufferStore(dreg, slot, total))
    return S.seq(*out)


def spanned_segment_reduce(low, op: O.Reduce, sreg: Buffer, dreg: Buffer, lay: RowBlockFragment, acc):
    """Segments spanning `lay.span` column groups (each group's columns inside one segment): per row
    slot, a fold of this thread's columns and its quad; the quad leaders store the partials to a
    small `<src>_segs<n>[rows, groups]` shared scratch, and after the barrier every copy of a
    (row, segment) value folds the span partials of its segment in group order (copies agree)."""
    dt_ = op.dst.dtype
    comb = _COMB[op.kind]
    rows = lay.row
    n = getattr(low, "nreduce", 0) + 1
    part = Buffer(f"rpart{n}", (rows.nlocal,), dt_, "local")
    scratch = Buffer(f"{op.src.name}_segs{n}", (rows.rows, lay.cols), dt_, "shared.dyn")
    out = [S.Allocate(part), S.Allocate(scratch)]
    out += fold_rows(low, op, sreg, rows, acc, lambda s, v: S.BufferStore(part, (E.as_expr(s),), v))
    grp = lay.col_group(low.tid)
    leader = E.binop("==", low.tid % 4, E.as_expr(0))  # the quad's lanes hold copies: one stores
    out.append(low.slot_loop(rows, lambda l, cv: S.IfThenElse(
        leader, S.BufferStore(scratch, (cv[0], grp), E.BufferLoad(part, (l,), dt_)))))

    def gather(l, cv):
        total = E.BufferLoad(scratch, (cv[0], cv[1] * lay.span), dt_)
        for k in range(1, lay.span):
            total = comb(total, E.BufferLoad(scratch, (cv[0], cv[1] * lay.span + k), dt_))
        ref = E.BufferLoad(dreg, (l,), dt_)
        return S.BufferStore(dreg, (l,), total if op.clear else comb(ref, total))

    out.append(low.slot_loop(lay, gather))
    return S.seq(*out)


def lane_row_reduce(low, op: O.Reduce, sreg: Buffer, dreg: Buffer, lay: LaneRowFragment, src_lay: FlatFragment):
    """A flat (H, W) tile into its LaneRowFragment: per row slot, this thread's slots of the row, an
    xor all-reduce over the row's lanes of a warp, then (rows spanning warps) a shared fold."""
    dt_ = op.dst.dtype
    comb = _COMB[op.kind]
    low.nreduce = getattr(low, "nreduce", 0) + 1
    n = low.nreduce
    part = Buffer(f"rpart{n}", (lay.nlocal,), dt_, "local")
    out = [S.Allocate(part)]
    lanes = min(lay.lanes, 32)
    for s in range(lay.nlocal):
        mine = [l for l in range(src_lay.nlocal) if lay.slot_of(l, src_lay) == s]
        for k, l in enumerate(mine):  # one statement per slot: no nested ternaries
            v = E.cast(dt_, E.BufferLoad(sreg, (E.as_expr(l),), sreg.dtype))
            if op.kind in ("abssum", "absmax"):
                v = E.call("abs", v)
            out.append(S.BufferStore(part, (E.as_expr(s),), v if k == 0 else comb(part[s], v)))
        if lanes > 1:  # a statement of its own, reached by every lane of the warp
            out.append(S.BufferStore(part, (E.as_expr(s),),
                                     E.Call(f"tl_lanes_allreduce_{_QUAD[op.kind]}", (part[s], E.as_expr(lanes)), dt_)))
    warps = lay.lanes // 32
    if warps > 1:
        scratch = Buffer(f"{op.src.name}_lanes{n}", (lay.rows, warps), dt_, "shared.dyn")
        warp = (low.tid % lay.lanes) // 32
        lead = E.binop("==", low.tid % 32, E.as_expr(0))
        out.append(S.Allocate(scratch))
        out.append(low.slot_loop(lay, lambda l, cv: S.IfThenElse(lead, S.BufferStore(scratch, (cv[0], warp), part[l]))))

        def gather(l, cv):
            acc = E.BufferLoad(scratch, (cv[0], E.as_expr(0)), dt_)
            for w in range(1, warps):
                acc = comb(acc, E.BufferLoad(scratch, (cv[0], E.as_expr(w)), dt_))
            return S.BufferStore(part, (l,), acc)

        out.append(low.slot_loop(lay, gather))
    for s in range(lay.nlocal):
        total = part[s] if op.clear else comb(E.BufferLoad(dreg, (E.as_expr(s),), dt_), part[s])
        out.append(S.BufferStore(dreg, (E.as_expr(s),), total))
    return S.seq(*out)


def _flat_owner(lay: FlatFragment, coords: tuple) -> tuple:
    """(thread, slot) holding `coords` of a FlatFragment (the inverse of its `flat`)."""
    e = 0
    for c, n in zip(coords, lay.shape):
        e = e * n + c
    per = lay.threads * lay.vec
    return (e // lay.vec) % lay.threads, (e // per) * lay.vec + e % lay.vec


def own_lines(src_lay, dst_lay, dim: int) -> list | None:
    """For each destination slot, the source slots of its reduced line, when every thread holds the
    whole line of each destination element it holds, in the same slots for every thread (an (S, 128)
    FlatFragment over 128 threads reduced over dim 0: thread t holds column t); else None."""
    if not (isinstance(src_lay, FlatFragment) and isinstance(dst_lay, FlatFragment)) or not src_lay.exact \
            or not dst_lay.exact or src_lay.threads != dst_lay.threads or len(dst_lay.shape) != len(src_lay.shape) - 1:
        return None
    red = src_lay.shape[dim]
    if dst_lay.threads * dst_lay.nlocal * red > 1 << 16:  # checked element by element at compile time
        return None
    lines = []
    for ld in range(dst_lay.nlocal):
        line = None
        for t in range(dst_lay.threads):
            c = list(dst_lay.coords(t, ld))
            owners = [_flat_owner(src_lay, tuple(c[:dim] + [r] + c[dim:])) for r in range(red)]
            if any(o != t for o, _ in owners) or line is not None and line != [sl for _, sl in owners]:
                return None
            line = [sl for _, sl in owners]
        lines.append(line)
    return lines


def own_line_reduce(op: O.Reduce, sreg: Buffer, dreg: Buffer, lines: list):
    """Each destination slot folds its line's source slots in this thread's registers: no scratch, no barrier."""
    dt_ = op.dst.dtype
    comb = _COMB[op.kind]
    out = []
    for ld, line in enumerate(lines):
        acc = None if op.clear else E.BufferLoad(dreg, (E.as_expr(ld),), dt_)
        for sl in line:
            v = E.cast(dt_, E.BufferLoad(sreg, (E.as_expr(sl),), sreg.dtype))
            if op.kind in ("abssum", "absmax"):
                v = E.call("abs", v)
            acc = v if acc is None else comb(acc, v)
            out.append(S.BufferStore(dreg, (E.as_expr(ld),), acc))
            acc = E.BufferLoad(dreg, (E.as_expr(ld),), dt_)
    return S.seq(*out)


def _why_scratch(lay, op: O.Reduce) -> str:
    """Why a reduction of a register tile cannot stay in registers (the PerformanceWarning's reason)."""
    acc = acc_of_rows(lay)
    if acc is not None and op.src.ndim == 3 and op.dim == 2:
        groups = column_groups(acc)[0]
        tile, h = acc.shape[1] // groups, const_int(op.src.shape[2])
        if groups > 1 and h is not None and h % 8 == 0 and (tile % h == 0 or h % tile == 0):
            return (f"each row's columns are split over {groups} warps or warpgroups, and "
                    "tl.disable_split_segment_reduce is set")
        if groups > 1:
            return (f"each row's columns are split over {groups} warps or warpgroups whose {tile} columns neither "
                    f"hold whole segments of {h} nor lie in one (a FullRow policy keeps a row in one)")
        return "its segments are not whole 8-column atoms of the accumulator"
    if acc is not None:
        return "it is not a reduction of an accumulator's rows into a float tile over those rows"
    return f"its {type(lay).__name__} layout spreads each reduced line over several threads"


def _flat(idx, shape):
    """Row-major offset of idx in a tile of `shape` (the flat reduction scratch)."""
    off = E.as_expr(idx[0])
    for i, d in zip(idx[1:], shape[1:]):
        off = off * E.as_expr(d) + i
    return off


@register_lowering("cuda", O.Reduce)
def lower_reduce(low, op: O.Reduce):
    if op.nan_propagate and op.kind in NAN_KINDS:  # the register paths fold with the plain max / min
        return generic_reduce(low, op, "nan_propagate=True folds each line in one thread")
    src, dst = op.src, op.dst
    sreg, dreg = low.reg(src), low.reg(dst)
    seg = low.plan.layout(dst) if dreg is not None and sreg is not None else None
    if isinstance(seg, RowBlockFragment) and op.dim == 2 and \
            seg == segment_rows(low.plan.layout(src), tuple(const_int(x) for x in src.shape)) and \
            dst.dtype.is_float and dst.dtype.bits <= 32:
        return segment_reduce(low, op, sreg, dreg, seg, acc_of_rows(low.plan.layout(src)))
    if isinstance(seg, LaneRowFragment) and op.dim == 1 and src.ndim == 2 and \
            seg == LaneRowFragment.of(low.plan.layout(src)) and dst.dtype.bits <= 32:
        return lane_row_reduce(low, op, sreg, dreg, seg, low.plan.layout(src))
    src_lay = accumulator_rows(low, op)
    if src_lay is not None:
        sreg, dreg = low.reg(src), low.reg(dst)
        if dreg is not None and low.plan.layout(dst) == RowFragment.of(src_lay) \
                and column_groups(src_lay)[0] == 1:
            return row_reduce(low, op, sreg, dreg, low.plan.layout(dst))
        return split_row_reduce(low, op, sreg, src_lay)
    lines = own_lines(low.plan.layout(src), low.plan.layout(dst), op.dim) \
        if sreg is not None and dreg is not None and getattr(low, "own_line_reduce", True) else None
    if lines is not None:
        return own_line_reduce(op, sreg, dreg, lines)
    return generic_reduce(low, op, None)


def generic_reduce(low, op: O.Reduce, why: str | None):
    """Each destination element folds its line in a serial loop, from a shared copy of a register
    source (`why`: the reason the register paths were not taken, else _why_scratch's)."""
    src, dst = op.src, op.dst
    out = []
    if low.reg(src) is not None:
        why = why or _why_scratch(low.plan.layout(src), op)
        low.warn(f"T.reduce_{op.kind}({src.name}, {dst.name}, dim={op.dim}) reduces through a shared-memory copy of "
                 f"{src.name}, not in registers: {why}")
        # one flat scratch per register storage: a T.reshape view and its base reduced in one epilogue
        # share it (row-major, the same element order), not two tile-sized copies
        home = storage_root(src)
        numel = 1
        for d in src.shape:
            numel *= const_int(d)
        scratch = low.scratch_of.get(home.uid)
        if scratch is None or scratch.dtype != src.dtype or const_int(scratch.shape[0]) != numel:
            scratch = Buffer(f"{src.name}_red", (numel,), src.dtype, "shared.dyn")
            low.scratch_of[home.uid] = scratch
            out.append(S.Allocate(scratch))
        lay = low.plan.layout(src)
        sreg = low.reg(src)
        out.append(low.owned_loop(lay, lambda l, cv: S.BufferStore(scratch, (_flat(cv, src.shape),), sreg[l])))
        src_buf = scratch
    else:
        src_buf = src
    dt_ = dst.dtype
    init = identity(op.kind, dt_)
    red = src.shape[op.dim]
    comb = combiner(op.kind, op.nan_propagate)

    def make(cv, reg_ref):
        keep = [c for c, s in zip(cv, dst.shape)] if len(cv) == dst.ndim else list(cv)
        ref = reg_ref if reg_ref is not None else E.BufferLoad(dst, tuple(keep), dt_)
        r = E.Var("r", dt.int32)
        sidx = [x for x in keep] if len(keep) == src.ndim - 1 else [x for x in keep if True][: src.ndim - 1]
        sidx.insert(op.dim, r)
        at = (_flat(sidx, src.shape),) if src_buf is not src else tuple(sidx)
        v = E.cast(dt_, E.BufferLoad(src_buf, at, src_buf.dtype))
        if op.kind in ("abssum", "absmax"):
            v = E.call("abs", v)
        tmp = Buffer("racc", (1,), dt_, "local.var")
        return S.seq(S.Allocate(tmp, (init if op.clear else ref,)),
                     S.For(r, E.as_expr(0), E.as_expr(red), "serial",
                           S.BufferStore(tmp, (E.as_expr(0),), comb(tmp[0], v))),
                     S.BufferStore(ref.buffer, ref.indices, tmp[0]))

    dreg = low.reg(dst)
    if dreg is not None:
        lay = low.plan.layout(dst)
        out.append(low.slot_loop(lay, lambda l, cv: make(cv, dreg[l])))
    else:
        out.append(low.flat_loop(tuple(dst.shape), lambda cv: make(cv, None)))
    return S.seq(*out)
