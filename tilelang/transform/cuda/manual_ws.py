"""Warp specialization written by hand (`T.ws`, mbarriers, `T.tma_copy`) on sm_90a.

Expects: tile-level IR of one kernel holding WarpGroupScope statements (op/hopper.py), or barrier
ops and the raw names of op/hopper_raw.py outside them (T.create_barriers, T.tma_load,
T.ptx_wgmma_ss ...: each a Raw line per executing thread); the user's barriers order everything
that crosses warp groups.
Guarantees: no automatic warp specialization or software pipelining: a T.Pipelined(num_stages=n)
loop gets n-stage rings of its TMA tiles and barriers (manual_ws_ring.py) where it can, else runs
serially (the user's barriers, not stage counts, say what overlaps); barriers are initialised
by thread 0 (then fence + __syncthreads) right after their allocation, one block for a run of
consecutive T.alloc_barrier (`tl.disable_barrier_init_merge`: one each); every hopper op is a Raw
line of our header's PTX wrappers; a 3-d shared tile used as `X[s, :, :]` by a TMA copy or a
gemm goes through a 2-d window onto stage s. Tile ops inside a scope are lowered later
(lower_tile_ops.py) over the scope's threads, with thread index `tid - 128 lo`.

    mbars = T.alloc_barrier([128, 128])        tl::mbarrier_init(&mbars[0], 128); ... __syncthreads();
    with T.ws(1):                        ->    if (tid >= 128 && tid < 256) {
        T.barrier_wait(mbars[1], p)                tl::mbarrier_wait(&mbars[1], p);
        T.tma_copy(A[..], A_s, barrier=mbars[0])   if (tl_shuffle_elect<128>()) { expect_tx(...); tma_load(...); }
        T.barrier_arrive(mbars[0])                 tl::mbarrier_arrive(&mbars[0]); }
    T.tma_copy(C_s, C[by * 128, bx * 128])     if (tl_shuffle_elect<256>()) { tma_store(&tmap_1, C_s, bx * 128, by * 128);
                                                                tl::tma_store_arrive(); }
    T.tma_store_wait()                         tl::tma_store_wait<0, true>();

A T.tma_copy store (shared -> global) is issued after a barrier that orders the threads' writes of
the tile (thread_sync; proxy_fences puts fence.proxy.async before it) and committed as its own
bulk group, not waited for; the kernel ends with `tl::tma_store_wait_all();` so no store is in
flight when the block exits. The scope's first thread issues a T.tma_copy
(`tl::tl_shuffle_elect<scope threads>()`); with leader_scope_threads=n the first of every n
threads (`tl::tl_shuffle_elect<n>()`), each with its own coordinates. A T.tma_copy that is one
contiguous run of both buffers which no tensor map fits (a row of a taller tile: `a_s[w, 0:K]`)
is a plain bulk copy (tl::bulk_copy_g2s / bulk_copy_s2g), the tile keeping its row-major layout.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...arith.divisibility import is_multiple
from ...arith.simplify import const_int, simplify
from ...errors import LoweringError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer, BufferRegion
from ...ir.visitor import Mutator, collect
from ...op import hopper as H
from ...op import hopper_raw as R
from ...op import tile_ops as O
from ...op.thread_ops import DeclBuffer
from .lower_tile_ops import Raw
from .manual_ws_ring import ring_loops
from .ws_loads import tma_plan
from .ws_epilogue import TmaDesc


@dataclass
class ManualWS:
    """What the rewrite found: the tensor maps the launcher encodes, the tiles' TMA layouts."""

    descs: list = field(default_factory=list)
    swizzled: set = field(default_factory=set)
    panels: set = field(default_factory=set)
    views: list = field(default_factory=list)  # 2-d windows onto stages of 3-d tiles (Buffer.view_of)


def has_warp_groups(k: S.KernelLaunch) -> bool:
    """Whether the kernel takes this path: T.ws scopes, or barrier / TMA ops outside them (the raw
    names' programs, which no other path lowers)."""
    return bool(collect(k.body, lambda n: isinstance(n, (H.WarpGroupScope, H.BarrierArrive, H.BarrierWait,
                                                         H.BarrierExpectTx, H.TmaCopy, H.TmaStore, R.BarrierInit,
                                                         R.TmaLoad,
                                                         R.BulkCopy, R.RawWgmma, R.FenceOperand))))


