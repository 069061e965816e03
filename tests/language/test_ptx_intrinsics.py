"""T.ptx_ldmatrix / T.ptx_mma / T.access_ptr written by hand: CUDA text, argument checks, a run on the CPU backend."""
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError


def _one_warp_mma():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), B: T.Tensor((8, 16), "float16"), C: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=32) as bx:
            A_s = T.alloc_shared((16, 16), "float16")
            B_s = T.alloc_shared((8, 16), "float16")
            a = T.alloc_local((8,), "float16")
            b = T.alloc_local((4,), "float16")
            c = T.alloc_local((4,), "float32")
            tx = T.get_thread_binding()
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(c)
            T.ptx_ldmatrix(False, 4, T.access_ptr(A_s[tx % 16, 8 * (tx // 16)], "r"), T.access_ptr(a[0], "w"))
            T.ptx_ldmatrix(False, 2, T.access_ptr(B_s[tx % 8, 8 * ((tx // 8) % 2)], "r"), T.access_ptr(b, "w"))
            T.ptx_mma("float32", "m16n8k16", "row", "col", "fp16", "fp16", "fp32", a.data, 0, b.data, 0, c.data, 0,
                      False)
            for s in T.unroll(4):
                C[tx // 4 + 8 * (s // 2), (tx % 4) * 2 + s % 2] = c[s]
    return k


def test_cuda_text_of_hand_written_ptx():
    src = tilelang.compile(_one_warp_mma(), target="cuda -arch=sm_80").get_kernel_source()
    # sources as 32-bit shared addresses (tl.disable_shared_address_slots)
    assert "tl::ldmatrix_frag<4, false>(a, (tl::smem_addr(A_s) + static_cast<uint32_t>(" in src
    assert "tl::ldmatrix_frag<2, false>(b, (tl::smem_addr(B_s) + static_cast<uint32_t>(" in src
    off = tilelang.compile(_one_warp_mma(), target="cuda -arch=sm_80",
                           pass_configs={"tl.disable_shared_address_slots": True}).get_kernel_source()
    assert "tl::ldmatrix_frag<4, false>(a, &A_s[" in off and "smem_addr(A_s)" not in off
    assert "tl::mma_frag<tl::half_t, tl::half_t, float, 16, 8, 16>(c, a, b);" in src
    # the shared tiles are written by T.copy and read by ldmatrix: a barrier between
    assert src.index("__syncthreads();") < src.index("tl::ldmatrix_frag")


def test_hand_written_ptx_runs_on_cpu():
    import torch

    a, b = torch.randn(16, 16).half(), torch.randn(8, 16).half()
    c = torch.full((16, 8), float("nan"))
    tilelang.compile(_one_warp_mma(), target="cpu")(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double().T, rtol=1e-5, atol=1e-5)


def test_ptx_argument_errors():
    with pytest.raises(TileLangError, match="only the row.col operand layout"):
        @T.prim_func
        def k1(C: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                a = T.alloc_local((8,), "float16")
                c = T.alloc_local((4,), "float32")
                T.ptx_mma("float32", "m16n8k16", "col", "col", "fp16", "fp16", "fp32", a.data, 0, a.data, 0,
                          c.data, 0, False)
    with pytest.raises(TileLangError, match="m16n8k16, got shape 'm16n8k8'"):
        @T.prim_func
        def k2(C: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                a = T.alloc_local((8,), "float16")
                c = T.alloc_local((4,), "float32")
                T.ptx_mma("float32", "m16n8k8", "row", "col", "fp16", "fp16", "fp32", a.data, 0, a.data, 0,
                          c.data, 0, False)
    with pytest.raises(TileLangError, match="the source must be shared memory"):
        @T.prim_func
        def k3(A: T.Tensor((16, 16), "float16")):
            with T.Kernel(1, threads=32) as bx:
                a = T.alloc_local((8,), "float16")
                T.ptx_ldmatrix(False, 4, T.access_ptr(A[0, 0], "r"), T.access_ptr(a[0], "w"))
