"""thread_sync: a __syncthreads() exactly where block-level statements race on shared memory.

Small hand-built programs pin the placement; lowered kernels are checked by an independent
race finder that walks every path (loops run 0, 1 and 2 times, each branch of an if): no
path may have a write and a later access (or a read and a later write) of one shared buffer
without a barrier between them, and every inserted barrier must be needed on some path.
"""
import dataclasses

import pytest

import tilelang.language as T
from tilelang import dtypes as dt
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.buffer import Buffer
from tilelang.ir.visitor import collect
from tilelang.transform.cuda.lower_tile_ops import Raw, lower_kernel
from tilelang.transform.cuda.thread_sync import insert_syncs

SHARED = ("shared", "shared.dyn")
tid = E.Var("tid", dt.int32)

# ----------------------------------------------------------------------------- hand-built IR


def shared(name):
    return Buffer(name, (128,), "float32", "shared.dyn")


def local(name):
    return Buffer(name, (4,), "float32", "local")


def write(buf, value=1.0):
    return S.BufferStore(buf, (tid,), E.as_expr(value, dt.float32))


def other(buf):
    """buf[tid + 1]: another thread's element, the read a barrier must order."""
    return E.BufferLoad(buf, ((tid + 1) % 128,), buf.dtype)


def read(buf, into=None):
    into = into if into is not None else local("r")
    return S.BufferStore(into, (E.as_expr(0),), other(buf))


def loop(*body, n=4):
    return S.For(E.Var("ko", dt.int32), E.as_expr(0), E.as_expr(n), "serial", S.seq(*body))


def is_barrier(st) -> bool:
    return isinstance(st, Raw) and "__syncthreads()" in st.fmt


def shape(st, names):
    """Nested, readable form of a statement: names[id] for leaves, '|' for a barrier."""
    if isinstance(st, S.SeqStmt):
        return [shape(s, names) for s in st.stmts]
    if is_barrier(st):
        return "|"
    if isinstance(st, S.For) and not st.annotation("tl.thread_loop", False):
        return {"for": _flat(shape(st.body, names))}
    if isinstance(st, S.While):
        return {"while": _flat(shape(st.body, names))}
    if isinstance(st, S.IfThenElse):
        out = {"then": _flat(shape(st.then_case, names))}
        if st.else_case is not None:
            out["else"] = _flat(shape(st.else_case, names))
        return {"if": out}
    return names.get(id(st), type(st).__name__)


def _flat(x):
    return x if isinstance(x, list) else [x]


def synced(*stmts, **names):
    """insert_syncs over stmts; leaves are printed by the keyword names they were given."""
    ids = {}
    for name, st in names.items():
        ids[id(st)] = name
    return _flat(shape(insert_syncs(S.seq(*stmts)), ids))


A, B = shared("A_s"), shared("B_s")


@pytest.mark.parametrize("first,second,barrier", [
    ("write A", "read A", True),    # RAW
    ("write A", "write A", True),   # WAW: the later value must win in every thread's view
    ("read A", "write A", True),    # WAR: readers finish before the overwrite
    ("read A", "read A", False),
    ("write A", "read B", False),   # disjoint shared buffers
    ("write A", "write B", False),
    ("read A", "write B", False),
])
def test_barrier_exactly_between_conflicting_shared_accesses(first, second, barrier):
    def make(what):
        op, name = what.split()
        buf = A if name == "A" else B
        return write(buf) if op == "write" else read(buf)

    s1, s2 = make(first), make(second)
    assert synced(s1, s2, s1=s1, s2=s2) == (["s1", "|", "s2"] if barrier else ["s1", "s2"])


def test_no_barrier_between_register_only_statements():
    r1, r2 = local("x"), local("y")
    a = S.BufferStore(r1, (E.as_expr(0),), E.as_expr(2.0, dt.float32))
    b = S.BufferStore(r2, (E.as_expr(0),), E.BufferLoad(r1, (E.as_expr(0),), dt.float32) * 2.0)
    c = S.BufferStore(r1, (E.as_expr(1),), E.BufferLoad(r2, (E.as_expr(0),), dt.float32))
    assert synced(a, b, c, a=a, b=b, c=c) == ["a", "b", "c"]


