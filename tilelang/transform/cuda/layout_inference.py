"""Decide, per fragment, whether it lives in registers (and with which layout) or in shared memory.

Expects: simplified tile-level IR inside one T.Kernel.
Guarantees: a `LayoutPlan` mapping each fragment buffer to a fragment layout (registers)
or to None (placed in shared memory, readable by every thread).

Strict:  the C of a T.gemm takes the mma.sync accumulator layout when the gemm can use
         tensor cores. Common: a fragment copied to or used elementwise with a laid-out
         fragment of the same shape in one T.Parallel takes the same layout. Free: the
         rest take a flat, coalesced layout. A fragment is demoted to shared memory when
         some use needs other threads' elements (indexed by other than the loop vars,
         used as a gemm A/B operand, scanned, sliced, or touched outside T.Parallel).
Slices:  F[i, u * 4 + j] in a T.Parallel over an exact driver, u an enclosing loop: the driver takes
         F's layout restricted to the slice when the owners do not move with u (offset_slices.py);
         a tf32 mma.sync gemm's A then stays in registers (MmaAFragment, tl::gemm_rs).
Register A: a 16-bit mma.sync gemm's A stays in registers (tl::gemm_rs) when it ends up in the
         accumulator layout of its rows over the gemm's (warps_m, 1) warps -- attention's P, a cast
         copy of S -- which is the k16 A layout (gemm_paths.mma_rs16_ok); otherwise shared memory.
Views:   a T.reshape / T.view of a fragment shares its registers: its layout is the source's
         seen with the view's shape (ReshapedFragment), and layouts flow both ways between
         them. Where that cannot be expressed (another dtype, an inexact layout that does not
         reshape), or either one is demoted, both live in shared memory.

    C_local = T.alloc_fragment((128, 128), "float32")     C_local: mma(128x128, 2x2 warps)
    m = T.alloc_fragment((128,), "float32")        ->     m: shared (read as m[i] in a 2-d loop)
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...arith.simplify import const_int
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import Mutator, Visitor, buffers_used, collect
from ...layout.operand_fragments import MmaAFragment
from ...layout.fragment import (AccColumnFragment, FlatFragment, LaneRowFragment, MmaAccFragment, ReshapedFragment,
                                RowFragment, WgmmaAccFragment, acc_of_rows, row_fragment_ok, segment_rows)
from ...op import tile_ops as O
from ...op.thread_ops import DeclBuffer
from ...op.regions import squeezed
from .column_fragments import acc_column_layout, acc_column_read, column_layout, column_read, loop_permutation
from .fragment_slices import LOOP_KINDS, fragment_slice, offset_cases, slice_slots
from .gemm_paths import (accumulator_box_ok, accumulator_folds, eight_bit_wgmma, grid_cost, mma_ok, mma_rs16_ok,
                         mma_rs_ok, whole, wgmma_ok, wgmma_policy_grid, wgmma_rs_ok)
from .offset_slices import offset_read, slice_driver
from .packed_columns import packed_layout, packed_read


@dataclass
class LayoutPlan:
    layouts: dict = field(default_factory=dict)  # Buffer.uid -> layout | None (shared)
    reasons: dict = field(default_factory=dict)  # Buffer.uid -> why demoted
    mma_gemms: set = field(default_factory=set)  # ids of Gemm ops lowered to mma.sync / wgmma
    per_thread: set = field(default_factory=set)  # Buffer.uid: every thread keeps its own copy (local)

    def layout(self, buf: Buffer):
        return self.layouts.get(buf.uid)

    def in_registers(self, buf: Buffer) -> bool:
        return buf.scope == "fragment" and self.layouts.get(buf.uid) is not None


class _Uses(Visitor):
    """Collects per-fragment constraints while walking the kernel."""

    def __init__(self, frags: dict, threads: int, sm: int = 80):
        self.frags = frags
        self.threads = threads
        self.strict: dict = {}
        self.demote: dict = {}
        self.links: list = []  # (buf_a, buf_b) must share a layout
        self.mma_gemms: set = set()
        self.par_vars: list = []
        self.sm = sm
        self.wgmma_gemms: set = set()
        self.rs_gemms: dict = {}  # id(gemm) -> (gemm, layout its register A must have)
        self.row_uses: list = []  # (1-d fragment read as R[i], the loop's exact fragments)
        self.col_uses: list = []  # (fragment read as F[x, j] or D[j], the loop's exact fragments)
        self.reduces: list = []
        self.notes: list = []
        self.boxes: list = []  # fragments a box is copied out of before their layout is known
        self.frag_threads: dict = {}  # fragment uid -> threads of the scope using it (T.ws)
        self.outside: set = set()  # fragments used outside every T.ws scope
        self.loops: list = []  # enclosing serial / unroll loops: (var, start, extent)
        self.slices: list = []  # (FragmentSlice, its constant offsets per case, where): checked once laid out
        self.rows_1d = True  # F[x, j] in a 1-d T.Parallel over j (column_fragments.column_read)
        self.slice_offsets = True  # F[i, u * 4 + j] over an exact driver (offset_slices.py)
        self.mma_rs = True  # an mma.sync gemm's tf32 A tile in registers (tl::gemm_rs)
        self.mma_rs16 = True  # ... and a 16-bit one already laid out as an accumulator of its rows (mma_rs16_ok)
        self.rs16_gemms: set = set()  # ids of those 16-bit gemms
        self.wgmma_policy = True  # a wgmma gemm's warpgroup grid follows its GemmWarpPolicy (wgmma_policy_grid)
        self.folds: dict | None = {}  # accumulator uid -> its reductions (accumulator_folds); None: policy grids
        # are taken whatever they cost
        self.offset_reads: list = []  # (OffsetRead, the loop's exact fragments, extents, where)
        self.packed = True  # P[i, j // k] over a driver with k-column runs (packed_columns.py)
        self.packed_reads: list = []  # (fragment read as P[i, j // k], k, the loop's exact fragments, where)

    def visit_WarpGroupScope(self, s):
        """Fragments used inside `T.ws` are spread over the scope's threads only."""
        for b in buffers_used(s.body):
            if b.uid in self.frags:
                prev = self.frag_threads.setdefault(b.uid, s.threads)
                if prev != s.threads or b.uid in self.outside:
                    self.bad(b, "used by different thread ranges (inside and outside T.ws)")
        outer, self.threads = self.threads, s.threads
        try:
            self.visit(s.body)
        finally:
            self.threads = outer

    def bad(self, buf, why):
        if buf.uid in self.frags:
            self.demote.setdefault(buf.uid, why)

    def visit_Gemm(self, op: O.Gemm):
        c = op.C.buffer
        rs = None
        if self.sm >= 90 and op.A.buffer.uid in self.frags and c.uid in self.frags:
            rs, why = wgmma_rs_ok(op, self.threads)
        warps = mma_ok(op, self.threads, half_acc=True)
        mma_a = None
        mma_path = rs is None and warps is not None and c.uid in self.frags and \
            not (self.sm >= 90 and wgmma_ok(op, self.threads)[0] is not None)
        a_shape = tuple(const_int(x) for x in op.A.buffer.shape)
        if mma_path and self.mma_rs and mma_rs_ok(op) is None:
            mma_a = MmaAFragment(a_shape, *warps)
        elif mma_path and self.mma_rs16 and mma_rs16_ok(op, warps) is None:
            mma_a = MmaAccFragment(a_shape, warps[0], 1)  # the accumulator layout is the k16 A layout
            self.rs16_gemms.add(id(op))
        elif self.sm >= 90 and op.A.buffer.uid in self.frags and c.uid in self.frags and rs is None:
            self.notes.append(f"T.gemm {op.A.buffer.name} x {op.B.buffer.name}: A goes through shared "
                              f"memory ({why})")
        for r in (op.A, op.B):
            if not ((rs is not None or mma_a is not None) and r is op.A):
                self.bad(r.buffer, "used as a T.gemm A/B operand (needs every thread's elements)")
        if c.uid not in self.frags:
            return
        if not whole(op.C, c):
            self.bad(c, "a slice of it is a T.gemm accumulator")
            return
        if rs is not None:
            if self.wgmma_policy and op.policy == "FullCol" and rs > 1:
                self.notes.append(f"T.gemm {op.A.buffer.name} x {op.B.buffer.name}: policy=FullCol is not "
                                  f"honoured: a register-A wgmma (A from registers) splits its {rs} warpgroups "
                                  "along M only")
            lay = WgmmaAccFragment(tuple(c.shape), rs, 1)
            a_lay = WgmmaAccFragment(tuple(op.A.buffer.shape), rs, 1)
            self.rs_gemms[id(op)] = (op, a_lay)
            prev = self.strict.get(c.uid)
            if prev is not None and prev != lay:
                self.bad(c, "accumulator of two gemms with different warp layouts")
            self.strict[c.uid] = lay
            self.mma_gemms.add(id(op))
            self.wgmma_gemms.add(id(op))
            return
        lay = None
        if self.sm >= 90:
            grid, why = wgmma_ok(op, self.threads)
            if grid is not None and self.wgmma_policy:
                want, off = wgmma_policy_grid(op, self.threads // 128, grid)
                m, n, _ = op.mnk
                # FullCol's grid is taken unless the squarest split costs less (grid_cost); FullRow's always:
                # its whole rows a warpgroup are what row fragments shared with other accumulators (softmax
                # rescaling an output tile) need, and its wgmma keeps every column
                folds = None if self.folds is None else self.folds.get(c.uid, ())
                if folds is None or op.policy != "FullCol" or \
                        grid_cost(m, n, want, folds) <= grid_cost(m, n, grid, folds):
                    grid = want
                if off is not None:
                    self.notes.append(f"T.gemm {op.A.buffer.name} x {op.B.buffer.name}: policy={op.policy} is not "
                                      f"honoured on wgmma ({off}); its warpgroups split the tile "
                                      f"{grid[0]} x {grid[1]} (M x N)")
            if grid is not None:
                lay = WgmmaAccFragment(tuple(c.shape), *grid)
                self.wgmma_gemms.add(id(op))
            elif warps is not None:
                self.notes.append(f"T.gemm {op.A.buffer.name} x {op.B.buffer.name} uses mma.sync, not wgmma: {why}")
            elif eight_bit_wgmma(op):
                self.notes.append(f"T.gemm {op.A.buffer.name} x {op.B.buffer.name} cannot use wgmma: {why}")
        if lay is None and warps is not None:
            lay = MmaAccFragment(tuple(c.shape), *warps)
        if mma_a is not None:
            if isinstance(lay, MmaAccFragment):
                self.rs_gemms[id(op)] = (op, mma_a)  # tl::gemm_rs when A ends up in this layout
            else:
                self.bad(op.A.buffer, "used as a T.gemm A/B operand (needs every thread's elements)")
        if lay is not None:
            prev = self.strict.get(c.uid)
            if prev is not None and prev != lay:
                self.bad(c, "accumulator of two gemms with different warp layouts")
            self.strict[c.uid] = lay
            self.mma_gemms.add(id(op))

    def visit_Copy(self, op: O.Copy):
        s, d = op.src.buffer, op.dst.buffer
        # a box of an accumulator to memory: each thread stores the slots of its own that fall in it
        acc_box = d.uid not in self.frags and accumulator_box_ok(op.src) and \
            isinstance(self.strict.get(s.uid), (MmaAccFragment, WgmmaAccFragment))
        for r, b in ((op.src, s), (op.dst, d)):
            if b.uid in self.frags and not whole(r, b) and not (b is s and acc_box):
                if b is s and d.uid not in self.frags and accumulator_box_ok(op.src) and s.uid not in self.strict:
                    self.boxes.append(s)  # fine if it ends up with an accumulator's layout (a copy of one)
                else:
                    self.bad(b, "T.copy of a slice of it")
        if s.uid in self.frags and d.uid in self.frags and tuple(s.shape) == tuple(d.shape):
            self.links.append((s, d))

    def visit_Fill(self, op: O.Fill):
        if not whole(op.dst, op.dst.buffer):
            self.bad(op.dst.buffer, "T.fill of a slice of it")

    def visit_CumSum(self, op: O.CumSum):
        self.bad(op.src, "T.cumsum scans across threads")
        self.bad(op.dst, "T.cumsum scans across threads")

    def visit_AtomicTile(self, op: O.AtomicTile):
        if hasattr(op.src, "buffer") and hasattr(op.src, "ranges") and not whole(op.src, op.src.buffer):
            self.bad(op.src.buffer, "T.atomic_* of a slice of it")

    def visit_Print(self, op):
        if isinstance(op.obj, Buffer):
            self.bad(op.obj, "printed")

    def visit_For(self, s: S.For):
        if s.kind != "parallel":
            self.loops.append((s.var, s.start, s.extent) if s.kind in LOOP_KINDS else (s.var, None, None))
            try:
                self.generic(s)
            finally:
                self.loops.pop()
            return
        vars_, exts, body = [], [], s
        while isinstance(body, S.For) and body.kind == "parallel":
            vars_.append(body.var)
            exts.append(const_int(body.extent))
            body = body.body
        if self.visit_slice(vars_, exts, body):
            return
        exact, rows, cols, permuted, moved, packed = [], [], [], [], [], []
        for ld in collect(body, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))):
            buf = ld.buffer
            if buf.uid not in self.frags:
                continue
            shape = tuple(const_int(x) for x in buf.shape)
            perm = loop_permutation(ld.indices, vars_)
            if tuple(ld.indices) == tuple(vars_) and shape == tuple(exts):
                exact.append(buf)
            elif (isinstance(ld, E.BufferLoad) or reducer_update(ld)) and len(vars_) >= 2 and buf.ndim == 1 and \
                    tuple(ld.indices) == (vars_[0],) and const_int(buf.shape[0]) == exts[0]:
                rows.append(buf)  # a per-row value read (or a reducer folded into) across a row
            elif (column_read(ld, vars_, exts, body) and (len(vars_) == 2 or self.rows_1d)) or \
                    acc_column_read(ld, vars_, exts):
                cols.append(buf)  # read along the thread's own columns: fine in a column-stable layout
            elif perm is not None and shape == tuple(exts[p] for p in perm):
                permuted.append((buf, perm))  # F[j, i] in a loop over (i, j): the loop follows F's layout
            elif self.slice_offsets and (rd := offset_read(ld, vars_, exts, self.loops)) is not None:
                moved.append((rd, f"indexed as {buf.name}[{', '.join(str(i) for i in ld.indices)}] in a T.Parallel "
                                  f"over {tuple(exts)}"))  # a sub-block an enclosing loop moves
            elif self.packed and (k := packed_read(ld, vars_, exts)) is not None:
                packed.append((buf, k, f"indexed as {buf.name}[{', '.join(str(i) for i in ld.indices)}] in a "
                                       f"T.Parallel over {tuple(exts)}"))  # packed values, k per element
            else:
                self.bad(buf, f"indexed as {buf.name}[{', '.join(str(i) for i in ld.indices)}] in a T.Parallel "
                              f"over {tuple(exts)}")
        for buf, perm in permuted:  # one transposed driver per loop, and no fragment indexed in loop order
            if exact or perm != permuted[0][1]:
                self.bad(buf, f"indexed in another order than the loop's other fragments in a T.Parallel over "
                              f"{tuple(exts)}")
        if not exact:  # a transposed driver's slots do not run in the loop's order: no slice of it
            for rd, where in moved:
                self.bad(rd.buffer, f"{where} (the loop's fragments are indexed in another order)")
            moved = []
        exact = exact or [b for b, p in permuted if p == permuted[0][1]]
        for a, b in zip(exact, exact[1:]):
            self.links.append((a, b))
        for r in rows:
            self.row_uses.append((r, exact))
        for c in cols:
            self.col_uses.append((c, exact))
        for buf, k, where in packed:
            if exact:
                self.packed_reads.append((buf, k, exact, where))
            else:
                self.bad(buf, f"{where} (no fragment indexed by the loop variables drives the loop)")
        for rd, where in moved:
            if exact:
                self.offset_reads.append((rd, exact, tuple(exts), where))
            else:
                self.bad(rd.buffer, f"{where} (no fragment indexed by the loop variables drives the loop)")
        for inner in collect(body, lambda n: isinstance(n, S.For) and n.kind == "parallel"):
            for ld in collect(inner, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))):
                self.bad(ld.buffer, "used in a nested T.Parallel")

    def visit_slice(self, vars_, exts, body) -> bool:
        """A T.Parallel over a sub-block of fragments (fragment_slices.py): fine when the offsets
        are constants over the enclosing loops; whether the slices fit the layout is checked last."""
        sl = fragment_slice(vars_, exts, body, lambda b: b.uid in self.frags)
        if sl is None:
            return False
        b = sl.buffers[0]
        idx = [str(v) if const_int(o) == 0 else str(v + o) for v, o in zip(vars_, sl.offsets)]
        where = f"indexed as {b.name}[{', '.join(idx)}] in a " \
                f"T.Parallel over {tuple(exts)}"
        cases = offset_cases(sl.offsets, self.loops)
        for buf in sl.buffers:
            if cases is None:
                self.bad(buf, f"{where} (the offset is not a constant, nor one of a few values of "
                              "enclosing constant-extent loops)")
        for a, c in zip(sl.buffers, sl.buffers[1:]):
            self.links.append((a, c))
        if cases is not None:
            self.slices.append((sl, cases, where))
        for inner in collect(body, lambda n: isinstance(n, S.For) and n.kind == "parallel"):
            for ld in collect(inner, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))):
                self.bad(ld.buffer, "used in a nested T.Parallel")
        return True

    def visit_Reduce(self, op: O.Reduce):
        self.reduces.append(op)

    def visit_BufferStore(self, s: S.BufferStore):
        self.bad(s.buffer, "stored outside a T.Parallel loop")
        self.generic(s)

    def visit_BufferLoad(self, e: E.BufferLoad):
        self.bad(e.buffer, "read outside a T.Parallel loop")
        self.generic(e)


