"""The expert tier (op/hopper.py) on the CPU backend: warp groups run one after another.

The CPU backend runs a block on one thread, so the statements of every `T.ws` scope run in
program order, each tile op over the whole tile. That is the kernel's meaning only where the
user's barriers allow that order, so every barrier is simulated and checked:

- a barrier word holds `phase * 2^20 + arrivals` (0 after T.alloc_barrier);
- an arrive adds the arrivals of every thread that runs it (the scope's threads, or the
  block's outside any scope); reaching the barrier's count completes the phase; more arrivals
  than the count in one phase fail (hardware would spill them into the next phase);
- a wait for parity p passes when the current phase's parity is not p (the phase of parity p
  has completed); otherwise, under program order, nothing could ever complete it: the kernel
  fails like a T.device_assert, naming the wait, instead of computing with stale data;
- T.create_barriers' barriers keep their counts in a uint32 buffer beside the words, set by
  T.ptx_init_barrier_thread_count (an arrival on one not initialised fails);
- T.tma_load copies its box at once (cpu/tl_hopper.h: swizzled into the kernel's shared pool),
  T.ptx_cp_async_bulk is a memcpy; neither completes transaction bytes (expect_tx counts none);
- T.ptx_wgmma_ss / _rs compute each thread's accumulator elements from shared memory through the
  descriptors at once (the waits change nothing); T.warpgroup_fence_operand is nothing;
- T.tma_copy is an ordinary copy, a load or a store (its bytes are there at once); expect_tx,
  setmaxnreg and proxy fences change no values;
- T.wgmma_gemm is an ordinary gemm and T.wait_wgmma, T.ptx_commit_group, T.ptx_wait_group
  change nothing; T.ptx_cp_async copies its elements at once (along the last dimension of
  both buffers), zeros where its predicate is false; T.cp_async_barrier_noinc is an arrival.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer
from ..op import hopper as H
from ..op import hopper_raw as R
from ..op import tile_ops as O

PHASE = 1 << 20  # arrivals per phase stay below this


def count_buffer(buf) -> Buffer:
    """The arrival counts of T.create_barriers' barriers (set by T.ptx_init_barrier_thread_count),
    one uint32 per barrier beside the barrier words; made once per barrier buffer."""
    c = getattr(buf, "count_buffer", None)
    if c is None:
        c = Buffer(buf.name + "_count", buf.shape, dt.uint32, "shared.dyn")
        buf.count_buffer = c
    return c


def _count(buf, index) -> E.Expr:
    if H.explicit_init(buf):
        return E.cast(dt.uint64, E.BufferLoad(count_buffer(buf), (index,), dt.uint32))
    counts = buf.barrier_counts
    out = E.const(counts[-1], dt.uint64)
    for i in range(len(counts) - 2, -1, -1):  # a select chain when the counts differ
        if counts[i] != counts[-1]:
            out = E.select(E.compare("==", index, i), E.const(counts[i], dt.uint64), out)
    return out


def _word(buf, index) -> E.Expr:
    return E.BufferLoad(buf, (index,), buf.dtype)


def barrier_init(buf) -> S.Stmt:
    """After the barrier buffer's Allocate: every barrier at phase 0 with no arrivals (and, for
    T.create_barriers, a count buffer of zeros: not initialised)."""
    zero = [S.BufferStore(buf, (E.as_expr(i),), E.const(0, buf.dtype)) for i in range(len(buf.barrier_counts))]
    if H.explicit_init(buf):
        c = count_buffer(buf)
        zero = [S.Allocate(c)] + zero + [S.BufferStore(c, (E.as_expr(i),), E.const(0, c.dtype))
                                         for i in range(len(buf.barrier_counts))]
    return S.seq(*zero)


def init(op: R.BarrierInit) -> S.Stmt:
    """mbarrier.init: the count, and phase 0 with no arrivals."""
    c = count_buffer(op.barrier)
    return S.seq(S.BufferStore(c, (op.index,), E.cast(dt.uint32, op.count), span=op.span),
                 S.BufferStore(op.barrier, (op.index,), E.const(0, op.barrier.dtype), span=op.span))


def arrive(buf, index, threads: int, what: str, span=None) -> S.Stmt:
    w = _word(buf, index)
    arrived = E.binop("%", w, E.const(PHASE, dt.uint64)) + E.const(threads, dt.uint64)
    count = _count(buf, index)
    checks, fits = [], E.compare("<=", arrived, count)
    if H.explicit_init(buf):
        set_ = E.compare("!=", count, E.const(0, dt.uint64))
        checks.append(O.DeviceAssert(set_, f"{what} on {buf.name}: the barrier was not initialised "
                                           "(T.ptx_init_barrier_thread_count)", span=span))
        fits = E.logical_or(E.logical_not(set_), fits)  # one failure, one message
    check = O.DeviceAssert(fits,
                           f"{what} on {buf.name}: {threads} arrivals overrun the barrier's count in one phase "
                           "(CPU backend: warp groups run in program order)", span=span)
    done = E.compare("==", arrived, count)
    new = E.select(done, (E.binop("//", w, E.const(PHASE, dt.uint64)) + 1) * E.const(PHASE, dt.uint64),
                   w + E.const(threads, dt.uint64))
    return S.seq(*checks, check, S.BufferStore(buf, (index,), new, span=span))


def wait(op: H.BarrierWait) -> S.Stmt:
    phase = E.binop("//", _word(op.barrier, op.index), E.const(PHASE, dt.uint64))
    parity = E.cast(dt.uint64, E.binop("%", op.parity, 2))
    ok = E.compare("!=", E.binop("%", phase, E.const(2, dt.uint64)), parity)
    msg = (f"barrier wait on {op.barrier.name} would never complete under the CPU backend's model (a block's "
           "warp groups run one after another in program order); this kernel needs a GPU (cuda -arch=sm_90a)")
    return O.DeviceAssert(ok, msg, span=op.span)


class HopperCPU:
    """Mixin for LowerTileOpsCPU: the visit_* rules of the hopper ops (see the module docstring)."""

    threads_now = 0  # threads running the current statement (the scope's, or the block's)

    def visit_WarpGroupScope(self, s: H.WarpGroupScope):
        outer, self.threads_now = self.threads_now, s.threads
        try:
            return self.visit(s.body)
        finally:
            self.threads_now = outer

    def visit_BarrierArrive(self, op: H.BarrierArrive):
        return arrive(op.barrier, op.index, self.threads_now, "T.mbarrier_arrive", op.span)

    def visit_BarrierExpectTx(self, op: H.BarrierExpectTx):
        if not op.arrive:
            return S.seq()
        return arrive(op.barrier, op.index, self.threads_now, "T.mbarrier_arrive_expect_tx", op.span)

    def visit_BarrierWait(self, op: H.BarrierWait):
        return wait(op)

    def visit_TmaCopy(self, op: H.TmaCopy):
        return self.visit(O.Copy(op.src, op.dst, span=op.span))

    def visit_TmaStore(self, op: H.TmaStore):
        return self.visit(O.Copy(op.src, op.dst, span=op.span))

    def visit_BarrierInit(self, op: R.BarrierInit):
        return init(op)

    def visit_TmaLoad(self, op: R.TmaLoad):
        return tma_load(op)

    def visit_BulkCopy(self, op: R.BulkCopy):
        return S.Evaluate(E.Call("extern:memcpy", (op.dst, op.src, op.nbytes), dt.as_dtype("handle")), span=op.span)

    def visit_RawWgmma(self, op: R.RawWgmma):
        return raw_wgmma(op)

    def visit_FenceOperand(self, op):
        return S.seq()

    def visit_SetMaxNReg(self, op):
        return S.seq()

    def visit_FenceProxyAsync(self, op):
        return S.seq()

    def visit_WaitWgmma(self, op):
        return S.seq()

    def visit_CpAsyncCommit(self, op):
        return S.seq()

    def visit_CpAsyncWait(self, op):
        return S.seq()

    def visit_AsyncStep(self, op):
        return S.seq()

    def visit_CpAsyncBarrierArrive(self, op: H.CpAsyncBarrierArrive):
        if op.inc:  # the pending count goes up, then the copies' landing takes it back down
            return S.seq()
        return arrive(op.barrier, op.index, self.threads_now, "T.cp_async_barrier_noinc", op.span)

    def visit_CpAsync(self, op: H.CpAsync):
        return cp_async(op)


def cp_async(op: H.CpAsync) -> S.Stmt:
    d, s = op.dst.args[0], op.src.args[0]
    i = E.Var("cpi", dt.int32)

    def at(ld):
        idx = list(ld.indices)
        idx[-1] = idx[-1] + i
        return tuple(idx)

    val = E.BufferLoad(s.buffer, at(s), s.buffer.dtype)
    if op.predicate is not None:
        val = E.select(op.predicate, val, E.const(0, s.buffer.dtype))
    store = S.BufferStore(d.buffer, at(d), E.cast(d.buffer.dtype, val), span=op.span)
    return S.For(i, E.as_expr(0), op.num_elems, "serial", store, span=op.span)


def tma_load(op: R.TmaLoad) -> S.Stmt:
    """tl_cpu_tma_load (cpu/tl_hopper.h) over the kernel's shared pool; a misaligned swizzled box fails."""
    d = op.desc
    g = op.desc.buffer
    base = E.Call("address_of", (E.BufferLoad(g, tuple(E.as_expr(0) for _ in g.shape), g.dtype),), g.dtype)
    call = E.Call("tl_cpu_tma_load", (op.dst, base, E.as_expr(d.elem), E.as_expr(d.swizzle), E.as_expr(d.rank),
                                      *d.dims, *d.strides, *(E.as_expr(b) for b in d.box), *op.coords), dt.int32)
    return O.DeviceAssert(E.compare("==", call, E.as_expr(0)),
                          f"T.tma_load into a {d.swizzle}-byte swizzled box: the shared address is not a multiple "
                          f"of {8 * d.swizzle} bytes", span=op.span)