def manual_ws(k: S.KernelLaunch, warn, tma_stores: bool = True,
              merge_inits: bool = True) -> tuple[S.KernelLaunch, ManualWS]:
    """-> (rewritten kernel, ManualWS). Raises LoweringError for what it cannot lower.
    tma_stores: a T.copy of a T.tma_copy target tile to a global box becomes TMA stores (sm_90a).
    merge_inits: consecutive T.alloc_barrier share one initialisation block and one __syncthreads."""
    rw = _Rewrite(warn)
    rw.threads = k.threads[0] * k.threads[1] * k.threads[2]
    rw.tma_stores = tma_stores
    rw.merge_inits = merge_inits
    body = rw.top(k.body)
    return replace(k, body=body), rw.info


_CUDA_TYPES = {"float16": "tl::half_t", "bfloat16": "tl::bfloat16_t", "float8_e4m3": "tl::float8_e4m3_t",
               "float8_e5m2": "tl::float8_e5m2_t", "int8": "int8_t", "float32": "float", "int32": "int32_t"}


def _addr(buf: Buffer, index) -> E.Expr:
    return E.Call("address_of", (E.BufferLoad(buf, (E.as_expr(index),), buf.dtype),), buf.dtype)


def _first(r: BufferRegion) -> E.Expr:
    """The address of region r's first element."""
    b = r.buffer
    return E.Call("address_of", (E.BufferLoad(b, tuple(E.as_expr(x) for x in r.starts), b.dtype),), b.dtype)


def _strides(b: Buffer) -> list:
    if b.strides is not None and b.scope == "global":
        return [E.as_expr(x) for x in b.strides]
    out, st = [], E.as_expr(1)
    for d in reversed(b.shape):
        out.append(st)
        st = simplify(st * d)
    return out[::-1]


def _flat(r: BufferRegion) -> E.Expr:
    """Element offset of region r's first element from its buffer's start."""
    return simplify(sum((E.as_expr(x) * st for x, st in zip(r.starts, _strides(r.buffer))), E.as_expr(0)))


def _run(r: BufferRegion) -> int | None:
    """Elements of region r when it is one contiguous run of its buffer (compile-time extents), else None."""
    ext = [const_int(e) for e in r.extents]
    if None in ext:
        return None
    b, n = r.buffer, 1
    for e in ext:
        n *= e
    inner = [d for d, e in enumerate(ext) if e != 1]
    if not inner:
        return n
    st = [const_int(x) for x in _strides(b)]
    d0 = inner[0]
    if any(st[d] is None for d in range(d0, b.ndim)):
        return None
    expect = 1
    for d in range(b.ndim - 1, d0 - 1, -1):  # dims after the first non-unit one: whole, packed
        if st[d] != expect or d > d0 and (const_int(b.shape[d]) != ext[d] or const_int(r.starts[d]) != 0):
            return None
        expect *= ext[d] if d == d0 else const_int(b.shape[d])
    return n


def barrier_init(*bufs: Buffer) -> Raw:
    """Thread 0 initialises every barrier of `bufs`, one fence and one __syncthreads for all of them."""
    inits = " ".join(f"tl::mbarrier_init(&{buf.name}[{i}], {c});" for buf in bufs
                     for i, c in enumerate(buf.barrier_counts))
    return Raw(f"if (tid == 0) {{{{ {inits} tl::fence_barrier_init(); }}}} __syncthreads();")


def _barrier_runs(stmts: list, merge: bool) -> list:
    """Each barrier Allocate followed by its initialisation; with `merge`, a run of consecutive barrier
    Allocates is followed by one initialisation of them all (one block-wide barrier, not one each)."""
    out, run = [], []
    for st in stmts + [None]:
        if isinstance(st, S.Allocate) and H.explicit_init(st.buffer):  # T.create_barriers: the program's own inits
            out.append(st)
            continue
        if isinstance(st, S.Allocate) and H.is_barrier(st.buffer):
            run.append(st)
            if merge:
                continue
        if run:
            out += [*run, barrier_init(*(a.buffer for a in run))]
            run = []
        if st is not None and not (isinstance(st, S.Allocate) and H.is_barrier(st.buffer)):
            out.append(st)
    return out


