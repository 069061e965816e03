"""shared_16xK_to_mma_32xS_layout_{sr,rs}_{a,b}: bijections onto (lane, slot) that agree with the PTX
ISA's mma.sync fragment tables (written out here independently, per register index)."""
import itertools

import pytest

from tilelang.cuda.intrinsics.layout import mma_layout as ML
from tilelang.ir import expr as E


def ptx_a(bits, lane, i):
    """(row, col) of a_i for m16n8k{8,16,32} (tf32 / f16 / s8), PTX ISA 9.7.13.4."""
    g, t = lane >> 2, lane % 4
    if bits == 32:  # a0..a3
        return g + 8 * (i & 1), t + 4 * (i >> 1)
    if bits == 16:  # a0..a7
        return g + (8 if i in (2, 3, 6, 7) else 0), 2 * t + (i & 1) + (8 if i >= 4 else 0)
    return g + (8 if i in (4, 5, 6, 7, 12, 13, 14, 15) else 0), 4 * t + (i & 3) + (16 if i >= 8 else 0)


def ptx_b(bits, lane, i):
    """(k, n) of b_i of one K x 8 B operand."""
    g, t = lane >> 2, lane % 4
    if bits == 32:
        return t + 4 * i, g
    if bits == 16:
        return 2 * t + (i & 1) + (8 if i >= 2 else 0), g
    return 4 * t + (i & 3) + (16 if i >= 4 else 0), g


CASES = [(32, ML.shared_16x8_to_mma_32x4_layout_sr_a, ML.shared_16x8_to_mma_32x4_layout_sr_b,
          ML.shared_16x8_to_mma_32x4_layout_rs_a, ML.shared_16x8_to_mma_32x4_layout_rs_b),
         (16, ML.shared_16x16_to_mma_32x8_layout_sr_a, ML.shared_16x16_to_mma_32x8_layout_sr_b,
          ML.shared_16x16_to_mma_32x8_layout_rs_a, ML.shared_16x16_to_mma_32x8_layout_rs_b),
         (8, ML.shared_16x32_to_mma_32x16_layout_sr_a, ML.shared_16x32_to_mma_32x16_layout_sr_b,
          ML.shared_16x32_to_mma_32x16_layout_rs_a, ML.shared_16x32_to_mma_32x16_layout_rs_b)]


@pytest.mark.parametrize("bits,sr_a,sr_b,rs_a,rs_b", CASES)
def test_sr_maps_match_ptx_fragments(bits, sr_a, sr_b, rs_a, rs_b):
    k, slots = 256 // bits, 128 // bits
    seen_a, seen_b = set(), set()
    for m, kk in itertools.product(range(16), range(k)):
        lane, s = sr_a(m, kk)
        assert 0 <= lane < 32 and 0 <= s < slots
        assert ptx_a(bits, lane, s) == (m, kk)
        assert rs_a(kk, m) == (lane, s)
        seen_a.add((lane, s))
        lane, s = sr_b(m, kk)  # B indexed (n, k): n in 0..15 covers two n8 tiles
        half, reg = divmod(s, slots // 2)
        assert ptx_b(bits, lane, reg) == (kk, m - 8 * half)
        assert rs_b(kk, m) == (lane, s)
        seen_b.add((lane, s))
    assert len(seen_a) == len(seen_b) == 32 * slots  # bijections onto 32 lanes x slots


def test_sr_maps_take_ir_expressions():
    i, j = E.Var("i"), E.Var("j")
    lane, slot = ML.shared_16x16_to_mma_32x8_layout_sr_a(i, j)
    assert isinstance(lane, E.Expr) and isinstance(slot, E.Expr)
