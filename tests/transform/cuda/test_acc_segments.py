"""A gemm accumulator seen as (rows, Q, H) through T.reshape (the fp8 lighting indexer's
`s_reshaped`): a per-row tile read as scale[i] stays a RowFragment, a per-column tile read as
w[q, h] an AccColumnFragment (or shared memory when the register budget is short), T.reduce over
the last dim folds each segment in registers and the quad (RowBlockFragment, no `_red` scratch),
and a T.Parallel over (Q, rows) reading logits[i, q] walks logits' own slots. CPU float64
semantics, NVRTC source checks for sm_80 (mma.sync) and sm_90a (wgmma), and the GPU."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

# (M rows, Q, H, K, threads): 4 heads-groups of 32 over 2 warpgroups; 2 of 64 over 4 warps (sm_80 mma)
CASES = [(128, 4, 32, 64, 256), (64, 2, 64, 32, 128), (128, 8, 16, 32, 128)]


def indexer_kernel(M, Q, H, K, threads, blocks=2, policy=T.GemmWarpPolicy.FullRow):
    N = Q * H

    @T.prim_func
    def k(A: T.Tensor((blocks * M, K), "float16"), B: T.Tensor((N, K), "float16"),
          Scale: T.Tensor((blocks * M,), "float32"), W: T.Tensor((Q, H), "float32"),
          Out: T.Tensor((Q, blocks * M), "float32")):
        with T.Kernel(blocks, threads=threads) as bx:
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((N, K), "float16")
            s = T.alloc_fragment((M, N), "float32")
            s3 = T.reshape(s, (M, Q, H))
            scale = T.alloc_fragment((M,), "float32")
            w = T.alloc_fragment((Q, H), "float32")
            logits = T.alloc_fragment((M, Q), "float32")
            T.copy(A[bx * M, 0], a_s)
            T.copy(B[0, 0], b_s)
            T.copy(Scale[bx * M], scale)
            T.copy(W[0, 0], w)
            T.gemm(a_s, b_s, s, transpose_B=True, clear_accum=True, policy=policy)
            for i, q, h in T.Parallel(M, Q, H):
                s3[i, q, h] = (T.max(s3[i, q, h], 0) * w[q, h]) * scale[i]
            T.reduce_sum(s3, logits, dim=-1, clear=True)
            for q, i in T.Parallel(Q, M):
                Out[q, bx * M + i] = logits[i, q]
    return k


def reference(A, B, Scale, W):
    s = (A.double() @ B.double().T).clamp_min(0)
    M2, Q, H = s.shape[0], W.shape[0], W.shape[1]
    s = s.view(M2, Q, H) * W.double()[None] * Scale.double()[:, None, None]
    return s.sum(-1).T


def run(kern, M, Q, H, K, device, blocks=2):
    A = torch.randn(blocks * M, K, dtype=torch.float16, device=device)
    B = torch.randn(Q * H, K, dtype=torch.float16, device=device)
    Scale = torch.rand(blocks * M, device=device) + 0.5
    W = torch.randn(Q, H, device=device)
    Out = torch.full((Q, blocks * M), float("nan"), device=device)
    kern(A, B, Scale, W, Out)
    torch.testing.assert_close(Out.double().cpu(), reference(A, B, Scale, W).cpu(), rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("M,Q,H,K,threads", CASES)
def test_segment_reduce_on_cpu(M, Q, H, K, threads):
    run(tilelang.compile(indexer_kernel(M, Q, H, K, threads), target="cpu"), M, Q, H, K, "cpu")


def source(M, Q, H, K, threads, arch, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        src = tilelang.compile(indexer_kernel(M, Q, H, K, threads, **kw), target=f"cuda -arch={arch}").get_kernel_source()
    return src, [str(m.message) for m in w]


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("M,Q,H,K,threads", CASES)
def test_segments_stay_in_registers(M, Q, H, K, threads, arch):
    src, msgs = source(M, Q, H, K, threads, arch)
    kept = [m for m in msgs if "kept in shared memory" in m]
    assert not [m for m in kept if "weights" not in m and " w " not in m], kept
    assert "_red" not in src, src  # no shared scratch for the reduction
    assert "tl_quad_sum" in src, src
    rows = [ln for ln in src.splitlines() if "float logits[" in ln]
    assert rows, src  # logits in registers: row slots x Q
    assert "float scale[" in src, src
    if not kept:  # the column tile fits the register budget: each thread's columns
        assert "float w[" in src, src
    # the transposed store: lane q % 4 of each quad stores value q
    assert "(tid % 4) ==" in src, src


@pytest.mark.nvrtc
def test_column_tile_over_the_register_budget_goes_to_shared_memory():
    """4 warpgroups over a 256 x 128 accumulator (64 words a thread) and a 32-word column copy of
    the weights: past 128 registers a thread with the rest, so the weights are read from shared."""
    src, msgs = source(256, 4, 32, 64, 512, "sm_90a")
    assert [m for m in msgs if "fragment w is kept in shared memory" in m and "registers a thread" in m], msgs
    assert "float w[" not in src and "tl_quad_sum" in src and "_red" not in src, src
    assert not [m for m in msgs if "spills" in m], msgs


@pytest.mark.nvrtc
def test_rows_split_over_warps_reduce_through_shared_memory():
    """mma.sync with the columns split over warps: 1 x 4 warps of 24 columns and segments of 16
    neither hold whole segments nor lie in one, so the reduction takes the full-tile shared scratch
    (never silently); 2 x 4 warps of 32 columns with segments of 32 (one a warp) or 64 (two warps'
    partials meet in a rows x 4 scratch) stay in registers, unless tl.disable_split_segment_reduce.
    The numbers: test_wgmma_policy.py (host emulator) and the GPU test."""
    src, msgs = source(64, 6, 16, 32, 128, "sm_80", policy=T.GemmWarpPolicy.FullCol)
    assert "s3_red" in src and "tl::gemm_ss<64, 96, 32, 1, 4," in src, src
    why = [m for m in msgs if "reduces through a shared-memory copy of s3" in m]
    assert why and "split over 4 warps" in why[0] and "neither hold whole segments of 16" in why[0], msgs
    src, msgs = source(128, 2, 64, 64, 256, "sm_80", policy=T.GemmWarpPolicy.Square)
    assert "s3_red" not in src and "s3_segs" in src, src
    src, msgs = source(128, 4, 32, 64, 256, "sm_80", policy=T.GemmWarpPolicy.Square)
    assert "s3_red" not in src and "tl_quad_sum" in src, src
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        src = tilelang.compile(indexer_kernel(128, 4, 32, 64, 256, policy=T.GemmWarpPolicy.Square),
                               target="cuda -arch=sm_80",
                               pass_configs={"tl.disable_split_segment_reduce": True}).get_kernel_source()
    assert "s3_red" in src, src


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("M,Q,H,K,threads", CASES + [(256, 4, 32, 64, 512)])
@pytest.mark.parametrize("wgmma", [True, False])
@pytest.mark.parametrize("policy", ["FullRow", "Square"])
def test_segment_reduce_on_gpu(M, Q, H, K, threads, wgmma, policy):
    cfg = {} if wgmma else {"tl.disable_wgmma": True}
    kern = tilelang.compile(indexer_kernel(M, Q, H, K, threads, policy=getattr(T.GemmWarpPolicy, policy)),
                            target="cuda", pass_configs=cfg)
    run(kern, M, Q, H, K, "cuda")


def bias_kernel(M, N, K, threads):
    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), bias: T.Tensor((N,), "float32"),
          Out: T.Tensor((N, M), "float32")):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((K, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            b_f = T.alloc_fragment((N,), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(bias, b_f)
            T.gemm(a_s, b_s, c, clear_accum=True)
            for i, j in T.Parallel(M, N):
                c[i, j] = c[i, j] + b_f[j]
            for j, i in T.Parallel(N, M):  # transposed store, walked in c's slots
                Out[j, i] = c[i, j]
    return k


@pytest.mark.parametrize("target", ["cpu", "cuda -arch=sm_80", "cuda -arch=sm_90a"])
def test_bias_columns_and_transposed_store(target):
    M, N, K, threads = 64, 64, 32, 128
    kern = tilelang.compile(bias_kernel(M, N, K, threads), target=target)
    if target != "cpu":
        src = kern.get_kernel_source()
        assert "float b_f[" in src and "c_red" not in src, src  # bias: the thread's columns, in registers
        return
    A, B, bias = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16), torch.randn(N)
    Out = torch.full((N, M), float("nan"))
    kern(A, B, bias, Out)
    ref = (A.double() @ B.double() + bias.double()[None]).T
    torch.testing.assert_close(Out.double(), ref, rtol=1e-4, atol=1e-2)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("wgmma", [True, False])
def test_bias_columns_and_transposed_store_on_gpu(wgmma):
    M, N, K, threads = 128, 128, 64, 256
    kern = tilelang.compile(bias_kernel(M, N, K, threads), target="cuda",
                            pass_configs={} if wgmma else {"tl.disable_wgmma": True})
    A, B = torch.randn(M, K, dtype=torch.float16, device="cuda"), torch.randn(K, N, dtype=torch.float16, device="cuda")
    bias, Out = torch.randn(N, device="cuda"), torch.full((N, M), float("nan"), device="cuda")
    kern(A, B, bias, Out)
    ref = (A.double() @ B.double() + bias.double()[None]).T
    torch.testing.assert_close(Out.double(), ref, rtol=1e-4, atol=1e-2)
