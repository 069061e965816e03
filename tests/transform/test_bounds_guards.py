"""Tile-op lowering drops the bounds guards of global tiles that block/loop ranges prove in range,
and keeps them on ragged tiles and symbolic shapes (CPU lowering, CUDA source, CPU runs)."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.backend.cpu.pipeline import PASSES
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.visitor import collect
from tilelang.testing.kernels import gemm
from tilelang.transform.pass_manager import PassContext, run_passes


def guards(func):
    """The bounds conditions (`x < dim`, `x >= 0`) the CPU lowering put on global accesses."""
    f = run_passes(func, PASSES, PassContext())
    conds = [n.cond for n in collect(f.body, lambda n: isinstance(n, (S.IfThenElse, E.Select)))]
    return [c for cond in conds for c in collect(cond, lambda n: isinstance(n, E.Binary) and n.op in ("<", ">="))]


def run_gemm(func, M, N, K):
    k = tilelang.compile(func, target="cpu")
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    storage = torch.full((M * N + 512,), 777.0)  # poisoned, with a sentinel tail past C
    c = storage[: M * N].view(M, N)
    k(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-3, atol=1e-3)
    assert torch.all(storage[M * N:] == 777.0), "a store landed past the end of C"


def test_divisible_static_gemm_has_no_guards():
    assert guards(gemm(256, 128, 96, 64, 64, 32)) == []
    run_gemm(gemm(256, 128, 96, 64, 64, 32), 256, 128, 96)


@pytest.mark.parametrize("M, N, K, dims", [(100, 128, 96, {"100"}),     # ragged M only
                                           (128, 72, 40, {"72", "40"}),  # ragged N and K
                                           (61, 37, 23, {"61", "37", "23"})])
def test_ragged_gemm_keeps_exactly_the_ragged_guards(M, N, K, dims):
    f = gemm(M, N, K, 32, 32, 16)
    assert {str(c.b) for c in guards(f) if c.op == "<"} == dims
    run_gemm(gemm(M, N, K, 32, 32, 16), M, N, K)


def test_symbolic_shapes_keep_their_guards():
    m = T.dynamic("m")

    @T.prim_func
    def scale(A: T.Tensor((m, 64), "float32"), C: T.Tensor((m, 64), "float32")):
        with T.Kernel(T.ceildiv(m, 32), threads=128) as bx:
            s = T.alloc_shared((32, 64), "float32")
            T.copy(A[bx * 32, 0], s)
            T.copy(s, C[bx * 32, 0])

    gs = guards(scale)
    assert len(gs) == 2 and all(str(g.b) == "m" for g in gs)  # rows only: the 64 columns fit
    k = tilelang.compile(scale, target="cpu")
    for rows in (70, 96):
        a = torch.randn(rows, 64)
        storage = torch.full((rows * 64 + 256,), 777.0)
        c = storage[: rows * 64].view(rows, 64)
        k(a, c)
        torch.testing.assert_close(c, a)
        assert torch.all(storage[rows * 64:] == 777.0)


def test_halo_tiles_get_a_lower_guard():
    @T.prim_func
    def shift(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            s = T.alloc_shared((16,), "float32")
            T.copy(A[bx * 16 - 2], s)  # the first block's tile starts at -2
            T.copy(s, C[bx * 16])

    ops = sorted(g.op for g in guards(shift))
    assert ops == [">="]  # bx*16 - 2 + 15 < 64: no upper guard
    k = tilelang.compile(shift, target="cpu")
    a = torch.randn(64).double().float()
    c = torch.full((64,), 777.0)
    k(a, c)
    want = torch.cat([torch.zeros(2), a[:-2]]).double()
    torch.testing.assert_close(c.double(), want)


def _nvrtc_or_skip():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


def cuda_source(func, arch="sm_80", **pc):
    _nvrtc_or_skip()
    k = tilelang.compile(func, target=f"cuda -arch={arch}", pass_configs={"tl.disable_wgmma": True, **pc})
    return k.get_kernel_source()


def test_cuda_mma_gemm_static_shape_has_no_guards():
    src = cuda_source(gemm(1024, 1024, 1024, 128, 128, 32))
    assert "< 1024" not in src  # no cp.async predicate, no epilogue if
    assert src.count("tl::cp_async_zfill<16>(") > 0 and "tl_store2(" in src
    assert "(ko + 2) < 32" in src  # the pipeline's own guard on the loads ahead stays


def test_cuda_mma_gemm_ragged_shapes_keep_guards():
    src = cuda_source(gemm(1000, 1024, 1000, 128, 128, 32))
    assert "< 1000)" in src  # M rows of A and C, K columns of A / rows of B
    assert "< 1024" not in src  # N divides: no column guard on B or C
    lines = src.splitlines()
    store = next(n for n, line in enumerate(lines) if "tl_store2(" in line)
    assert "if (" in lines[store - 1] and "< 1000" in lines[store - 1]  # the epilogue store stays guarded


def test_cuda_symbolic_gemm_keeps_guards():
    m = T.dynamic("m")
    src = cuda_source(gemm(m, 1024, 1024, 128, 128, 32))
    assert "<= tl_m_lt)" in src  # i < m, compared in 32 bits (codegen/cuda.narrow_dims)
