"""T.gemm on a column slice of a shared tile (sparse MLA backward: `T.gemm(dP, Q_shared[:, :D], acc,
transpose_A=True)` and `Q_shared[:, D:]`): where the slice takes whole rows and whole 64-column panels
of a 16-bit tile longer than 128 bytes per row, it runs on mma.sync with the tile kept in panels (it
ran on CUDA cores, and spilled). Results against float64 on the CPU backend and (marked cuda) the GPU."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def sliced(M=64, N=32, D=128, tail=64, dtype="bfloat16"):
    @T.prim_func
    def k(P: T.Tensor((M, N), dtype), Q: T.Tensor((M, D + tail), dtype), O1: T.Tensor((N, D), "float32"),
          O2: T.Tensor((N, tail), "float32")):
        with T.Kernel(1, threads=256) as _:
            P_s = T.alloc_shared((M, N), dtype)
            Q_s = T.alloc_shared((M, D + tail), dtype)
            acc = T.alloc_fragment((N, D), "float32")
            acc_t = T.alloc_fragment((N, tail), "float32")
            T.copy(P, P_s)
            T.copy(Q, Q_s)
            T.clear(acc)
            T.clear(acc_t)
            T.gemm(P_s, Q_s[:, :D], acc, transpose_A=True)
            T.gemm(P_s, Q_s[:, D:], acc_t, transpose_A=True)
            T.copy(acc, O1)
            T.copy(acc_t, O2)

    return k


def _compile(target, **kw):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(sliced(**kw), target=target)
    return kern, [str(w.message) for w in got]


def _check(kern, device):
    M, N, D, tail = 64, 32, 128, 64
    p = torch.randn(M, N, device=device).bfloat16()
    q = torch.randn(M, D + tail, device=device).bfloat16()
    o1 = torch.full((N, D), float("nan"), device=device)
    o2 = torch.full((N, tail), float("nan"), device=device)
    kern(p, q, o1, o2)
    ref = p.double().cpu().T @ q.double().cpu()
    torch.testing.assert_close(o1.double().cpu(), ref[:, :D], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(o2.double().cpu(), ref[:, D:], rtol=1e-4, atol=1e-4)


def test_sliced_gemm_cpu_matches_float64():
    _check(_compile("cpu")[0], "cpu")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_panel_slices_take_mma_sync_with_panel_offsets(arch):
    kern, msgs = _compile(f"cuda -arch={arch}")
    src = kern.get_kernel_source()
    assert not any("CUDA cores" in m for m in msgs), msgs
    # B is a 64-row panel tile: the first slice starts at the tile, the tail at panel 2 (2 * 64 * 64 elements)
    assert "tl::gemm_ss<32, 128, 64, 1, 8, true, false, 32, 128, true, true, tl::bfloat16_t, 0, 64>(P_s, Q_s, acc)" in src
    assert "true, false, 32, 64, true, true, tl::bfloat16_t, 0, 64>(P_s, (Q_s + 8192), acc_t)" in src


def test_slice_off_a_panel_edge_stays_on_cuda_cores():
    @T.prim_func
    def k(P: T.Tensor((64, 32), "bfloat16"), Q: T.Tensor((64, 192), "bfloat16"), O: T.Tensor((32, 96), "float32")):
        with T.Kernel(1, threads=128) as _:
            P_s = T.alloc_shared((64, 32), "bfloat16")
            Q_s = T.alloc_shared((64, 192), "bfloat16")
            acc = T.alloc_fragment((32, 96), "float32")
            T.copy(P, P_s)
            T.copy(Q, Q_s)
            T.clear(acc)
            T.gemm(P_s, Q_s[:, 32:128], acc, transpose_A=True)
            T.copy(acc, O)

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        tilelang.compile(k, target="cuda -arch=sm_80")
    assert any("runs on CUDA cores" in str(w.message) for w in got)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_sliced_gemm_cuda_matches_float64():
    _check(_compile("cuda")[0], "cuda")
