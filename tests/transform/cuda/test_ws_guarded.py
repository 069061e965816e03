"""Warp specialization of a T.Pipelined loop whose copies sit under `if cond:` (a block-sparse
GEMM: `if Mask[by, bx, k]: T.copy(...); T.copy(...); T.gemm(...)`).

The TMA producer loads a stage only where cond holds and otherwise completes the stage's full
barrier with a plain arrival (no bytes); the consumers keep `if cond:` around the gemm. Before,
such a loop silently took the cp.async pipeline on sm_90a (one load in flight, each behind a
read of the mask).

Checks: the sm_90a source is warp-specialized with the guard on both sides; the kernel runs on
the host emulator (TMA, mbarriers, wgmma) and on the CPU backend and matches float64 on a fresh
random mask, a mask with whole rows of skipped tiles and an all-false mask; the same on the GPU."""
import pytest
import torch

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"


def blocksparse(M, N, K, bM, bN, bK, stages=2, threads=128):
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          Mask: T.Tensor((M // bM, N // bN, K // bK), "bool"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // bN, M // bM, threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bK, bN), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // bK, num_stages=stages):
                if Mask[by, bx, k]:
                    T.copy(A[by * bM, k * bK], A_s)
                    T.copy(B[k * bK, bx * bN], B_s)
                    T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bM, bx * bN])

    return f


def reference(a, b, mask, bM, bN, bK):
    ref = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    A, B = a.double(), b.double()
    for i in range(mask.shape[0]):
        for j in range(mask.shape[1]):
            for k in range(mask.shape[2]):
                if mask[i, j, k]:
                    ref[i * bM:(i + 1) * bM, j * bN:(j + 1) * bN] += \
                        A[i * bM:(i + 1) * bM, k * bK:(k + 1) * bK] @ B[k * bK:(k + 1) * bK, j * bN:(j + 1) * bN]
    return ref


CASE = (256, 256, 512, 128, 128, 32)


def _masks(g, shape):
    rnd = torch.rand(shape, generator=g) > 0.5
    rows = rnd.clone()
    rows[0] = False  # a block whose every iteration skips its loads
    return {"random": rnd, "empty_rows": rows, "none": torch.zeros(shape, dtype=torch.bool)}


def _inputs(seed):
    M, N, K, bM, bN, bK = CASE
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(K, N, generator=g).half()
    return a, b, _masks(g, (M // bM, N // bN, K // bK))


def _check(c, a, b, mask):
    M, N, K, bM, bN, bK = CASE
    ref = reference(a, b, mask, bM, bN, bK)
    assert (c.double() - ref).abs().max().item() <= 2e-2 + 2e-3 * ref.abs().max().item()


@pytest.mark.nvrtc
def test_guarded_copies_are_warp_specialized(host):
    k = tilelang.compile(blocksparse(*CASE), target=SM90)
    src = k.get_kernel_source()
    assert "tl::tma_load" in src and "tl::mbarrier_arrive_expect_tx" in src
    assert "cp_async" not in src
    # the producer's skipped iteration arrives on full; both sides read the mask
    assert "tl::mbarrier_arrive(&tl_full[" in src
    assert src.count("Mask[") == 2


@pytest.mark.nvrtc
def test_guarded_ws_runs_on_host_and_matches_float64(host):
    k = tilelang.compile(blocksparse(*CASE), target=SM90)
    prog = host.HostProgram({"k": k})
    a, b, masks = _inputs(11)
    try:
        for name, mask in masks.items():
            c = torch.full((CASE[0], CASE[1]), float("nan")).half()
            prog.run("k", [a, b, mask, c])
            _check(c, a, b, mask)
    finally:
        prog.close()


def test_guarded_loop_matches_float64_on_cpu():
    k = tilelang.compile(blocksparse(*CASE), target="c")
    a, b, masks = _inputs(12)
    for mask in masks.values():
        c = torch.full((CASE[0], CASE[1]), float("nan")).half()
        k(a, b, mask, c)
        _check(c, a, b, mask)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_guarded_ws_on_gpu():
    k = tilelang.compile(blocksparse(*CASE), target="cuda")
    a, b, masks = _inputs(13)
    for mask in masks.values():
        c = torch.full((CASE[0], CASE[1]), float("nan"), device="cuda").half()
        k(a.cuda(), b.cuda(), mask.cuda(), c)
        torch.cuda.synchronize()
        _check(c.cpu(), a, b, mask)


@pytest.mark.nvrtc
def test_copies_the_producer_cannot_take_say_why(host):
    """A body that is more than one `if` around its copies keeps the cp.async pipeline, and says so."""
    import warnings

    M, N, K, bM, bN, bK = CASE

    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          Mask: T.Tensor((M // bM, N // bN, K // bK), "bool"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // bN, M // bM, threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bK, bN), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // bK, num_stages=2):
                C_l[0, 0] = C_l[0, 0] + 0.0
                if Mask[by, bx, k]:
                    T.copy(A[by * bM, k * bK], A_s)
                    T.copy(B[k * bK, bx * bN], B_s)
                    T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bM, bx * bN])

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        src = tilelang.compile(f, target=SM90).get_kernel_source()
    assert "tl::tma_load" not in src
    assert any("no warp specialization (TMA pipeline): T.copy A -> A_s is not one the producer can issue" in str(w.message)
               for w in rec), [str(w.message) for w in rec]
