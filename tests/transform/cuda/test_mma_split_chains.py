"""tl::gemm_ss splits a short warp tile's mma chains over two accumulator sets (gemm_sm80.h,
TL_MMA_SPLIT_CHAINS; off with pass_config `tl.disable_mma_split_chains`). The generated CUDA runs on
the host (tilelang/testing/host_cuda: the header with host ldmatrix / mma.sync) against float64
torch on random inputs, with and without the split, for fp16, bf16, tf32 and int8 operands."""
import pytest

import tilelang
import tilelang.language as T

from .conftest import check_gemm_nt, gemm_nt_operands

SM80 = "cuda -arch=sm_80"
OFF = {"tl.disable_mma_split_chains": True}


def gemm(M, N, K, dtype, acc):
    sdt = "tfloat32" if dtype == "float32" else dtype

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(1, threads=128) as _bx:
            a_s = T.alloc_shared((M, K), sdt)
            b_s = T.alloc_shared((N, K), sdt)
            c = T.alloc_fragment((M, N), acc)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.clear(c)
            T.gemm(a_s, b_s, c, transpose_B=True)
            T.copy(c, C)

    return main


# name: (M, N, K, dtype, acc): 2 x 2 warps of 16 x 16 (2 mma tiles each), 8+ K slices: split
CASES = {
    "f16": (32, 32, 128, "float16", "float32"),
    "bf16": (32, 32, 256, "bfloat16", "float32"),
    "tf32": (32, 32, 64, "float32", "float32"),
    "i8": (32, 32, 256, "int8", "int32"),
    "f16_big_tile": (64, 64, 128, "float16", "float32"),  # 4 mma tiles a warp: in order
}


@pytest.fixture(scope="module")
def prog():
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    kernels = {}
    for name, (M, N, K, d, acc) in CASES.items():
        kernels[name] = tilelang.compile(gemm(M, N, K, d, acc), target=SM80)
    return host_cuda.HostProgram(kernels)


@pytest.fixture(scope="module")
def prog_off():
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    M, N, K, d, acc = CASES["f16"]
    return host_cuda.HostProgram({"f16": tilelang.compile(gemm(M, N, K, d, acc), target=SM80, pass_configs=OFF)})


def _run_and_check(p, name, seed):
    M, N, K, d, acc = CASES[name]
    a, b, c = gemm_nt_operands(M, N, K, d, acc, seed)
    p.run(name, [a, b, c])
    check_gemm_nt(a, b, c, d)


@pytest.mark.parametrize("name", list(CASES))
def test_split_chains_match_float64_on_host(prog, name):
    _run_and_check(prog, name, 11)


def test_in_order_matches_float64_on_host(prog_off):
    _run_and_check(prog_off, "f16", 12)


def test_switch_defines_the_macro():
    M, N, K, d, acc = CASES["f16"]
    on = tilelang.compile(gemm(M, N, K, d, acc), target=SM80).get_kernel_source()
    off = tilelang.compile(gemm(M, N, K, d, acc), target=SM80, pass_configs=OFF).get_kernel_source()
    assert "TL_MMA_SPLIT_CHAINS" not in on and "#define TL_MMA_SPLIT_CHAINS 0" in off
