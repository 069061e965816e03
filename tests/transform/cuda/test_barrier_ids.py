"""Named barrier ids shared by the program and the compiler (transform/cuda/barrier_ids.py): a
program's own T.sync_threads(id, count) moves the compiler's ids for T.ws branches, the
warp-specialized consumers, ping-pong turns and the per-warpgroup epilogue to ids the program
does not use (NVRTC sm_90a source; the host emulator and the CPU backend against float64); ids
not known at compile time, or too few left, are LoweringErrors at the program's line."""
import math
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import LoweringError
from tilelang.transform.cuda.barrier_ids import BarrierIds, UserBarriers
from .conftest import run_attention_on_host

SM90 = "cuda -arch=sm_90a"
N = 4


def exchange(uid=2):
    """Warpgroup 1 stages a tile through Y_s (the compiler's barrier in its T.ws branch, default id
    2), then hands Z_s to warpgroup 0 through the program's own barrier `uid` of 256 threads."""
    @T.prim_func
    def f(A: T.Tensor((N, 128), "float32"), C: T.Tensor((N, 128), "float32"), D: T.Tensor((N, 128), "float32")):
        with T.Kernel(N, threads=256) as b:
            Y_s = T.alloc_shared((128,), "float32")
            Z_s = T.alloc_shared((128,), "float32")
            tx = T.get_thread_binding()
            with T.ws(1):
                for i in T.Parallel(128):
                    Y_s[i] = A[b, i] + 3.0
                for i in T.Parallel(128):
                    D[b, i] = Y_s[127 - i] * Y_s[i]
                Z_s[tx - 128] = A[b, tx - 128] * 2.0
                T.sync_threads(uid, 256)
            with T.ws(0):
                T.sync_threads(uid, 256)
                C[b, tx] = Z_s[127 - tx] + 1.0
    return f