class _Rewrite(Mutator):
    def __init__(self, warn):
        self.warn = warn
        self.info = ManualWS()
        self.lo = 0  # first thread of the innermost enclosing scope
        self.threads = 1  # its thread count (the block's outside any scope)
        self.views: dict = {}  # storage uid -> 2-d window Buffer
        self.noted = False
        self.tma_stores = True
        self.merge_inits = True

    def top(self, body: S.Stmt) -> S.Stmt:
        self.body = body
        stmts = list(body.stmts if isinstance(body, S.SeqStmt) else (body,))
        stmts, serial = ring_loops(stmts)
        for loop, why in serial:
            self.warn(f"T.Pipelined(num_stages={loop.annotation('num_stages', 0)}) around T.ws (line "
                      f"{getattr(loop.span, 'line', '?')}) runs as a serial loop, its warp groups overlapping as far "
                      f"as the kernel's own barriers let them: no {loop.annotation('num_stages', 0)}-stage ring, as "
                      f"{why}")
            self.noted = True
        out = [st if isinstance(st, S.Allocate) and H.is_barrier(st.buffer) else self.visit(st)
               for st in stmts]
        out = _barrier_runs(out, self.merge_inits)
        self.info.views = list(self.views.values())
        allocs = [S.Allocate(v) for v in self.views.values()]
        at = max((i for i, st in enumerate(out) if isinstance(st, S.Allocate)), default=-1) + 1
        if collect(body, lambda n: isinstance(n, H.TmaStore)):  # no T.tma_copy store in flight at exit
            out.append(Raw("tl::tma_store_wait_all();"))
        return S.seq(*out[:at], *allocs, *out[at:])

    def visit_Allocate(self, s: S.Allocate):
        if H.is_barrier(s.buffer):
            raise LoweringError(f"T.alloc_barrier {s.buffer.name}: allocate barriers at the top level of the "
                                "kernel (all threads initialise them together)", s.span)
        return s

    def visit_WarpGroupScope(self, s: H.WarpGroupScope):
        n = s.hi - s.lo
        if s.unit == 1:  # lanes of one warp (transform/thread_scopes): tile ops over them, but no gemm
            gemm = collect(s.body, lambda x: isinstance(x, O.Gemm))
            if gemm:
                raise LoweringError(f"T.gemm in the branch on threads [{s.t_lo}, {s.t_hi}): a gemm needs whole warps "
                                    "(`if tx < 32`, `if tx >= 64 and tx < 128`)", gemm[0].span or s.span)
        elif s.lo % n and collect(s.body, lambda x: isinstance(x, O.Gemm)):
            # the gemm headers number warps modulo their count (a reduction's lowering counts from t_lo)
            what = f"T.ws({', '.join(str(g) for g in range(s.lo, s.hi))})" if s.unit == H.WARP_GROUP else \
                f"the branch on threads [{s.t_lo}, {s.t_hi})"
            raise LoweringError(f"{what}: a T.gemm over {n} {'warp groups' if s.unit == H.WARP_GROUP else 'warps'} "
                                f"must start at a multiple of {n}", s.span)
        outer, self.lo, self.threads = (self.lo, self.threads), s.t_lo, s.threads
        try:
            return replace(s, body=self.visit(s.body))
        finally:
            self.lo, self.threads = outer

    def visit_For(self, s: S.For):
        if s.kind == "pipelined" and collect(s.body, lambda n: isinstance(n, H.WarpGroupScope)):
            if not self.noted:
                self.noted = True
                self.warn(f"T.Pipelined(num_stages={s.annotation('num_stages', 0)}) around T.ws runs as a serial "
                          "loop: the warp groups overlap as far as the kernel's own barriers let them")
            s = replace(s, kind="serial", annotations=())
        return self.generic(s)

    # ------------------------------------------------------------ barriers
    def visit_BarrierArrive(self, op: H.BarrierArrive):
        if op.cta_id is not None:  # the barrier of cluster rank cta_id (mapa + a shared::cluster arrive)
            return Raw("tl::mbarrier_arrive_cluster({0}, (uint32_t)({1}));", (_addr(op.barrier, op.index), op.cta_id),
                       span=op.span)
        return Raw("tl::mbarrier_arrive({0});", (_addr(op.barrier, op.index),), span=op.span)

    def visit_BarrierWait(self, op: H.BarrierWait):
        return Raw("tl::mbarrier_wait({0}, {1});", (_addr(op.barrier, op.index), op.parity), span=op.span)

    def visit_BarrierExpectTx(self, op: H.BarrierExpectTx):
        fn = "mbarrier_arrive_expect_tx" if op.arrive else "mbarrier_expect_tx"
        return Raw(f"tl::{fn}({{0}}, {{1}});", (_addr(op.barrier, op.index), op.tx), span=op.span)

    def visit_BarrierInit(self, op: R.BarrierInit):
        return Raw("tl::mbarrier_init({0}, {1});", (_addr(op.barrier, op.index), op.count), span=op.span)

    def visit_TmaLoad(self, op: R.TmaLoad):
        """T.tma_load: one tensor map per distinct T.create_tma_descriptor, encoded at launch."""
        desc = next((d for d in self.info.descs if d.raw == op.desc), None)
        if desc is None:
            desc = TmaDesc(f"tmap_{len(self.info.descs)}", op.desc.buffer, op.desc.box[::-1], op.desc.swizzle,
                           raw=op.desc)
            self.info.descs.append(desc)
        coords = "".join(f", {{{2 + j}}}" for j in range(len(op.coords)))
        return Raw(f"tl::tma_load(&{desc.name}, {{0}}, {{1}}{coords});",
                   (_addr(op.barrier, op.index), op.dst, *op.coords), span=op.span)

    def visit_BulkCopy(self, op: R.BulkCopy):
        return Raw("tl::bulk_copy_g2s({0}, {1}, {2}, {3});", (op.dst, op.src, op.nbytes, _addr(op.barrier, op.index)),
                   span=op.span)

    def visit_RawWgmma(self, op: R.RawWgmma):
        """T.ptx_wgmma_ss / _rs: the header's tl::wgmma_ss / wgmma_rs (tl/wgmma.h) on the thread's registers."""
        t = {k: _CUDA_TYPES[getattr(op, k + "_type")] for k in "abc"}
        scales = f"{op.scale_a}, {op.scale_b}"
        if op.rs:
            return Raw(f"tl::wgmma_rs<{t['a']}, {t['b']}, {t['c']}, {op.n}, {str(not op.b_k_major).lower()}, {scales}>"
                       "(reinterpret_cast<const uint32_t*>({0}), {1}, {2}, {3});",
                       (op.a, op.b, op.d, op.scale_out), span=op.span)
        trans = f"{str(not op.a_k_major).lower()}, {str(not op.b_k_major).lower()}"
        return Raw(f"tl::wgmma_ss<{t['a']}, {t['b']}, {t['c']}, {op.n}, {trans}, {scales}>"
                   "({0}, {1}, {2}, {3});", (op.a, op.b, op.d, op.scale_out), span=op.span)

    def visit_FenceOperand(self, op: R.FenceOperand):
        t = "float" if op.is_float else "uint32_t"
        return Raw(f"tl::warpgroup_fence_operand<{op.count}>(reinterpret_cast<{t}*>({{0}}));", (op.ptr,), span=op.span)

    def visit_SetMaxNReg(self, op: H.SetMaxNReg):
        return Raw(f"tl::setmaxnreg_{'inc' if op.inc else 'dec'}<{op.count}>();", span=op.span)

    def visit_FenceProxyAsync(self, op: H.FenceProxyAsync):
        return Raw("tl::fence_proxy_async();", span=op.span)

    # ------------------------------------------------------------ staged tiles
    def window(self, r: BufferRegion, what: str, span):
        """(2-d region, prefix statements): `X[s, :, :]` of a 3-d shared tile -> a window onto stage s."""
        x = r.buffer
        if x.scope not in ("shared", "shared.dyn") or x.ndim != 3:
            return r, []
        whole = all(const_int(st) == 0 and const_int(e) == const_int(n)
                    for (st, e), n in zip(r.ranges[1:], x.shape[1:]))
        if const_int(r.extents[0]) != 1 or not whole:
            raise LoweringError(f"{what}: {x.name} is 3-d; use one whole stage of it, {x.name}[s, :, :]", span)
        v = self.views.get(x.uid)
        if v is None:
            v = Buffer(x.name + "_stage", x.shape[1:], x.dtype, "shared.dyn")
            v.view_of = x
            self.views[x.uid] = v
            if (v.numel() * x.dtype.bytes) % 1024:
                raise LoweringError(f"{what}: a stage of {x.name} is {v.numel() * x.dtype.bytes} bytes; TMA and "
                                    "wgmma tiles here need stages of a multiple of 1024 bytes", span)
        move = Raw(f"{v.name} = {x.name} + ({{0}}) * {v.numel()};", (r.starts[0],))
        return v.region(), [move]

    def visit_Gemm(self, op: O.Gemm):
        # a whole stage goes through a window (every gemm path takes it); other slices of a 3-d
        # tile are left to the wgmma lowering (lower_async.tile_pointer)
        a, pa = self.window(op.A, "T.gemm A", op.span) if self.whole_stage(op.A) else (op.A, [])
        b, pb = self.window(op.B, "T.gemm B", op.span) if self.whole_stage(op.B) else (op.B, [])
        if not pa and not pb:
            return op
        return S.seq(*pa, *pb, replace(op, A=a, B=b))

    @staticmethod
    def whole_stage(r: BufferRegion) -> bool:
        return r.buffer.ndim != 3 or all(const_int(st) == 0 and const_int(e) == const_int(n)
                                         for (st, e), n in zip(r.ranges[1:], r.buffer.shape[1:]))

    def bound_in_kernel(self, g: Buffer) -> bool:
        """Whether global tensor g is a view the kernel binds itself (T.make_tensor of a pointer, T.view):
        no tensor map can be encoded for it on the host before the launch."""
        return bool(collect(self.body, lambda n: isinstance(n, DeclBuffer) and n.buffer is g))

    def host_map(self, g: Buffer, what: str, span):
        if self.bound_in_kernel(g):
            raise LoweringError(f"{what}: {g.name} is a view bound inside the kernel (T.make_tensor, T.view); "
                                "a TMA tensor map is encoded on the host for a tensor parameter (pass it "
                                "as a T.Tensor, or use T.copy)", span)

    def visit_TmaCopy(self, op: H.TmaCopy):
        what = f"T.tma_copy {op.src.buffer.name} -> {op.dst.buffer.name}"
        run = self.bulk_run(op.src, op.dst)
        if run is not None:  # one contiguous run: a plain bulk copy, no tensor map
            # the tile named in the text: it keeps its own bytes (written asynchronously)
            text = (f"if ({self.leader(op.leader)}) {{{{ tl::mbarrier_expect_tx({{0}}, {run}); "
                    f"tl::bulk_copy_g2s({op.dst.buffer.name} + {{1}}, {{2}}, {run}, {{0}}); }}}}")
            return Raw(text, (_addr(op.barrier, op.index), _flat(op.dst), _first(op.src)), span=op.span)
        self.host_map(op.src.buffer, what, op.span)
        dst, pre = self.window(op.dst, "T.tma_copy", op.span)
        cp = O.Copy(op.src, dst)
        plan, why = tma_plan(cp)
        if plan is None:
            raise LoweringError(f"{what}: {why}", op.span)
        box, swz, panels = plan
        x = dst.buffer
        (self.info.panels if panels > 1 else self.info.swizzled).add(x.uid)
        desc = TmaDesc(f"tmap_{len(self.info.descs)}", op.src.buffer, box, swz)
        self.info.descs.append(desc)
        rows = const_int(x.shape[0])
        width = 64 if panels > 1 else const_int(x.shape[1])
        coords = [simplify(E.as_expr(c)) for c in reversed(op.src.starts)]  # innermost first
        args = [_addr(op.barrier, op.index)]
        loads = []
        for q in range(panels):
            c = [simplify(coords[0] + q * 64)] + coords[1:]
            first = len(args)
            args += [E.as_expr(q * rows * width)] + c
            loads.append(f"tl::tma_load(&{desc.name}, {{0}}, {x.name} + {{{first}}}"
                         + "".join(f", {{{first + 1 + j}}}" for j in range(len(c))) + ");")
        nbytes = x.numel() * x.dtype.bytes
        text = (f"if ({self.leader(op.leader)}) {{{{ tl::mbarrier_expect_tx({{0}}, {nbytes}); "
                + " ".join(loads) + " }}")
        return S.seq(*pre, Raw(text, tuple(args), span=op.span))

    def bulk_run(self, g: BufferRegion, t: BufferRegion) -> int | None:
        """Bytes of a copy between global region g and shared region t that are each one contiguous run
        which a TMA tensor map does not fit (a row longer than a box, a row of a taller tile, a view the
        kernel binds itself) and a plain bulk copy does: a multiple of 16 bytes at 16-byte aligned
        offsets, the tile in no TMA layout and no gemm operand (the copy writes its bytes in order)."""
        x = t.buffer
        if x.uid in self.info.swizzled or x.uid in self.info.panels or \
                collect(self.body, lambda n: isinstance(n, O.Gemm) and x in (n.A.buffer, n.B.buffer, n.C.buffer)):
            return None
        if x.ndim == 3 and self.whole_stage(t):
            return None  # one stage of a staged tile: a window onto it, the tensor-map path
        if not self.bound_in_kernel(g.buffer) and tma_plan(O.Copy(g, t))[0] is not None:
            return None  # a tile a tensor map moves: the tensor-map path
        n = _run(g)
        if n is None or n != _run(t) or (n * x.dtype.bytes) % 16:
            return None
        b = x.dtype.bytes
        if not all(is_multiple(simplify(_flat(r) * b), 16) for r in (g, t)):
            return None
        return n * b

    def leader(self, n) -> str:
        """The condition naming the issuing thread: the scope's first (n None), or the first of every n."""
        m = self.threads if n is None else n
        if self.lo % m == 0:
            return f"tl::tl_shuffle_elect<{m}>()"
        return f"tid == {self.lo}" if n is None else f"(tid - {self.lo}) % {n} == 0"

    def visit_TmaStore(self, op: H.TmaStore):
        """T.tma_copy(X, Out[..]): the tile's box(es) stored by one thread and committed, not waited for."""
        run = self.bulk_run(op.dst, op.src)
        if run is not None:  # one contiguous run: a plain bulk copy, no tensor map
            # the tile named in the text: it keeps its own bytes (read asynchronously)
            text = (f"if ({self.leader(op.leader)}) {{{{ tl::bulk_copy_s2g({{0}}, {op.src.buffer.name} + {{1}}, "
                    f"{run}); tl::tma_store_arrive(); }}}}")
            return Raw(text, (_first(op.dst), _flat(op.src)), reads=(op.src.buffer,), span=op.span)
        self.host_map(op.dst.buffer, f"T.tma_copy {op.src.buffer.name} -> {op.dst.buffer.name}", op.span)
        src, pre = self.window(op.src, "T.tma_copy", op.span)
        x, g = src.buffer, op.dst.buffer
        plan, why = tma_plan(O.Copy(op.dst, src))
        if plan is None:
            raise LoweringError(f"T.tma_copy {x.name} -> {g.name}: {why}", op.span)
        box, swz, panels = plan
        if x.ndim == 2:  # the tile takes TMA's layout for its box (as a T.tma_copy load target does)
            other = self.info.swizzled if panels > 1 else self.info.panels
            if x.uid in other:
                raise LoweringError(f"T.tma_copy {x.name} -> {g.name}: {x.name} is also copied with another TMA "
                                    "box layout (one tile, one layout)", op.span)
            (self.info.panels if panels > 1 else self.info.swizzled).add(x.uid)
        desc = next((d for d in self.info.descs if d.buffer is g and d.box == box and d.swizzle == swz
                     and d.raw is None), None)
        if desc is None:
            desc = TmaDesc(f"tmap_{len(self.info.descs)}", g, box, swz)
            self.info.descs.append(desc)
        rows = const_int(x.shape[0])
        coords = [simplify(E.as_expr(c)) for c in reversed(op.dst.starts)]  # innermost first
        args, stores = [], []
        for q in range(panels):
            c = [simplify(coords[0] + q * 64)] + coords[1:]
            first = len(args)
            args += [E.as_expr(q * rows * 64)] + c
            stores.append(f"tl::tma_store(&{desc.name}, {x.name} + {{{first}}}"
                          + "".join(f", {{{first + 1 + j}}}" for j in range(len(c))) + ");")
        text = f"if ({self.leader(op.leader)}) {{{{ " + " ".join(stores) + " tl::tma_store_arrive(); }}"
        return S.seq(*pre, Raw(text, tuple(args), reads=(x,), span=op.span))

    def visit_Copy(self, op: O.Copy):
        """T.copy(X[:, c0:c0 + W], Out[..]) of a tile in TMA's layout (a T.tma_copy target: 64-column
        128B-swizzled panels, or one swizzled box) to a global box: TMA stores issued by the scope's
        first thread, which waits until they have read the tile. The threads' element copy
        (a 16-byte shared load, an address and a global store per 8 elements) goes; thread_sync
        puts the barrier (and proxy_fences the fence) after the tile's writes before it.

            T.copy(O_s[:, 0:256], Out[b, s, 0:64, 0:256])   ->   if (tid == lo) { tma_store(&tmap_1,
                                                                   O_s + q * 4096, q * 64, 0, s, b) (q < 4);
                                                                   commit; wait until read }"""
        x, g = op.src.buffer, op.dst.buffer
        if not self.tma_stores or x.scope not in ("shared", "shared.dyn") or g.scope != "global" or x.ndim != 2:
            return op
        panel = x.uid in self.info.panels
        if not panel and x.uid not in self.info.swizzled or self.elsewhere(g, op) or self.bound_in_kernel(g):
            return op
        rows, width = (const_int(n) for n in x.shape)
        (r0, rn), (c0, cn) = ((const_int(a), const_int(b)) for a, b in zip(op.src.starts, op.src.extents))
        whole = r0 == 0 and rn == rows and (c0 == 0 and cn == width or panel and c0 % 64 == 0 and cn % 64 == 0)
        if None in (rows, width, r0, rn, c0, cn) or not whole:
            return op
        box_tile = Buffer(x.name + "_box", (rows, cn), x.dtype, "shared.dyn")
        plan, _ = tma_plan(O.Copy(op.dst, box_tile.region(), disable_tma=op.disable_tma))
        if plan is None or (plan[1], plan[2]) != ((128, cn // 64) if panel else (width * x.dtype.bytes, 1)):
            return op
        box, swz, _ = plan
        desc = next((d for d in self.info.descs if d.buffer is g and d.box == box and d.swizzle == swz), None)
        if desc is None:
            desc = TmaDesc(f"tmap_{len(self.info.descs)}", g, box, swz)
            self.info.descs.append(desc)
        coords = [simplify(E.as_expr(c)) for c in reversed(op.dst.starts)]  # innermost first
        args, stores = [], []
        for q in range(cn // 64 if panel else 1):
            c = [simplify(coords[0] + q * 64)] + coords[1:]
            first = len(args)
            args += [E.as_expr((c0 // 64 + q) * rows * 64 if panel else 0)] + c
            stores.append(f"tl::tma_store(&{desc.name}, {x.name} + {{{first}}}"
                          + "".join(f", {{{first + 1 + j}}}" for j in range(len(c))) + ");")
        text = (f"if (tid == {self.lo}) {{{{ " + " ".join(stores)
                + " tl::tma_store_commit(); tl::tma_store_wait<0>(); }}")
        return Raw(text, tuple(args), reads=(x,), span=op.span)

    def elsewhere(self, g: Buffer, op) -> bool:
        """Whether the kernel reads global tensor g, or writes it other than by copies of shared tiles
        (TMA stores land asynchronously: such an access would need them complete). Copies of other
        shared tiles into g (the other warp group's half of the output) may be TMA stores too."""
        def touches(n):
            if isinstance(n, (E.BufferLoad, S.BufferStore)):
                return n.buffer is g
            if isinstance(n, O.Copy) and n is not op:
                return n.src.buffer is g or n.dst.buffer is g and n.src.buffer.scope not in ("shared", "shared.dyn")
            return isinstance(n, (H.TmaCopy, H.TmaStore)) and (n.src.buffer is g or n.dst.buffer is g)
        return bool(collect(self.body, touches))
