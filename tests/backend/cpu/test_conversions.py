"""tl_cpu.h's low-precision conversions agree bit for bit with torch's own CPU conversions.

Why exhaustive: the CPU backend is the reference every kernel is checked against, so a
conversion that is off by one ulp on a tie, or saturates where torch gives inf, would make
correct GPU kernels look wrong (or hide wrong ones). Every 16-bit and 8-bit source pattern is
tried; 32/64-bit sources get ~1e6 random values plus constructed ties and edge cases.
NaN is compared as NaN (torch's own NaN bits differ between its scalar and vector paths).
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch

from tilelang.backend.cpu.compile import compile_c

BF16, F16, E4M3, E5M2 = torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2
_BITS = {BF16: (torch.int16, np.uint16), F16: (torch.int16, np.uint16),
         E4M3: (torch.uint8, np.uint8), E5M2: (torch.uint8, np.uint8),
         torch.float32: (torch.int32, np.uint32)}
_SIGNED = {np.uint8: np.uint8, np.uint16: np.int16, np.uint32: np.int32}


def cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """torch's cast, except to e5m2 past the largest finite value (inf included): CUDA's conversion
    (.satfinite), and so ours, saturates to +-57344 where torch overflows to +-inf."""
    return (t.clamp(-57344, 57344) if dtype == E5M2 else t).to(dtype)

# NOTE: one C function per direction; harness code is ours, the conversions are the header's.
HARNESS = r"""
#include "cpu/tl_cpu.h"
#define MAP(NAME, TIN, TOUT, EXPR) \
    void NAME(const TIN *in, TOUT *out, int64_t n) { \
        for (int64_t i = 0; i < n; ++i) { TIN x = in[i]; out[i] = (EXPR); } }
MAP(bf16_to_f32, uint16_t, float, tl_bf16_to_f32(tl_bf16_from_bits(x)))
MAP(bf16_to_f16, uint16_t, uint16_t, tl_f16_bits(tl_bf16_to_f16(tl_bf16_from_bits(x))))
MAP(f32_to_bf16, float, uint16_t, tl_f32_to_bf16(x).bits)
MAP(f64_to_bf16, double, uint16_t, tl_f64_to_bf16(x).bits)
MAP(f16_to_bf16, uint16_t, uint16_t, tl_f16_to_bf16(tl_f16_from_bits(x)).bits)
MAP(f64_to_f16, double, uint16_t, tl_f16_bits(tl_f64_to_f16(x)))
MAP(e4m3_to_f32, uint8_t, float, tl_fp8e4m3_to_f32(x))
MAP(e5m2_to_f32, uint8_t, float, tl_fp8e5m2_to_f32(x))
MAP(e4m3_to_f16, uint8_t, uint16_t, tl_f16_bits(tl_fp8e4m3_to_f16(x)))
MAP(e5m2_to_f16, uint8_t, uint16_t, tl_f16_bits(tl_fp8e5m2_to_f16(x)))
MAP(f32_to_e4m3, float, uint8_t, tl_f32_to_fp8e4m3(x))
MAP(f32_to_e5m2, float, uint8_t, tl_f32_to_fp8e5m2(x))
MAP(f64_to_e4m3, double, uint8_t, tl_f64_to_fp8e4m3(x))
MAP(f64_to_e5m2, double, uint8_t, tl_f64_to_fp8e5m2(x))
MAP(f16_to_e4m3, uint16_t, uint8_t, tl_f16_to_fp8e4m3(tl_f16_from_bits(x)))
MAP(f16_to_e5m2, uint16_t, uint8_t, tl_f16_to_fp8e5m2(tl_f16_from_bits(x)))
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILELANG_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return compile_c(HARNESS)


def run(lib, name: str, x: np.ndarray, out_dtype) -> np.ndarray:
    """Call the harness function `name` on x; the output is poisoned (0xA5 bytes) first."""
    x = np.ascontiguousarray(x)
    out = np.full(x.size * np.dtype(out_dtype).itemsize, 0xA5, np.uint8).view(out_dtype)
    fn = lib.function(name, None, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64])
    fn(x.ctypes.data, out.ctypes.data, x.size)
    return out


def assert_same(ours_bits: np.ndarray, ref: torch.Tensor, inputs: np.ndarray) -> None:
    """Bit equality with torch's result `ref`, except that any NaN matches any NaN."""
    tdt, ndt = _BITS[ref.dtype]
    assert ours_bits.dtype == ndt, (ours_bits.dtype, ndt)
    ref_bits = ref.contiguous().view(tdt).numpy().view(ndt)
    ours = torch.from_numpy(ours_bits.view(_SIGNED[ndt])).view(ref.dtype)
    ref_nan, our_nan = ref.float().isnan().numpy(), ours.float().isnan().numpy()
    bad = (ref_nan != our_nan) | (~ref_nan & (ref_bits != ours_bits))
    if bad.any():
        flat = inputs.reshape(-1)
        rows = [f"  in={flat[i]!r} ({_hex(flat[i])}) ours=0x{int(ours_bits[i]):x} "
                f"torch=0x{int(ref_bits[i]):x}" for i in np.flatnonzero(bad)[:8]]
        pytest.fail(f"{bad.sum()} of {bad.size} differ from torch:\n" + "\n".join(rows))


