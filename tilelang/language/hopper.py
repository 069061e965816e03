"""The expert tier: warp groups by hand (`T.ws`), mbarriers, TMA copies, register budgets.

Thin wrappers: each checks its arguments and appends an `op/hopper.py` node. Lowering:
`transform/cuda/manual_ws.py` (sm_90a) and `transform/lower_tile_ops_cpu.py` (the CPU backend
runs a block's warp groups one after another in program order and checks every barrier wait).

Example (a producer warp group feeding a consumer through two barriers)::

    data_is_ready = T.alloc_barrier(arrive_count=128)
    compute_is_done = T.alloc_barrier(arrive_count=128)
    for ko in range(T.ceildiv(K, block_K)):
        with T.ws(1):
            T.barrier_wait(compute_is_done, (ko + 1) % 2)
            T.tma_copy(A[by * block_M, ko * block_K], A_shared, barrier=data_is_ready)
            T.barrier_arrive(data_is_ready)
        with T.ws(0):
            T.barrier_wait(data_is_ready, ko % 2)
            T.gemm(A_shared, B_shared, C_local)
            T.barrier_arrive(compute_is_done)
"""
from __future__ import annotations

from dataclasses import dataclass

from ..arith.simplify import const_int
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir.buffer import Buffer
from ..ir.expr import BufferLoad, Call, Expr, as_expr
from ..op import hopper as H
from ..op.regions import is_tile_arg, pair_regions
from .tile import GemmWarpPolicy


@dataclass(frozen=True)
class WarpGroups:
    """What `T.ws(...)` returns; `with` it opens a WarpGroupScope (see frontend/parser.py)."""

    lo: int
    hi: int


def ws(*warp_group_idx) -> WarpGroups:
    """`with T.ws(g):` runs its body on warp group g only: threads [128 g, 128 (g + 1)).

    Several consecutive groups: `T.ws(0, 1)` is threads [0, 256). Tile ops inside (T.gemm,
    T.copy, T.clear ...) are block-level over those threads only.
    """
    k = B.in_kernel("T.ws")
    groups = sorted({_const(g, "T.ws", "warp group index") for g in warp_group_idx})
    if not groups:
        raise DSLTypeError("T.ws: give at least one warp group index, e.g. `with T.ws(0):`")
    if groups != list(range(groups[0], groups[-1] + 1)):
        raise DSLTypeError(f"T.ws{tuple(groups)}: only consecutive warp groups are supported here")
    threads = k.threads[0] * k.threads[1] * k.threads[2]
    if groups[0] < 0 or (groups[-1] + 1) * H.WARP_GROUP > threads:
        raise DSLTypeError(f"T.ws{tuple(groups)}: the block has {threads} threads, "
                           f"{threads // H.WARP_GROUP} whole warp groups of {H.WARP_GROUP}")
    return WarpGroups(groups[0], groups[-1] + 1)


WarpSpecialize = ws


def _const(v, what, name) -> int:
    c = const_int(v)
    if c is None:
        raise DSLTypeError(f"{what}: the {name} must be a compile-time integer, got {v!r}")
    return c


def barrier_ref(mbarrier, what):
    """(buffer, index) of `mbars[i]`, a one-barrier buffer, or an integer barrier id: barrier i of
    the kernel's T.create_barriers(n) (the public TileLang's TIR intrinsics name barriers by id)."""
    if isinstance(mbarrier, BufferLoad) and H.is_barrier(mbarrier.buffer):
        return mbarrier.buffer, mbarrier.indices[0]
    if H.is_barrier(mbarrier):
        return mbarrier, as_expr(0)
    if isinstance(mbarrier, int) and not isinstance(mbarrier, bool) or \
            isinstance(mbarrier, Expr) and mbarrier.dtype.is_int():
        ids = B.in_kernel(what).barriers
        if ids is None:
            raise DSLTypeError(f"{what}: barrier id {mbarrier} names a barrier of T.create_barriers(n), and this "
                               "kernel has not called it (or pass a barrier from T.alloc_barrier)")
        i = const_int(mbarrier)
        if i is not None and not 0 <= i < ids.shape[0]:
            raise DSLTypeError(f"{what}: barrier id {i} is out of range: T.create_barriers({ids.shape[0]}) made "
                               f"ids 0 .. {ids.shape[0] - 1}")
        return ids, as_expr(mbarrier)
    raise DSLTypeError(f"{what}: expected a barrier from T.alloc_barrier (or one element mbars[i]), or a "
                       f"T.create_barriers id, got {mbarrier!r}")


