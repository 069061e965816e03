"""Argument checks of the expert-tier names (T.ws, T.alloc_barrier, T.tma_copy ...)."""
import pytest

import tilelang.language as T
from tilelang.errors import DSLTypeError, TileLangError


def parse(body, threads=256):
    @T.prim_func
    def f(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=threads) as bx:
            body(A, B)

    return f


def test_alloc_barrier_counts():
    with pytest.raises((ValueError, TileLangError), match="at least 1"):
        parse(lambda A, B: T.alloc_barrier(0))
    with pytest.raises((ValueError, TileLangError), match="at least 1"):
        parse(lambda A, B: T.alloc_barrier([128, -1]))


def test_ws_range_is_checked():
    def body(A, B):
        with T.ws(2):
            T.copy(A, B)

    with pytest.raises(TileLangError, match="256 threads"):
        parse(body)


def test_ws_groups_must_be_consecutive():
    def body(A, B):
        with T.ws(0, 2):
            T.copy(A, B)

    with pytest.raises(TileLangError, match="consecutive"):
        parse(body, threads=384)


def test_tma_copy_arguments():
    def no_barrier(A, B):
        S = T.alloc_shared((128, 64), "float16")
        T.tma_copy(A, S)

    with pytest.raises(TileLangError, match="barrier="):
        parse(no_barrier)

    def multicast(A, B):
        S = T.alloc_shared((128, 64), "float16")
        bar = T.alloc_barrier(1)
        T.tma_copy(A, S, barrier=bar, cluster_mask=3)

    with pytest.raises(NotImplementedError, match="cluster_mask"):
        parse(multicast)

    def store_with_barrier(A, B):
        S = T.alloc_shared((128, 64), "float16")
        bar = T.alloc_barrier(1)
        T.tma_copy(S, B, barrier=bar)

    with pytest.raises(TileLangError, match="T.tma_store_wait, not a barrier"):
        parse(store_with_barrier)

    def odd_leader(A, B):
        S = T.alloc_shared((128, 64), "float16")
        T.tma_copy(S, B, leader_scope_threads=48)

    with pytest.raises(TileLangError, match="multiple of the warp size"):
        parse(odd_leader)

    def global_to_global(A, B):
        T.tma_copy(A, B)

    with pytest.raises(TileLangError, match=r"global -> shared \(a load\) or shared -> global"):
        parse(global_to_global)


def test_barrier_ops_need_barriers():
    def body(A, B):
        S = T.alloc_shared((1,), "uint64")
        T.barrier_arrive(S)

    with pytest.raises(TileLangError, match="T.alloc_barrier"):
        parse(body)

    def remote(A, B):
        bar = T.alloc_barrier(1)
        T.mbarrier_arrive(bar, cta_id=1)

    with pytest.raises(TypeError, match="cta_id.*needs a barrier from T.alloc_cluster_barrier"):
        parse(remote)


def test_set_max_nreg_range():
    with pytest.raises(DSLTypeError, match="multiple of 8"):
        parse(lambda A, B: T.set_max_nreg(30, 1))