def _hex(v) -> str:
    a = np.asarray(v)
    return "0x" + a.tobytes()[::-1].hex()  # little-endian host: reverse for readable order


def all_bits(n_bits: int) -> np.ndarray:
    return np.arange(1 << n_bits, dtype=np.uint16 if n_bits == 16 else np.uint8)


# ------------------------------------------------------------ inputs for 32/64-bit sources

def f32_edges() -> np.ndarray:
    tiny = np.finfo(np.float32).tiny
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, tiny, -tiny, tiny / 2,
            np.float32(1e-45), -np.float32(1e-45), np.finfo(np.float32).max,
            -np.finfo(np.float32).max, 448, 449, 464, 465, 479.9, 480, 496, 500, 1e4, 1e30,
            57344, 57345, 61439, 61440, 61441, 65504, 65520, 65536, 1e6,
            2.0 ** -6, 2.0 ** -7, 2.0 ** -9, 2.0 ** -10, 2.0 ** -11, 1.5 * 2.0 ** -10,
            2.0 ** -14, 2.0 ** -16, 2.0 ** -17, 2.0 ** -18, 1.5 * 2.0 ** -17, 3.3895314e38]
    v = np.array(vals, dtype=np.float32)
    bits = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0x7FFFFFFF, 0xFFC00001, 0x7F7FFFFF,
                     0x00000001, 0x807FFFFF, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F817FFF],
                    dtype=np.uint32).view(np.float32)
    return np.concatenate([v, -v, bits])


def ties(dtype: torch.dtype) -> np.ndarray:
    """Every exact midpoint between neighbouring values of `dtype` (exact in f32), the values
    themselves, their f32 neighbours, and values past the largest finite one (where
    saturation vs overflow is decided)."""
    n_bits = torch.finfo(dtype).bits
    pats = torch.from_numpy(all_bits(n_bits).view(np.int16 if n_bits == 16 else np.uint8))
    vals = pats.view(dtype).double().numpy()
    vals = np.unique(vals[np.isfinite(vals)])
    mids = (vals[1:] + vals[:-1]) / 2
    top, step = vals[-1], vals[-1] - vals[-2]
    beyond = np.array([top + step / 2, top + step, top + 1.5 * step, top * 2])
    with np.errstate(over="ignore"):
        base = np.concatenate([mids, vals, beyond, -beyond]).astype(np.float32)
    return np.concatenate([base, np.nextafter(base, np.float32(np.inf)),
                           np.nextafter(base, np.float32(-np.inf))])