def test_barrier_goes_right_before_the_conflicting_read_not_before_register_work():
    w, r = write(A), read(A)
    x = S.BufferStore(local("x"), (E.as_expr(0),), E.as_expr(1.0, dt.float32))
    y = read(B)
    assert synced(w, x, y, r, w=w, x=x, y=y, r=r) == ["w", "x", "y", "|", "r"]


def test_one_barrier_serves_every_pending_conflict():
    wa, wb, ra, rb = write(A), write(B), read(A), read(B)
    assert synced(wa, wb, ra, rb, wa=wa, wb=wb, ra=ra, rb=rb) == ["wa", "wb", "|", "ra", "rb"]


def test_loop_end_barrier_when_the_next_iteration_races():
    r, w = read(A), write(A)
    # iteration ko+1 reads A while a slow thread may still write it in iteration ko
    assert synced(loop(r, w), r=r, w=w) == [{"for": ["r", "|", "w", "|"]}]


def test_no_barrier_in_a_loop_that_only_reads_or_touches_disjoint_buffers():
    ra, rb = read(A), read(B)
    assert synced(loop(ra, rb), ra=ra, rb=rb) == [{"for": ["ra", "rb"]}]


def test_loop_that_may_run_zero_times_keeps_the_earlier_write_pending():
    w, wb, rb, r = write(A), write(B), read(B), read(A)
    got = synced(w, loop(wb, rb), r, w=w, wb=wb, rb=rb, r=r)
    assert got == ["w", {"for": ["wb", "|", "rb", "|"]}, "|", "r"]


def test_write_inside_an_if_orders_the_read_after_it():
    w, r = write(A), read(A)
    branch = S.IfThenElse(E.binop("<", tid, 32), w)
    assert synced(branch, r, w=w, r=r) == [{"if": {"then": ["w"]}}, "|", "r"]


def test_if_condition_reading_shared_memory_waits_for_the_write():
    w, x = write(A), S.BufferStore(local("x"), (E.as_expr(0),), E.as_expr(1.0, dt.float32))
    branch = S.IfThenElse(E.binop(">", other(A), E.as_expr(0.0, dt.float32)), x)
    assert synced(w, branch, w=w, x=x) == ["w", "|", {"if": {"then": ["x"]}}]


def test_raw_statements_declare_their_shared_accesses():
    w = Raw("tl::copy_vec16({0}, {1}, true);", (), reads=(), writes=(A,))
    r = Raw("tl::gemm_ss<...>({0}, {1}, {2});", (), reads=(A, B))
    g = Raw("tl::cp_async_zfill<16>({0}, {1}, true);", ())  # async: completion is the pipeline's business
    assert synced(w, r, g, w=w, r=r, g=g) == ["w", "|", "r", "g"]


def test_atomic_on_shared_memory_is_a_write():
    at = S.Evaluate(E.Call("atomic_add", (E.BufferLoad(A, ((tid + 1) % 128,), dt.float32), E.as_expr(1.0, dt.float32)),
                           dt.float32))
    r = read(A)
    assert synced(at, r, at=at, r=r) == ["at", "|", "r"]


def test_while_condition_reading_shared_memory_waits_for_the_write():
    w, x = write(A), S.BufferStore(local("x"), (E.as_expr(0),), E.as_expr(1.0, dt.float32))
    cond = E.binop("<", other(A), E.as_expr(4.0, dt.float32))
    assert synced(w, S.While(cond, x), w=w, x=x) == ["w", "|", {"while": ["x"]}]


def test_barrier_for_a_write_before_a_read_only_loop_runs_once():
    w, r = write(A), read(A)
    assert synced(w, loop(r), w=w, r=r) == ["w", "|", {"for": ["r"]}]


# ----------------------------------------------------------------------------- race finder


