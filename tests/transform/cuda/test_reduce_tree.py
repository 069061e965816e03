"""Row reductions of an mma / wgmma accumulator folded in independent partial chains
(transform/cuda/ops/reduce.tree_fold; off with tl.disable_reduce_tree). NVRTC builds check that
attention's row max and row sum become 4 chains per row joined pairwise (source), with the same
FMNMX / FADD counts in the consumer's k-loop and no spills (SASS); on the host emulator the
examples' flash attention (D64 / D128, causal and not, ragged, several persistent tiles a block)
and a gemm whose rows are reduced by sum / max / min / absmax (sm_90a wgmma and sm_80 mma.sync)
match float64 on fresh random inputs, with the switch on and off."""
import pytest

import tilelang
import tilelang.language as T
from .conftest import consumer_loop_ops, example_attention, run_attention_on_host

SM90 = "cuda -arch=sm_90a"
OFF = {"tl.disable_reduce_tree": True}


@pytest.mark.nvrtc
def test_attention_row_folds_are_four_chains():
    cfg = (128, 128, 2, 256)
    on = example_attention(16, 16, 2048, 64, False, cfg)
    off = example_attention(16, 16, 2048, 64, False, cfg, OFF)
    src_on, src_off = on.get_kernel_source(), off.get_kernel_source()
    assert all(f"float racc{r}_{s}[4];" in src_on for r in (1, 2) for s in (0, 1))  # 2 row slots x 4 partials
    assert "racc1_0[0] = fmaxf(racc1_0[0], racc1_0[1]);" in src_on and "racc1_0[0] = fmaxf(racc1_0[0], racc1_0[2]);" in src_on
    assert "racc2_1[0] = (racc2_1[0] + racc2_1[1]);" in src_on
    assert "float racc1[1];" in src_off and "racc1[0] = fmaxf(racc1[0], acc_s[1]);" in src_off
    s_on, s_off = on.export_sass(), off.export_sass()
    for op in ("FMNMX", "FADD", "MUFU.EX2", "HGMMA"):
        assert consumer_loop_ops(s_on, op) == consumer_loop_ops(s_off, op), op
    assert "LDL" not in s_on and "STL" not in s_on


@pytest.mark.nvrtc
@pytest.mark.parametrize("S,D,causal,cfg,sms,seed", [
    (200, 64, False, (128, 128, 2, 256), 3, 11),   # 4 tiles on 3 blocks: block 0 runs two; last k-step ragged
    (200, 64, True, (128, 128, 2, 256), 3, 12),
    (330, 128, False, (128, 64, 2, 256), 3, 13),
    (330, 128, True, (128, 128, 2, 256), 2, 14),
])
@pytest.mark.parametrize("extra", [None, OFF], ids=["tree", "serial"])
def test_attention_matches_float64_on_host(host, monkeypatch, S, D, causal, cfg, sms, seed, extra):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: sms)
    k = example_attention(1, 2, S, D, causal, cfg, extra)
    assert ("racc1_0[4]" in k.get_kernel_source()) == (extra is None)
    run_attention_on_host(host, k, 1, 2, S, D, causal, seed)


def _gemm_rows(M, N, K, kind, threads):
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), R: T.Tensor((M,), "float32"),
          P: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            C = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C)
            T.gemm(A_s, B_s, C, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)  # 32 columns a thread
            if kind == "sum":
                T.reduce_sum(C, r, dim=1)
            elif kind == "max":
                T.reduce_max(C, r, dim=1)
            elif kind == "min":
                T.reduce_min(C, r, dim=1)
            else:
                T.reduce_absmax(C, r, dim=1)
            T.copy(r, R)
            for i, j in T.Parallel(M, N):  # a second use of C's slots after the fold
                C[i, j] = C[i, j] * 0.5
            T.reduce_sum(C, r, dim=1)
            T.copy(r, P)
    return f


@pytest.mark.nvrtc
@pytest.mark.parametrize("target,threads", [(SM90, 128), ("cuda -arch=sm_80", 128)])
@pytest.mark.parametrize("kind", ["sum", "max", "min", "absmax"])
@pytest.mark.parametrize("extra", [None, OFF], ids=["tree", "serial"])
def test_gemm_row_reductions_match_float64_on_host(host, target, threads, kind, extra):
    import torch

    M, N, K = 64, 128, 64
    k = tilelang.compile(_gemm_rows(M, N, K, kind, threads), target=target, pass_configs=extra or {})
    src = k.get_kernel_source()
    assert ("racc1_0[" in src) == (extra is None) and ("racc1[1];" in src) == (extra is not None), src[:2000]
    g = torch.Generator().manual_seed(hash((target, kind)) % 1000)
    a, b = torch.randn(M, K, generator=g).half(), torch.randn(N, K, generator=g).half()
    r, p = torch.full((M,), float("nan")), torch.full((M,), float("nan"))
    prog = host.HostProgram({"k": k})
    prog.run("k", [a, b, r, p])
    prog.close()
    c = a.double() @ b.double().T
    ref = {"sum": c.sum(1), "max": c.amax(1), "min": c.amin(1), "absmax": c.abs().amax(1)}[kind]
    tol = 1e-3 * c.abs().sum(1).max().item() if kind == "sum" else 1e-4
    assert (r.double() - ref).abs().max().item() <= tol
    assert (p.double() - 0.5 * c.sum(1)).abs().max().item() <= 1e-3 * c.abs().sum(1).max().item()