def f32_random(rng, n: int, lo_exp: int, hi_exp: int) -> np.ndarray:
    """Half random bit patterns (every class), half with exponents in [lo_exp, hi_exp)."""
    raw = rng.integers(0, 1 << 32, n // 2, dtype=np.uint64).astype(np.uint32)
    exp = rng.integers(lo_exp + 127, hi_exp + 127, n - n // 2).astype(np.uint32)
    man = rng.integers(0, 1 << 23, n - n // 2).astype(np.uint32)
    sign = rng.integers(0, 2, n - n // 2).astype(np.uint32) << 31
    return np.concatenate([raw, sign | (exp << 23) | man]).view(np.float32)


def f64_cases(rng, ties32: np.ndarray, n: int, lo_exp: int, hi_exp: int) -> np.ndarray:
    """Doubles a hair above/below f32-exact ties (where rounding once vs twice differs),
    random doubles in range, random 64-bit patterns and edge cases."""
    t = ties32[np.isfinite(ties32)].astype(np.float64)
    near = np.concatenate([t * (1 + 2.0 ** -40), t * (1 - 2.0 ** -40), t])
    in_range = np.ldexp(rng.uniform(-2, 2, n), rng.integers(lo_exp, hi_exp, n))
    raw = rng.integers(0, 1 << 63, n // 4, dtype=np.uint64).view(np.float64)
    edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e300, 1e-300,
                     3.4028235677973366e38, 3.5e38, 2.0 ** -150, 2.0 ** -149 * 0.75])
    return np.concatenate([near, in_range, raw, -raw, edge])


# ------------------------------------------------------------ 16-bit sources: exhaustive

def test_bf16_to_f32_all_patterns(lib):
    x = all_bits(16)
    ours = run(lib, "bf16_to_f32", x, np.float32).view(np.uint32)
    assert_same(ours, torch.from_numpy(x.view(np.int16)).view(BF16).float(), x)


def test_bf16_to_f16_all_patterns(lib):
    x = all_bits(16)
    ours = run(lib, "bf16_to_f16", x, np.uint16)
    assert_same(ours, torch.from_numpy(x.view(np.int16)).view(BF16).to(F16), x)


@pytest.mark.parametrize("name,dtype", [("f16_to_bf16", BF16), ("f16_to_e4m3", E4M3),
                                        ("f16_to_e5m2", E5M2)])
def test_f16_source_all_patterns(lib, name, dtype):
    x = all_bits(16)
    ours = run(lib, name, x, _BITS[dtype][1])
    assert_same(ours, cast(torch.from_numpy(x.view(np.int16)).view(F16), dtype), x.view(np.float16))


# ------------------------------------------------------------ fp8 sources: all 256 patterns

@pytest.mark.parametrize("name,src,dst", [
    ("e4m3_to_f32", E4M3, torch.float32), ("e5m2_to_f32", E5M2, torch.float32),
    ("e4m3_to_f16", E4M3, F16), ("e5m2_to_f16", E5M2, F16)])
def test_fp8_to_wider_all_patterns(lib, name, src, dst):
    x = all_bits(8)
    out_np = np.uint32 if dst == torch.float32 else np.uint16
    ours = run(lib, name, x, np.float32 if dst == torch.float32 else np.uint16).view(out_np)
    assert_same(ours, torch.from_numpy(x).view(src).to(dst), x)


# ------------------------------------------------------------ f32 sources

def test_f32_to_bf16(lib):
    rng = np.random.default_rng()
    hi = rng.integers(0, 1 << 16, 100_000, dtype=np.uint32) << 16
    ties = np.concatenate([hi | 0x8000, hi | 0x7FFF, hi | 0x8001, hi]).view(np.float32)
    x = np.concatenate([f32_random(rng, 1_000_000, -140, 128), ties, f32_edges()])
    ours = run(lib, "f32_to_bf16", x, np.uint16)
    assert_same(ours, torch.from_numpy(x).to(BF16), x)


@pytest.mark.parametrize("name,dtype,lo,hi", [("f32_to_e4m3", E4M3, -14, 11),
                                              ("f32_to_e5m2", E5M2, -20, 18)])
def test_f32_to_fp8(lib, name, dtype, lo, hi):
    rng = np.random.default_rng()
    x = np.concatenate([f32_random(rng, 600_000, lo, hi), ties(dtype), f32_edges()])
    ours = run(lib, name, x, np.uint8)
    assert_same(ours, cast(torch.from_numpy(x), dtype), x)


def test_fp8_out_of_range_behaviour_is_pinned(lib):
    """e4m3fn saturates finite and inf inputs to +-448 (torch 2.13 and CUDA alike); e5m2 saturates
    to +-57344 as CUDA's conversions do (torch overflows to +-inf from 61440); NaN keeps its sign."""
    x = np.array([1e6, np.inf, -np.inf, 465.0, -1e30, np.nan, 61440.0, -1e6], np.float32)
    e4 = run(lib, "f32_to_e4m3", x, np.uint8)
    e5 = run(lib, "f32_to_e5m2", x, np.uint8)
    assert e4.tolist()[:5] == [0x7E, 0x7E, 0xFE, 0x7E, 0xFE] and e4[5] & 0x7F == 0x7F
    assert e5.tolist()[:5] == [0x7B, 0x7B, 0xFB, 0x5F, 0xFB] and e5[6] == 0x7B  # 465 -> 448
    assert e5[7] == 0xFB and e5[5] & 0x7F == 0x7F
    assert_same(e4, torch.from_numpy(x).to(E4M3), x)
    assert_same(e5, cast(torch.from_numpy(x), E5M2), x)


# ------------------------------------------------------------ f64 sources (torch rounds twice)

@pytest.mark.parametrize("name,dtype,lo,hi", [
    ("f64_to_bf16", BF16, -140, 128), ("f64_to_f16", F16, -26, 17),
    ("f64_to_e4m3", E4M3, -14, 11), ("f64_to_e5m2", E5M2, -20, 18)])
def test_f64_source(lib, name, dtype, lo, hi):
    rng = np.random.default_rng()
    x = f64_cases(rng, ties(dtype), 300_000, lo, hi)
    ours = run(lib, name, x, _BITS[dtype][1])
    assert_same(ours, cast(torch.from_numpy(x), dtype), x)


def test_f64_rounds_through_f32_like_torch(lib):
    """1 + 2^-8 + 2^-40 rounds directly to bf16 1.0078125, but through f32 it becomes the tie
    1 + 2^-8 and rounds to even, 1.0: torch (and we) give 1.0."""
    x = np.array([1 + 2.0 ** -8 + 2.0 ** -40], np.float64)
    assert run(lib, "f64_to_bf16", x, np.uint16)[0] == 0x3F80
    assert torch.from_numpy(x).to(BF16).view(torch.int16).item() == 0x3F80
