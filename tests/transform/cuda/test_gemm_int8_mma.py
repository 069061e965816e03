"""int8 T.gemm on mma.sync m16n8k32 (s8 x s8 -> s32), both operands K-major (A M x K, B N x K:
transpose_B=True), including A from a fragment that goes through shared memory (the w4a8 dequant GEMM).
Other int8 shapes run on CUDA cores and say why. CPU backend and (marked cuda) GPU against exact integers."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def igemm(M, N, K, bM, bN, bK, threads, trans_b=True, a_frag=False, stages=2):
    b_shape, bs_shape = ((N, K), (bN, bK)) if trans_b else ((K, N), (bK, bN))

    @T.prim_func
    def k(A: T.Tensor((M, K), "int8"), B: T.Tensor(b_shape, "int8"), C: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "int8")
            B_s = T.alloc_shared(bs_shape, "int8")
            A_f = T.alloc_fragment((bM, bK), "int8")
            acc = T.alloc_fragment((bM, bN), "int32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                T.copy(A[by * bM, ko * bK], A_s)
                if trans_b:
                    T.copy(B[bx * bN, ko * bK], B_s)
                else:
                    T.copy(B[ko * bK, bx * bN], B_s)
                if a_frag:
                    for i, j in T.Parallel(bM, bK):
                        A_f[i, j] = A_s[i, j] - 1
                    T.gemm(A_f, B_s, acc, transpose_B=trans_b)
                else:
                    T.gemm(A_s, B_s, acc, transpose_B=trans_b)
            T.copy(acc, C[by * bM, bx * bN])

    return k


def _compile(fn, target):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(fn, target=target)
    return kern, [str(w.message) for w in got]


def _run(kern, M, N, K, trans_b, a_frag, device):
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8, device=device)
    b = torch.randint(-128, 128, (N, K) if trans_b else (K, N), dtype=torch.int8, device=device)
    c = torch.full((M, N), -7, dtype=torch.int32, device=device)
    kern(a, b, c)
    av = a.cpu().long()
    if a_frag:  # A_s - 1 in int8 wraps
        av = (av - 1 + 128) % 256 - 128
    bv = b.cpu().long()
    ref = av @ (bv.T if trans_b else bv)
    assert torch.equal(c.cpu().long(), ref)


CASES = [(64, 64, 128, 64, 64, 64, 128, False), (96, 64, 256, 32, 32, 128, 128, True)]


@pytest.mark.parametrize("M, N, K, bM, bN, bK, threads, a_frag", CASES)
def test_int8_gemm_cpu_exact(M, N, K, bM, bN, bK, threads, a_frag):
    kern, _ = _compile(igemm(M, N, K, bM, bN, bK, threads, a_frag=a_frag), "cpu")
    _run(kern, M, N, K, True, a_frag, "cpu")


@pytest.mark.parametrize("a_frag", [False, True])
def test_int8_gemm_takes_mma_sync_s8(a_frag):
    kern, msgs = _compile(igemm(96, 64, 256, 32, 32, 128, 128, a_frag=a_frag), "cuda -arch=sm_80")
    src = kern.get_kernel_source()
    assert "true, true, int8_t>(" in src, src
    assert not any("CUDA cores" in m for m in msgs), msgs


def test_int8_gemm_with_n_major_b_stays_on_cuda_cores_and_says_why():
    # 32x32x32 tiles: the CUDA-core fallback with a 64-deep k-step took NVRTC ~50 s; the shape has no
    # bearing on the operand-major check this test is about
    _, msgs = _compile(igemm(32, 32, 64, 32, 32, 32, 128, trans_b=False), "cuda -arch=sm_80")
    assert any("int8 mma.sync needs both operands K-major" in m for m in msgs), msgs


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("M, N, K, bM, bN, bK, threads, a_frag", CASES)
@pytest.mark.parametrize("no_wgmma", [False, True])
def test_int8_gemm_cuda_exact(M, N, K, bM, bN, bK, threads, a_frag, no_wgmma):
    """no_wgmma: the mma.sync path on the GPU's own arch (a cubin for sm_80 does not load on sm_90)."""
    fn = igemm(M, N, K, bM, bN, bK, threads, a_frag=a_frag)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(fn, target="cuda", pass_configs={"tl.disable_wgmma": True} if no_wgmma else None)
    _run(kern, M, N, K, True, a_frag, "cuda")


def test_int8_pipelined_gemm_with_one_k_slice_per_stage_compiles():
    """Fuzz seed 793: a 32-deep int8 k-step is one m16n8k32 slice; the fused mainloop, which takes an even
    number of slices per stage, must leave it alone (NVRTC's static_assert failed)."""
    kern, _ = _compile(igemm(64, 128, 96, 16, 128, 32, 128, stages=2), "cuda -arch=sm_80")
    assert "gemm_ss_pipe" not in kern.get_kernel_source()
    kern_cpu, _ = _compile(igemm(64, 128, 96, 16, 128, 32, 128, stages=2), "cpu")
    _run(kern_cpu, 64, 128, 96, True, False, "cpu")
