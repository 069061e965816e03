"""tvm.tirx.IndexMap: from_func, map_indices (symbolic and constant), map_shape, inverse."""
import random

import numpy as np
import pytest

import tilelang.language as T
from tilelang.errors import DSLTypeError
from tilelang.ir import expr as E
from tilelang.layout.layout import compile_exprs
from tilelang.tvm.tirx import IndexMap


def _ints(exprs):
    return [E.const_value(e) for e in exprs]


def _mma_a(i, j):  # the m16n8k16 A operand: (row, col) -> (lane, register)
    return [(i % 8) * 4 + (j % 8) // 2, (j // 8) * 4 + (i // 8) * 2 + j % 2]


def test_from_func_indices_and_dtype():
    m = IndexMap.from_func(_mma_a, index_dtype=T.int32)
    assert m.ndim == 2 and len(m.final_indices) == 2
    assert all(v.dtype == T.int32 for v in m.initial_indices)
    assert IndexMap.from_func(lambda i: i * 2).initial_indices[0].dtype == T.int64  # TVM's default


def test_map_indices_constant_matches_python():
    m = IndexMap.from_func(_mma_a, index_dtype=T.int32)
    for _ in range(50):
        i, j = random.randrange(16), random.randrange(16)
        assert _ints(m.map_indices([i, j])) == _mma_a(i, j)


def test_map_indices_symbolic_evaluates_right():
    m = IndexMap.from_func(_mma_a, index_dtype=T.int32)
    r, c = E.Var("r"), E.Var("c")
    outs = m.map_indices([r * 2, c + 1])
    fn = compile_exprs((r, c), tuple(outs))
    for _ in range(50):
        a, b = random.randrange(8), random.randrange(15)
        assert list(fn(a, b)) == _mma_a(2 * a, b + 1)


def test_ndim_for_varargs_and_errors():
    m = IndexMap.from_func(lambda *idx: list(reversed(idx)), ndim=3)
    assert _ints(m.map_indices([1, 2, 3])) == [3, 2, 1]
    with pytest.raises(DSLTypeError, match="ndim"):
        IndexMap.from_func(lambda *idx: idx)
    with pytest.raises(DSLTypeError, match="takes 2 indices"):
        IndexMap.from_func(_mma_a).map_indices([1])


def test_map_shape_and_inverse_roundtrip():
    m = IndexMap.from_func(_mma_a, index_dtype=T.int32)
    assert _ints(m.map_shape([16, 16])) == [32, 8]
    inv = m.inverse([16, 16])
    seen = np.zeros((16, 16), dtype=int)
    for lane in range(32):
        for reg in range(8):
            i, j = _ints(inv.map_indices([lane, reg]))
            assert _mma_a(i, j) == [lane, reg]
            seen[i, j] += 1
    assert (seen == 1).all()
    with pytest.raises(DSLTypeError, match="constant indices"):
        inv.map_indices([E.Var("x"), 0])


def test_inverse_of_non_bijective_raises():
    with pytest.raises(DSLTypeError, match="not bijective"):
        IndexMap.from_func(lambda i, j: [i // 2, j]).inverse([4, 4])


def test_is_equivalent_to():
    a = IndexMap.from_func(lambda i, j: [i * 16 + j])
    b = IndexMap.from_func(lambda x, y: [x * 16 + y])
    c = IndexMap.from_func(lambda i, j: [j * 16 + i])
    assert a.is_equivalent_to(b) and not a.is_equivalent_to(c)