def mbarrier_wait_parity(mbarrier, parity):
    """Wait until the phase of `mbarrier` with parity `parity` (0 or 1) has completed."""
    B.in_kernel("T.mbarrier_wait_parity")
    buf, i = barrier_ref(mbarrier, "T.mbarrier_wait_parity")
    B.current().emit(H.BarrierWait(buf, i, as_expr(parity)))


def mbarrier_arrive(mbarrier, cta_id=None):
    """One arrival on `mbarrier` per thread that runs it. With `cta_id`, the arrival lands on the
    barrier of the cluster's block of that rank (T.block_rank_in_cluster), a barrier from
    T.alloc_cluster_barrier (CUDA sm_90; the CPU backend does not run such arrivals)."""
    B.in_kernel("T.mbarrier_arrive")
    buf, i = barrier_ref(mbarrier, "T.mbarrier_arrive")
    if cta_id is not None and not getattr(buf, "cluster_barrier", False):
        raise DSLTypeError(f"T.mbarrier_arrive(mbar, cta_id): arriving on another block's barrier needs a barrier "
                           f"from T.alloc_cluster_barrier, got {buf.name} (T.alloc_barrier)")
    B.current().emit(H.BarrierArrive(buf, i, cta_id=None if cta_id is None else as_expr(cta_id)))


def mbarrier_expect_tx(mbarrier, tx):
    """Add `tx` bytes the barrier's current phase also waits for (no arrival)."""
    B.in_kernel("T.mbarrier_expect_tx")
    buf, i = barrier_ref(mbarrier, "T.mbarrier_expect_tx")
    B.current().emit(H.BarrierExpectTx(buf, i, as_expr(tx), False))


def mbarrier_arrive_expect_tx(mbarrier, tx):
    """One arrival plus `tx` expected bytes on the barrier's current phase."""
    B.in_kernel("T.mbarrier_arrive_expect_tx")
    buf, i = barrier_ref(mbarrier, "T.mbarrier_arrive_expect_tx")
    B.current().emit(H.BarrierExpectTx(buf, i, as_expr(tx), True))


def barrier_wait(mbarrier, parity):
    """`T.mbarrier_wait_parity(mbarrier, parity)`."""
    mbarrier_wait_parity(mbarrier, parity)


def barrier_arrive(mbarrier):
    """`T.mbarrier_arrive(mbarrier)`."""
    mbarrier_arrive(mbarrier)


