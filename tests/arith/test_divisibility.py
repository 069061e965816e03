"""arith/divisibility.known_divisor of remainders: `(q * 1024 + tid * 4) % 64` (a flat element
counter's column, vectorize's shared-tile reductions) is a multiple of 4. Each claimed divisor is
checked against the expression's values (tilelang.testing.int_eval) at random points."""
import random

import pytest

from tilelang import dtypes as dt
from tilelang.arith.divisibility import is_multiple, known_divisor
from tilelang.ir.expr import Var
from tilelang.testing.int_eval import int_value

q, t, k = Var("q", dt.int32), Var("tid", dt.int32), Var("k", dt.int32)

CASES = [
    ((q * 1024 + t * 4) % 64, 4),
    ((t * 8) % 48, 8),
    ((t * 6 + 12) % 9, 3),
    ((q * 64) % 32, 32),  # a multiple of 64 mod 32 is 0: every divisor of 32 holds
    ((t * 4) % 6, 2),
    (t % 64, 1),
    ((t * 4) % k, 1),  # nothing known about k
    ((t * 4 + 2) % 8 + q * 2, 2),
]


@pytest.mark.parametrize("e, d", CASES)
def test_remainder_divisors(e, d):
    assert known_divisor(e) == d
    assert is_multiple(e, d)
    rng = random.Random(5)
    for _ in range(300):
        env = {"q": rng.randrange(-50, 50), "tid": rng.randrange(-300, 300), "k": rng.choice([3, 5, 8, 12])}
        assert int_value(e, env) % d == 0, (e, env)


def test_remainder_never_claims_more():
    # (tid * 4) % 64 takes the value 4: no divisor above 4 may be claimed
    e = (t * 4) % 64
    assert known_divisor(e) == 4 and int_value(e, {"tid": 1}) == 4
