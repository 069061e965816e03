"""int4 / uint4 tensors and tiles: packed two values a byte (element k in byte k // 2, the even
element in the low nibble), passed as int8 / uint8 tensors whose last dim is half the logical
one. Loads sign-extend an int4 nibble, stores keep the low 4 bits, int4 arithmetic and casts wrap
to 4 bits. CPU backend, and the CUDA source on the host emulator (sm_80 and sm_90a).

The reference packs and unpacks with numpy on fresh random values; outputs are poisoned."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T

RNG = np.random.default_rng()


def pack(vals: np.ndarray, dtype=torch.int8) -> torch.Tensor:
    """Logical 4-bit values (..., N) -> a (..., N // 2) byte tensor, the even element in the low nibble."""
    u = (np.asarray(vals).astype(np.int64) & 15).astype(np.uint8)
    b = u[..., 0::2] | (u[..., 1::2] << 4)
    return torch.from_numpy(b.copy()).view(dtype)


def unpack(t: torch.Tensor, signed: bool) -> np.ndarray:
    u = t.view(torch.uint8).numpy().astype(np.int64)
    v = np.stack([u & 15, u >> 4], -1).reshape(*u.shape[:-1], -1)
    return ((v ^ 8) - 8) if signed else v


def wrap4(x: np.ndarray, signed: bool) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64) & 15
    return ((x ^ 8) - 8) if signed else x


def load_kernel(M, N, dtype):
    @T.prim_func
    def k(Q: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), T.int32)):
        with T.Kernel(1, threads=64) as _:
            for i, j in T.Parallel(M, N):
                Y[i, j] = Q[i, j]

    return k


def store_kernel(M, N, dtype):
    @T.prim_func
    def k(X: T.Tensor((M, N), T.int32), Q: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=64) as _:
            for i, j in T.Parallel(M, N):
                Q[i, j] = X[i, j]

    return k


def arith_kernel(M, N, dtype):
    """int4 + int4 and a cast of a float to int4, each wrapping to 4 bits."""
    @T.prim_func
    def k(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), F: T.Tensor((M, N), T.float32),
          S: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=64) as _:
            for i, j in T.Parallel(M, N):
                S[i, j] = A[i, j] + B[i, j]
                C[i, j] = T.cast(F[i, j], dtype)

    return k


def staged_kernel(M, N, dtype, blk=8):
    """global -> shared -> fragment (x * 3 - 1, in int32) -> shared -> global, all int4."""
    @T.prim_func
    def k(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk), threads=128) as bx:
            xs = T.alloc_shared((blk, N), dtype)
            yf = T.alloc_fragment((blk, N), dtype)
            ys = T.alloc_shared((blk, N), dtype)
            T.copy(X[bx * blk, 0], xs)
            for i, j in T.Parallel(blk, N):
                yf[i, j] = T.cast(T.cast(xs[i, j], T.int32) * 3 - 1, dtype)
            T.copy(yf, ys)
            T.copy(ys, Y[bx * blk, 0])

    return k


