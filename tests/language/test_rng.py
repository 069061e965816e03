"""T.rng_init / T.rng_rand / T.rng_rand_float (language/random.py): the default subsequence is the
thread's own (tx + bx * threads), each thread keeps its own generator across barriers, and the
float mappings (uniform / normal, 32 / 64 bit) follow the documented formulas. CPU backend and
host emulator against a plain-Python Philox4x32-10; the CUDA source compiles with NVRTC."""
import math

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip

THREADS, BLOCKS, DRAWS = 64, 3, 4
M32 = 0xFFFFFFFF


def philox(seed, ctr):
    """Philox4x32-10 of a 128-bit counter (Random123's definition)."""
    c = [(ctr >> (32 * i)) & M32 for i in range(4)]
    k = [seed & M32, (seed >> 32) & M32]
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & M32, (p0 >> 32) ^ c[3] ^ k[1], p0 & M32]
        k = [(k[0] + 0x9E3779B9) & M32, (k[1] + 0xBB67AE85) & M32]
    return c


def words(seed, seq, n):
    return [philox(seed, (e // 4) + (seq << 64))[e % 4] for e in range(n)]


def reference(seed):
    """Per thread: 4 raw words, then uniform32, uniform64, normal32 x2, normal64 x2 (float64)."""
    out = np.zeros((BLOCKS, THREADS, DRAWS + 6))
    for b in range(BLOCKS):
        for t in range(THREADS):
            w = words(seed, t + b * THREADS, DRAWS + 1 + 2 + 2 + 4)
            out[b, t, :DRAWS] = w[:DRAWS]
            w = w[DRAWS:]
            out[b, t, DRAWS] = w[0] * 2.0 ** -32 + 2.0 ** -33
            out[b, t, DRAWS + 1] = (w[1] ^ (w[2] << 21)) * 2.0 ** -53 + 2.0 ** -54
            u, v = w[3] * 2.0 ** -32 + 2.0 ** -33, (w[4] * 2.0 ** -32 + 2.0 ** -33) * 2 * math.pi
            r = math.sqrt(-2 * math.log(u))
            out[b, t, DRAWS + 2], out[b, t, DRAWS + 3] = r * math.sin(v), r * math.cos(v)
            u = (w[5] ^ (w[6] << 21)) * 2.0 ** -53 + 2.0 ** -54
            v = (w[7] ^ (w[8] << 21)) * 2.0 ** -52 + 2.0 ** -53
            r = math.sqrt(-2 * math.log(u))
            out[b, t, DRAWS + 4], out[b, t, DRAWS + 5] = r * math.sin(math.pi * v), r * math.cos(math.pi * v)
    return out


def draws(seed):
    @T.prim_func
    def k(U: T.Tensor((BLOCKS, THREADS, DRAWS), "uint32"), F: T.Tensor((BLOCKS, THREADS, 4), "float32"),
          D: T.Tensor((BLOCKS, THREADS, 2), "float64")):
        with T.Kernel(BLOCKS, threads=THREADS) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed)
            T.sync_threads()  # each thread's generator lives across the barrier
            for j in T.serial(DRAWS):
                U[bx, tx, j] = T.rng_rand()
            F[bx, tx, 0] = T.rng_rand_float()
            D[bx, tx, 0] = T.rng_rand_float(64)
            F[bx, tx, 1] = T.rng_rand_float(dist="normal")
            F[bx, tx, 2] = T.rng_rand_float(32, "normal")
            D[bx, tx, 1] = T.rng_rand_float(bit=64, dist="normal")
            F[bx, tx, 3] = T.cast(T.rng_rand_float(64, "normal"), "float32")
    return k


def outputs():
    return (torch.zeros(BLOCKS, THREADS, DRAWS, dtype=torch.uint32), torch.full((BLOCKS, THREADS, 4), float("nan")),
            torch.full((BLOCKS, THREADS, 2), float("nan"), dtype=torch.float64))


def check(seed, u, f, d):
    ref = reference(seed)
    assert (u.numpy().astype(np.int64) == ref[:, :, :DRAWS].astype(np.int64)).all()
    np.testing.assert_allclose(f[:, :, 0].double().numpy(), ref[:, :, DRAWS], rtol=1e-7)
    np.testing.assert_allclose(d[:, :, 0].numpy(), ref[:, :, DRAWS + 1], rtol=1e-15)
    np.testing.assert_allclose(f[:, :, 1:3].double().numpy(), ref[:, :, DRAWS + 2:DRAWS + 4], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d[:, :, 1].numpy(), ref[:, :, DRAWS + 4], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(f[:, :, 3].double().numpy(), ref[:, :, DRAWS + 5], rtol=1e-6, atol=1e-6)


def test_rng_per_thread_streams_on_cpu():
    seed = int(np.random.randint(1, 2 ** 40))
    args = outputs()
    tilelang.compile(draws(seed), target="cpu")(*args)
    check(seed, *args)


def test_rng_rand_float_arguments():
    with pytest.raises(tilelang.errors.TileLangError, match="bit must be 32 or 64"):
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                T.rng_init(1)
                A[0] = T.rng_rand_float(dist="gamma")


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_rng_on_host_emulator(arch):
    host = host_cuda_or_skip()
    from tilelang.backend.cuda import nvrtc
    seed = int(np.random.randint(1, 2 ** 40))
    kern = tilelang.compile(draws(seed), target=f"cuda -arch={arch}")
    nvrtc.compile_cuda(kern.get_kernel_source(), arch)
    args = outputs()
    host.HostProgram({"k": kern}).run("k", list(args))
    check(seed, *args)