def _without_scopes(body):
    """The kernel body without T.ws scopes and allocations (what uses all the block's threads)."""
    class _Drop(Mutator):
        def visit_WarpGroupScope(self, s):
            return replace(s, body=S.SeqStmt(()))

        def visit_Allocate(self, s):
            return S.SeqStmt(())

    return _Drop().visit(body)


def fragment_views(body, frags: dict) -> dict:
    """view uid -> (view, source) for every T.reshape / T.view of an allocated fragment."""
    out = {}
    for d in collect(body, lambda n: isinstance(n, DeclBuffer)):
        v, src = d.buffer, d.data
        if v.scope == "fragment" and isinstance(src, Buffer) and src.uid in frags:
            out[v.uid] = (v, src)
    return out


def _static(buf) -> tuple | None:
    shape = tuple(const_int(s) for s in buf.shape)
    return None if any(s is None for s in shape) else shape


def _sync_views(views: dict, layouts: dict, strict=()) -> bool:
    """A view and its source hold the same registers: lay out whichever is missing from the other."""
    changed = False
    for vu, (v, src) in views.items():
        lv, ls = layouts.get(vu), layouts.get(src.uid)
        if v.dtype != src.dtype or _static(v) is None:
            continue
        if ls is not None and lv is None:
            d = ReshapedFragment.of(ls, _static(v))
            if d is not None:
                layouts[vu], changed = d, True
        elif lv is not None and ls is None and src.uid not in strict:
            d = ReshapedFragment.of(lv, _static(src))
            if d is not None:
                layouts[src.uid], changed = d, True
    return changed