def _accesses(st):
    """(reads, writes) of shared buffers by one block-level statement, from its IR alone."""
    reads, writes = set(), set()
    addressed = {id(c.args[0]) for c in collect(st, lambda n: isinstance(n, E.Call) and n.op == "address_of")}
    for n in collect(st, lambda x: isinstance(x, (E.BufferLoad, S.BufferStore, Raw, E.Call))):
        if isinstance(n, Raw):
            reads |= {b.uid for b in n.reads if b.scope in SHARED}
            writes |= {b.uid for b in n.writes if b.scope in SHARED}
        elif isinstance(n, E.Call) and n.op.startswith("atomic_") and isinstance(n.args[0], E.BufferLoad):
            if n.args[0].buffer.scope in SHARED:
                writes.add(n.args[0].buffer.uid)  # read-modify-write
        elif isinstance(n, S.BufferStore) and n.buffer.scope in SHARED:
            writes.add(n.buffer.uid)
        elif isinstance(n, E.BufferLoad) and n.buffer.scope in SHARED and id(n) not in addressed:
            reads.add(n.buffer.uid)
    return frozenset(reads), frozenset(writes)


BAR = "bar"


def paths(st, cap=20000) -> set:
    """Every sequence of accesses / barriers the block can execute (loops 0-2 trips)."""
    def cat(xs, ys):
        out = {a + b for a in xs for b in ys}
        assert len(out) <= cap, "too many paths for the race finder"
        return out

    if isinstance(st, S.SeqStmt):
        out = {()}
        for s in st.stmts:
            out = cat(out, paths(s, cap))
        return out
    if is_barrier(st):
        return {(BAR,)}
    if isinstance(st, S.For) and not st.annotation("tl.thread_loop", False):
        body = paths(st.body, cap)
        head = {((_accesses(S.Evaluate(st.extent))),)}
        return cat(head, {()} | body | cat(body, body))
    if isinstance(st, S.While):
        c = {(_accesses(S.Evaluate(st.cond)),)}
        once = cat(cat(c, paths(st.body, cap)), c)
        return c | once | cat(once, cat(paths(st.body, cap), c))
    if isinstance(st, S.IfThenElse):
        c = {(_accesses(S.Evaluate(st.cond)),)}
        other_ = paths(st.else_case, cap) if st.else_case is not None else {()}
        return cat(c, paths(st.then_case, cap) | other_)
    if type(st).__name__ == "WSSplit":
        return paths(st.consumer, cap)
    return {(_accesses(st),)}


def races(st) -> list:
    """One line per racing path: which buffer, and the two accesses with no barrier between."""
    names = {b.uid: b.name for b in collect(st, lambda n: isinstance(n, Buffer))}
    names.update({n.buffer.uid: n.buffer.name for n in collect(st, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore)))})
    found = set()
    for p in paths(st):
        r_, w_ = set(), set()
        for ev in p:
            if ev == BAR:
                r_, w_ = set(), set()
                continue
            reads, writes = ev
            for kind, us in (("write then read", w_ & reads), ("write then write", w_ & writes),
                             ("read then write", r_ & writes)):
                found |= {f"{names.get(u, u)}: {kind}" for u in us}
            r_ |= reads
            w_ |= writes
    return sorted(found)


def without(st, target):
    """st with the statement `target` (by identity) removed."""
    if isinstance(st, S.SeqStmt):
        return S.SeqStmt(tuple(without(s, target) for s in st.stmts if s is not target))
    if isinstance(st, S.For):
        return dataclasses.replace(st, body=without(st.body, target))
    if isinstance(st, S.While):
        return dataclasses.replace(st, body=without(st.body, target))
    if isinstance(st, S.IfThenElse):
        return dataclasses.replace(st, then_case=without(st.then_case, target),
                                   else_case=None if st.else_case is None else without(st.else_case, target))
    return st


def lowered(func, arch="sm_80", helpers=None):
    """(body before thread_sync, after): lower_cuda's steps on an unpipelined kernel."""
    k = helpers.tile_kernel(func, arch)
    new, _ = lower_kernel(k, [].append, 90 if arch.startswith("sm_9") else 80)
    return new.body, insert_syncs(new.body)


def assert_barriers_exact(before, after):
    left = races(after)
    assert not left, f"races left after thread_sync: {left}"
    old = {id(b) for b in collect(before, is_barrier)}
    added = [b for b in collect(after, is_barrier) if id(b) not in old]
    for b in added:
        assert races(without(after, b)), "a barrier no path needs"
    return added


