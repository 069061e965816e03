"""T.Kernel(prelude=...): device source placed once at the top of the generated CUDA file, for the
functions the body calls with T.call_extern (as T.import_source does). Compiled with NVRTC and run
on the host emulator (generated CUDA on the CPU) against a torch reference."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError

PRELUDE = """
template <typename T>
__device__ T scaled_sub(T x, T y) { return 3 * x - y; }
"""


def kernel(n=256, prelude=PRELUDE, threads=128):
    @T.prim_func
    def k(A: T.Tensor((n,), T.int32), B: T.Tensor((n,), T.int32), C: T.Tensor((n,), T.int32)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads, prelude=prelude) as bx:
            tx = T.get_thread_binding()
            C[bx * threads + tx] = T.call_extern(T.int32, "scaled_sub", A[bx * threads + tx], B[bx * threads + tx])

    return k


@pytest.mark.nvrtc
def test_prelude_is_placed_once_before_the_kernel():
    src = tilelang.compile(kernel(), target="cuda -arch=sm_80").get_kernel_source()
    assert src.count("__device__ T scaled_sub(T x, T y)") == 1
    assert src.index("scaled_sub(T x") < src.index("__global__")
    assert "scaled_sub(" in src.split("__global__")[1]  # the body's call


@pytest.mark.nvrtc
def test_prelude_function_runs_on_host_emulator():
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    kern = tilelang.compile(kernel(), target="cuda -arch=sm_80")
    g = torch.Generator().manual_seed(9)
    a = torch.randint(-1000, 1000, (256,), dtype=torch.int32, generator=g)
    b = torch.randint(-1000, 1000, (256,), dtype=torch.int32, generator=g)
    c = torch.full((256,), 7, dtype=torch.int32)
    prog = host_cuda.HostProgram({"k": kern})
    try:
        prog.run("k", [a, b, c])
    finally:
        prog.close()
    assert torch.equal(c, 3 * a - b)


def test_prelude_must_be_text():
    with pytest.raises(TileLangError, match="prelude= takes the source text"):
        kernel(prelude=42)


def test_cuda_prelude_on_cpu_target_is_a_clear_error():
    with pytest.raises(TileLangError, match="CUDA-only code"):
        tilelang.compile(kernel(), target="cpu")
