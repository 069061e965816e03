"""Block-level copy lowering for the CUDA tile-op pass (ops/copy.py is T.copy's rule and calls
copy_tile): T.copy between global, shared and register tiles as 16-byte vectors / cp.async,
ldmatrix fills, paired accumulator stores, or per-element loops.

A mixin of the pass's visitor (`_Lower`): it uses the visitor's thread count `T`, `tid`, layout
plan, register map, enclosing-loop frames and bound `ranges`. cp.async sources inside a serial
loop read through a per-thread pointer declared once before the loop (see hoisted_source).

    T.copy(A[by*128, ko*32], A_s)    ->   before the loop: const auto* tl_gsrc0 = &A[(by*128 + tid/4) * K + tid%4*8]
                                          for v in unroll(2): cp_async_zfill(&A_s[v*64 + tid/4, tid%4*8],
                                                                             tl_gsrc0 + ko*32 + v*64*K, ok)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import dtypes as dt
from ...arith.divisibility import is_multiple
from ...arith.simplify import aligned, const_int, linear_form, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import Mutator, collect, substitute
from ...layout.fragment import FlatFragment, MmaAccFragment, WgmmaAccFragment
from ...op import tile_ops as O
from ...op.regions import squeezed
from ..lower_tile_ops_cpu import in_bounds, region_indices
from .gemm_paths import accumulator_box_ok, whole
from .ldmatrix import ldmatrix_candidate, ldmatrix_fill, ldmatrix_unfit
from .stmatrix import stmatrix_candidate, stmatrix_store, stmatrix_unfit
from .ops.base import THREAD_LOOP
from .raw import Raw


# ends a synchronous cp.async T.copy (cp_async_waits.py merges consecutive ones)
COPY_COMMIT_WAIT = "tl::cp_async_commit(); tl::cp_async_wait<0>();"


def _raw():
    """(Raw, THREAD_LOOP)."""
    return Raw, THREAD_LOOP


class CopyLowering:
    """T.copy (and its helpers) for `_Lower`."""

    def vector_width(self, op: O.Copy) -> tuple[int, str | None]:
        if self.reg(op.src.buffer) is not None or self.reg(op.dst.buffer) is not None:
            return 1, None
        if op.dst.buffer.scope in ("local", "local.var"):  # every thread fills its own whole copy
            return 1, None
        return copy_vector_width(op)

    def vector_copy(self, op: O.Copy, vec: int):
        Raw, THREAD_LOOP = _raw()
        ext = squeezed(op.dst.extents)
        total = 1
        for e in ext:
            total *= e
        per = self.T * vec
        v = E.Var("v", dt.int32)
        e = E.Var("e", dt.int32)
        cvars = [E.Var("ijkm"[d], dt.int32) for d in range(len(ext))]
        coords = unflatten(e, ext)
        si, di = region_indices(op.src, cvars), region_indices(op.dst, cvars)
        with self.ranges.coords(cvars, ext):
            ok_s, ok_d = in_bounds(op.src, si, self.ranges), in_bounds(op.dst, di, self.ranges)
        src_addr = E.Call("address_of", (E.BufferLoad(op.src.buffer, si, op.src.buffer.dtype),), dt.uint64)
        g2s = op.src.buffer.scope == "global" and op.dst.buffer.scope in ("shared", "shared.dyn")
        slot = "{0}"
        if g2s and getattr(self, "shared_address_slots", False):
            # the destination as a 32-bit shared address (codegen's {0:smem}), indexed by the unrolled
            # coordinates (v * rows + f(tid)): the rows an unroll step moves leave the swizzle as a constant
            slot = "{0:smem}"
            unrolled = self.unrolled_coords(v, vec, ext) if total % (self.T * vec) == 0 else None
            if unrolled is not None:
                di = tuple(simplify(E.as_expr(i)) for i in region_indices(op.dst, unrolled))
        dst_addr = E.Call("address_of", (E.BufferLoad(op.dst.buffer, di, op.dst.buffer.dtype),), dt.uint64)
        hoisted = self.hoisted_source(op, v, vec, ext) if g2s else None
        # in a pipeline the copy completes at the pipeline's wait + barrier, not here
        nb = vec * op.src.buffer.dtype.bytes
        if hoisted is not None:
            cp = Raw(f"tl::cp_async_zfill<{nb}>({slot}, {hoisted[0]} + ({{1}}), {{2}});",
                     (dst_addr, hoisted[1], E.as_expr(ok_s)), writes=() if op.async_group else (op.dst.buffer,))
        elif g2s:
            cp = Raw(f"tl::cp_async_zfill<{nb}>({slot}, {{1}}, {{2}});", (dst_addr, src_addr, E.as_expr(ok_s)),
                     writes=() if op.async_group else (op.dst.buffer,))
        else:
            cp = Raw(f"tl::copy_vec{nb}({{0}}, {{1}}, {{2}});", (dst_addr, src_addr, E.as_expr(ok_s)),
                     reads=(op.src.buffer,), writes=(op.dst.buffer,))
        body = cp if ok_d is True else S.IfThenElse(ok_d, cp)
        inner = S.seq(S.LetStmt(e, (v * self.T + self.tid) * vec),
                      *[S.LetStmt(c, x) for c, x in zip(cvars, coords)], body)
        if total % per:
            inner = S.IfThenElse(E.binop("<", e, total), inner) if False else S.seq(
                S.LetStmt(e, (v * self.T + self.tid) * vec),
                S.IfThenElse(E.binop("<", e, total), S.seq(*[S.LetStmt(c, x) for c, x in zip(cvars, coords)], body)))
        loop = S.For(v, E.as_expr(0), E.as_expr(-(-total // per)), "unroll", inner, THREAD_LOOP)
        if g2s and not (op.async_group or op.no_wait):  # T.async_copy: its commit follows, the program waits
            return S.seq(loop, Raw(COPY_COMMIT_WAIT))
        return loop

    def hoisted_source(self, op: O.Copy, v: E.Var, vec: int, ext) -> tuple[str, E.Expr] | None:
        """(pointer name, element offset) for a cp.async source inside a serial loop ko: the
        per-thread address at ko = v = 0 is declared once before the loop (tl_gsrcN) and each copy
        adds ko * ck + v * cv, so the loop bumps one pointer instead of rebuilding a 64-bit address
        per vector. None unless every source index is linear in ko and v with the rest invariant.
        An index with one loop-invariant select (the pipeline's k serpentine: `rev ? n - 1 - k : k`)
        gets a pointer and a k-stride per branch, chosen once before the loop."""
        Raw = _raw()[0]
        if not self.loops:
            return None
        frame = self.loops[-1]
        coords = self.unrolled_coords(v, vec, ext)
        if coords is None:
            return None
        ko, start = frame.loop.var, E.as_expr(frame.loop.start)
        indices = [simplify(E.as_expr(idx)) for idx in region_indices(op.src, coords)]
        conds = {n.cond for idx in indices for n in collect(idx, lambda n: isinstance(n, E.Select))}
        if not conds:
            form = self._affine(op, indices, frame, v)
            if form is None:
                return None
            base, kc, vc = form
            name = self._declare(frame, (op.src.buffer.uid, tuple(base)),
                                 lambda n: Raw(f"const auto* tl_gsrc{n} = {{0}};", (_address(op, base),)))
            return name, simplify(E.cast(dt.int64, ko - start) * kc + E.cast(dt.int64, v) * vc)
        cond = next(iter(conds))
        if len(conds) != 1 or any(x == ko or x == v or x in frame.inside or isinstance(x, (E.BufferLoad, E.Call))
                                  for x in _leaves(cond)):
            return None
        forms = [self._affine(op, [simplify(_pick(i, cond, side)) for i in indices], frame, v) for side in (1, 0)]
        if None in forms or forms[0][2] != forms[1][2]:
            return None
        (base_r, kc_r, vc), (base_f, kc_f, _) = forms
        name = self._declare(frame, (op.src.buffer.uid, tuple(base_f), tuple(base_r), cond),
                             lambda n: Raw(f"const auto* tl_gsrc{n} = ({{0}}) ? {{1}} : {{2}}; "
                                           f"const int64_t tl_gstep{n} = ({{0}}) ? {{3}} : {{4}};",
                                           (cond, _address(op, base_r), _address(op, base_f), kc_r, kc_f)))
        step = E.Var(name.replace("gsrc", "gstep"), dt.int64)
        return name, simplify(E.cast(dt.int64, ko - start) * step + E.cast(dt.int64, v) * vc)

    def _declare(self, frame, key, make) -> str:
        """The name of the hoisted source pointer for `key`, declared before the loop on first use
        (`make(n)` builds declaration number n)."""
        decl = frame.decls.get(key)
        if decl is None:
            decl = frame.decls[key] = make(self.nhoisted)
            self.nhoisted += 1
        return decl.fmt.split()[2]

    def _affine(self, op: O.Copy, indices: list, frame, v: E.Var):
        """(indices at ko = start and v = 0, element stride per ko, per v) of a source tile whose
        indices are linear in the loop variable ko and the unroll variable v; None otherwise."""
        ko, start = frame.loop.var, E.as_expr(frame.loop.start)
        base, ck, cv = [], [], []
        for idx in indices:
            lin = linear_form(simplify(E.as_expr(idx)))
            if lin is None or any(c and t != ko and t != v and any(x == ko or x == v for x in _vars(t))
                                  for t, c in lin[0].items()):
                return None
            ck.append(lin[0].get(ko, 0))
            cv.append(lin[0].get(v, 0))
            # a T.ws scope's tid_wg is bound inside the loop: the pointer before it uses tid - t_lo
            base.append(simplify(substitute(E.as_expr(idx), {ko: start, v: E.as_expr(0), **self.tid_defs})))
        # NOTE: a load (a T.alloc_var, an index table) may change inside the loop: never hoisted
        if not any(ck) or any(x in frame.inside or x == v or isinstance(x, (E.BufferLoad, E.Call))
                              for b in base for x in _leaves(b)):
            return None
        stride, kc, vc = E.as_expr(1, dt.int64), E.as_expr(0, dt.int64), E.as_expr(0, dt.int64)
        declared = op.src.buffer.strides  # a T.StridedTensor's element strides, else row-major ones
        for d in range(op.src.buffer.ndim - 1, -1, -1):
            if declared is not None:
                stride = E.cast(dt.int64, E.as_expr(declared[d]))
            kc, vc = kc + stride * ck[d], vc + stride * cv[d]
            stride = stride * E.cast(dt.int64, op.src.buffer.shape[d])
        return base, simplify(kc), simplify(vc)

    def unrolled_coords(self, v: E.Var, vec: int, ext) -> list | None:
        """Coordinates of element (v * T + tid) * vec of a tile of extents `ext` as `v * rows +
        f(tid)` in the first dim and `g(tid)` in the rest, when one unroll step moves whole rows:
        the addresses of the unrolled copies then differ by constants (immediate offsets)."""
        inner = 1
        for x in ext[1:]:
            inner *= x
        per = self.T * vec
        if per % inner:
            return None
        e0 = self.tid * vec
        if len(ext) == 1:
            return [v * per + e0]
        return [v * (per // inner) + e0 // inner] + unflatten(e0 % inner, ext[1:])

    def copy_tile(self, op: O.Copy):
        """A block-level T.copy (ops/copy.py dispatches here)."""
        vec, why = self.vector_width(op)
        if vec > 1:
            if why and not op.async_group:  # a pipeline's copies: the pipeline pass said it
                self.warn(f"T.copy {op.src.buffer.name} -> {op.dst.buffer.name} uses "
                          f"{vec * op.src.buffer.dtype.bytes}-byte vectors, not 16-byte ones ({why})")
            return self.vector_copy(op, vec)
        ld = self.ldmatrix_copy(op)
        if ld is not None:
            return ld
        if op.no_wait:
            self.warn(f"T.async_copy {op.src.buffer.name} -> {op.dst.buffer.name} is not a cp.async copy "
                      f"({why or 'its elements do not form 4-, 8- or 16-byte vectors'}): each thread stores its "
                      "elements synchronously")
        before = self.vectorized
        out = self.element_copy(op)
        if why and self.vectorized == before:
            self.warn(f"T.copy {op.src.buffer.name} -> {op.dst.buffer.name} uses scalar accesses instead of "
                      f"16-byte vectors ({why})")
        return out

    def element_copy(self, op: O.Copy):
        sreg, dreg = self.reg(op.src.buffer), self.reg(op.dst.buffer)
        if sreg is not None and dreg is None:
            st = self.stmatrix_copy(op, sreg)
            if st is not None:
                return st
            paired = self.pair_store(op, sreg)
            if paired is not None:
                return paired
            if not whole(op.src, op.src.buffer):  # layout inference admits a box only where pair_store takes it
                raise AssertionError(f"T.copy of a box of accumulator {op.src.buffer.name}: no paired store")
        drive = op.dst if dreg is not None or sreg is None else op.src

        def make(cv, reg_ref):
            si, di = region_indices(op.src, cv), region_indices(op.dst, cv)
            same = sreg is not None and dreg is not None and self._same_slots(op)
            src = sreg[reg_ref.indices] if (sreg is not None and (drive is op.src or same)) else (
                sreg[self._slot_of(op.src.buffer, si)] if sreg is not None else
                E.BufferLoad(op.src.buffer, si, op.src.buffer.dtype))
            val = E.cast(op.dst.buffer.dtype, src)
            ok_s = in_bounds(op.src, si, self.ranges)
            if ok_s is not True:
                val = E.select(ok_s, val, E.const(0, op.dst.buffer.dtype))
            if dreg is not None:
                ref = reg_ref if drive is op.dst else dreg[self._slot_of(op.dst.buffer, di)]
                return S.BufferStore(ref.buffer, ref.indices, val)
            st = S.BufferStore(op.dst.buffer, di, val)
            ok_d = in_bounds(op.dst, di, self.ranges)
            return st if ok_d is True else S.IfThenElse(ok_d, st)

        return self.elementwise(drive, make)

    def _box_slots(self, lvar, coords, box, n):
        """[lo, hi) when, for every thread, slot pair l lies inside `box` exactly for lo <= l < hi."""
        inside = []
        with self.ranges.scoped({self.tid: (0, self.T - 1)}):
            for l in range(n):
                state = True
                for c, (start, ext) in zip(coords, box):
                    b = self.ranges.bounds(substitute(c, {lvar: E.as_expr(l)}))
                    if b is None:
                        return None
                    if b[1] < start or b[0] >= start + ext:
                        state = False
                    elif not (b[0] >= start and b[1] < start + ext):
                        return None
                inside.append(state)
        slots = [l for l, x in enumerate(inside) if x]
        if not slots or slots != list(range(slots[0], slots[-1] + 1)):
            return None
        return slots[0], slots[-1] + 1

    def ldmatrix_copy(self, op: O.Copy):
        Raw, THREAD_LOOP = _raw()
        dreg = self.reg(op.dst.buffer)
        lay = self.plan.layout(op.dst.buffer) if dreg is not None else None
        if not ldmatrix_candidate(op, lay, self.reg(op.src.buffer) is not None):
            return None
        why = ldmatrix_unfit(op, lay, self.T)
        if why:
            self.warn(f"T.copy {op.src.buffer.name} -> {op.dst.buffer.name} loads element by element, "
                      f"not with ldmatrix: {why}")
            return None
        return ldmatrix_fill(op, dreg, lay, self.tid, Raw, THREAD_LOOP)

    def stmatrix_copy(self, op: O.Copy, sreg: Buffer):
        """Accumulator -> 16-bit shared tile by stmatrix (sm_90), or None (paired stores then)."""
        lay = self.plan.layout(op.src.buffer)
        if not self.stmatrix or not stmatrix_candidate(op, lay, self.reg(op.dst.buffer) is not None, self.sm):
            return None
        if stmatrix_unfit(op, lay):
            return None
        Raw, THREAD_LOOP = _raw()
        return stmatrix_store(op, sreg, lay, self.tid, Raw, THREAD_LOOP)

    def pair_store(self, op: O.Copy, sreg: Buffer):
        """Accumulator -> memory: slots 2k, 2k+1 hold adjacent columns, so store them together."""
        Raw, THREAD_LOOP = _raw()
        lay = self.plan.layout(op.src.buffer)
        dst = op.dst.buffer
        if not isinstance(lay, (MmaAccFragment, WgmmaAccFragment)) or not is_multiple(dst.shape[-1], 2):
            return None
        if not aligned(op.dst.starts[-1], 2) or len(squeezed(op.dst.extents)) != 2 \
                or const_int(op.dst.extents[-1]) == 1:
            return None
        lvar = E.Var("l", dt.int32)
        base = lvar * 2
        i, j = (simplify(c) for c in lay.coords(self.tid, base))
        ci, cj = E.Var("i", dt.int32), E.Var("j", dt.int32)
        box = not whole(op.src, op.src.buffer)
        if box and not accumulator_box_ok(op.src):
            return None
        (r0, R), (c0, W) = ((simplify(E.as_expr(s_)), simplify(E.as_expr(e))) for s_, e in op.src.ranges)
        di = region_indices(op.dst, (ci - r0, cj - c0) if box else (ci, cj))
        addr = E.Call("address_of", (E.BufferLoad(dst, di, dst.dtype),), dt.uint64)
        conv = {"bfloat16": "tl_f32_to_bf16", "float8_e4m3fn": "tl_f32_to_fp8e4m3",
                "float8_e5m2": "tl_f32_to_fp8e5m2", "tfloat32": "tl_f32_to_tf32",
                "float8_e8m0fnu": "tl_f32_to_fp8e8m0"}.get(dst.dtype.name, "")  # emulated types compute in float
        # an emulated type is rounded once, by conv, from the float value (a cast to it first printed
        # as f32 -> bf16 -> f32 before conv rounded again)
        vt = dt.float32 if conv else dst.dtype
        v0 = E.cast(vt, E.BufferLoad(sreg, (base,), sreg.dtype))
        v1 = E.cast(vt, E.BufferLoad(sreg, (base + 1,), sreg.dtype))
        st = Raw(f"tl_store2({{0}}, {conv}({{1}}), {conv}({{2}}));", (addr, v0, v1),
                 writes=(dst,) if dst.scope != "global" else ())
        ok = in_bounds(op.dst, di, self.ranges)
        lo, hi = 0, lay.nlocal // 2
        if box:  # only the slots of this thread inside the box: a static slot range when provable
            consts = [const_int(x) for x in (r0, R, c0, W)]
            span = None if None in consts else self._box_slots(lvar, (i, j), tuple(zip(consts[::2], consts[1::2])), hi)
            if span is not None:
                lo, hi = span
            else:
                inside = E.logical_and(E.logical_and(E.binop(">=", ci, r0), E.binop("<", ci, r0 + R)),
                                       E.logical_and(E.binop(">=", cj, c0), E.binop("<", cj, c0 + W)))
                ok = inside if ok is True else E.logical_and(inside, ok)
        body = st if ok is True else S.IfThenElse(ok, st)
        return S.For(lvar, E.as_expr(lo), E.as_expr(hi - lo), "unroll",
                     S.seq(S.LetStmt(ci, i), S.LetStmt(cj, j), body), THREAD_LOOP)

    def _same_slots(self, op: O.Copy) -> bool:
        """Register tile -> register tile where slot l of a thread holds the same element on both
        sides: one layout, or flat layouts of one squeezed shape over whole tiles ((1, N) and (N,))."""
        a, b = self.plan.layout(op.src.buffer), self.plan.layout(op.dst.buffer)
        if a == b:
            return True
        return isinstance(a, FlatFragment) and isinstance(b, FlatFragment) and \
            (a.threads, a.vec) == (b.threads, b.vec) and squeezed(a.shape) == squeezed(b.shape) and \
            whole(op.src, op.src.buffer) and whole(op.dst, op.dst.buffer)

    def _slot_of(self, buf, idx):
        raise NotImplementedError(f"T.copy between register fragments of different layouts ({buf.name} is laid "
                                  f"out as {self.plan.layout(buf)}); copy through a shared tile instead")


@dataclass
class Hoist:
    """An enclosing loop (tile-level), the variables bound inside it, and the per-thread
    declarations to emit before it (keyed by what they compute)."""

    loop: S.For
    inside: set
    decls: dict = field(default_factory=dict)


def _address(op: O.Copy, indices) -> E.Expr:
    return E.Call("address_of", (E.BufferLoad(op.src.buffer, tuple(indices), op.src.buffer.dtype),), dt.uint64)


def _pick(e, cond, side: int):
    """e with every select on `cond` replaced by its true (side 1) or false (side 0) branch."""
    class _P(Mutator):
        def visit_Select(self, n):
            if n.cond == cond:
                return self.visit(n.a if side else n.b)
            return self.generic(n)

    return _P().visit(E.as_expr(e))


def _vars(e) -> list:
    return collect(e, lambda n: isinstance(n, E.Var))


def _leaves(e) -> list:
    return collect(e, lambda n: isinstance(n, (E.Var, E.BufferLoad, E.Call)))


def bound_in(loop: S.For) -> set:
    return {loop.var} | {n.var for n in collect(loop.body, lambda n: isinstance(n, (S.LetStmt, S.For)))}


def unflatten(e, extents) -> list:
    """Row-major coordinates of flat index e over `extents`."""
    coords, rest = [], e
    for x in reversed(list(extents)[1:]):
        coords.append(rest % x)
        rest = rest // x
    coords.append(rest)
    return coords[::-1]


def copy_vector_width(op: O.Copy) -> tuple[int, str | None]:
    """(elements per vector, why not 16 bytes): the widest 16-, 8- or 4-byte vector both sides
    allow, with None when it is 16 bytes; (1, reason) when none fits."""
    s, d = op.src.buffer, op.dst.buffer
    if s.dtype != d.dtype:
        return 1, f"it converts {s.dtype} to {d.dtype}"
    if s.dtype.bits < 8:  # element loops store each nibble atomically (tl_nibble_set_atomic)
        return 1, f"{s.dtype} packs two values per byte"
    first = None
    for nbytes in (16, 8, 4):
        vec = nbytes // s.dtype.bytes
        why = _vector_unfit(op, vec) if vec > 1 else "elements wider than the vector"
        if why is None:
            return vec, first
        first = first or why
    return 1, first


def _vector_unfit(op: O.Copy, vec: int) -> str | None:
    """Why `vec`-element vectors cannot move this copy, or None."""
    ext = squeezed(op.dst.extents)
    if not ext or not all(isinstance(e, int) for e in ext) or ext[-1] % vec:
        return f"the tile's last extent is not a multiple of {vec}"
    for r in (op.src, op.dst):
        b = r.buffer
        if const_int(r.extents[-1]) != ext[-1]:
            return f"{b.name}: the tile's last dim is not the buffer's last dim"
        if b.strides is not None:  # T.StridedTensor: rows start where the declared strides say
            inner = const_int(b.strides[-1]) if not isinstance(b.strides[-1], int) else b.strides[-1]
            if inner != 1:
                return f"{b.name}: its declared inner stride is {b.strides[-1]}, not 1"
            bad = [x for x in b.strides[:-1] if not is_multiple(x, vec)]
            if bad:
                return f"{b.name}: its declared stride {bad[0]} is not provably a multiple of {vec} elements"
        elif not is_multiple(b.shape[-1], vec):
            return f"{b.name}: row length {b.shape[-1]} is not a multiple of {vec} elements"
        if not aligned(r.starts[-1], vec):
            return f"{b.name}: column offset {r.starts[-1]} is not provably a multiple of {vec}"
    return None
