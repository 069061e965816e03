"""T.PersistentTileScheduler and T.meta_class on the CPU backend: tile orders against an enumeration
written independently of the scheduler's index arithmetic, and a persistent tiled matmul against a
float64 product."""
import pytest
import torch

import tilelang
import tilelang.language as T


def panel_order(m_tiles, n_tiles, swizzle, column_major, cluster=1):
    """Linear tile order as nested loops: panels of `swizzle` slow-axis tiles, the fast axis swept
    inside a panel with the panel's columns varying fastest."""
    m_rows = -(-m_tiles // cluster)
    fast_n, slow_n = (m_rows, n_tiles) if column_major else (n_tiles, m_rows)
    order = []
    for start in range(0, slow_n, swizzle):
        for f in range(fast_n):
            for s in range(start, min(start + swizzle, slow_n)):
                order.append((f, s) if column_major else (s, f))
    return order


def visit_kernel(m_tiles, n_tiles, workers, swizzle, column_major, cluster, iters):
    @T.prim_func
    def visits(Log: T.Tensor((workers, iters, 3), T.int32)):
        with T.Kernel(workers, threads=1) as (wid,):
            sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=workers, swizzle_size=swizzle,
                                              column_major=column_major, cluster_size=cluster)
            sched.init(wid)
            while sched.valid():
                Log[wid, sched.current_iter, 0] = sched.m_idx
                Log[wid, sched.current_iter, 1] = sched.n_idx
                Log[wid, sched.current_iter, 2] = sched.linear_idx
                sched.next_tile()

    return tilelang.compile(visits, target="cpu")


@pytest.mark.parametrize("m_tiles,n_tiles,workers,swizzle,column_major,cluster", [
    (4, 2, 1, 1, True, 1),
    (6, 5, 4, 2, True, 1),
    (5, 7, 3, 3, False, 1),
    (7, 3, 5, 4, True, 1),
    (6, 4, 3, 2, True, 2),
    (5, 6, 2, 4, False, 2),
])
def test_tile_order_matches_panel_enumeration(m_tiles, n_tiles, workers, swizzle, column_major, cluster):
    order = panel_order(m_tiles, n_tiles, swizzle, column_major, cluster)
    iters = -(-len(order) // workers)
    kernel = visit_kernel(m_tiles, n_tiles, workers, swizzle, column_major, cluster, iters)
    log = torch.full((workers, iters, 3), -1, dtype=torch.int32)
    kernel(log)
    expect = torch.full((workers, iters, 3), -1, dtype=torch.int32)
    for linear, (m, n) in enumerate(order):
        expect[linear % workers, linear // workers] = torch.tensor([m, n, linear], dtype=torch.int32)
    torch.testing.assert_close(log, expect, rtol=0, atol=0)


def test_stateless_coord_decodes_every_linear_index():
    m_tiles, n_tiles, swizzle = 5, 7, 3
    total = m_tiles * n_tiles

    @T.prim_func
    def decode(Out: T.Tensor((total, 2), T.int32)):
        with T.Kernel(total, threads=1) as (tile,):
            sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=1, swizzle_size=swizzle,
                                              column_major=False, stateful=False)
            m, n = sched.coord(tile)
            Out[tile, 0] = m
            Out[tile, 1] = n

    out = torch.zeros(total, 2, dtype=torch.int32)
    tilelang.compile(decode, target="cpu")(out)
    expect = torch.tensor(panel_order(m_tiles, n_tiles, swizzle, False), dtype=torch.int32)
    torch.testing.assert_close(out, expect, rtol=0, atol=0)
    src = str(decode)
    assert "alloc_var" not in src  # stateless: no state buffers


def test_stateless_scheduler_has_no_state():
    with pytest.raises(Exception, match="holds no m_idx"):
        @T.prim_func
        def bad(A: T.Tensor((4,), T.int32)):
            with T.Kernel(1, threads=1):
                sched = T.PersistentTileScheduler(2, 2, num_workers=1, stateful=False)
                A[0] = sched.m_idx


def test_persistent_matmul_float64_reference():
    M, N, K, bm, bn, workers = 80, 72, 40, 16, 24, 4  # 5 x 3 tiles over 4 workers, panels of 2
    m_tiles, n_tiles = T.ceildiv(M, bm), T.ceildiv(N, bn)

    @T.prim_func
    def matmul(A: T.Tensor((M, K), T.float32), B: T.Tensor((K, N), T.float32), C: T.Tensor((M, N), T.float32),
               Visits: T.Tensor((m_tiles, n_tiles), T.int32)):
        with T.Kernel(workers, threads=32) as (wid,):
            acc = T.alloc_fragment((bm, bn), T.float32)
            sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=workers, swizzle_size=2, name="sched")
            sched.init(wid)
            while sched.valid():
                bx, by = sched.m_idx, sched.n_idx
                T.clear(acc)
                for i, j in T.Parallel(bm, bn):
                    for k in T.serial(K):
                        acc[i, j] += A[bx * bm + i, k] * B[k, by * bn + j]
                T.copy(acc, C[bx * bm, by * bn])
                Visits[bx, by] = Visits[bx, by] + 1
                sched.next_tile()

    script = matmul.script()
    for name in ("sched_m_idx", "sched_n_idx", "sched_linear_idx", "sched_current_iter"):
        assert name in script
    kernel = tilelang.compile(matmul, target="cpu")
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.zeros(M, N)
    visits = torch.zeros(m_tiles, n_tiles, dtype=torch.int32)
    kernel(a, b, c, visits)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)
    assert visits.eq(1).all(), visits


@T.meta_class
class Countdown:
    """A user helper: a counter stepping down by `step` until it drops below zero."""

    def __init__(self, start, step, name=None):
        self.step = step
        self._left = T.alloc_var(T.int32)
        self._start = start

    def reset(self):
        self._left[0] = self._start

    def tick(self):
        self._left[0] = self._left[0] - self.step

    def alive(self):
        return self._left[0] >= 0

    @property
    def left(self):
        return self._left[0]


def test_meta_class_user_helper():
    assert not hasattr(Countdown.alive, "macro") and hasattr(Countdown.__dict__["tick"], "macro")

    @T.prim_func
    def run(Out: T.Tensor((8,), T.int32), Start: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=1):
            c = Countdown(Start[0], 3, name="cd")
            c.reset()
            n = T.alloc_var(T.int32)
            while c.alive():
                Out[n] = c.left
                n = n + 1
                c.tick()

    assert "cd_left" in run.script()
    out = torch.full((8,), -7, dtype=torch.int32)
    tilelang.compile(run, target="cpu")(out, torch.tensor([14], dtype=torch.int32))
    expect = [14, 11, 8, 5, 2, -7, -7, -7]
    assert out.tolist() == expect
