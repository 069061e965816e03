"""bf16 arithmetic on CUDA and the integer promotion of narrow shifts.

CUDA computes a bf16 `+ - *` of bf16 values with one bf16 instruction (__hmul_rn ...: sm_80+),
the CPU backend in float rounded to bf16 after each operation; the two are bit-identical (float
holds a sum or product of two bf16 values to within one rounding that bf16's rounding absorbs:
24 >= 2 * 8 + 2 bits). The mxfp4 dequant's `B_local[v] *= scale[0]` was two conversions, a float
multiply and a rounding per element.

An 8-bit `(uint8)1 << s` converted to bf16 is 2^s (C's integer promotion, as the public
TileLang's generated C computes it), not the shift wrapped to 8 bits; used as a uint8 it wraps.
"""
from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T


def bf16_chain(N=2048, threads=64):
    """Per thread: 8 values scaled by one shared factor (the mxfp4 dequant's shape), then a chain
    of + - * with a constant and a cast operand."""

    @T.prim_func
    def chain(A: T.Tensor((N,), "bfloat16"), B: T.Tensor((N,), "bfloat16"), S: T.Tensor((N // 8,), "bfloat16"),
              F: T.Tensor((N,), "float32"), C: T.Tensor((N,), "bfloat16")):
        with T.Kernel(N // (threads * 8), threads=threads) as bx:
            tx = T.get_thread_binding()
            a = T.alloc_local((8,), "bfloat16")
            s = T.alloc_local((1,), "bfloat16")
            base = (bx * threads + tx) * 8
            for v in T.vectorized(8):
                a[v] = A[base + v]
            s[0] = S[base // 8]
            for v in T.vectorized(8):
                a[v] *= s[0]
            for v in T.vectorized(8):
                C[base + v] = (a[v] - B[base + v]) * 0.3 + a[v] * T.Cast("bfloat16", F[base + v])

    return chain


def chain_inputs(N=2048, seed=0):
    g = torch.Generator().manual_seed(seed)

    def spread(n):  # magnitudes from 2^-140 (bf16 subnormals) to 2^120 (products overflow)
        return torch.randn(n, generator=g, dtype=torch.float64) * torch.exp2(torch.randint(-140, 120, (n,), generator=g))

    a, b, s = spread(N).bfloat16(), spread(N).bfloat16(), spread(N // 8).bfloat16()
    f = (torch.randn(N, generator=g, dtype=torch.float64) * 3).float()
    return a, b, s, f


def chain_reference(a, b, s, f):
    """float64, rounded to bf16 after every operation."""
    r = lambda t: t.to(torch.bfloat16).double()  # noqa: E731
    x = r(a.double() * s.double().repeat_interleave(8))
    return r(r(r(x - b.double()) * r(torch.tensor(0.3, dtype=torch.float64))) + r(x * r(f.double())))


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_bf16_chain_native_matches_float64_and_cpu(run_on_host, arch):
    k = tilelang.compile(bf16_chain(), target=f"cuda -arch={arch}")
    src = k.get_kernel_source()
    assert "__hmul_rn(" in src and "__hsub_rn(" in src and "__hadd_rn(" in src, src
    a, b, s, f = chain_inputs()
    c = torch.full((2048,), float("nan"), dtype=torch.bfloat16)
    run_on_host(k, [a, b, s, f, c])
    ref = chain_reference(a, b, s, f)
    assert ref.isinf().any() and (ref.abs() < 2.0 ** -126).logical_and(ref != 0).any()  # the edges are exercised
    torch.testing.assert_close(c.double(), ref, rtol=0, atol=0, equal_nan=True)
    c_cpu = torch.full((2048,), float("nan"), dtype=torch.bfloat16)
    tilelang.compile(bf16_chain(), target="cpu")(a, b, s, f, c_cpu)
    assert torch.equal(c_cpu.view(torch.int16), c.view(torch.int16))


def shift_scale(N=256, threads=64):
    """The mxfp4 example's scale: `T.shift_left(1, s)` of a uint8 s, stored to bf16; and, used as
    a uint8, `(x << s)` stored to uint8 (wraps) and reinterpreted (w4a8's nibble move)."""

    @T.prim_func
    def shifts(Sc: T.Tensor((N,), "uint8"), X: T.Tensor((N,), "uint8"), E: T.Tensor((N,), "bfloat16"),
               W: T.Tensor((N,), "uint8"), R: T.Tensor((N,), "int8")):
        with T.Kernel(N // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            i = bx * threads + tx
            s = T.alloc_local((1,), "uint8")
            e = T.alloc_local((1,), "bfloat16")
            s[0] = Sc[i]
            e[0] = T.shift_left(1, s[0])
            E[i] = e[0]
            W[i] = T.shift_left(X[i], s[0] % 8)
            R[i] = T.reinterpret(T.shift_left(X[i], T.uint8(4)), "int8")

    return shifts


def shift_reference(sc, x):
    s = sc.long()
    e = torch.where(s < 31, torch.exp2(s.double()), torch.where(s == 31, -(2.0 ** 31), 0.0))
    w = (x.long() << (s % 8)) & 0xFF
    r = ((x.long() << 4) & 0xFF).to(torch.uint8).view(torch.int8)
    return e.to(torch.bfloat16), w.to(torch.uint8), r


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_narrow_shift_promotes_where_converted(target, request):
    sc = torch.arange(256, dtype=torch.uint8)  # every shift amount: 2^s below 31, 0 from 32 on
    x = torch.randint(0, 256, (256,), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    outs = [torch.full((256,), float("nan"), dtype=torch.bfloat16), torch.full((256,), 7, dtype=torch.uint8),
            torch.full((256,), 7, dtype=torch.int8)]
    if target == "cpu":
        tilelang.compile(shift_scale(), target="cpu")(sc, x, *outs)
    else:
        run = request.getfixturevalue("run_on_host")
        k = tilelang.compile(shift_scale(), target="cuda -arch=sm_90a")
        assert "tl_shl_i32(" in k.get_kernel_source()
        run(k, [sc, x, *outs])
    e, w, r = shift_reference(sc, x)
    assert torch.equal(outs[0].view(torch.int16), e.view(torch.int16)), (outs[0][:40], e[:40])
    assert torch.equal(outs[1], w)
    assert torch.equal(outs[2], r)
