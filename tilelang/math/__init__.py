"""Integer helpers for host-side shape arithmetic: `cdiv`, `next_power_of_2` (also `tilelang.cdiv`).

    tilelang.cdiv(1000, 128)            # 8
    tilelang.math.next_power_of_2(96)   # 128
"""
from __future__ import annotations

__all__ = ["cdiv", "next_power_of_2"]


def next_power_of_2(x: int) -> int:
    """The smallest power of two >= x, for x >= 1 (1 -> 1, 96 -> 128, 128 -> 128)."""
    x = int(x)
    if x < 1:
        raise ValueError(f"next_power_of_2: expected an integer >= 1, got {x}")
    return 1 << (x - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    """a / b rounded up, for positive b: the number of size-b tiles covering a (host ints; in a
    kernel use T.ceildiv)."""
    return (a + b - 1) // b