def _compile(f, target, configs=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(f, target=target, pass_configs=configs or {})


def _check_exchange(run):
    a = torch.randn(N, 128)
    c, d = torch.full((N, 128), float("nan")), torch.full((N, 128), float("nan"))
    run(a, c, d)
    ad = a.double()
    torch.testing.assert_close(c.double(), (ad * 2).flip(1) + 1, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(d.double(), (ad + 3).flip(1) * (ad + 3), rtol=1e-5, atol=1e-5)


def test_exchange_on_cpu():
    _check_exchange(_compile(exchange(), "cpu"))


@pytest.mark.nvrtc
def test_ws_branch_barrier_moves_off_the_programs_id(host):
    k = _compile(exchange(2), SM90)
    src = k.get_kernel_source()
    assert src.count("tl::named_barrier_sync(2, 256);") == 2
    assert "tl::barrier_sync<3, 128>();" in src  # branch 1's own barrier: default 2, the program has it
    assert not re.search(r"barrier_sync<2,", src)
    prog = host.HostProgram({"f": k})
    prog.barrier_timeout = 10
    _check_exchange(lambda a, c, d: prog.run("f", [a, c, d]))
    # no program id at or below the default: the ids are today's
    assert "tl::barrier_sync<2, 128>();" in _compile(exchange(5), SM90).get_kernel_source()


def test_allocator_rules():
    none = BarrierIds()
    assert (none.consumers(), none.turns(2), none.wg_epilogue(2), none.branch(3, "b")) == (1, 2, 4, 3)
    ids = BarrierIds(UserBarriers({1: (None, "T.sync_threads"), 3: (None, "T.sync_threads")}))
    assert ids.consumers() == 2 and ids.turns(2) == 4 and ids.wg_epilogue(2) == 6
    assert [ids.branch(d, "b") for d in (1, 2, 3)] == [2, 4, 5]
    full = BarrierIds(UserBarriers({i: (None, "T.sync_threads") for i in range(1, 15)}))
    assert full.consumers() == 15
    with pytest.raises(LoweringError, match="no 2 free consecutive ids"):
        full.turns(2)


def _attention(S, D, bM, bN, threads, user_id):
    """The examples' flash attention (non-causal), whose consumers also meet at the program's own
    named barrier `user_id` (all `threads` of them) between staging O and storing it."""
    scale = (1.0 / D) ** 0.5 * 1.44269504
    shape = [1, S, 2, D]

    @T.prim_func
    def fa(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"), V: T.Tensor(shape, "float16"),
           Output: T.Tensor(shape, "float16")):
        with T.Kernel(T.ceildiv(S, bM), 2, 1, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([bM, D], "float16")
            K_shared = T.alloc_shared([bN, D], "float16")
            V_shared = T.alloc_shared([bN, D], "float16")
            O_shared = T.alloc_shared([bM, D], "float16")
            acc_s = T.alloc_fragment([bM, bN], "float")
            acc_s_cast = T.alloc_fragment([bM, bN], "float16")
            acc_o = T.alloc_fragment([bM, D], "float")
            m = T.alloc_fragment([bM], "float")
            m_prev = T.alloc_fragment([bM], "float")
            sc = T.alloc_fragment([bM], "float")
            ssum = T.alloc_fragment([bM], "float")
            logsum = T.alloc_fragment([bM], "float")
            T.copy(Q[bz, bx * bM:(bx + 1) * bM, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity("float"))
            for k in T.Pipelined(T.ceildiv(S, bN), num_stages=2):
                T.copy(K[bz, k * bN:(k + 1) * bN, by, :], K_shared)
                for i, j in T.Parallel(bM, bN):
                    acc_s[i, j] = T.if_then_else(k * bN + j < S, 0, -T.infinity("float"))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(bM):
                    sc[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(bM, bN):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, ssum, dim=1)
                for i in T.Parallel(bM):
                    logsum[i] = logsum[i] * sc[i] + ssum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(bM, D):
                    acc_o[i, j] *= sc[i]
                T.copy(V[bz, k * bN:(k + 1) * bN, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(bM, D):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.sync_threads(user_id, threads)
            T.copy(O_shared, Output[bz, bx * bM:(bx + 1) * bM, by, :])
    return fa


@pytest.mark.nvrtc
def test_attention_turns_move_off_the_programs_id(host, monkeypatch):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: 3)  # persistent: 3 blocks, 6 tiles
    S, D = 330, 128
    k = _compile(_attention(S, D, 128, 64, 256, 2), SM90)
    src = k.get_kernel_source()
    assert "tl::named_barrier_sync(2, 256);" in src
    # turns of the two consumer warpgroups: default 2..3, moved past the program's 2
    assert "tl::warpgroup_turn_wait<3, 2>(tid >> 7);" in src and "warpgroup_turn_wait<2," not in src
    assert "tl::warpgroup_turn_pass<3, 2>(tid >> 7);" in src
    assert "tl::warpgroup_bar_sync<5, 2>(tid >> 7);" in src  # the epilogue's: default 4..5, after the turns
    assert not re.search(r"barrier_sync<2,|warpgroup_bar_sync<[234],", src)
    run_attention_on_host(host, k, 1, 2, S, D, False, 7)


def test_attention_on_cpu():
    S, D = 100, 64
    k = _compile(_attention(S, D, 64, 32, 128, 2), "cpu")
    g = torch.Generator().manual_seed(3)
    q, kk, v = (torch.randn(1, S, 2, D, generator=g).half() for _ in range(3))
    o = torch.full((1, S, 2, D), float("nan")).half()
    k(q, kk, v, o)
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), kk.double()) / math.sqrt(D)
    ref = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v.double())
    assert (o.double() - ref).abs().max().item() < 3e-3


def test_non_constant_id_is_an_error():
    @T.prim_func
    def f(A: T.Tensor((N, 128), "float32"), Ids: T.Tensor((1,), "int32")):
        with T.Kernel(N, threads=256) as b:
            Y_s = T.alloc_shared((128,), "float32")
            with T.ws(1):
                for i in T.Parallel(128):
                    Y_s[i] = A[b, i] + 3.0
                for i in T.Parallel(128):
                    A[b, i] = Y_s[127 - i]
            with T.ws(0):
                T.sync_threads(Ids[0], 128)  # the barrier id

    with pytest.raises(LoweringError, match=r"T\.sync_threads: barrier id `.*` is not a compile-time constant.*"
                                             r"named barrier 2 .*branch over threads \[128, 256\)") as e:
        _compile(f, SM90)
    assert e.value.span is not None and "# the barrier id" in e.value.span.excerpt()


def test_collision_without_remap_is_an_error():
    with pytest.raises(LoweringError, match=r"T\.sync_threads: named barrier 2 is also needed by the compiler, for "
                                             r"the barriers of the branch over threads \[128, 256\).*"
                                             r"tl\.disable_barrier_id_remap") as e:
        _compile(exchange(2), SM90, {"tl.disable_barrier_id_remap": True})
    assert "T.sync_threads(uid, 256)" in e.value.span.excerpt()

