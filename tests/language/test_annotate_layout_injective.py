"""T.annotate_layout on a shared tile: a many-to-one layout is a ValueError naming the buffer and
two elements that collide; one-to-one layouts (including ones that leave holes) still run."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout import Layout

N = 96


def _roundtrip(fwd, n=N):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), Out: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((n,), "float32")
            T.annotate_layout({s: Layout((n,), fwd)})
            for i in T.Parallel(n):
                s[i] = A[i] * 2.0
            for i in T.Parallel(n):
                Out[i] = s[n - 1 - i] + A[i]

    return main


def _reference(a: torch.Tensor) -> torch.Tensor:
    x = a.double()
    return (2.0 * x.flip(0) + x).float()


@pytest.mark.parametrize("fwd, a, b", [
    (lambda i: i % 48, (0,), (48,)),
    (lambda i: i * 0, (0,), (1,)),
    (lambda i: (i // 2) * 3, (0,), (1,)),
])
def test_many_to_one_shared_layout_is_rejected(fwd, a, b):
    with pytest.raises(ValueError, match=r"shared buffer `s`.*must be injective") as info:
        tilelang.compile(_roundtrip(fwd), out_idx=[1], target="cpu")
    assert f"elements {a} and {b}" in str(info.value)


@pytest.mark.parametrize("fwd", [lambda i: i, lambda i: i ^ 1, lambda i: i * 3 + 5])
def test_one_to_one_shared_layouts_still_run(fwd):
    k = tilelang.compile(_roundtrip(fwd), out_idx=[1], target="cpu")
    a = torch.randn(N)
    torch.testing.assert_close(k(a), _reference(a), rtol=1e-6, atol=1e-6)


def test_first_collision_reports_a_colliding_pair():
    lay = Layout((4, 6), lambda i, j: (i % 2, j))
    a, b, phys = lay.first_collision()
    assert lay.map(*a) == lay.map(*b) == phys and a != b
    assert Layout((4, 6), lambda i, j: (j, i)).first_collision() is None
    perm = np.random.default_rng().permutation(24)
    assert Layout.from_table(perm.reshape(24, 1)).first_collision() is None
    dup = perm.copy()
    dup[7] = dup[19]
    assert Layout.from_table(dup.reshape(24, 1)).first_collision() == ((7,), (19,), (int(dup[7]),))