def tma_copy(src, dst, *, barrier=None, cluster_mask=None, leader_scope_threads=None, eviction_policy=None,
             annotations=None):
    """A tile copy through TMA, issued by one thread, that the program synchronises itself.

    Load (global -> shared): the bytes complete on `barrier`; the caller arrives on and waits
    for it, e.g. `T.tma_copy(A[by * 128, ko * 64], A_s, barrier=full); T.barrier_arrive(full)`
    then `T.barrier_wait(full, ko % 2)` where A_s is read.
    Store (shared -> global, no barrier): the store is issued and committed as one bulk group,
    not waited for: `T.tma_copy(C_s, C[by * 128, bx * 128]); T.tma_store_wait()` before C_s is
    written again (the kernel's exit waits for stores still in flight).
    leader_scope_threads=n (a multiple of 32): one thread of every n issues its own copy (e.g. 32:
    each warp copies the region its own indices name); default: one thread of the whole scope.
    """
    B.in_kernel("T.tma_copy")
    for name, x in (("src", src), ("dst", dst)):
        if not is_tile_arg(x):
            raise DSLTypeError(f"T.tma_copy {name}: expected a buffer, slice or corner, got {x!r}")
    s, d = pair_regions(src, dst, "T.tma_copy")
    smem = ("shared", "shared.dyn")
    load = s.buffer.scope == "global" and d.buffer.scope in smem
    store = s.buffer.scope in smem and d.buffer.scope == "global"
    if not (load or store):
        raise DSLTypeError(f"T.tma_copy {s.buffer.name} ({s.buffer.scope}) -> {d.buffer.name} ({d.buffer.scope}): "
                           "TMA copies global -> shared (a load) or shared -> global (a store)")
    if cluster_mask is not None:
        raise NotImplementedError("T.tma_copy(cluster_mask=...): multicast to the blocks of a thread-block cluster "
                                  "is not supported yet (no cluster launches here)")
    if eviction_policy is not None:
        raise NotImplementedError(f"T.tma_copy(eviction_policy={eviction_policy!r}): L2 cache eviction hints on TMA "
                                  "copies are not supported yet")
    if annotations is not None:
        raise NotImplementedError("T.tma_copy(annotations=...): copy annotations are not supported yet")
    leader = None
    if leader_scope_threads is not None:
        leader = const_int(leader_scope_threads)
        if leader is None or isinstance(leader_scope_threads, bool) or leader <= 0 or leader % 32:
            raise DSLTypeError("T.tma_copy: leader_scope_threads must be a positive multiple of the warp size (32), "
                               f"got {leader_scope_threads!r}")
    if store:
        if barrier is not None:
            raise DSLTypeError(f"T.tma_copy {s.buffer.name} -> {d.buffer.name}: a TMA store completes through "
                               "T.tma_store_wait, not a barrier; drop barrier=")
        B.current().emit(H.TmaStore(s, d, leader=leader))
        return
    if barrier is None:
        raise DSLTypeError("T.tma_copy: a load needs barrier= (from T.alloc_barrier) to complete on")
    buf, i = barrier_ref(barrier, "T.tma_copy barrier=")
    B.current().emit(H.TmaCopy(s, d, buf, i, leader=leader))


def fence_proxy_async():
    """Order this thread's earlier shared-memory accesses before later async-proxy ones (TMA, wgmma)."""
    B.in_kernel("T.fence_proxy_async")
    B.current().emit(H.FenceProxyAsync())


def set_max_nreg(reg_count, is_inc):
    """setmaxnreg: the executing warp group's register budget becomes `reg_count` (24..256, a
    multiple of 8); is_inc 1 raises it, 0 lowers it. Run it in a whole warp group (`T.ws`)."""
    B.in_kernel("T.set_max_nreg")
    n = _const(reg_count, "T.set_max_nreg", "register count")
    if not (24 <= n <= 256 and n % 8 == 0):
        raise DSLTypeError(f"T.set_max_nreg: reg_count must be a multiple of 8 in [24, 256], got {n}")
    B.current().emit(H.SetMaxNReg(n, bool(_const(is_inc, "T.set_max_nreg", "is_inc"))))


def inc_max_nreg(reg_count):
    set_max_nreg(reg_count, 1)


def dec_max_nreg(reg_count):
    set_max_nreg(reg_count, 0)


# ---------------------------------------------------------------- async wgmma (issue, then wait)
def wgmma_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square, clear_accum=False,
               annotations=None):
    """C += A @ B on Hopper wgmma, issued without waiting (T.gemm's arguments).

    The accumulator C must not be read, and A / B not overwritten, until `T.wait_wgmma(n)`
    leaves at most n later batches in flight. Compilation fails where this gemm cannot use
    wgmma (a target below sm_90a, or operands wgmma cannot take) instead of falling back.
    """
    from ..frontend.builder import in_kernel
    from .tile import gemm

    in_kernel("T.wgmma_gemm")
    gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum, wg_wait=-1)


