"""compile_flags reach the backend compiler (C compiler on CPU, NVRTC on CUDA)."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import CompileError


def _add_one():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = A[i] + 1.0

    return main


def test_cpu_compile_flags_are_passed_to_the_c_compiler():
    k = tilelang.compile(_add_one(), target="cpu", compile_flags="-O1 -DTL_FLAG_TEST=1")
    assert k.artifact.lib.flags[-2:] == ("-O1", "-DTL_FLAG_TEST=1")
    a = torch.randn(64)
    b = torch.empty(64)
    k(a, b)
    assert torch.equal(b, a + 1)  # one fp32 add, exactly
    with pytest.raises(CompileError):
        tilelang.compile(_add_one(), target="cpu", compile_flags=["-fno-such-flag-tl"])


def test_cpu_drops_nvcc_only_flags():
    """The nvcc flag list the public MLA examples pass as jit compile_flags: the CPU target keeps
    the C compiler's (-O3, -U..., -DNDEBUG, -Xcompiler's values) and drops the rest."""
    nvcc = ["-O3", "-Wno-deprecated-declarations", "-U__CUDA_NO_HALF_OPERATORS__", "--expt-relaxed-constexpr",
            "--expt-extended-lambda", "--ptxas-options=-v,--register-usage-level=10", "-Xptxas", "-v",
            "-arch", "sm_90a", "--use_fast_math", "-lineinfo", "-Xcompiler", "-DTL_FLAG_TEST=1,-O2", "-DNDEBUG"]
    k = tilelang.compile(_add_one(), target="cpu", compile_flags=nvcc)
    assert k.artifact.lib.flags[-6:] == ("-O3", "-Wno-deprecated-declarations", "-U__CUDA_NO_HALF_OPERATORS__",
                                          "-DTL_FLAG_TEST=1", "-O2", "-DNDEBUG")
    a = torch.randn(64)
    b = torch.empty(64)
    k(a, b)
    assert torch.equal(b, a + 1)


def test_cuda_compile_flags_are_passed_to_nvrtc():
    pytest.importorskip("cuda.bindings")
    k = tilelang.compile(_add_one(), target="cuda -arch=sm_80", compile_flags=["-DTL_FLAG_TEST=1"])
    assert "-DTL_FLAG_TEST=1" in k.artifact.compiled.options
    with pytest.raises(CompileError):
        tilelang.compile(_add_one(), target="cuda -arch=sm_80", compile_flags=["--no-such-nvrtc-flag"])
    with pytest.raises(TypeError):
        tilelang.compile(_add_one(), target="cpu", compile_flags=[3])