def _demote_views(views: dict, layouts: dict, demote: dict):
    """A view whose layout is not its source's, or either side demoted: both go to shared memory."""
    for vu, (v, src) in views.items():
        ls = layouts.get(src.uid)
        if v.dtype != src.dtype:
            demote.setdefault(vu, f"a T.view of register tile {src.name} as {v.dtype} (registers hold {src.dtype})")
        elif layouts.get(vu) is None or ls is None or ReshapedFragment.of(ls, _static(v)) != layouts[vu]:
            demote.setdefault(vu, f"its shape {tuple(v.shape)} has no register layout over {src.name}'s")
    changed = True
    while changed:
        changed = False
        for vu, (v, src) in views.items():
            if vu in demote and src.uid not in demote:
                demote[src.uid] = f"its view {v.name} is kept in shared memory ({demote[vu]})"
                changed = True
            elif src.uid in demote and vu not in demote:
                demote[vu] = f"a view of {src.name}, which is kept in shared memory"
                changed = True


def _propagate(links, layouts, views=None):
    changed = True
    while changed:
        changed = False
        if views:
            changed = _sync_views(views, layouts)
        for a, b in links:
            la, lb = layouts.get(a.uid), layouts.get(b.uid)
            if la is not None and lb is None:
                layouts[b.uid], changed = la, True
            elif lb is not None and la is None:
                layouts[a.uid], changed = lb, True