SIGNED = {"int4": True, "uint4": False}


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_loads_sign_extend_int4_and_zero_extend_uint4(dtype):
    M, N = 4, 64
    lo, hi = (-8, 8) if SIGNED[dtype] else (0, 16)
    vals = RNG.integers(lo, hi, (M, N))
    vals[0, :16] = np.arange(lo, hi)
    y = torch.full((M, N), 0x5A5A, dtype=torch.int32)
    tilelang.compile(load_kernel(M, N, dtype), target="cpu")(pack(vals), y)
    np.testing.assert_array_equal(y.numpy(), vals)


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_stores_keep_the_low_four_bits(dtype):
    M, N = 4, 64
    x = RNG.integers(-1000, 1000, (M, N)).astype(np.int32)
    q = torch.full((M, N // 2), 0x77, dtype=torch.int8)
    tilelang.compile(store_kernel(M, N, dtype), target="cpu")(torch.from_numpy(x), q)
    np.testing.assert_array_equal(unpack(q, SIGNED[dtype]), wrap4(x, SIGNED[dtype]))


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_arithmetic_and_casts_wrap_to_four_bits(dtype):
    M, N = 4, 32
    s = SIGNED[dtype]
    lo, hi = (-8, 8) if s else (0, 16)
    a, b = RNG.integers(lo, hi, (M, N)), RNG.integers(lo, hi, (M, N))
    f = RNG.uniform(-40, 40, (M, N)).astype(np.float32)
    out_s, out_c = torch.full((M, N // 2), 0x33, dtype=torch.int8), torch.full((M, N // 2), 0x33, dtype=torch.int8)
    kern = tilelang.compile(arith_kernel(M, N, dtype), target="cpu")
    kern(pack(a), pack(b), torch.from_numpy(f), out_s, out_c)
    np.testing.assert_array_equal(unpack(out_s, s), wrap4(a + b, s))
    np.testing.assert_array_equal(unpack(out_c, s), wrap4(np.trunc(f).astype(np.int64), s))


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_tiles_round_trip_through_shared_and_fragments(dtype):
    M, N = 24, 64
    s = SIGNED[dtype]
    vals = RNG.integers(-8, 8, (M, N)) if s else RNG.integers(0, 16, (M, N))
    y = torch.full((M, N // 2), 0x7F, dtype=torch.int8)
    tilelang.compile(staged_kernel(M, N, dtype), target="cpu")(pack(vals), y)
    np.testing.assert_array_equal(unpack(y, s), wrap4(vals * 3 - 1, s))


def test_output_allocation_and_argument_checks():
    M, N = 4, 32
    kern = tilelang.compile(store_kernel(M, N, "int4"), out_idx=[1], target="cpu")
    x = RNG.integers(-8, 8, (M, N)).astype(np.int32)
    q = kern(torch.from_numpy(x))
    assert q.dtype == torch.int8 and tuple(q.shape) == (M, N // 2)  # int8 storage, two values a byte
    np.testing.assert_array_equal(unpack(q, True), x)
    qu = tilelang.compile(store_kernel(M, N, "uint4"), out_idx=[1], target="cpu")(torch.from_numpy(x))
    assert qu.dtype == torch.uint8 and tuple(qu.shape) == (M, N // 2)
    np.testing.assert_array_equal(unpack(qu, False), x & 15)

    ld = tilelang.compile(load_kernel(M, N, "int4"), out_idx=[1], target="cpu")
    np.testing.assert_array_equal(ld(q).numpy(), x)
    np.testing.assert_array_equal(ld(q.view(torch.uint8)).numpy(), x)  # either byte type holds the nibbles
    with pytest.raises(ValueError, match=r"logical shape \(4, 64\) \(torch shape \(4, 32\)\)"):
        ld(torch.zeros(M, N, dtype=torch.int8))  # the logical shape is not the byte shape
    with pytest.raises(TypeError, match="2x smaller"):
        ld(torch.zeros(M, N // 2, dtype=torch.int16))


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_cuda_source_on_the_host_emulator(arch, dtype):
    from tilelang.testing import host_cuda

    if not host_cuda.available():
        pytest.skip("g++ not installed")
    M, N = 24, 64
    s = SIGNED[dtype]
    vals = RNG.integers(-8, 8, (M, N)) if s else RNG.integers(0, 16, (M, N))
    kernels = {"staged": tilelang.compile(staged_kernel(M, N, dtype), target=f"cuda -arch={arch}"),
               "load": tilelang.compile(load_kernel(M, N, dtype), target=f"cuda -arch={arch}")}
    y = torch.full((M, N // 2), 0x7F, dtype=torch.int8)
    z = torch.full((M, N), 0x5A5A, dtype=torch.int32)
    prog = host_cuda.HostProgram(kernels)
    try:
        prog.run("staged", [pack(vals), y])
        prog.run("load", [pack(vals), z])
    finally:
        prog.close()
    np.testing.assert_array_equal(unpack(y, s), wrap4(vals * 3 - 1, s))
    np.testing.assert_array_equal(z.numpy(), vals)
