"""Dynamic dims compiled as 16-byte row multiples (jit/aligned_dims.py) and checked per call.

A GEMM over `T.dynamic` m, n, k: its CUDA kernel is compiled assuming k and n are multiples of 8
(fp16 rows of 16-byte multiples), which gives it TMA / cp.async loads; a call whose k or n
breaks that runs the same program compiled without the assumption, and says so. Checked
against float64 on the GPU (marked `cuda`), with ragged m, n, k around the tile sizes."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.arith.divisibility import assume_divisors, is_multiple, known_divisor
from tilelang.ir.expr import Var


def dyn_gemm(bm=128, bn=128, bk=32, threads=128, stages=3):
    m, n, k = T.dynamic("m"), T.dynamic("n"), T.dynamic("k")

    @T.prim_func
    def main(A: T.Tensor((m, k), T.float16), B: T.Tensor((k, n), T.float16), C: T.Tensor((m, n), T.float16)):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for kk in T.Pipelined(T.ceildiv(k, bk), num_stages=stages):
                T.copy(A[by * bm, kk * bk], a_s)
                T.copy(B[kk * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return main


def test_known_divisor_uses_assumptions():
    k, j = Var("k"), Var("j")
    assert known_divisor(k * 4 + 8) == 4
    assert not is_multiple(k * 2, 16)
    with assume_divisors({k: 8}):
        assert known_divisor(k * 2) == 16
        assert is_multiple(k * 2, 16)
        assert known_divisor(k + j) == 1
        assert known_divisor(k * j) == 8
    assert known_divisor(k * 2) == 2  # the assumption ends with the block


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_dynamic_rows_take_the_vector_path(arch):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(dyn_gemm(), out_idx=None, target=f"cuda -arch={arch}")
    src = kern.get_kernel_source()
    assert {v.name: d for v, d in kern.aligned.divisors.items()} == {"k": 8, "n": 8}
    assert ("tma_load" in src) if arch == "sm_90a" else ("cp_async" in src)
    assert not [w for w in got if "not a multiple of 8 elements" in str(w.message)]


def test_disable_dynamic_alignment():
    kern = tilelang.compile(dyn_gemm(), target="cuda -arch=sm_90a",
                            pass_configs={"tl.disable_dynamic_alignment": True})
    assert kern.aligned is None
    assert "tma_load" not in kern.get_kernel_source()


def test_cpu_backend_has_no_assumption():
    kern = tilelang.compile(dyn_gemm(bm=32, bn=32, threads=128, stages=2), target="cpu")
    assert kern.aligned is None
    a, b = torch.randn(40, 50, dtype=torch.float16), torch.randn(50, 30, dtype=torch.float16)
    c = torch.empty(40, 30, dtype=torch.float16)
    kern(a, b, c)
    ref = a.double() @ b.double()
    assert ((c.double() - ref).abs().max() / ref.abs().max()).item() < 2e-3


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_dynamic_gemm_gpu_aligned_and_fallback():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(dyn_gemm(), target="cuda")  # the device's own arch (cubins do not run elsewhere)
    for (m, n, k) in [(1000, 1032, 1048), (256, 384, 512), (130, 136, 72)]:
        _gpu_check(kern, m, n, k)
    assert getattr(kern, "_unaligned_artifact", None) is None  # every call above met the divisors
    with pytest.warns(Warning, match="k=1050 is not a multiple of 8"):
        _gpu_check(kern, 300, 264, 1050)
    _gpu_check(kern, 300, 261, 1048)  # n breaks it: also the general kernel, no second warning
    _gpu_check(kern, 512, 512, 512)  # and back to the fast one


def _gpu_check(kern, m, n, k):
    a = torch.randn(m, k, dtype=torch.float16, device="cuda")
    b = torch.randn(k, n, dtype=torch.float16, device="cuda")
    c = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
    kern(a, b, c)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 2e-3, (m, n, k, err)
