"""tilelang.cdiv / tilelang.math.next_power_of_2 against brute force."""
import pytest

import tilelang
import tilelang.math


def test_cdiv_matches_ceiling_division():
    for a in range(0, 300, 7):
        for b in (1, 3, 64, 128):
            assert tilelang.cdiv(a, b) == -(-a // b)
    assert tilelang.math.cdiv is tilelang.cdiv


def test_next_power_of_2_brute_force():
    for x in range(1, 2100):
        p = tilelang.next_power_of_2(x)
        assert p >= x and p & (p - 1) == 0 and (p == 1 or p // 2 < x)
    with pytest.raises(ValueError, match=">= 1"):
        tilelang.math.next_power_of_2(0)
