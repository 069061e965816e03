"""T.rng_init / T.rng_rand / T.rng_rand_float (language/random.py): the default subsequence is the
thread's own (tx + bx * threads), each thread keeps its own generator across barriers, and the
float mappings (uniform / normal, 32 / 64 bit) follow the documented formulas. For each generator
(Philox4x32-10, XORWOW, MRG32k3a) the CPU backend and the host emulator are checked against a
plain-Python recurrence written from the published definitions and the documented seeding; the
CUDA source compiles with NVRTC."""
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


PHILOX, XORWOW, MRG = "curandStatePhilox4_32_10_t", "curandStateXORWOW_t", "curandStateMRG32k3a_t"
GENERATORS = [PHILOX, XORWOW, MRG]
M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
M1, M2 = 4294967087, 4294944443


def mix(x):
    """splitmix64's output function of x + gamma."""
    z = (x + GAMMA) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def seed_words(seed, seq, n):
    t = mix(mix(seed) ^ seq)
    return [mix((t + i * GAMMA) & M64) for i in range(n)]


def xorshift_step(x):
    t = x[0] ^ (x[0] >> 2)
    return x[1:] + [(x[4] ^ (x[4] << 4) ^ t ^ (t << 1)) & M32]


def xorshift_jump(x, n):
    """The xorwow words after n steps, by square-and-multiply of the 160 x 160 GF(2) step matrix
    (as the images of the unit vectors: independent of the header's polynomial method)."""
    def pack(w):
        return sum(v << (32 * i) for i, v in enumerate(w))

    def unpack(v):
        return [(v >> (32 * i)) & M32 for i in range(5)]

    def apply(cols, v):
        out, j = 0, 0
        while v:
            if v & 1:
                out ^= cols[j]
            v >>= 1
            j += 1
        return out

    step = [pack(xorshift_step(unpack(1 << j))) for j in range(160)]
    power = [1 << j for j in range(160)]  # identity
    while n:
        if n & 1:
            power = [apply(step, c) for c in power]
        step = [apply(step, c) for c in step]
        n >>= 1
    return unpack(apply(power, pack(x)))


def xorwow_words(seed, seq, n, off=0):
    """Marsaglia's xorwow (five xorshift words, Weyl counter d += 362437), our seeding; an offset of
    10**6 or more is jumped by matrix powers, smaller ones stepped."""
    w = seed_words(seed, seq, 3)
    x = [w[0] & M32, w[0] >> 32, w[1] & M32, w[1] >> 32, w[2] & M32]
    d = w[2] >> 32
    if off >= 10 ** 6:
        x, d, off = xorshift_jump(x, off), (d + off * 362437) & M32, 0
    out = []
    for _ in range(off + n):
        t = x[0] ^ (x[0] >> 2)
        x = x[1:] + [(x[4] ^ (x[4] << 4) ^ t ^ (t << 1)) & M32]
        d = (d + 362437) & M32
        out.append((x[4] + d) & M32)
    return out[off:]


def mrg_state(seed, seq):
    w = seed_words(seed, seq, 6)
    return [v % M1 for v in w[:3]], [v % M2 for v in w[3:]]


def mrg_words(s1, s2, n):
    """L'Ecuyer's MRG32k3a from state (s1, s2), oldest first; z = (p1 - p2) mod m1 in [1, m1]."""
    out = []
    for _ in range(n):
        p1 = (1403580 * s1[1] - 810728 * s1[0]) % M1
        p2 = (527612 * s2[2] - 1370589 * s2[0]) % M2
        s1, s2 = [s1[1], s1[2], p1], [s2[1], s2[2], p2]
        out.append(p1 - p2 if p1 > p2 else p1 - p2 + M1)
    return out


def mrg_jump(s, rows, m, n):
    """s advanced n steps: the companion matrix to the n-th power by plain repeated squaring."""
    a = [[0, 1, 0], [0, 0, 1], rows]
    r = [[int(i == j) for j in range(3)] for i in range(3)]
    mul = lambda x, y: [[sum(x[i][k] * y[k][j] for k in range(3)) % m for j in range(3)] for i in range(3)]  # noqa: E731
    while n:
        r, a, n = (mul(r, a) if n & 1 else r), mul(a, a), n >> 1
    return [sum(r[i][k] * s[k] for k in range(3)) % m for i in range(3)]


