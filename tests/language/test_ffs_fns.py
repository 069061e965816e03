"""T.__ffs and T.__fns (CUDA's __ffs / __ffsll and __fns, PTX fns.b32) on the CPU backend and on the host
emulator of the sm_90a CUDA, against a Python model of the PTX ISA's description."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip


def ffs_model(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return (x & -x).bit_length()


def fns_model(mask: int, base: int, offset: int) -> int:
    if offset == 0:
        return base if (mask >> base) & 1 else 0xFFFFFFFF
    left, step, pos = abs(offset) - 1, 1 if offset > 0 else -1, base
    while 0 <= pos < 32:
        if (mask >> pos) & 1:
            if left == 0:
                return pos
            left -= 1
        pos += step
    return 0xFFFFFFFF


def program(n):
    @T.prim_func
    def f(X: T.Tensor((n,), "int32"), Y: T.Tensor((n,), "int64"), Base: T.Tensor((n,), "int32"),
          Off: T.Tensor((n,), "int32"), F32: T.Tensor((n,), "int32"), F64: T.Tensor((n,), "int32"),
          N: T.Tensor((n,), "int64")):
        with T.Kernel(1, threads=n) as bx:
            for i in T.Parallel(n):
                F32[i] = T.__ffs(X[i])
                F64[i] = T.__ffs(Y[i])
                N[i] = T.Cast("int64", T.__fns(X[i], Base[i], Off[i]))
    return f


def inputs(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-2**31, 2**31, n, dtype=np.int64)
    x[:4] = [0, 1, -2**31, 0x2AAAAAAA]
    y = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64) >> rng.integers(0, 63, n)
    y[:2] = [0, -2**63]
    base = rng.integers(0, 32, n).astype(np.int32)
    off = rng.integers(-6, 7, n).astype(np.int32)
    return x.astype(np.int32), y, base, off


def check(x, y, base, off, f32, f64, nn):
    for i in range(len(x)):
        assert f32[i] == ffs_model(int(x[i]), 32), (i, x[i])
        assert f64[i] == ffs_model(int(y[i]), 64), (i, y[i])
        assert nn[i] == fns_model(int(x[i]) & 0xFFFFFFFF, int(base[i]), int(off[i])), (i, x[i], base[i], off[i])


def test_model_matches_the_ptx_examples():
    assert [fns_model(0xAAAAAAAA, b, o) for b, o in ((3, 1), (3, -1), (2, 1), (2, -1))] == [3, 3, 3, 1]


def test_ffs_fns_on_the_cpu():
    n = 64
    x, y, base, off = inputs(n, 1)
    outs = [torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int64)]
    tilelang.compile(program(n), target="cpu")(*(torch.from_numpy(a) for a in (x, y, base, off)), *outs)
    check(x, y, base, off, *(o.numpy() for o in outs))


@pytest.mark.nvrtc
def test_ffs_fns_in_the_cuda_source_on_the_host_emulator():
    host = host_cuda_or_skip()
    n = 64
    x, y, base, off = inputs(n, 2)
    k = tilelang.compile(program(n), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert "tl_ffs32(" in src and "tl_ffs64(" in src and "tl_fns(" in src
    outs = [torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int64)]
    prog = host.HostProgram({"f": k})
    prog.run("f", [*(torch.from_numpy(a) for a in (x, y, base, off)), *outs])
    prog.close()
    check(x, y, base, off, *(o.numpy() for o in outs))


def test_ffs_needs_an_integer():
    with pytest.raises(TypeError, match="__ffs needs an integer operand"):
        T.__ffs(1.5)
