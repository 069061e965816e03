"""Consumer warpgroups whose rows all land past the end of the outputs skip their k-loop work
(transform/cuda/ws_dead_rows.py, opt-in: `tl.enable_ws_dead_rows`). NVRTC builds check which kernels get the
loop of waits (192-row attention tiles over a sequence that is not a multiple of 192; not where the
grid proves every warpgroup keeps rows, nor where the tile's rows land at rows the tensor keeps) and
that ptxas keeps every wgmma pipelined (no C7515 / C7518 serialization); on the host emulator the
kernels, with their dead warpgroups, match float64 attention and log-sum-exp on fresh random inputs."""
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from .conftest import run_attention_on_host

SM90 = "cuda -arch=sm_90a"
DEAD = "tl::warpgroup_id()"
ON = {"tl.enable_ws_dead_rows": True}


def _flashattn():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from flash_attention import flashattn
    return flashattn


def _persistent(monkeypatch, sms=132):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: sms)


def _fa_lse(S, D=64, bM=192, bN=128, rows_from_block=True):
    """Base-2 softmax attention with its log-sum-exp; 384 threads (three consumer warpgroups)."""
    neg = -T.infinity("float32")

    @T.prim_func
    def fa(Q: T.Tensor((S, D), "float16"), K: T.Tensor((S, D), "float16"), V: T.Tensor((S, D), "float16"),
           O: T.Tensor((S, D), "float16"), L: T.Tensor((S,), "float32")):
        with T.Kernel(T.ceildiv(S, bM), threads=384) as bx:
            q_s = T.alloc_shared((bM, D), "float16")
            k_s = T.alloc_shared((bN, D), "float16")
            v_s = T.alloc_shared((bN, D), "float16")
            s = T.alloc_fragment((bM, bN), "float32")
            p = T.alloc_fragment((bM, bN), "float16")
            o = T.alloc_fragment((bM, D), "float32")
            m = T.alloc_fragment((bM,), "float32")
            m_prev = T.alloc_fragment((bM,), "float32")
            scale = T.alloc_fragment((bM,), "float32")
            rsum = T.alloc_fragment((bM,), "float32")
            lsum = T.alloc_fragment((bM,), "float32")
            T.copy(Q[bx * bM, 0], q_s)
            T.fill(o, 0)
            T.fill(lsum, 0)
            T.fill(m, neg)
            for k in T.Pipelined(T.ceildiv(S, bN), num_stages=2):
                T.copy(K[k * bN, 0], k_s)
                for i, j in T.Parallel(bM, bN):
                    s[i, j] = T.if_then_else(k * bN + j < S, 0, neg)
                T.gemm(q_s, k_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(bM):
                    scale[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(bM, bN):
                    s[i, j] = T.exp2(s[i, j] - m[i])
                T.reduce_sum(s, rsum, dim=1)
                for i in T.Parallel(bM):
                    lsum[i] = lsum[i] * scale[i] + rsum[i]
                T.copy(s, p)
                for i, j in T.Parallel(bM, D):
                    o[i, j] *= scale[i]
                T.copy(V[k * bN, 0], v_s)
                T.gemm(p, v_s, o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(bM, D):
                o[i, j] /= lsum[i]
            for i in T.Parallel(bM):
                lsum[i] = T.log2(lsum[i]) + m[i]
            if rows_from_block:
                T.copy(o, O[bx * bM, 0])
            else:  # rows 0 .. bM - 1 of every block's output land inside O: none of them is dead
                T.copy(o, O[0, 0])
            T.copy(lsum, L[bx * bM])

    return fa


@pytest.mark.nvrtc
@pytest.mark.parametrize("S,causal,dead", [
    (2048, False, True),   # 11 blocks of 192 rows: the last one's third warpgroup starts at row 2048
    (2048, True, True),
    (2304, True, False),   # 12 blocks of 192 rows, no remainder: the grid proves every warpgroup keeps rows
])
def test_dead_warpgroups_where_rows_can_fall_past_the_end(S, causal, dead, monkeypatch):
    _persistent(monkeypatch)
    k = tilelang.compile(_flashattn().get_tir(16, 16, S, 64, causal, 192, 128, 2, 384), target=SM90,
                         pass_configs=ON)
    src = k.get_kernel_source()
    assert (DEAD in src) == dead
    if dead:  # the working loop, then the loop of waits: its turns and releases, no gemm
        wait_loop = src[:src.index("tl_cbase[0] = (tl_cbase[0] +")]
        wait_loop = wait_loop[wait_loop.rindex("} else {"):]
        assert "gemm" not in wait_loop and "warpgroup_turn_wait<2, 3>" in wait_loop
        assert "mbarrier_arrive(&tl_empty1" in wait_loop and "mbarrier_wait(&tl_full1" in wait_loop
    log = k.artifact.compiled.log or ""
    assert "C7515" not in log and "C7518" not in log  # no wgmma serialized by the branch
    info = k.artifact.compiled.ptxas_info()
    assert info.get("spill_stores", 0) == 0


@pytest.mark.nvrtc
def test_no_dead_warpgroups_without_the_config_or_with_two_warpgroups(monkeypatch):
    _persistent(monkeypatch)
    fa = _flashattn()
    off = tilelang.compile(fa.get_tir(16, 16, 2048, 64, True, 192, 128, 2, 384), target=SM90)  # the default
    assert DEAD not in off.get_kernel_source() and "warpgroup_turn_wait<2, 3>" in off.get_kernel_source()
    two = tilelang.compile(fa.get_tir(2, 4, 1950, 64, True, 128, 128, 2, 256), target=SM90,
                           pass_configs={"tl.enable_ws_pingpong": True, **ON})
    assert "warpgroup_turn_wait<2, 2>" in two.get_kernel_source()
    assert DEAD in two.get_kernel_source()  # 1950 = 15 * 128 + 30: the last block's second warpgroup is dead


@pytest.mark.nvrtc
def test_rows_that_land_inside_the_output_are_computed():
    k = tilelang.compile(_fa_lse(300, rows_from_block=False), target=SM90, pass_configs=ON)
    src = k.get_kernel_source()
    assert "warpgroup_turn_wait<2, 3>" in src and DEAD not in src
    assert DEAD in tilelang.compile(_fa_lse(300), target=SM90, pass_configs=ON).get_kernel_source()


@pytest.mark.nvrtc
@pytest.mark.parametrize("S,causal,sms,seed", [
    (100, True, 1, 13),    # one tile: warpgroups 1 and 2 dead, the turns still go round
])  # (two tiles on one block, the second's third warpgroup dead: the log-sum-exp test below)
def test_attention_with_dead_warpgroups_matches_float64_on_host(host, monkeypatch, S, causal, sms, seed):
    _persistent(monkeypatch, sms)
    B, H, D = 1, 2, 64
    k = tilelang.compile(_flashattn().get_tir(B, H, S, D, causal, 192, 128, 2, 384), target=SM90, pass_configs=ON)
    assert DEAD in k.get_kernel_source()
    run_attention_on_host(host, k, B, H, S, D, causal, seed)


@pytest.mark.nvrtc
def test_a_consumers_barrier_before_the_loop_keeps_every_warpgroup_working(host, monkeypatch):
    """At D128 the consumers load Q themselves (cp.async) and meet at a barrier of all three warpgroups
    before the k-loop: inside the branch on the warpgroup's rows a dead warpgroup never reached it
    (the H100 hung; so did the host emulator). Such a kernel is built without the skip."""
    _persistent(monkeypatch, 1)
    B, H, S, D = 1, 2, 100, 128
    k = tilelang.compile(_flashattn().get_tir(B, H, S, D, False, 192, 128, 2, 384), target=SM90, pass_configs=ON)
    src = k.get_kernel_source()
    assert DEAD not in src and "cp_async" in src and "warpgroup_turn_wait<2, 3>" in src
    run_attention_on_host(host, k, B, H, S, D, False, 7)


@pytest.mark.nvrtc
def test_log_sum_exp_with_dead_warpgroups_matches_float64_on_host(host, monkeypatch):
    import torch

    _persistent(monkeypatch, 1)
    S, D = 300, 64
    k = tilelang.compile(_fa_lse(S, D), target=SM90, pass_configs=ON)
    assert DEAD in k.get_kernel_source()
    g = torch.Generator().manual_seed(21)
    q, kk, v = (torch.randn(S, D, generator=g).half() for _ in range(3))
    o = torch.full((S, D), float("nan")).half()
    lse = torch.full((S,), float("nan"))
    prog = host.HostProgram({"fa": k})
    prog.run("fa", [q, kk, v, o, lse])
    prog.close()
    s = q.double() @ kk.double().T  # base-2 scores
    ref_o = torch.softmax(s * torch.log(torch.tensor(2.0, dtype=torch.float64)), -1) @ v.double()
    ref_l = torch.logsumexp(s * torch.log(torch.tensor(2.0, dtype=torch.float64)), -1) / torch.log(
        torch.tensor(2.0, dtype=torch.float64))
    assert not torch.isnan(o).any() and not torch.isnan(lse).any()
    assert (o.double() - ref_o).abs().max().item() < 3e-3
    assert (lse.double() - ref_l).abs().max().item() < 1e-3 * ref_l.abs().max().item()