def words(seed, seq, n, gen=PHILOX, off=0):
    """n uint32 words of subsequence seq from element off."""
    if gen == XORWOW:
        return xorwow_words(seed, seq, n, off)
    if gen == MRG:
        s1, s2 = mrg_state(seed, seq)
        if off:
            s1 = mrg_jump(s1, [M1 - 810728, 1403580, 0], M1, off)
            s2 = mrg_jump(s2, [M2 - 1370589, 0, 527612], M2, off)
        return mrg_words(s1, s2, n)
    return [philox(seed, (e // 4) + (seq << 64))[e % 4] for e in range(off, off + n)]


def reference(seed, gen=PHILOX):
    """Per thread: 4 raw words, then uniform32, uniform64, normal32 x2, normal64 x2 (float64)."""
    out = np.zeros((BLOCKS, THREADS, DRAWS + 6))
    for b in range(BLOCKS):
        for t in range(THREADS):
            w = words(seed, t + b * THREADS, DRAWS + 1 + 2 + 2 + 4, gen)
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


def draws(seed, gen=PHILOX):
    @T.prim_func
    def k(U: T.Tensor((BLOCKS, THREADS, DRAWS), "uint32"), F: T.Tensor((BLOCKS, THREADS, 4), "float32"),
          D: T.Tensor((BLOCKS, THREADS, 2), "float64")):
        with T.Kernel(BLOCKS, threads=THREADS) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed, generator=gen)
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


def check(seed, u, f, d, gen=PHILOX):
    ref = reference(seed, gen)
    assert (u.numpy().astype(np.int64) == ref[:, :, :DRAWS].astype(np.int64)).all()
    np.testing.assert_allclose(f[:, :, 0].double().numpy(), ref[:, :, DRAWS], rtol=1e-7)
    np.testing.assert_allclose(d[:, :, 0].numpy(), ref[:, :, DRAWS + 1], rtol=1e-15)
    np.testing.assert_allclose(f[:, :, 1:3].double().numpy(), ref[:, :, DRAWS + 2:DRAWS + 4], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d[:, :, 1].numpy(), ref[:, :, DRAWS + 4], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(f[:, :, 3].double().numpy(), ref[:, :, DRAWS + 5], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("gen", GENERATORS)
def test_rng_per_thread_streams_on_cpu(gen):
    seed = int(np.random.randint(1, 2 ** 40))
    args = outputs()
    tilelang.compile(draws(seed, gen), target="cpu")(*args)
    check(seed, *args, gen=gen)


def test_xorshift_jump_matches_stepping():
    rs = np.random.default_rng()
    x = [int(v) for v in rs.integers(0, 2 ** 32, 5, dtype=np.uint64)]
    for n in (0, 1, 7, 1500):
        y = x
        for _ in range(n):
            y = xorshift_step(y)
        assert xorshift_jump(x, n) == y


def test_mrg_jump_matches_stepping():
    """The test's own matrix-power jump agrees with stepping the recurrence (so it can check the kernels')."""
    s1, s2 = mrg_state(7, 3)
    n = int(np.random.randint(1, 300))
    stepped = mrg_words(s1, s2, n + 5)[n:]
    j1, j2 = mrg_jump(s1, [M1 - 810728, 1403580, 0], M1, n), mrg_jump(s2, [M2 - 1370589, 0, 527612], M2, n)
    assert mrg_words(j1, j2, 5) == stepped


def offsets_kernel(gen, n):
    @T.prim_func
    def k(Seed: T.Tensor((n,), "uint64"), Seq: T.Tensor((n,), "uint64"), Off: T.Tensor((n,), "uint64"),
          U: T.Tensor((n, 6), "uint32")):
        with T.Kernel(n, threads=1) as bx:
            T.rng_init(Seed[bx], Seq[bx], Off[bx], generator=gen)
            for j in T.serial(6):
                U[bx, j] = T.rng_rand()
    return k


def offsets_case(gen):
    """Random 64-bit seeds and subsequences; offsets 0, 1, 5, past 2^40 and near 2^64, and for xorwow
    also 1023 / 1024 (stepped / jumped in the header) and 5000 (jumped there, stepped here)."""
    rs = np.random.default_rng()
    seed = [int(v) for v in rs.integers(0, 2 ** 63, 6, dtype=np.uint64)]
    seq = [0, 1, 2 ** 40 + 3] + [int(v) for v in rs.integers(0, 2 ** 63, 3, dtype=np.uint64)]
    off = [0, 1, 5, 1023] + [int(v) for v in rs.integers(0, 3000, 2)]
    off[3:5] = [2 ** 40 + 17, (1 << 64) - 3]
    if gen == XORWOW:
        off[0:3] = [1023, 1024, 5000]
    t = lambda v: torch.tensor(np.array(v, dtype=np.uint64))  # noqa: E731
    want = [words(seed[i], seq[i], 6, gen, off[i]) for i in range(6)]
    return [t(seed), t(seq), t(off), torch.zeros(6, 6, dtype=torch.uint32)], want


@pytest.mark.parametrize("gen", GENERATORS)
def test_rng_seed_subsequence_offset(gen):
    """Runtime seed / subsequence / offset (uint64 tensors) on the CPU backend."""
    args, want = offsets_case(gen)
    tilelang.compile(offsets_kernel(gen, 6), target="cpu")(*args)
    assert args[3].numpy().astype(np.int64).tolist() == want


@pytest.mark.nvrtc
@pytest.mark.parametrize("gen", GENERATORS)
def test_rng_seed_subsequence_offset_on_host_emulator(gen):
    """The same through the CUDA source (its seeding hash and MRG32k3a jump-ahead), run on the host."""
    host = host_cuda_or_skip()
    args, want = offsets_case(gen)
    host.HostProgram({"k": tilelang.compile(offsets_kernel(gen, 6), target="cuda -arch=sm_90a")}).run("k", args)
    assert args[3].numpy().astype(np.int64).tolist() == want


STAT_BLOCKS, STAT_THREADS, STAT_DRAWS = 100, 128, 8  # 102400 samples of each kind


def stats_kernel(seed, gen):
    shape = (STAT_BLOCKS, STAT_THREADS, STAT_DRAWS)

    @T.prim_func
    def k(U: T.Tensor(shape, "float32"), UD: T.Tensor(shape, "float64"), N: T.Tensor(shape, "float32"),
          ND: T.Tensor(shape, "float64")):
        with T.Kernel(STAT_BLOCKS, threads=STAT_THREADS) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed, generator=gen)
            for j in T.serial(STAT_DRAWS):
                U[bx, tx, j] = T.rng_rand_float()
                UD[bx, tx, j] = T.rng_rand_float(64)
                N[bx, tx, j] = T.rng_rand_float(dist="normal")
                ND[bx, tx, j] = T.rng_rand_float(64, "normal")
    return k


@pytest.mark.parametrize("gen", GENERATORS)
def test_rng_statistics(gen):
    """Moments of 1e5 uniforms / normals per mapping (standard errors ~1e-3 for uniforms, ~3e-3 for normals),
    uniforms inside (0, 1], and neighbouring threads' streams uncorrelated."""
    shape = (STAT_BLOCKS, STAT_THREADS, STAT_DRAWS)
    outs = [torch.full(shape, float("nan"), dtype=d) for d in (torch.float32, torch.float64) * 2]
    tilelang.compile(stats_kernel(int(np.random.randint(0, 2 ** 31)), gen), target="cpu")(*outs)
    u, ud, nf, nd = (o.double().numpy() for o in outs)
    for x in (u, ud):
        assert x.min() > 0 and x.max() <= 1
        assert abs(x.mean() - 0.5) < 0.006 and abs(x.var() - 1 / 12) < 0.003
        assert abs(np.corrcoef(x[:, 0::2].ravel(), x[:, 1::2].ravel())[0, 1]) < 0.02
    for x in (nf, nd):
        assert np.isfinite(x).all()
        assert abs(x.mean()) < 0.015 and abs(x.var() - 1) < 0.03
        assert abs((x ** 4).mean() - 3) < 0.15  # kurtosis of a normal
        assert abs((np.abs(x) < 1).mean() - 0.6826894921) < 0.008


def test_rng_rand_float_arguments():
    with pytest.raises(tilelang.errors.TileLangError, match="bit must be 32 or 64"):
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                T.rng_init(1)
                A[0] = T.rng_rand_float(dist="gamma")


def test_rng_generator_arguments():
    with pytest.raises(tilelang.errors.TileLangError, match="generator must be one of"):
        @T.prim_func
        def k(A: T.Tensor((4,), "uint32")):
            with T.Kernel(1, threads=1):
                T.rng_init(1, generator="curandStateSobol32_t")
                A[0] = T.rng_rand()

    @T.prim_func
    def mixed(A: T.Tensor((4,), "uint32")):
        with T.Kernel(1, threads=2) as bx:
            tx = T.get_thread_binding()
            if tx == 0:
                T.rng_init(1, generator=XORWOW)
            else:
                T.rng_init(1, generator=MRG)
            A[tx] = T.rng_rand()
    with pytest.raises(tilelang.errors.TileLangError, match="one kernel uses one generator"):
        tilelang.compile(mixed, target="cpu")


@pytest.mark.nvrtc
@pytest.mark.parametrize("gen", GENERATORS)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_rng_on_host_emulator(arch, gen):
    """The CUDA source compiles with NVRTC, and run on the host it gives the reference's words and the CPU
    backend's uint32 and uniform values bit for bit (normals: sin/cos/log may differ in the last ulp)."""
    host = host_cuda_or_skip()
    from tilelang.backend.cuda import nvrtc
    seed = int(np.random.randint(1, 2 ** 40))
    kern = tilelang.compile(draws(seed, gen), target=f"cuda -arch={arch}")
    src = kern.get_kernel_source()
    assert {PHILOX: "tl_philox tl_rng;", XORWOW: "tl_xorwow tl_rng;", MRG: "tl_mrg32k3a tl_rng;"}[gen] in src
    nvrtc.compile_cuda(src, arch)
    args = outputs()
    host.HostProgram({"k": kern}).run("k", list(args))
    check(seed, *args, gen=gen)
    cpu = outputs()
    tilelang.compile(draws(seed, gen), target="cpu")(*cpu)
    assert torch.equal(args[0], cpu[0])
    assert torch.equal(args[1][:, :, 0], cpu[1][:, :, 0]) and torch.equal(args[2][:, :, 0], cpu[2][:, :, 0])
    torch.testing.assert_close(args[1], cpu[1], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(args[2], cpu[2], rtol=1e-13, atol=1e-13)
