"""T.__ldg: an element of a global tensor read through CUDA's read-only data cache (`__ldg(&x[i])`), a plain load
on the CPU backend; the CUDA source runs on the host emulator. It did not exist."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip
from tilelang.errors import DSLTypeError


def program(dtype, n=128):
    @T.prim_func
    def f(x: T.Tensor((n,), dtype), M: T.Tensor((n // 8, 8), dtype), y: T.Tensor((n,), dtype)):
        with T.Kernel(n // 32, threads=32) as pid:
            tx = T.get_thread_binding()
            i = pid * 32 + tx
            y[i] = T.__ldg(x[i]) * 2.0 + T.__ldg(M, (i // 8, i % 8))

    return f


def reference(x, m, dtype):
    return (x.double() * 2 + m.reshape(-1).double()).to(getattr(torch, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_ldg_on_the_cpu(dtype):
    td = getattr(torch, dtype)
    x, m = torch.randn(128).to(td), torch.randn(16, 8).to(td)
    y = torch.zeros(128, dtype=td)
    tilelang.compile(program(dtype), target="cpu")(x, m, y)
    torch.testing.assert_close(y.double(), reference(x, m, dtype).double(), rtol=1e-2, atol=1e-2)


@pytest.mark.nvrtc
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_ldg_in_the_cuda_source_on_the_host_emulator(dtype):
    host = host_cuda_or_skip()
    k = tilelang.compile(program(dtype), target="cuda -arch=sm_90a")
    assert "__ldg(&" in k.get_kernel_source()
    td = getattr(torch, dtype)
    x, m = torch.randn(128).to(td), torch.randn(16, 8).to(td)
    y = torch.zeros(128, dtype=td)
    prog = host.HostProgram({"f": k})
    try:
        prog.run("f", [x, m, y])
    finally:
        prog.close()
    torch.testing.assert_close(y.double(), reference(x, m, dtype).double(), rtol=1e-2, atol=1e-2)


def test_ldg_of_a_shared_tile_is_an_error():
    with pytest.raises(DSLTypeError, match="read-only data cache serves global tensors"):
        @T.prim_func
        def f(x: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((32,), "float32")
                T.copy(x, s)
                x[0] = T.__ldg(s[1])