def wait_wgmma(id):
    """Wait until at most `id` committed T.wgmma_gemm batches of this warp group are in flight."""
    B.in_kernel("T.wait_wgmma")
    n = _const(id, "T.wait_wgmma", "batch count")
    if not 0 <= n <= 7:
        raise DSLTypeError(f"T.wait_wgmma: the count of batches left in flight must be in [0, 7], got {n}")
    B.current().emit(H.WaitWgmma(n))


# ---------------------------------------------------------------- per-thread cp.async
def _pointer(p, what):
    """`T.access_ptr(X[...])` (an address_of call) or an element X[...] -> address_of(element)."""
    if isinstance(p, Call) and p.op == "address_of" and isinstance(p.args[0], BufferLoad):
        return p
    if isinstance(p, BufferLoad):
        return Call("address_of", (p,), p.buffer.dtype)
    raise DSLTypeError(f"{what}: expected T.access_ptr(buffer[...], ...) or a buffer element, got {p!r}")


def ptx_cp_async(dst_access_ptr, src_access_ptr, num_elems, predicate=None):
    """This thread copies `num_elems` elements global -> shared with cp.async (4, 8 or 16 bytes),
    without waiting: complete it with T.ptx_commit_group / T.ptx_wait_group, or with
    T.cp_async_barrier_noinc(barrier) and a barrier wait. With `predicate` false the destination
    is zero-filled instead. Example::

        T.ptx_cp_async(T.access_ptr(K_s[r, c], "w", 8), T.access_ptr(K[row, c], "r", 8), 8)
    """
    B.in_kernel("T.ptx_cp_async")
    dst = _pointer(dst_access_ptr, "T.ptx_cp_async dst")
    src = _pointer(src_access_ptr, "T.ptx_cp_async src")
    db, sb = dst.args[0].buffer, src.args[0].buffer
    if db.scope not in ("shared", "shared.dyn") or sb.scope != "global":
        raise DSLTypeError(f"T.ptx_cp_async: copies global -> shared; got {sb.name} ({sb.scope}) -> "
                           f"{db.name} ({db.scope})")
    if db.dtype.bytes != sb.dtype.bytes:
        raise DSLTypeError(f"T.ptx_cp_async: {sb.name} ({sb.dtype}) and {db.name} ({db.dtype}) have different "
                           "element sizes")
    n = const_int(num_elems)
    if n is not None and n * db.dtype.bytes not in (4, 8, 16):
        raise DSLTypeError(f"T.ptx_cp_async: {n} x {db.dtype} is {n * db.dtype.bytes} bytes; cp.async copies "
                           "4, 8 or 16 bytes")
    if n is None:
        raise DSLTypeError("T.ptx_cp_async: num_elems must be a compile-time integer")
    pred = None if predicate is None else as_expr(predicate)
    B.current().emit(H.CpAsync(dst, src, as_expr(n), pred))


def cp_async_barrier_noinc(barrier):
    """One arrival of this thread on `barrier`, made once its earlier cp.async copies have landed
    (cp.async.mbarrier.arrive.noinc: the arrival counts against the barrier's arrive_count)."""
    B.in_kernel("T.cp_async_barrier_noinc")
    buf, i = barrier_ref(barrier, "T.cp_async_barrier_noinc")
    B.current().emit(H.CpAsyncBarrierArrive(buf, i))


def ptx_commit_group():
    """cp.async.commit_group: this thread's uncommitted cp.async copies form one group."""
    B.in_kernel("T.ptx_commit_group")
    B.current().emit(H.CpAsyncCommit())


def ptx_wait_group(num):
    """cp.async.wait_group: wait until at most `num` of this thread's committed groups are pending."""
    B.in_kernel("T.ptx_wait_group")
    n = _const(num, "T.ptx_wait_group", "group count")
    if n < 0:
        raise DSLTypeError(f"T.ptx_wait_group: the count must be >= 0, got {n}")
    B.current().emit(H.CpAsyncWait(n))