@T.prim_func
def _tiles(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S1 = T.alloc_shared((64, 64), "float32")
        S2 = T.alloc_shared((64, 64), "float32")
        R = T.alloc_fragment((64, 64), "float32")
        Q = T.alloc_fragment((64, 64), "float32")
        T.copy(A, S1)
        T.copy(A, S2)
        for i, j in T.Parallel(64, 64):
            R[i, j] = S1[j, i]              # needs both copies done: one barrier
        for i, j in T.Parallel(64, 64):
            Q[i, j] = R[i, j] * 2.0         # registers only: no barrier
        for i, j in T.Parallel(64, 64):
            S1[i, j] = Q[i, j]              # overwrites what others read: barrier
        for ko in T.serial(4):
            for i, j in T.Parallel(64, 64):
                R[i, j] = S2[j, i] + R[i, j]
            for i, j in T.Parallel(64, 64):
                S2[i, j] = R[i, j]          # WAR in the body, RAW into the next iteration
        T.copy(S1, B)


def test_lowered_kernel_has_a_barrier_exactly_where_tiles_race(helpers):
    before, after = lowered(_tiles, helpers=helpers)
    added = assert_barriers_exact(before, after)
    assert len(added) == 5, f"{len(added)} barriers:\n{after}"
    top = after.stmts if isinstance(after, S.SeqStmt) else (after,)
    loops = [s for s in top if isinstance(s, S.For) and not s.annotation("tl.thread_loop", False)]
    assert len(loops) == 1 and is_barrier(loops[0].body.stmts[-1])  # loop-end barrier
    # the register-only loop (Q = R * 2) runs before the barrier that guards the overwrite of S1
    q = [i for i, st in enumerate(top) if any(n.buffer.name == "Q" for n in collect(
        st, lambda n: isinstance(n, S.BufferStore))) and isinstance(st, S.For)]
    assert len(q) == 1 and not is_barrier(top[q[0] - 1]) and is_barrier(top[q[0] + 1])


@pytest.mark.parametrize("name,arch,kw", [
    ("gemm", "sm_80", {}),                         # the K loop unpipelined: copy, copy, gemm
    ("row_softmax", "sm_80", {}),                  # m demoted to shared memory, reduce scratch
    ("two_gemms", "sm_80", {}),                    # P demoted: elementwise write, then gemm operand
    ("two_gemms", "sm_90a", {}),
])
def test_lowered_user_kernels_are_race_free_with_needed_barriers_only(name, arch, kw, kernels, helpers):
    before, after = lowered(getattr(kernels, name)(**kw), arch, helpers=helpers)
    assert assert_barriers_exact(before, after)


@T.prim_func
def _shared_histogram(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        H = T.alloc_shared((64,), "float32")
        T.clear(H)
        for i, j in T.Parallel(64, 64):
            T.atomic_add(H[j], A[i, j])
        T.copy(H, B)


def test_shared_atomics_are_ordered_before_later_reads(helpers):
    _, after = lowered(_shared_histogram, helpers=helpers)
    assert races(after) == []


@T.prim_func
def _while_flag(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_shared((128,), "int32")
        T.copy(A, F)
        while F[0] < 4:
            for i in T.Parallel(128):
                F[i] = F[i] + 1
        T.copy(F, B)


def test_while_condition_on_a_shared_flag_is_race_free(helpers):
    _, after = lowered(_while_flag, helpers=helpers)
    assert races(after) == []


def test_race_finder_sees_the_races_thread_sync_removes(helpers):
    """The checker is not vacuous: the lowered kernel without its barriers races."""
    before, _ = lowered(_tiles, helpers=helpers)
    found = races(before)
    assert {"S1: write then read", "S1: read then write", "S2: write then read", "S2: read then write"} <= set(found)


@T.prim_func
def _shared_trip_count(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_shared((128,), "int32")
        T.copy(A, F)
        for ko in T.serial(F[0]):
            for i in T.Parallel(128):
                F[i] = F[i] + 1
        T.copy(F, B)


def test_loop_extent_read_from_shared_memory_is_race_free(helpers):
    _, after = lowered(_shared_trip_count, helpers=helpers)
    assert races(after) == []


# ----------------------------------------------------------------------------- passes writing disjoint elements
def _pass_loop(per_thread, inner):
    """for i in 0..4: for v in 0..inner: S[i*128*per_thread + tid*per_thread + v] = 1 (S of 4*128*per_thread)."""
    big = Buffer("S", (4 * 128 * per_thread,), "float32", "shared.dyn")
    i, v = E.Var("i", dt.int32), E.Var("v", dt.int32)
    st = S.BufferStore(big, (i * (128 * per_thread) + tid * per_thread + v,), E.as_expr(1.0, dt.float32))
    return big, S.For(i, E.as_expr(0), E.as_expr(4), "serial", S.For(v, E.as_expr(0), E.as_expr(inner), "serial", st))


def _barriers(st):
    return len(collect(st, lambda n: isinstance(n, Raw) and "__syncthreads" in n.fmt))


def test_passes_writing_disjoint_elements_need_no_barrier_between_them():
    _, lp = _pass_loop(8, 8)
    assert _barriers(insert_syncs(lp, (tid,), (128,))) == 0


def test_passes_whose_writes_overlap_keep_their_barriers():
    _, lp = _pass_loop(4, 8)  # v runs past the thread's 4 elements into the next thread's
    assert _barriers(insert_syncs(lp, (tid,), (128,))) > 0
    _, lp = _pass_loop(8, 8)
    assert _barriers(insert_syncs(lp, (tid,), ())) > 0  # no thread range known: no proof


def test_passes_where_every_thread_writes_the_pass_element_need_no_barrier():
    """naive gemv's staging loop: for k: A_s[k] = A[k] (all threads alike); B_s[tid*128 + k] = B[..]."""
    a_s, b_s = Buffer("A_s", (128,), "float32", "shared.dyn"), Buffer("B_s", (128 * 128,), "float32", "shared.dyn")
    k = E.Var("k", dt.int32)
    body = S.seq(S.BufferStore(a_s, (k,), E.as_expr(1.0, dt.float32)),
                 S.BufferStore(b_s, (tid * 128 + k,), E.as_expr(2.0, dt.float32)))
    lp = S.For(k, E.as_expr(0), E.as_expr(128), "serial", body)
    assert _barriers(insert_syncs(lp, (tid,), (128,))) == 0
    # a pass element shifted by the thread (A_s[k + tid]) meets another pass's: barriers stay
    bad = S.For(k, E.as_expr(0), E.as_expr(4), "serial", S.BufferStore(a_s, (k + tid % 4,), E.as_expr(1.0, dt.float32)))
    assert _barriers(insert_syncs(bad, (tid,), (128,))) > 0


def test_a_pass_reading_what_another_thread_wrote_keeps_its_barrier():
    big, lp = _pass_loop(8, 8)
    r = S.BufferStore(local("r"), (E.as_expr(0),), E.BufferLoad(big, ((tid + 1) % 128,), big.dtype))
    body = S.seq(lp.body, r)
    assert _barriers(insert_syncs(dataclasses.replace(lp, body=body), (tid,), (128,))) > 0


def _host_or_skip():
    """tilelang/testing/host_cuda (generated CUDA run on the host), or skip without g++."""
    import os

    from tilelang.testing import host_cuda as host
    if not host.available():
        pytest.skip("g++ not installed")
    return host


def _thread_level_fill():
    import tilelang.language as T

    @T.prim_func
    def fill(A: T.Tensor((8 * 2048,), "float32"), B: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=256) as _:
            S_s = T.alloc_shared((128, 128), "float32")
            loc = T.alloc_local((8,), "float32")
            tx = T.get_thread_binding()
            for i in T.serial(8):
                for v in T.vectorized(8):
                    loc[v] = A[i * 2048 + tx * 8 + v] * 2.0
                for v in T.vectorized(8):
                    index = i * 2048 + tx * 8 + v
                    S_s[index // 128, index % 128] = loc[v] + 1.0
            T.copy(S_s, B)

    return fill


def test_thread_level_passes_over_disjoint_elements_get_one_barrier_and_run_right():
    import warnings

    import torch

    import tilelang

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(_thread_level_fill(), target="cuda -arch=sm_90a")
    src = kern.get_kernel_source()
    body = src.split("for (int i = 0;")[1]
    assert body.count("__syncthreads") == 1, src  # after the loop, before the copy reads other threads' rows
    host = _host_or_skip()
    a = torch.randn(8 * 2048)
    b = torch.full((128, 128), float("nan"))
    host.HostProgram({"fill": kern}).run("fill", [a, b])
    torch.testing.assert_close(b.double(), (a.double() * 2 + 1).reshape(128, 128), rtol=1e-6, atol=1e-6)


def test_passes_where_every_thread_writes_the_same_elements_need_a_barrier_only_when_passes_overlap():
    """No thread index: all threads store the same elements within a pass (the program's own race,
    which no barrier orders); distinct passes store distinct elements (i*8 + v), so they need none
    between them. i + v reaches the next pass's elements: that keeps its barrier."""
    big = Buffer("S", (32,), "float32", "shared.dyn")
    i, v = E.Var("i", dt.int32), E.Var("v", dt.int32)
    for idx, barrier in ((i * 8 + v, False), (i + v, True)):
        st = S.BufferStore(big, (idx,), E.as_expr(1.0, dt.float32))
        lp = S.For(i, E.as_expr(0), E.as_expr(4), "serial", S.For(v, E.as_expr(0), E.as_expr(8), "serial", st))
        assert (_barriers(insert_syncs(lp, (tid,), (128,))) > 0) == barrier, idx


def test_vectorized_thread_level_stores_through_index_lets_are_vectors_with_one_barrier():
    import warnings

    import torch

    import tilelang
    import tilelang.language as T

    @T.prim_func
    def fill4(A: T.Tensor((4 * 1024,), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256) as _:
            S_s = T.alloc_shared((64, 64), "float32")
            loc = T.alloc_local((4,), "float32")
            tx = T.get_thread_binding()
            for i in T.serial(4):
                for v in T.vectorized(4):
                    loc[v] = A[i * 1024 + tx * 4 + v] * 2.0
                for v in T.vectorized(4):
                    index = i * 1024 + tx * 4 + v
                    S_s[index // 64, index % 64] = loc[v] + 1.0
            T.copy(S_s, B)

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(fill4, target="cuda -arch=sm_90a")
    src = kern.get_kernel_source()
    assert "tl::store_vec<4>(&S_s[" in src and "tl::load_vec<4>(" in src, src
    assert not any("T.vectorized" in str(w.message) for w in got)
    assert src.split("for (int i = 0;")[1].count("__syncthreads") == 1, src
    host = _host_or_skip()
    a = torch.randn(4 * 1024)
    b = torch.full((64, 64), float("nan"))
    host.HostProgram({"fill4": kern}).run("fill4", [a, b])
    torch.testing.assert_close(b.double(), (a.double() * 2 + 1).reshape(64, 64), rtol=1e-6, atol=1e-6)


def test_ws_consumers_thread_level_passes_over_disjoint_elements_have_no_barrier_inside():
    """The hopper mxfp4 dequant shape: warp-specialized consumers (threads below 256 of 384) store a
    shared B tile per pass of a thread-level loop, through an index let bound outside the vector loop."""
    import warnings

    import tilelang
    import tilelang.language as T

    @T.prim_func
    def deq(A: T.Tensor((256, 512), "bfloat16"), B: T.Tensor((128, 512), "bfloat16"), C: T.Tensor((256, 128), "float32")):
        with T.Kernel(1, 1, threads=256) as (bx, by):
            A_s = T.alloc_shared((256, 128), "bfloat16")
            B_s = T.alloc_shared((128, 128), "bfloat16")
            D_s = T.alloc_shared((128, 128), "bfloat16")
            acc = T.alloc_fragment((256, 128), "float32")
            loc = T.alloc_local((8,), "bfloat16")
            tx = T.get_thread_binding()
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[0, k * 128], A_s)
                T.copy(B[0, k * 128], B_s)
                for i in T.serial(8):
                    base = i * 2048 + tx * 8
                    for v in T.vectorized(8):
                        loc[v] = B_s[(base + v) // 128, (base + v) % 128]
                    for v in T.vectorized(8):
                        D_s[(base + v) // 128, (base + v) % 128] = loc[v] * 2.0
                T.gemm(A_s, D_s, acc, transpose_B=True)
            T.copy(acc, C)

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        src = tilelang.compile(deq, target="cuda -arch=sm_90a").get_kernel_source()
    assert "tma_load" in src and "setmaxnreg" in src, src  # warp-specialized
    assert not any("T.vectorized" in str(w.message) for w in got), [str(w.message) for w in got]
    import re

    loop = re.split(r"for \(int i\w* = 0; i\w* < 8; \+\+i\w*\) \{", src)[1].split("tl::gemm_ss_sm90")[0]
    assert "load_vec<8>" in loop and "store_vec<8>" in loop, loop
    assert loop.count("barrier_sync") + loop.count("__syncthreads") == 1, loop  # after the loop only


def _flag_loop(stride, lanes=16, apart=True, n=4):
    """for r in n: F[r*stride + tid/8] = ... ; (barrier) ; if F[r*stride + tid/8]: X[tid] = ...
    (a sparse-MLA producer's per-row flag over 128 threads, 8 per row)."""
    f, x = Buffer("F_s", (64,), "bool", "shared.dyn"), shared("X_s")
    r = E.Var("r", dt.int32)
    at = (r * stride + tid // 8,)
    body = S.seq(S.BufferStore(f, at, E.as_expr(True, dt.bool_)),
                 S.IfThenElse(E.BufferLoad(f, at, dt.bool_), S.BufferStore(local("o"), (E.as_expr(0),), other(x)), None))
    return insert_syncs(S.For(r, E.as_expr(0), E.as_expr(n), "serial", body), (tid,), (128,), apart)


def test_passes_touching_disjoint_flag_elements_drop_the_loop_end_barrier():
    # pass r reads flags [16r, 16r + 15], pass r + 1 writes [16r + 16, 16r + 31]: only the RAW barrier
    out = _flag_loop(16)
    assert _barriers(out) == 1 and not is_barrier(out.body.stmts[-1])
    assert _barriers(_flag_loop(16, apart=False)) == 2  # tl.disable_sync_pass_ranges


def test_passes_whose_flag_elements_overlap_keep_the_loop_end_barrier():
    out = _flag_loop(8)  # pass r + 1 writes [8r + 8, 8r + 23], pass r read [8r, 8r + 15]
    assert _barriers(out) == 2 and is_barrier(out.body.stmts[-1])


def test_passes_apart_within_a_warp_group_branch_use_its_thread_range():
    """Inside `tid >= 256` the flag row is (tid - 256) / 8 in [0, 15]; over the whole block it is not."""
    from tilelang.op.hopper import WarpGroupScope

    f = Buffer("F_s", (64,), "bool", "shared.dyn")
    r = E.Var("r", dt.int32)
    at = (r * 16 + (tid - 256) // 8,)
    body = S.seq(S.BufferStore(f, at, E.as_expr(True, dt.bool_)),
                 S.IfThenElse(E.BufferLoad(f, at, dt.bool_), S.BufferStore(local("o"), (E.as_expr(0),),
                                                                         E.as_expr(1.0, dt.float32)), None))
    lp = S.For(r, E.as_expr(0), E.as_expr(4), "serial", body)
    scoped = insert_syncs(WarpGroupScope(2, 3, lp), (tid,), (384,))
    assert _barriers(scoped) == 1
    assert _barriers(insert_syncs(lp, (tid,), (384,))) == 2  # tid / 8 spans 48 rows: passes overlap


def test_passes_apart_needs_the_thread_index_itself_not_a_value_derived_from_it():
    """F[16r + w] with w = tid % 16 bound outside the loop: another thread's w in the next pass may meet
    this pass's element, so the barrier stays; written with the thread index it is proved apart."""
    f = Buffer("F_s", (64,), "bool", "shared.dyn")
    r, w = E.Var("r", dt.int32), E.Var("w", dt.int32)

    def prog(col):
        at = (r * 16 + col,)
        body = S.seq(S.BufferStore(f, at, E.as_expr(True, dt.bool_)),
                     S.IfThenElse(E.BufferLoad(f, at, dt.bool_), S.BufferStore(local("o"), (E.as_expr(0),),
                                                                             E.as_expr(1.0, dt.float32)), None))
        return S.seq(S.LetStmt(w, tid % 16), S.For(r, E.as_expr(0), E.as_expr(4), "serial", body))

    assert _barriers(insert_syncs(prog(tid % 16), (tid,), (128,))) == 1
    assert _barriers(insert_syncs(prog(w), (tid,), (128,))) == 2
