"""float8_e8m0fnu (the OCP MX scale format: a byte e is 2^(e - 127), 0xFF is NaN) on the CPU backend
and in the CUDA source (compiled with NVRTC for sm_90a and sm_80, run on the host emulator).

Stores follow CUDA's __nv_cvt_{float,double}_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf), the public
TileLang's conversion: |x| rounded up to a power of two, |x| <= 2^-127 (0 included) -> 2^-127,
|x| > 2^127 and inf -> 2^127, NaN -> NaN; a float64 rounds once, from the double. The reference is
an independent float64 numpy model (frexp); loads are checked against torch's own e8m0 conversions,
and stores of exact powers of two (where torch rounds as CUDA does) against torch's too."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip, requires_cuda

pytestmark = pytest.mark.skipif(not hasattr(torch, "float8_e8m0fnu"), reason="torch without float8_e8m0fnu")

E8M0 = "float8_e8m0fnu"
ARCHS = ("sm_90a", "sm_80")
POISON = 0xAB


def ref_codes(x) -> np.ndarray:
    """e8m0 codes of float64 values: ceil(log2 |x|) + 127 clamped to [0, 254]; 0 -> 0, inf -> 254, NaN -> 255."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    with np.errstate(invalid="ignore"):
        m, e = np.frexp(np.where(np.isfinite(a), a, 1.0))  # a = m * 2^e, m in [0.5, 1)
    k = np.where(m == 0.5, e - 1, e)
    code = np.clip(k + 127, 0, 254)
    code = np.where(a == 0, 0, code)
    code = np.where(np.isinf(a), 254, code)
    return np.where(np.isnan(a), 255, code).astype(np.uint8)


def ref_values(codes) -> np.ndarray:
    c = np.asarray(codes).astype(np.int64)
    return np.where(c == 255, np.nan, np.ldexp(1.0, c - 127))


EDGES = [0.0, -0.0, 1.0, -1.0, 1.5, 1.49, 0.75, 0.5000001, 2.0 ** -127, 2.0 ** -128, 2.0 ** -149, 2.0 ** -126,
         1.5 * 2.0 ** -127, 2.0 ** -126 * 1.0000001, 2.0 ** 127, 1.5 * 2.0 ** 127, 3.4028234663852886e38, 2.0 ** 126 * 1.5,
         np.inf, -np.inf, np.nan, -np.nan, -3.0, 448.0, 1e-40, -1e-45, 65504.0, 1.0 + 2.0 ** -23]
# exact in float64 but not in float32: a float would round them down to the power below first
EDGES_F64 = [1.0 + 2.0 ** -40, 2.0 ** -127 * (1 + 2.0 ** -40), 2.0 ** 126 * (1 + 2.0 ** -50), 1e300, -1e300,
             1e-300, 2.0 ** -1074, 2.0 ** -200, 4.0 * (1 + 2.0 ** -52)]


def inputs(n: int, src: str) -> torch.Tensor:
    """n fresh random values over e8m0's whole range (both signs), the edge values first, as `src`."""
    rng = np.random.default_rng()
    x = rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-135, 135, n)) * rng.uniform(0.5, 1.0, n)
    edges = EDGES + (EDGES_F64 if src == "float64" else [])
    x[:len(edges)] = edges
    return torch.from_numpy(x).to(getattr(torch, src))


def copy_kernel(M, src, dst):
    @T.prim_func
    def main(A: T.Tensor((M,), src), B: T.Tensor((M,), dst)):
        with T.Kernel(1, threads=128):
            T.copy(A, B)

    return main


def parallel_kernel(M, src, dst):
    @T.prim_func
    def main(A: T.Tensor((M,), src), B: T.Tensor((M,), dst)):
        with T.Kernel(1, threads=128):
            A_local = T.alloc_fragment((M,), src)
            B_local = T.alloc_fragment((M,), dst)
            T.copy(A, A_local)
            for i in T.Parallel(M):
                B_local[i] = A_local[i]
            T.copy(B_local, B)

    return main