# ---------------------------------------------------------------- raw names (the public TIR intrinsics)
def ptx_arrive_barrier(barrier_id):
    """mbarrier.arrive: `T.mbarrier_arrive(barrier_id)` (a barrier from T.alloc_barrier, or mbars[i])."""
    mbarrier_arrive(barrier_id)


def ptx_arrive_barrier_expect_tx(barrier_id, byte_count):
    """mbarrier.arrive.expect_tx: `T.mbarrier_arrive_expect_tx(barrier_id, byte_count)`."""
    mbarrier_arrive_expect_tx(barrier_id, byte_count)


def ptx_wait_barrier(barrier_id):
    """mbarrier.try_wait on parity 0, looping until it passes: `T.mbarrier_wait_parity(barrier_id, 0)`
    (the first phase of the barrier; later phases need T.mbarrier_wait_parity)."""
    mbarrier_wait_parity(barrier_id, 0)


def ptx_cp_async_barrier(barrier_id):
    """cp.async.mbarrier.arrive (without .noinc): the barrier's current phase also waits for this
    thread's earlier cp.async copies; the thread's arrival is not counted against arrive_count
    (for that, T.cp_async_barrier_noinc)."""
    B.in_kernel("T.ptx_cp_async_barrier")
    buf, i = barrier_ref(barrier_id, "T.ptx_cp_async_barrier")
    B.current().emit(H.CpAsyncBarrierArrive(buf, i, inc=True))


def _step(name, kind, count=0):
    B.in_kernel(name)
    B.current().emit(H.AsyncStep(kind, count))


def _count(v, name):
    n = _const(v, name, "group count")
    if n < 0:
        raise DSLTypeError(f"{name}: the count must be >= 0, got {n}")
    return n


def ptx_fence_barrier_init():
    """fence.mbarrier_init.release.cluster: earlier barrier initialisations become visible (sm_90).
    T.alloc_barrier's own initialisation is fenced already; this is for programs that spell it out."""
    _step("T.ptx_fence_barrier_init", "fence_barrier_init")


def tma_store_arrive():
    """cp.async.bulk.commit_group: this thread's uncommitted TMA stores form one group (sm_90)."""
    _step("T.tma_store_arrive", "bulk_commit")


def tma_store_wait(count=0, read=True):
    """cp.async.bulk.wait_group[.read] count: wait until at most `count` of this thread's TMA store
    groups are in flight; with `read` (the default) only until they have read shared memory (sm_90)."""
    n = _count(count, "T.tma_store_wait")
    if not isinstance(read, bool):
        read = bool(_const(read, "T.tma_store_wait", "read flag"))
    _step("T.tma_store_wait", "bulk_wait_read" if read else "bulk_wait", n)


def warpgroup_arrive():
    """wgmma.fence: register and shared-memory writes before it are seen by the wgmma after it (sm_90a)."""
    _step("T.warpgroup_arrive", "wgmma_fence")


def warpgroup_commit_batch():
    """wgmma.commit_group: this warp group's uncommitted wgmma ops form one batch (sm_90a)."""
    _step("T.warpgroup_commit_batch", "wgmma_commit")


def warpgroup_wait(num_mma):
    """wgmma.wait_group num_mma: `T.wait_wgmma(num_mma)` (at most that many batches left in flight)."""
    wait_wgmma(num_mma)


# ---------------------------------------------------------------- register budgets of a specialized block
def annotate_producer_reg_dealloc(reg_count=24):
    """The producer warp group gives registers back: `T.dec_max_nreg(reg_count)` (default 24)."""
    set_max_nreg(reg_count, 0)


def annotate_consumer_reg_alloc(reg_count=240):
    """The consumer warp groups take more registers: `T.inc_max_nreg(reg_count)` (default 240)."""
    set_max_nreg(reg_count, 1)