def infer_layouts(kernel: S.KernelLaunch, sm: int = 80, row_fragments: bool = False,
                  replicate_inputs: bool = True, rows_1d: bool = True, slice_offsets: bool = True,
                  mma_rs: bool = True, packed: bool = True, wgmma_policy: bool = True,
                  split_segments: bool = True, policy_cost: bool = True, mma_rs16: bool = True) -> LayoutPlan:
    threads = kernel.threads[0] * kernel.threads[1] * kernel.threads[2]
    frags = {a.buffer.uid: a.buffer for a in collect(kernel.body, lambda n: isinstance(n, S.Allocate))
             if a.buffer.scope == "fragment"}
    views = fragment_views(kernel.body, frags)
    every = {**frags, **{vu: v for vu, (v, _) in views.items()}}
    uses = _Uses(every, threads, sm)
    uses.rows_1d = rows_1d
    uses.slice_offsets, uses.mma_rs, uses.packed = slice_offsets, mma_rs, packed
    uses.mma_rs16 = mma_rs16
    uses.wgmma_policy = wgmma_policy
    uses.folds = accumulator_folds(kernel.body, views) if policy_cost else None
    uses.outside = {b.uid for b in buffers_used(_without_scopes(kernel.body)) if b.uid in every}
    uses.visit(kernel.body)
    for vu, (v, src) in views.items():  # a view spreads over the threads its source does
        nt = uses.frag_threads.get(vu)
        if nt is not None and uses.frag_threads.setdefault(src.uid, nt) != nt:
            uses.bad(src, f"it and its view {v.name} are used by different thread ranges")
    layouts: dict = {uid: None for uid in every}
    for uid, lay in uses.strict.items():
        layouts[uid] = lay
    # common: propagate along links until nothing changes
    changed = True
    while changed:
        changed = _sync_views(views, layouts, uses.strict)
        for a, b in uses.links:
            la, lb = layouts.get(a.uid), layouts.get(b.uid)
            if la is not None and lb is None and b.uid not in uses.strict:
                layouts[b.uid] = la
                changed = True
            elif lb is not None and la is None and a.uid not in uses.strict:
                layouts[a.uid] = lb
                changed = True
    # per-row values of an accumulator (row max / sum in softmax) take its row layout
    def acc_rows(lay):
        if not row_fragments:
            return None
        acc = acc_of_rows(lay)
        return RowFragment.of(acc) if acc is not None and row_fragment_ok(acc) else None

    for op in uses.reduces:
        if layouts.get(op.dst.uid) is not None or op.dst.uid not in frags or op.src.uid not in every:
            continue
        if op.src.ndim == 2 and op.dim == 1 and op.dst.ndim == 1 and op.src.uid in frags:
            layouts[op.dst.uid] = acc_rows(layouts.get(op.src.uid))
        elif op.src.ndim == 3 and op.dim == 2 and row_fragments and _static(op.src) and \
                _static(op.dst) == _static(op.src)[:2]:  # segments of an accumulator's rows ((R, Q, H) view)
            layouts[op.dst.uid] = segment_rows(layouts.get(op.src.uid), _static(op.src), split_segments)
    for r, exact in uses.row_uses:
        if layouts.get(r.uid) is None and exact:
            layouts[r.uid] = acc_rows(layouts.get(exact[0].uid))
    reducer_rows = {r.uid for r, _ in uses.row_uses if is_reducer(r)}
    _propagate(uses.links, layouts, views)
    # an RS gemm's A tile that nothing else laid out takes the layout the instruction reads
    # (a T.copy from shared then fills it with ldmatrix). Not a 16-bit one: gemm_ss's ldmatrix reads
    # such a tile from shared memory as fast; it pays only where A is an accumulator-laid tile already
    for op, a_lay in uses.rs_gemms.values():
        if layouts.get(op.A.buffer.uid) is None and not _mma_a_demoted(uses, op.A.buffer, a_lay) and \
                id(op) not in uses.rs16_gemms:
            layouts[op.A.buffer.uid] = a_lay
    _propagate(uses.links, layouts, views)
    # a loop reading a laid-out tile at a moving offset, driven by tiles nothing laid out yet:
    # they take the tile's layout restricted to the slice, when that does not move with the offset
    for rd, exact, exts, _ in uses.offset_reads:
        want = slice_driver(layouts.get(rd.buffer.uid), rd, exts)
        if want is not None and all(layouts.get(b.uid) is None and b.uid not in uses.strict for b in exact):
            for b in exact:
                layouts[b.uid] = want
            _propagate(uses.links, layouts, views)
    # a packed tile read as P[i, j // k] over a laid-out driver: a PackedFragment of it (packed_columns.py)
    packed_uids = {b.uid for b, _, _, _ in uses.packed_reads}

    def place_packed():
        for b, k, exact, _ in uses.packed_reads:
            want = packed_layout(layouts.get(exact[0].uid), k)
            if want is not None and layouts.get(b.uid) is None and b.uid not in uses.strict:
                layouts[b.uid] = want
                _propagate(uses.links, layouts, views)

    place_packed()
    # free: tiles of two or more dims first, so that the rows a T.reduce folds a flat tile into can
    # take that tile's lane rows before the 1-d tiles linked to them choose
    def free_layout(uid, buf):
        shape = tuple(const_int(s) for s in buf.shape)
        n = 1
        for s in shape:
            n *= s
        vec = max(1, 16 // buf.dtype.bytes)
        nt = uses.frag_threads.get(uid, threads)
        while vec > 1 and (n % (nt * vec) or shape[-1] % vec):
            vec //= 2
        return FlatFragment(shape, nt, vec)

    def free(uid, buf, lay=None):
        layouts[uid] = lay or free_layout(uid, buf)
        # what it is linked to (and its views) follow before the next free choice: a T.copy between two
        # fragments of different dtypes would otherwise give each its own vector width and a conflict
        _propagate(uses.links, layouts, views)

    # Linked 2-d tiles, and those whose rows one 1-d tile serves (the source of T.reduce(F, R) and the
    # loops reading R[i]), take one flat layout: the widest vector any of them would take. Then R can
    # hold the rows each thread covers in all of them, and a cast copy keeps 16-byte vectors.
    comp = {uid: uid for uid in frags}

    def root(u):
        while comp[u] != u:
            comp[u] = comp[comp[u]]
            u = comp[u]
        return u

    def join(a, b):
        if a.uid in comp and b.uid in comp and _static(a) is not None and _static(a) == _static(b):
            comp[root(a.uid)] = root(b.uid)

    for a, b in uses.links:
        join(a, b)
    if row_fragments:
        served: dict = {}
        for r, exact in uses.row_uses:
            if exact:
                served.setdefault(r.uid, []).append(exact[0])
        for op in uses.reduces:
            if op.src.ndim == 2 and op.dim == 1 and op.dst.ndim == 1:
                served.setdefault(op.dst.uid, []).append(op.src)
        for tiles in served.values():
            for a, b in zip(tiles, tiles[1:]):
                join(a, b)
    members: dict = {}
    for uid in frags:
        members.setdefault(root(uid), []).append(uid)
    for uid, buf in frags.items():
        if layouts[uid] is not None or uid in reducer_rows or buf.ndim < 2 or uid in packed_uids:
            continue
        nt = uses.frag_threads.get(uid, threads)
        cands = [free_layout(m, frags[m]) for m in members[root(uid)] if m not in uses.strict and
                 m not in reducer_rows and uses.frag_threads.get(m, threads) == nt]
        free(uid, buf, max(cands, key=lambda f: f.vec) if cands else None)
    _propagate(uses.links, layouts, views)
    place_packed()  # drivers laid out flat just now
    for op in uses.reduces:  # T.reduce(F, R, dim=1) over a flat F: R holds the rows F's threads cover
        if row_fragments and op.src.ndim == 2 and op.dim == 1 and op.dst.ndim == 1 and op.dst.uid in frags and \
                layouts.get(op.dst.uid) is None and op.dst.uid not in uses.strict and \
                op.dst.dtype.bits <= 32 and not is_reducer(op.dst):
            want = LaneRowFragment.of(layouts.get(op.src.uid))
            if want is not None and (want.rows,) == _static(op.dst):
                layouts[op.dst.uid] = want
                _propagate(uses.links, layouts, views)
    # a 1-d tile read as R[i] across the rows of flat loops that all deal rows alike holds the rows
    # each thread covers there (the 1-d loops computing it run on every copy of a row)
    wanted: dict = {}
    for r, exact in uses.row_uses:
        if row_fragments and r.uid in frags and not is_reducer(r) and r.uid not in uses.strict:
            wanted.setdefault(r.uid, set()).add(LaneRowFragment.of(layouts.get(exact[0].uid)) if exact else None)
    for uid, want in wanted.items():
        lay = next(iter(want))
        if layouts.get(uid) is None and len(want) == 1 and lay is not None and (lay.rows,) == _static(frags[uid]):
            layouts[uid] = lay
            _propagate(uses.links, layouts, views)
    for uid, buf in frags.items():
        if layouts[uid] is None and uid not in reducer_rows:
            free(uid, buf)
    # F[x, j] / D[j] read in a loop over a column-stable flat layout: they take that layout's columns
    linked = {b.uid for pair in uses.links for b in pair} | set(uses.strict) | set(views) | \
        {src.uid for _, src in views.values()}
    def col_layout(driver, shape):
        return column_layout(driver, shape) or (acc_column_layout(driver, shape) if row_fragments else None)

    for c, exact in uses.col_uses:
        want = col_layout(layouts.get(exact[0].uid), _static(c) or ()) if exact else None
        if want is not None and c.uid not in linked and c.uid in frags:
            layouts[c.uid] = want
    # a reducer folded into across the rows of a flat loop keeps per-thread partials of the rows
    # its threads cover (finalize_reducer combines them)
    for r, exact in uses.row_uses:
        want = LaneRowFragment.of(layouts.get(exact[0].uid)) if exact else None
        if r.uid in reducer_rows and r.uid not in linked and layouts.get(r.uid) is None and want is not None:
            layouts[r.uid] = want
    # links whose layouts still disagree: demote the non-strict side
    for a, b in uses.links:
        la, lb = layouts.get(a.uid), layouts.get(b.uid)
        if la is not None and lb is not None and la != lb:
            victim = b if a.uid in uses.strict else a
            uses.demote.setdefault(victim.uid, f"layout conflict with {(a if victim is b else b).name}")
    _check_slices(uses, layouts)
    for rd, exact, exts, where in uses.offset_reads:  # otherwise the tile is read from shared memory
        want = slice_driver(layouts.get(rd.buffer.uid), rd, exts)
        if want is None or any(layouts.get(b.uid) != want for b in exact):
            uses.bad(rd.buffer, f"{where} (the elements each thread owns in the slice change with the offset, "
                                "or the loop's fragments are not laid out as the slice)")
    for b in uses.boxes:
        if not isinstance(layouts.get(b.uid), (MmaAccFragment, WgmmaAccFragment)):
            uses.demote.setdefault(b.uid, "T.copy of a slice of it")
    # RS gemms: the A tile must end up in the layout the instruction reads; otherwise it goes
    # through shared memory like any other operand
    for op, a_lay in uses.rs_gemms.values():
        a = op.A.buffer
        if layouts.get(a.uid) != a_lay or a.uid in uses.demote:
            uses.demote.setdefault(a.uid, "its layout is not the mma.sync A layout (an accumulator layout of its "
                                          "rows over the gemm's warps)" if id(op) in uses.rs16_gemms else
                                   "its layout is not the wgmma RS A layout")
            uses.notes.append(f"T.gemm {a.name} x {op.B.buffer.name}: A goes through shared memory (layout)")
    # R[i] in a loop over an accumulator: R must hold that accumulator's rows
    for r, exact in uses.row_uses:
        live = [b for b in exact if b.uid not in uses.demote]
        want = acc_rows(layouts.get(live[0].uid)) if live else None
        if want is None and live and (r.uid in reducer_rows or isinstance(layouts.get(r.uid), LaneRowFragment)):
            want = LaneRowFragment.of(layouts.get(live[0].uid))
        if want is None or layouts.get(r.uid) != want:
            uses.demote.setdefault(r.uid, f"read as {r.name}[i] across rows of a tile it is not laid out with")
    for c, exact in uses.col_uses:  # the loop must still be driven by that layout
        live = [b for b in exact if b.uid not in uses.demote]
        want = col_layout(layouts.get(live[0].uid), _static(c) or ()) if live else None
        if want is None or layouts.get(c.uid) != want:
            uses.demote.setdefault(c.uid, f"read along the columns of a T.Parallel whose layout does not give "
                                          f"each thread the same columns in every row")
    _column_budget(frags, layouts, uses, threads)
    _check_packed(uses, layouts)
    _demote_views(views, layouts, uses.demote)
    if _check_packed(uses, layouts):  # a driver demoted as a view just now
        _demote_views(views, layouts, uses.demote)
    plan = LayoutPlan()
    plan.per_thread = per_thread_fragments(kernel.body, frags, views)
    replicated = replicated_inputs(kernel.body, frags, views, set(uses.demote)) if replicate_inputs else set()
    plan.per_thread |= replicated
    for uid in every:
        if uid in replicated:
            plan.layouts[uid] = None
        elif uid in uses.demote:
            plan.layouts[uid] = None
            plan.reasons[uid] = uses.demote[uid]
        else:
            plan.layouts[uid] = layouts[uid]
    # a demoted accumulator cannot take the mma path with C in registers
    plan.mma_gemms = {g for g in uses.mma_gemms}
    plan.wgmma_gemms = set(uses.wgmma_gemms)
    plan.rs_gemms = {k: v[1] for k, v in uses.rs_gemms.items() if plan.layouts.get(v[0].A.buffer.uid) is not None}
    plan.notes = list(uses.notes)
    return plan


_ = squeezed


REG_OVERHEAD = 32  # registers a kernel needs beside its register tiles (addresses, indices, loop state)


def _mma_a_demoted(uses: _Uses, a, a_lay) -> bool:
    """An mma A tile that will go to shared memory anyway (already demoted, or read at a moving offset
    whose owners move in that layout): the tiles linked to it keep the layouts they would have had."""
    if not isinstance(a_lay, MmaAFragment):
        return False
    return a.uid in uses.demote or any(rd.buffer.uid == a.uid and slice_driver(a_lay, rd, exts) is None
                                       for rd, _, exts, _ in uses.offset_reads)


def _column_budget(frags: dict, layouts: dict, uses: _Uses, threads: int):
    """Column tiles of an accumulator (AccColumnFragment: every thread keeps a copy of the columns it
    holds) are read-only broadcasts: where the kernel's register tiles would not fit the per-thread
    register budget with them, they go to shared memory (conflict-free broadcast reads) instead
    of making ptxas spill. The fp8 lighting indexer: a 256 x 128 accumulator over 512 threads
    (64 words), its 32-column weights copy and 10 more words on a budget of 104 spilled 476 bytes."""
    def words(uid):
        lay = layouts.get(uid)
        return 0 if lay is None or uid in uses.demote else lay.nlocal * max(1, frags[uid].dtype.bytes // 4)

    budget = min(255, 65536 // max(1, threads)) // 8 * 8
    cols = sorted((uid for uid in frags if isinstance(getattr(layouts.get(uid), "inner", layouts.get(uid)),
                                                      AccColumnFragment) and uid not in uses.demote),
                  key=words, reverse=True)
    total = sum(words(uid) for uid in frags)
    for uid in cols:
        if total + REG_OVERHEAD <= budget:
            break
        w = words(uid)
        uses.demote.setdefault(uid, f"its copy of the accumulator's columns ({w} registers a thread) would take the "
                                    f"kernel's register tiles to {total} of {budget} registers a thread")
        total -= w


def _check_packed(uses: _Uses, layouts: dict) -> bool:
    """A packed tile stays in registers only beside a live driver whose PackedFragment it has
    (packed_columns.py); -> whether one was demoted now."""
    demoted = False
    for b, k, exact, where in uses.packed_reads:
        live = [x for x in exact if x.uid not in uses.demote]
        want = packed_layout(layouts.get(live[0].uid), k) if live else None
        if (want is None or layouts.get(b.uid) != want) and b.uid not in uses.demote:
            uses.demote[b.uid] = f"{where} (the loop's driver does not give each thread runs of {k} columns, " \
                                 "or the tile is laid out otherwise elsewhere)"
            demoted = True
    return demoted


def _check_slices(uses: _Uses, layouts: dict):
    """A sub-block loop keeps its fragments in registers when every slice it takes is a set of
    whole slots of their layout (the same on every thread)."""
    for sl, cases, where in uses.slices:
        for buf in sl.buffers:
            lay = layouts.get(buf.uid)
            if lay is None or not hasattr(lay, "threads"):
                uses.bad(buf, f"{where} (its layout {type(lay).__name__} has no per-thread slices)")
                continue
            for offs in cases:
                if slice_slots(lay, offs, sl.box) is None and not sl.plain_at(offs):
                    uses.bad(buf, f"{where} (the slice at offset {offs} cuts through its register layout: "
                                  "some threads own only part of a slot's pattern)")
                    break


def per_thread_fragments(body, frags: dict, views: dict | None = None) -> set:
    """Fragments written only by scalar code (outside T.Parallel and tile ops), e.g.
    `rms[0] = 0; rms[0] += x[i]`: every thread runs those stores itself, so each keeps a copy of
    its own (public TileLang's meaning); one shared copy would race on the read-modify-writes.
    A view (T.reshape) counts as its source, and is per-thread with it."""
    views = views or {}
    key = {vu: src.uid for vu, (_, src) in views.items()}
    uid = lambda b: key.get(b.uid, b.uid)  # noqa: E731
    scalar = {uid(s.buffer) for s in collect(body, lambda n: isinstance(n, S.BufferStore)) if uid(s.buffer) in frags}
    in_par, in_ops = set(), set()
    for loop in collect(body, lambda n: isinstance(n, S.For) and n.kind == "parallel"):
        in_par |= {uid(s.buffer) for s in collect(loop, lambda n: isinstance(n, S.BufferStore))}
    for op in collect(body, lambda n: isinstance(n, S.TileOp) and not isinstance(n, DeclBuffer)):
        in_ops |= {uid(b) for b in buffers_used(op)}
    out = scalar - in_par - in_ops - {u for u, b in frags.items() if is_reducer(b)}  # reducers fold across threads
    return out | {vu for vu, src in key.items() if src in out}


REPLICATED_MAX = 64  # elements of a small input fragment every thread may hold whole (replicated_inputs)


def replicated_inputs(body, frags: dict, views: dict, demoted: set) -> set:
    """Demoted fragments each thread can hold whole instead: at most REPLICATED_MAX elements,
    written only by whole-tile T.copy from global memory and otherwise only read (mhc_post's 4 x 4
    `a_local`, read as a_local[k, i] across the rows of a flat loop). Every thread loads the same
    values, so the per-thread copies agree; the public build keeps such a tile in registers on
    every thread too. Views, reducers and tiles any other tile op touches are left demoted."""
    viewed = set(views) | {src.uid for _, src in views.values()}
    stored = {s.buffer.uid for s in collect(body, lambda n: isinstance(n, S.BufferStore))}
    ok, touched = set(), set()
    for op in collect(body, lambda n: isinstance(n, S.TileOp) and not isinstance(n, DeclBuffer)):
        if isinstance(op, O.Copy) and op.dst.buffer.uid in frags and whole(op.dst, op.dst.buffer) and \
                op.src.buffer.scope == "global":
            ok.add(op.dst.buffer.uid)
            touched |= {b.uid for b in buffers_used(op) if b is not op.dst.buffer}
        else:
            touched |= {b.uid for b in buffers_used(op)}
    out = set()
    for uid in demoted & ok:
        b = frags[uid]
        shape = _static(b)
        n = 1
        for x in shape or (REPLICATED_MAX + 1,):
            n *= x
        if n <= REPLICATED_MAX and uid not in stored and uid not in touched and uid not in viewed \
                and not is_reducer(b):
            out.add(uid)
    return out


def is_reducer(buf) -> bool:
    """A T.alloc_reducer tile: its partials are combined across threads, never private to one."""
    return getattr(buf, "reducer_op", None) is not None


def reducer_update(st) -> bool:
    """st is `r[i] = r[i] op v` (r[i] op= v) on a reducer r."""
    if not isinstance(st, S.BufferStore) or not is_reducer(st.buffer):
        return False
    from .thread_allreduce import update_operand

    return update_operand(st.value, E.BufferLoad(st.buffer, st.indices, st.buffer.dtype), st.buffer.reducer_op) \
        is not None
