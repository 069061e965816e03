"""T.reduce and its kinds beyond sum / max / min (op/reduce_rules.py): bitand / bitor / bitxor,
nan_propagate on float16 / bfloat16, the batch and annotations arguments, and T.atomic_or. Each
kernel runs on the CPU backend and, as CUDA, on the host emulator, against numpy / float64
references on fresh random inputs."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip

M, N = 32, 48


def bit_reduces():
    @T.prim_func
    def k(X: T.Tensor((M, N), "int32"), R: T.Tensor((5, M), "int32"), C: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((M, N), "int32")
            r = T.alloc_fragment((M,), "int32")
            c = T.alloc_fragment((N,), "int32")
            T.copy(X, x)
            T.reduce_bitand(x, r, dim=1)
            T.copy(r, R[0, :])
            T.reduce_bitor(x, r, dim=1, batch=2)
            T.copy(r, R[1, :])
            T.reduce_bitxor(x, r, dim=-1)
            T.copy(r, R[2, :])
            T.reduce(x, r, "max", 1, True)
            T.copy(r, R[3, :])
            T.reduce_bitxor(x, r, dim=1, clear=False)  # folds the max in: max ^ xor of the row
            T.copy(r, R[4, :])
            T.reduce(x, c, "bitor", 0, True, annotations={"enable_fadd2": False})
            T.copy(c, C)
    return k


def check_bits(x, r, c):
    xv = x.numpy().astype(np.int64)
    assert (r[0].numpy() == np.bitwise_and.reduce(xv, axis=1)).all()
    assert (r[1].numpy() == np.bitwise_or.reduce(xv, axis=1)).all()
    xor = np.bitwise_xor.reduce(xv, axis=1)
    assert (r[2].numpy() == xor).all()
    assert (r[3].numpy() == xv.max(axis=1)).all()
    assert (r[4].numpy() == (xv.max(axis=1) ^ xor)).all()
    assert (c.numpy() == np.bitwise_or.reduce(xv, axis=0)).all()


def bit_inputs():
    x = torch.randint(-(1 << 30), 1 << 30, (M, N), dtype=torch.int32)
    x[:, ::3] |= 0x0F0F  # some bits every row shares, so bitand is not 0
    return x, torch.full((5, M), -7, dtype=torch.int32), torch.full((N,), -7, dtype=torch.int32)


def nan_reduces(dtype):
    @T.prim_func
    def k(X: T.Tensor((M, N), dtype), R: T.Tensor((3, M), dtype)):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((M, N), dtype)
            r = T.alloc_fragment((M,), dtype)
            T.copy(X, x)
            T.reduce_max(x, r, dim=1, nan_propagate=True)
            T.copy(r, R[0, :])
            T.reduce_min(x, r, 1, True, 1, True)
            T.copy(r, R[1, :])
            T.reduce_absmax(x, r, dim=1, annotations={"nan_propagate": True})
            T.copy(r, R[2, :])
    return k


def nan_inputs(dtype):
    x = torch.randn(M, N).to(getattr(torch, dtype))
    rows = torch.randperm(M)[: M // 2]
    x[rows, torch.randint(0, N, (M // 2,))] = float("nan")
    return x, torch.zeros(3, M, dtype=x.dtype)


def check_nan(x, r):
    xd = x.double()
    for i, want in enumerate((xd.amax(dim=1), xd.amin(dim=1), xd.abs().amax(dim=1))):
        torch.testing.assert_close(r[i].double(), want, equal_nan=True, rtol=0, atol=0)


def or_flags():
    @T.prim_func
    def k(Idx: T.Tensor((256,), "int32"), V: T.Tensor((256,), "int32"), F: T.Tensor((8,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            T.atomic_or(F[Idx[bx * 128 + tx]], V[bx * 128 + tx])
    return k


def check_or(idx, v, f0, f):
    want = f0.numpy().astype(np.int64).copy()
    for i, x in zip(idx.tolist(), v.tolist()):
        want[i] |= x
    assert (f.numpy() == want).all()


def or_inputs():
    return (torch.randint(0, 8, (256,), dtype=torch.int32), torch.randint(0, 1 << 31, (256,), dtype=torch.int32),
            torch.randint(0, 1 << 31, (8,), dtype=torch.int32))


def test_bit_reduces_on_cpu():
    kern = tilelang.compile(bit_reduces(), target="cpu")
    args = bit_inputs()
    kern(*args)
    check_bits(*args)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_nan_propagate_on_cpu(dtype):
    kern = tilelang.compile(nan_reduces(dtype), target="cpu")
    x, r = nan_inputs(dtype)
    kern(x, r)
    check_nan(x, r)


def test_atomic_or_on_cpu():
    kern = tilelang.compile(or_flags(), target="cpu")
    idx, v, f0 = or_inputs()
    f = f0.clone()
    kern(idx, v, f)
    check_or(idx, v, f0, f)


def _host():
    host = host_cuda_or_skip()
    return host


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_on_host_emulator(arch):
    host = _host()
    tgt = f"cuda -arch={arch}"
    args = bit_inputs()
    host.HostProgram({"k": tilelang.compile(bit_reduces(), target=tgt)}).run("k", list(args))
    check_bits(*args)
    for dtype in ("float16", "bfloat16"):
        x, r = nan_inputs(dtype)
        host.HostProgram({"k": tilelang.compile(nan_reduces(dtype), target=tgt)}).run("k", [x, r])
        check_nan(x, r)
    idx, v, f0 = or_inputs()
    f = f0.clone()
    kern = tilelang.compile(or_flags(), target=tgt)
    assert "tl_atomic_or_i32" in kern.get_kernel_source()
    host.HostProgram({"k": kern}).run("k", [idx, v, f])
    check_or(idx, v, f0, f)


def test_argument_errors():
    def build(body):
        @T.prim_func
        def k(X: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=128):
                x = T.alloc_fragment((M, N), "float32")
                r = T.alloc_fragment((M,), "float32")
                body(x, r)
        return k

    with pytest.raises(tilelang.errors.TileLangError, match="batch must be an int >= 1"):
        build(lambda x, r: T.reduce_sum(x, r, dim=1, batch=0))
    with pytest.raises(tilelang.errors.TileLangError, match="needs a float16 or bfloat16 destination"):
        build(lambda x, r: T.reduce_max(x, r, dim=1, nan_propagate=True))
    with pytest.raises(tilelang.errors.TileLangError, match="needs an integer or bool destination"):
        build(lambda x, r: T.reduce_bitor(x, r, dim=1))
    with pytest.raises(tilelang.errors.TileLangError, match="reduce_type must be one of"):
        build(lambda x, r: T.reduce(x, r, "prod", 1, True))
    with pytest.raises(tilelang.errors.TileLangError, match="dst must name buffer elements"):
        build(lambda x, r: T.atomic_addx2(T.float32x2(x[0, 0], x[0, 1]) * 2, r[0], return_prev=True))
