"""Fit the polynomial of tl_exp2_poly (include/tl/exp2_poly.h): 2^f on [-1/2, 1/2], minimax in
relative error, with p(0) = 1 exactly, coefficients rounded to float32.

    python scripts/exp2_poly_fit.py            # the table below and the header's constants

Why p(0) = 1: the kernel forms 2^x as the bits of p(f) plus n << 23 (n = rint(x)); x clamped to
-127 gives n = -127, f = 0, and only p(0) = 1 makes that +0 (p(0) just below 1 would borrow from
the sign bit: a NaN). It also keeps a row's maximum at exactly P = 1, as ex2.approx does.

The fit is a relative minimax over a dense grid (`fit`), then the
float32 kernel (clamp, the 1.5 * 2^23 rounding trick, Horner by fma, the exponent add) is
evaluated in numpy over every float32 x in [-126, 0] on a grid and compared with 2^x in float64.
"""
from __future__ import annotations

import numpy as np

SHIFT = np.float32(12582912.0)  # 1.5 * 2^23: x + SHIFT leaves rint(x) in the low mantissa bits


def fit(degree: int, points: int = 4001, iters: int = 3000) -> np.ndarray:
    """float32 coefficients c1..c_degree of p(f) = 1 + c1 f + ... (relative minimax on [-1/2, 1/2]).

    Lawson's iteration (numpy only): weighted least squares whose weights grow where the error is
    largest, converging to the minimax fit on the grid. The header's constants came from an exact
    linear-program solve of the same problem (minimise t with |p(f) / 2^f - 1| <= t); this
    reproduces them to ~1e-6 relative, and its max error is within 0.01 % of theirs."""
    f = np.linspace(-0.5, 0.5, points)
    g = np.exp2(f)
    a = np.stack([f ** k for k in range(1, degree + 1)], axis=1) / g[:, None]  # p(f)/2^f - 1, linear in c
    b = 1.0 - 1.0 / g
    w = np.full(points, 1.0 / points)
    c = np.zeros(degree)
    for _ in range(iters):
        sw = np.sqrt(w)
        c = np.linalg.lstsq(a * sw[:, None], b * sw, rcond=None)[0]
        w = w * np.abs(a @ c - b)
        w /= w.sum()
    return c.astype(np.float32)


def _fma32(a, b, c):
    """float32 fma: the product of two float32 values is exact in float64; one rounding to float32
    of the sum (a double rounding through float64 that cannot matter at these error levels)."""
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def exp2_poly32(x: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """The header's tl_exp2_poly in float32 arithmetic, step by step (no flush to zero)."""
    x = np.maximum(x.astype(np.float32), np.float32(-127.0))  # fmaxf: -inf -> -127
    t = (x + SHIFT).astype(np.float32)
    f = (x - (t - SHIFT)).astype(np.float32)
    p = np.full_like(f, coeffs[-1])
    for c in coeffs[-2::-1]:
        p = _fma32(p, f, np.full_like(f, c))
    p = _fma32(p, f, np.ones_like(f))
    bits = p.view(np.uint32) + (t.view(np.uint32) << np.uint32(23))
    return bits.view(np.float32)


def max_rel_error(coeffs: np.ndarray, lo: float = -126.0, hi: float = 0.0, points: int = 2_000_001) -> float:
    """max |tl_exp2_poly(x) / 2^x - 1| over `points` float32 x in [lo, hi] (normal results)."""
    x = np.linspace(lo, hi, points).astype(np.float32)
    got = exp2_poly32(x, coeffs).astype(np.float64)
    return float(np.max(np.abs(got / np.exp2(x.astype(np.float64)) - 1.0)))


def hex32(v) -> str:
    """A float32 as a C hex float literal: 0x1.62f5fap-1f."""
    mant, exp = float(v).hex().split("p")
    return f"{mant.rstrip('0')}p{exp}f"


def main():
    print("degree  max rel err (float32 kernel, x in [-126, 0])  log2")
    for d in (2, 3, 4):
        c = fit(d)
        err = max_rel_error(c)
        print(f"{d:6d}  {err:.3e}  {np.log2(err):6.2f}   " + "  ".join(f"{float(v).hex()}" for v in c))
    c = fit(3)
    print("\n// include/tl/exp2_poly.h, degree 3 (c1, c2, c3):")
    for k, v in enumerate(c, 1):
        print(f"#define TL_EXP2_POLY_C{k} {hex32(v)}  // {float(v):.9g}")


if __name__ == "__main__":
    main()