def cast_expr_kernel(M, src):
    """T.cast to e8m0 inside an expression, read back as float32: the value the store would hold."""
    @T.prim_func
    def main(A: T.Tensor((M,), src), B: T.Tensor((M,), T.float32)):
        with T.Kernel(2, threads=64) as bx:
            for i in T.Parallel(M // 2):
                B[bx * (M // 2) + i] = T.cast(T.cast(A[bx * (M // 2) + i], E8M0), T.float32) * 0.5

    return main


def cast_sat_false_kernel(M):
    """sat=False changes nothing for e8m0: the public TileLang's conversion is satfinite either way."""
    @T.prim_func
    def main(A: T.Tensor((M,), T.float32), B: T.Tensor((M,), E8M0)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(M):
                B[i] = T.cast(A[i] * 2.0, E8M0, sat=False)

    return main


def mx_quant_kernel(M, K, blk=32):
    """MX-style quantization: one e8m0 scale per `blk` values of a row (amax / 448 rounded up to a power
    of two, so x / scale fits e4m3), staged through fragments and a shared tile of scales."""
    @T.prim_func
    def main(X: T.Tensor((M, K), T.float32), Q: T.Tensor((M, K), T.float8_e4m3fn),
             S: T.Tensor((M, K // blk), E8M0)):
        with T.Kernel(M // 4, threads=128) as bx:
            x = T.alloc_fragment((4, K), T.float32)
            xb = T.alloc_fragment((4, K // blk, blk), T.float32)
            amax = T.alloc_fragment((4, K // blk), T.float32)
            s_sh = T.alloc_shared((4, K // blk), E8M0)
            T.copy(X[bx * 4, 0], x)
            for i, b, j in T.Parallel(4, K // blk, blk):
                xb[i, b, j] = x[i, b * blk + j]
            T.reduce_absmax(xb, amax, dim=2)
            for i, b in T.Parallel(4, K // blk):
                s_sh[i, b] = amax[i, b] * (1.0 / 448.0)
            for i, k in T.Parallel(4, K):
                Q[bx * 4 + i, k] = x[i, k] / T.cast(s_sh[i, k // blk], T.float32)
            T.copy(s_sh, S[bx * 4, 0])

    return main


def staged_tile_kernel(M, N, bm=16):
    """e8m0 tiles global -> shared -> global (byte copies; TMA on sm_90a), and each one read as float32."""
    @T.prim_func
    def main(A: T.Tensor((M, N), E8M0), B: T.Tensor((M, N), E8M0), F: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            s = T.alloc_shared((bm, N), E8M0)
            f = T.alloc_fragment((bm, N), T.float32)
            T.copy(A[bx * bm, 0], s)
            for i, j in T.Parallel(bm, N):
                f[i, j] = s[i, j]
            T.copy(s, B[bx * bm, 0])
            T.copy(f, F[bx * bm, 0])

    return main


def poisoned_codes(n: int) -> torch.Tensor:
    return torch.full((n,), POISON, dtype=torch.uint8).view(torch.float8_e8m0fnu)


def run(kernel, args, where: str):
    """Run on the CPU backend (where == "cpu") or on the host emulator (where == an sm arch)."""
    if where == "cpu":
        tilelang.compile(kernel, target="cpu")(*args)
        return
    host = host_cuda_or_skip()
    prog = host.HostProgram({"k": tilelang.compile(kernel, target=f"cuda -arch={where}")})
    try:
        prog.run("k", list(args))
    finally:
        prog.close()


def check_codes(got: torch.Tensor, x: torch.Tensor):
    got = got.view(torch.uint8).numpy()
    want = ref_codes(x.double().numpy())
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(float(x[b]), int(got[b]), int(want[b])) for b in bad[:8]]


@pytest.mark.filterwarnings("ignore::tilelang.backend.cuda.pipeline.PerformanceWarning")
@pytest.mark.parametrize("make", [copy_kernel, parallel_kernel])
@pytest.mark.parametrize("src", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("where", ("cpu",) + ARCHS)
def test_stores_round_up_to_a_power_of_two(make, src, where):
    M = 512
    x = inputs(M, src)
    q = poisoned_codes(M)
    run(make(M, src, E8M0), (x, q), where)
    check_codes(q, x)
    # exact powers of two in range: torch's own (round-to-nearest) cast gives the same codes
    pw = torch.from_numpy(np.ldexp(1.0, np.random.default_rng().integers(-127, 128, M))).to(getattr(torch, src))
    finite = torch.isfinite(pw) & (pw != 0)  # float16 / bfloat16 cannot hold every power
    q2 = poisoned_codes(M)
    run(make(M, src, E8M0), (pw, q2), where)
    assert torch.equal(q2.view(torch.uint8)[finite], pw[finite].to(torch.float8_e8m0fnu).view(torch.uint8))


@pytest.mark.filterwarnings("ignore::tilelang.backend.cuda.pipeline.PerformanceWarning")
@pytest.mark.parametrize("make", [copy_kernel, parallel_kernel])
@pytest.mark.parametrize("dst", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("where", ("cpu",) + ARCHS)
def test_loads_match_torch_for_all_256_codes(make, dst, where):
    M = 512
    codes = torch.from_numpy(np.random.default_rng().integers(0, 256, M).astype(np.uint8))
    codes[:256] = torch.arange(256, dtype=torch.uint8)
    e = codes.view(torch.float8_e8m0fnu)
    y = torch.full((M,), 7.0, dtype=getattr(torch, dst))  # poisoned: 7 is no power of two
    run(make(M, E8M0, dst), (e, y), where)
    torch.testing.assert_close(y, e.to(y.dtype), rtol=0, atol=0, equal_nan=True)
    if dst in ("float32", "float64", "bfloat16"):  # every e8m0 value exactly (2^-127 a denormal)
        np.testing.assert_array_equal(y.double().numpy(), ref_values(codes.numpy()))


@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("where", ("cpu", "sm_90a"))
def test_cast_inside_an_expression(src, where):
    M = 256
    x = inputs(M, src)
    y = torch.full((M,), 7.0)
    run(cast_expr_kernel(M, src), (x, y), where)
    want = ref_values(ref_codes(x.double().numpy())) * 0.5
    np.testing.assert_array_equal(y.double().numpy(), want.astype(np.float32).astype(np.float64))


@pytest.mark.parametrize("where", ("cpu", "sm_90a"))
def test_cast_with_sat_false_still_saturates(where):
    M = 256
    x = inputs(M, "float32")
    q = poisoned_codes(M)
    run(cast_sat_false_kernel(M), (x, q), where)
    check_codes(q, x.double() * 2.0)
    assert int(q.view(torch.uint8)[EDGES.index(np.inf)]) == 254


@pytest.mark.parametrize("where", ("cpu",) + ARCHS)
def test_mx_block_scales_and_quantized_values(where):
    M, K, blk = 8, 128, 32
    rng = np.random.default_rng()
    x = rng.standard_normal((M, K)) * np.exp2(rng.integers(-20, 20, (M, 1)))
    x[0, :blk] = 0.0  # an all-zero block: its scale is 2^-127
    x[1, :blk] = rng.uniform(-3000.0, 3000.0, blk)
    x[1, 5] = -448.0 * 2.0 ** 3  # amax * (1 / 448) is exactly 8 in float32: no rounding up
    x = torch.from_numpy(x).float()
    q = torch.full((M, K), 0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn)  # poisoned with NaN
    s = torch.full((M, K // blk), POISON, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    run(mx_quant_kernel(M, K, blk), (x, q, s), where)
    amax = x.abs().reshape(M, K // blk, blk).amax(-1).numpy()
    want_s = ref_codes((amax * np.float32(1.0 / 448.0)).astype(np.float32))
    np.testing.assert_array_equal(s.view(torch.uint8).numpy(), want_s)
    assert int(want_s[0, 0]) == 0 and int(want_s[1, 0]) == 130
    scale = torch.from_numpy(ref_values(want_s)).repeat_interleave(blk, dim=1)
    want_q = (x.double() / scale).float().to(torch.float8_e4m3fn)
    np.testing.assert_array_equal(q.view(torch.uint8).numpy(), want_q.view(torch.uint8).numpy())
    assert q.float().abs().max().item() <= 448.0


@pytest.mark.parametrize("where", ("cpu",) + ARCHS)
def test_tiles_through_shared_memory(where):
    M, N = 64, 64
    codes = torch.from_numpy(np.random.default_rng().integers(0, 256, (M, N)).astype(np.uint8))
    a = codes.view(torch.float8_e8m0fnu)
    b = torch.full((M, N), POISON, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    f = torch.full((M, N), 7.0)
    run(staged_tile_kernel(M, N), (a, b, f), where)
    assert torch.equal(b.view(torch.uint8), codes)
    np.testing.assert_array_equal(f.double().numpy(), ref_values(codes.numpy()))


def test_output_allocation_and_argument_dtype_check():
    M = 256
    k = tilelang.compile(copy_kernel(M, "float32", E8M0), out_idx=[1], target="cpu")
    x = inputs(M, "float32")
    q = k(x)
    assert q.dtype == torch.float8_e8m0fnu and tuple(q.shape) == (M,)
    check_codes(q, x)
    with pytest.raises(TypeError, match=r"expected dtype float8_e8m0fnu \(torch.float8_e8m0fnu\), got torch.uint8"):
        tilelang.compile(copy_kernel(M, E8M0, "float32"), target="cpu")(torch.zeros(M, dtype=torch.uint8),
                                                                         torch.zeros(M))


def test_float64_converts_from_the_double_in_cuda_source():
    for arch in ARCHS:
        for make in (copy_kernel, parallel_kernel):
            src = tilelang.compile(make(256, "float64", E8M0), target=f"cuda -arch={arch}").get_kernel_source()
            assert "tl_f64_to_fp8e8m0(" in src and "tl_f32_to_fp8e8m0(" not in src, src


@requires_cuda
@pytest.mark.filterwarnings("ignore::tilelang.backend.cuda.pipeline.PerformanceWarning")
@pytest.mark.parametrize("src", ["float32", "float64", "bfloat16"])
def test_gpu_matches_reference(src):
    M = 1024
    x = inputs(M, src)
    for make in (copy_kernel, parallel_kernel):
        q = poisoned_codes(M).cuda()
        tilelang.compile(make(M, src, E8M0), target="cuda")(x.cuda(), q)
        check_codes(q.cpu(), x)
        codes = q.view(torch.uint8).clone()
        codes[:256] = torch.arange(256, dtype=torch.uint8, device="cuda")
        y = torch.full((M,), 7.0, dtype=getattr(torch, src), device="cuda")
        tilelang.compile(make(M, E8M0, src), target="cuda")(codes.view(torch.float8_e8m0fnu), y)
        np.testing.assert_array_equal(y.double().cpu().numpy(), ref_values(codes.cpu().numpy()))
