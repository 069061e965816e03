"""tfloat32 on the CPU backend: float32 storage, values rounded to a 10-bit mantissa (nearest,
ties away from zero, as cvt.rna.tf32.f32) where stored, cast or loaded; arithmetic stays float32.
A tf32 GEMM equals the float64 product of the rounded inputs. CUDA: compile-only source checks."""
import math

import pytest
import torch

import tilelang
import tilelang.language as T


def tf32_reference(x: torch.Tensor) -> torch.Tensor:
    """Round to 11 significant bits with frexp (independent of the kernel's bit trick)."""
    out = []
    for v in x.double().tolist():
        if math.isnan(v) or math.isinf(v) or v == 0.0:
            out.append(v)
            continue
        m, e = math.frexp(v)  # v = m * 2**e, 0.5 <= |m| < 1
        q = math.floor(abs(m) * 2 ** 11 + 0.5) / 2 ** 11
        if e < -125:  # float32 subnormal range: the tf32 ulp is fixed at 2**-136
            q = math.floor(abs(v) * 2 ** 136 + 0.5) / 2 ** 136
            e, m = 0, 1.0
        r = math.copysign(q * 2.0 ** e, v)
        out.append(r if abs(r) < 2 ** 128 else math.copysign(math.inf, v))
    return torch.tensor(out, dtype=torch.float64)


def cast_kernel(n):
    @T.prim_func
    def k(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32), Z: T.Tensor((n,), T.tfloat32),
          P: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(n):
                Y[i] = T.cast(T.cast(X[i], T.tfloat32), T.float32)
                Z[i] = X[i]
                P[i] = T.cast(Z[i] * Z[i], T.float32)  # a product of tf32 values is not rounded again

    return k


def test_rounding_matches_reference_on_specials_and_random():
    specials = [0.0, -0.0, 1.0, 1.0 + 2 ** -11, 1.0 + 3 * 2 ** -12, 1.0 + 2 ** -12, -(1.0 + 2 ** -12),
                1.0 + 2 ** -12 - 2 ** -23, 3.4028234e38, 3.3e38, 1e-40, -1e-42, 2 ** -126, math.inf, -math.inf,
                0.1, -7.3, 65504.0]
    g = torch.Generator().manual_seed(1)
    rnd = torch.randn(128 - len(specials), generator=g, dtype=torch.float64) * torch.logspace(-30, 30, 128 - len(specials),
                                                                                             dtype=torch.float64)
    x = torch.cat([torch.tensor(specials, dtype=torch.float64), rnd]).float()
    n = x.numel()
    k = tilelang.compile(cast_kernel(n), target="cpu")
    y, z, p = (torch.full((n,), float("nan")) for _ in range(3))
    k(x, y, z, p)
    ref = tf32_reference(x)
    same = (y.double() == ref) | (y.isnan() & ref.isnan())
    assert bool(same.all()), (x[~same], y[~same], ref[~same])
    assert bool(((z.double() == ref) | (z.isnan() & ref.isnan())).all())  # a plain store rounds too
    assert torch.equal(torch.signbit(y[1:2]), torch.tensor([True]))
    finite = ref.abs() < 1e18
    assert torch.equal(p[finite].double(), (ref[finite] * ref[finite]).float().double())


def test_nan_stays_nan():
    n = 32
    k = tilelang.compile(cast_kernel(n), target="cpu")
    x = torch.full((n,), float("nan"))
    x.view(torch.int32)[:4] = torch.tensor([0x7F800001, 0x7F800FFF, -0x7FFFF, 0x7FC00000], dtype=torch.int32)
    y, z, p = (torch.zeros(n) for _ in range(3))
    k(x, y, z, p)
    assert bool(y.isnan().all()) and bool(z.isnan().all())


def tf32_gemm(M, N, K, bm=32, bn=32, bk=16):
    @T.prim_func
    def mm(A: T.Tensor((M, K), T.float32), B: T.Tensor((N, K), T.tfloat32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.tfloat32)
            b_s = T.alloc_shared((bn, bk), T.tfloat32)
            c_f = T.alloc_fragment((bm, bn), T.float32)
            T.clear(c_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[bx * bn, k * bk], b_s)
                T.gemm(a_s, b_s, c_f, transpose_B=True)
            T.copy(c_f, C[by * bm, bx * bn])

    return mm


def test_tf32_gemm_uses_rounded_inputs():
    M, N, K = 64, 32, 48
    k = tilelang.compile(tf32_gemm(M, N, K), target="cpu")
    a = torch.randn(M, K) * 3
    b = torch.randn(N, K)  # a float32 tensor passed for a tfloat32 parameter: rounded where read
    c = torch.full((M, N), float("nan"))
    k(a, b, c)
    ra = tf32_reference(a.flatten()).view(M, K)
    rb = tf32_reference(b.flatten()).view(N, K)
    ref = ra @ rb.T
    err = (c.double() - ref).abs().max().item()
    assert err < 1e-4 * K, err
    assert (a.double() @ b.double().T - ref).abs().max().item() > 20 * err  # rounding is visible


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_source_rounds_with_cvt_rna(arch):
    k = tilelang.compile(cast_kernel(64), target=f"cuda -arch={arch}")
    src = k.get_kernel_source()
    assert "tl_f32_to_tf32(" in src
    from pathlib import Path

    header = (Path(tilelang.__file__).parent / "include" / "tl" / "c_compat.h").read_text()
    assert "cvt.rna.tf32.f32" in header
    tilelang.compile(tf32_gemm(64, 32, 48), target=f"cuda -arch={arch}")


def test_casts_from_types_tf32_holds_exactly_are_not_rounded():
    """bf16 / fp16 / fp8 / int8 values are tf32 values: their casts print no rounding (mhc_pre's
    bf16 -> tf32 staging rounded three times per element), and results stay bit-exact."""
    import tilelang
    import tilelang.language as T

    @T.prim_func
    def k(A: T.Tensor((64,), "bfloat16"), B: T.Tensor((64,), "float16"), C: T.Tensor((64,), "float32"),
          O: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=1) as _:
            t = T.alloc_local((64,), "tfloat32")
            u = T.alloc_local((64,), "tfloat32")
            for i in T.serial(64):
                t[i] = T.cast(A[i], "tfloat32")
                u[i] = T.cast(C[i], "tfloat32") + T.cast(B[i], "tfloat32")
                O[i] = t[i] * 2.0 + u[i]

    kern = tilelang.compile(k, target="cpu")
    src = kern.get_kernel_source()
    assert "tl_f32_to_tf32((float)(tl_bf16_to_f32" not in src, src
    a = torch.randn(64).bfloat16()
    b = torch.randn(64).half()
    c = torch.randn(64)
    o = torch.full((64,), float("nan"))
    kern(a, b, c, o)

    def tf32(x):  # round to nearest, ties away (cvt.rna): keep 10 mantissa bits
        bits = x.float().view(torch.int32)
        return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)

    want = tf32(a.float()) * 2.0 + tf32(tf32(c) + b.float())
    torch.testing.assert_close(o, want, rtol=0, atol=0)
