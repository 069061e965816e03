"""The elementwise math of language/math.py and math_ieee.py on the CUDA backend: the generated
source compiles with NVRTC for sm_80 and sm_90a in every float dtype, prints CUDA's own
intrinsics where it should, and (on the host emulator, no GPU) computes what the CPU backend
and a float64 reference compute."""
import pytest
import torch

import tilelang
import tilelang.language as T

N = 128
ROWS = 22


def _needs_nvrtc():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


def every_op(dtype):
    """One row per operation; a float16 / bfloat16 kernel keeps the rounding modes at rn."""
    rm = ("ru", "rd", "rz") if dtype in ("float32", "float64") else ("rn", "rn", "rn")
    frsqrt = T.ieee_frsqrt if dtype != "float64" else (lambda x: T.ieee_frcp(T.ieee_fsqrt(x)))

    @T.prim_func
    def k(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), E: T.Tensor((N,), "int32"),
          Y: T.Tensor((ROWS, N), dtype), J: T.Tensor((3, N), "int32"), Q: T.Tensor((2, N), "float8_e4m3fn"),
          R: T.Tensor((N,), "float8_e5m2"), M: T.Tensor((3, N), "bool")):
        with T.Kernel(2, threads=64) as bx:
            for i in T.Parallel(N // 2):
                g = bx * (N // 2) + i
                Y[0, g] = T.acos(T.clamp(A[g], -1.0, 1.0))
                Y[1, g] = T.atan2(A[g], B[g])
                Y[2, g] = T.round(A[g], "ties-away-from-zero")
                Y[3, g] = T.nearbyint(A[g] * 4)
                Y[4, g] = T.clamp(A[g], B[g], 1.5)
                Y[5, g] = T.fmod(A[g], B[g])
                Y[6, g] = T.copysign(A[g], B[g])
                Y[7, g] = T.nextafter(A[g], B[g])
                Y[8, g] = T.ldexp(A[g], E[g])
                Y[9, g] = T.ieee_add(A[g], B[g], rm[0])
                Y[10, g] = T.ieee_fdiv(A[g], B[g], rm[1])
                Y[11, g] = T.ieee_fsqrt(T.abs(A[g]), rm[2])
                Y[12, g] = T.ieee_fmaf(A[g], B[g], A[g], rm[0])
                Y[13, g] = T.ieee_frcp(B[g], rm[1])
                Y[14, g] = frsqrt(T.abs(B[g]))
                Y[15, g] = T.fma(A[g], B[g], B[g])
                Y[16, g] = T.fmul(A[g], B[g]) + B[g]
                Y[17, g] = T.fast_rcp(B[g])
                Y[18, g] = T.sinh(A[g]) + T.tanh(B[g]) + T.asinh(A[g]) + T.tan(B[g] * 0.25)
                Y[19, g] = T.hypot(A[g], B[g])
                Y[20, g] = T.ieee_sub(A[g], B[g], rm[2])
                Y[21, g] = T.ieee_mul(A[g], B[g], rm[0])
                J[0, g] = T.popcount(E[g] * 997)
                J[1, g] = T.clz(E[g] * 997)
                J[2, g] = T.q_multiply_shift(E[g] * 1000003, 1518500250, 31, 2)
                Q[0, g] = T.cast(A[g] * 300, "float8_e4m3fn", sat=False)
                Q[1, g] = T.cast(A[g] * 300, "float8_e4m3fn")
                R[g] = T.cast(A[g] * 40000, "float8_e5m2", sat=False)
                M[0, g] = T.isnan(Y[5, g])
                M[1, g] = T.isinf(A[g] / B[g])
                M[2, g] = T.isfinite(Y[10, g])
    return k


def _args(dtype, seed, poison):
    g = torch.Generator().manual_seed(seed)
    tdt = getattr(torch, dtype)
    a = (torch.randn(N, generator=g, dtype=torch.float64) * 2).to(tdt)
    b = (torch.randn(N, generator=g, dtype=torch.float64) * 2).to(tdt)
    a[:6] = torch.tensor([float("nan"), float("inf"), -0.0, 2.5, -2.5, 0.5]).to(tdt)
    b[:6] = torch.tensor([1.0, 2.0, -3.0, float("nan"), 0.0, float("-inf")]).to(tdt)
    e = torch.randint(-5, 6, (N,), generator=g, dtype=torch.int32)
    outs = [torch.full((ROWS, N), poison, dtype=tdt), torch.full((3, N), int(poison), dtype=torch.int32),
            torch.full((2, N), poison).to(torch.float8_e4m3fn), torch.full((N,), poison).to(torch.float8_e5m2),
            torch.full((3, N), poison > 0, dtype=torch.bool)]
    return [a, b, e, *outs]


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_compiles_with_nvrtc(arch, dtype):
    _needs_nvrtc()
    src = tilelang.compile(every_op(dtype), target=f"cuda -arch={arch}").get_kernel_source()
    want = {"float32": ["__fadd_ru(", "__fdiv_rd(", "__fsqrt_rz(", "__fmaf_ru(", "__frsqrt_rn(", "__fmul_rn(",
                        "tl_fast_rcp(", "tl_clamp_f32(", "roundf(", "nextafterf("],
            "float64": ["__dadd_ru(", "__ddiv_rd(", "__dsqrt_rz(", "__fma_ru(", "__drcp_rd(", "__dmul_rn(",
                        "tl_clamp_f64(", "nextafter("],
            "float16": ["__fadd_rn(", "__fmul_rn(", "tl_clamp_f32(", "tl_fast_rcp("],
            "bfloat16": ["__fadd_rn(", "__fdiv_rn(", "tl_clamp_f32("]}[dtype]
    want += ["tl_popc32(", "tl_clz32(", "tl_f32_to_fp8e4m3_nosat(", "tl_f32_to_fp8e5m2_nosat(", "isnan("]
    missing = [w for w in want if w not in src]
    assert not missing, (missing, src)


@pytest.mark.nvrtc
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_host_emulator_matches_cpu_backend(dtype):
    """Exact operations bit for bit with the CPU backend (itself checked against exact references in
    test_math_ieee.py / test_math_elementwise.py); the transcendental rows within a few ulps."""
    _needs_nvrtc()
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    seed = int(torch.randint(0, 2**31, (1,)).item())
    cuda_args, cpu_args = _args(dtype, seed, 7.0), _args(dtype, seed, -9.0)  # unwritten elements differ
    host.HostProgram({"k": tilelang.compile(every_op(dtype), target="cuda -arch=sm_80")}).run("k", cuda_args)
    tilelang.compile(every_op(dtype), target="cpu")(*cpu_args)
    approx = {0, 1, 18, 19}  # libm calls: the same functions here, a few ulps apart on a GPU
    got, want = cuda_args[3].double(), cpu_args[3].double()
    for r in range(ROWS):
        tol = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 1e-2}[dtype] if r in approx else 0
        torch.testing.assert_close(got[r], want[r], rtol=tol, atol=tol, equal_nan=True, msg=lambda m: f"row {r}: {m}")
    for j in (4, 7):  # int32 popcount / clz / q_multiply_shift; bool
        assert torch.equal(cuda_args[j], cpu_args[j]), j
    for j in (5, 6):  # float8 values (NaN encodings may differ)
        torch.testing.assert_close(cuda_args[j].double(), cpu_args[j].double(), rtol=0, atol=0, equal_nan=True)
    e4 = cpu_args[5][0].double()
    big = (cpu_args[0] * 300).double().abs() > 464  # the product rounds to the input dtype first, as in the kernel
    assert torch.isnan(e4[big]).all() and (cpu_args[5][1].double()[big].abs() == 448).all()