_KINDS = {"float16": 0, "bfloat16": 1, "float8_e4m3": 2, "float8_e5m2": 3, "int8": 4}
_ACC_KINDS = {"float32": 0, "float16": 1, "int32": 2}


def raw_wgmma(op: R.RawWgmma) -> S.Stmt:
    """tl_cpu_wgmma (cpu/tl_hopper.h) for the executing thread: its own accumulator elements, from
    shared memory through the descriptors (or A from the warp's registers: RS ran after every
    thread of the segment before it, transform/cpu_threads.py)."""
    zero = E.as_expr(0)
    a_bytes = dt.as_dtype(op.a_type).bytes
    args = (E.as_expr(op.n), E.as_expr(_KINDS[op.a_type]), E.as_expr(_KINDS[op.b_type]),
            E.as_expr(_ACC_KINDS[op.c_type]), E.as_expr(int(not op.a_k_major)), E.as_expr(int(not op.b_k_major)),
            E.as_expr(op.scale_a * op.scale_b), zero if op.rs else op.a, op.a if op.rs else zero,
            E.as_expr(op.a_regs_elems * a_bytes), op.b, op.d, E.binop("%", op.tid, 128), op.scale_out)
    call = E.Call("tl_cpu_wgmma", args, dt.int32)
    return O.DeviceAssert(E.compare("==", call, zero),
                          "T.ptx_wgmma: a descriptor with a base offset, or an operand outside the kernel's shared "
                          "memory (CPU backend)", span=op.span)
