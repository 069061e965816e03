"""TVMScript-style programs compile for CUDA (NVRTC, sm_80 and sm_90a): T.handle parameters bound by
T.match_buffer, T.If/T.While frames, T.tvm_storage_sync, blocks, string literals of extern calls.
Their results are checked on the CPU backend (tests/language/test_tir_*.py)."""
import pytest

import tilelang
from tests.language.test_tir_blocks import block_gemm
from tests.language.test_tir_frames import elementwise, tvm_style_gemm
from tilelang.backend.cuda import nvrtc

nvrtc_only = pytest.mark.skipif(not nvrtc.nvrtc_available(), reason="NVRTC not found")
ARCHS = ["sm_80", "sm_90a"]


@nvrtc_only
@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_match_buffer_gemm_compiles(arch):
    src = tilelang.compile(tvm_style_gemm(256, 256, 128, 64, 64, 32, "float16", "float32"),
                           target=f"cuda -arch={arch}").get_kernel_source()
    assert "main(tl_half* __restrict__ A, tl_half* __restrict__ B, tl_half* __restrict__ C" in src
    assert "tl::gemm_ss" in src  # the tile GEMM, as with T.Tensor parameters


@nvrtc_only
@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_frames_blocks_and_strings_compile(arch):
    src = tilelang.compile(elementwise(), target=f"cuda -arch={arch}").get_kernel_source()
    assert "tvm_style_ew(" in src and "__syncthreads();" in src and "while (" in src
    src = tilelang.compile(block_gemm(40, 23, 17), target=f"cuda -arch={arch}").get_kernel_source()
    # T.where guards the block; T.init runs at the reduction axis' start
    assert "if (((((by * 16) + i) < 40) && (((bx * 16) + j) < 23))) {\n          if ((k == 0)) {" in src
