"""Layout: evaluation (ints and IR), bijection, inverse, compose, repeat, equality."""
import itertools

import numpy as np
import pytest

import tilelang.language as T
from tilelang.errors import DSLTypeError
from tilelang.ir.expr import Var
from tilelang.layout import Layout


def transpose(m, n):
    return Layout((m, n), lambda i, j: (j, i))


def padded(m, n, pad):
    return Layout((m, n), lambda i, j: i * (n + pad) + j)


def test_map_ints_matches_python_formula():
    L = Layout((6, 10), lambda i, j: (i // 2, (i % 2) * 10 + j))
    for i, j in itertools.product(range(6), range(10)):
        assert L.map(i, j) == (i // 2, (i % 2) * 10 + j)
    assert L.output_shape() == (3, 20)
    assert L.is_bijective()


def test_map_exprs_substitutes_and_simplifies():
    L = Layout((8, 8), lambda i, j: (i * 8 + j,))
    r, c = Var("r"), Var("c")
    (e,) = L.map(r + 1, c)
    # the substituted expression evaluates like the formula for every (r, c)
    probe = Layout((7, 8), lambda a, b: L.map(a + 1, b))
    for a, b in itertools.product(range(7), range(8)):
        assert probe.map(a, b) == ((a + 1) * 8 + b,)
    assert "r" in str(e) and "c" in str(e)


def test_forward_fn_may_return_single_expr_or_ints():
    assert Layout((4,), lambda i: 3 - i).map(1) == (2,)
    assert Layout((2, 2), lambda i, j: [0, j]).map(1, 1) == (0, 1)


def test_out_of_range_and_arity_errors():
    L = transpose(4, 8)
    with pytest.raises(DSLTypeError, match="outside"):
        L.map(4, 0)
    with pytest.raises(DSLTypeError, match="2 indices"):
        L.map(1)
    with pytest.raises(DSLTypeError, match="index variables"):
        Layout((4,), lambda i: i + Var("free"))


def test_bijectivity_detects_collisions_and_gaps():
    assert transpose(4, 8).is_bijective()
    assert not Layout((4, 4), lambda i, j: (i, j // 2)).is_bijective()       # collisions
    gap = padded(4, 4, 1)                                                      # stride 5: holes
    assert gap.is_injective() and not gap.is_bijective()
    with pytest.raises(DSLTypeError, match="bijective"):
        gap.inverse()


def test_inverse_roundtrip_and_table_backing():
    L = Layout((8, 16), lambda i, j: (j // 4, (j % 4) * 8 + (i ^ (j // 4))))
    inv = L.inverse()
    assert inv.is_table and inv.shape == L.output_shape()
    for i, j in itertools.product(range(8), range(16)):
        assert inv.map(*L.map(i, j)) == (i, j)
    assert inv.inverse() == L
    with pytest.raises(DSLTypeError, match="constant indices"):
        inv.map(Var("x"), 0)


def test_compose_applies_inner_first():
    swz = Layout((8, 8), lambda i, j: (i, j ^ i))
    t = transpose(8, 8)
    st = swz.compose(t)                       # x -> swz(t(x))
    for i, j in itertools.product(range(8), range(8)):
        assert st.map(i, j) == swz.map(*t.map(i, j)) == (j, i ^ j)
    assert not st.is_table
    # with a table-backed side the result is a table with the same values
    tab = swz.compose(t.inverse())
    assert tab.is_table and tab == st
    assert swz.compose(swz.inverse()) == Layout.identity((8, 8))


def test_compose_checks_dimensions():
    with pytest.raises(DSLTypeError, match="produces 1"):
        transpose(4, 4).compose(Layout((4, 4), lambda i, j: i * 4 + j))


def test_repeat_tiles_blocks():
    atom = Layout((2, 4), lambda i, j: (i, 3 - j))
    R = atom.repeat((3, 2))
    assert R.shape == (6, 8) and R.output_shape() == (6, 8) and R.is_bijective()
    for i, j in itertools.product(range(6), range(8)):
        bi, bj = i // 2, j // 4
        assert R.map(i, j) == (bi * 2 + i % 2, bj * 4 + 3 - j % 4)
    assert atom.inverse().repeat((3, 2)) == R.inverse()


def test_equality_by_enumeration():
    a = Layout((4, 4), lambda i, j: (i, j))
    b = Layout((4, 4), lambda i, j: (i % 4, (j + 4) % 4))   # different expression, same map
    c = Layout((4, 4), lambda i, j: (j, i))
    assert a == b and hash(a) == hash(b)
    assert a != c
    assert a != Layout((4, 2), lambda i, j: (i, j))
    assert Layout.from_table(np.asarray(c.table())) == c


def test_language_wrapper():
    L = T.Layout((4, 8), lambda i, j: [j, i])
    assert isinstance(L, Layout) and L.map(1, 2) == (2, 1)


def test_symbolic_extent_maps_by_substitution():
    n = Var("n")
    L = Layout((4, n), lambda i, j: i * n + j)
    assert str(L.map(1, 2)[0]) == "n + 2"
    from tilelang.errors import NonConstantShapeError
    with pytest.raises(NonConstantShapeError, match="constant"):
        L.inverse()


def test_repeat_dim_factor_adds_a_leading_copy_index():
    atom = Layout((4, 8), lambda i, j: i * 8 + (j ^ i))
    for d, f in ((0, 3), (1, 2), (-1, 5)):
        R = atom.repeat(d, f) if d != 1 else atom.repeat(dim=d, factor=f)
        dd = d % 2
        assert R.shape == tuple(s * (f if k == dd else 1) for k, s in enumerate(atom.shape))
        assert R.output_shape() == (f, 32)
        for i, j in itertools.product(range(R.shape[0]), range(R.shape[1])):
            idx = [i, j]
            q, idx[dd] = divmod(idx[dd], atom.shape[dd])
            assert R.map(i, j) == (q, *atom.map(*idx))
    assert atom.repeat(dim=0, factor=1) is atom
    assert atom.inverse().repeat(0, 2).is_table  # a table-backed layout repeats by enumeration
    assert atom.inverse().repeat(0, 2).map(37) == (1, *atom.inverse().map(5))
    for bad in ((0, 0), (0, -2), (2, 2), (-3, 2)):
        with pytest.raises(ValueError):
            atom.repeat(*bad)
    with pytest.raises(TypeError):
        atom.repeat(dim=0, factor=2.0)


def test_expand_prepends_pass_through_dims():
    base = Layout((4, 6), lambda j, k: (k, j))
    X = base.expand([2, 3])
    assert X.shape == (2, 3, 4, 6) and X.output_shape() == (2, 3, 6, 4)
    for a, b, j, k in itertools.product(range(2), range(3), range(4), range(6)):
        assert X.map(a, b, j, k) == (a, b, k, j)
    assert base.expand(5) == Layout((5, 4, 6), lambda i, j, k: (i, k, j))
    assert base.expand([]) is base and base.expand(()) is base
    assert base.inverse().expand(2).map(1, 5, 3) == (1, 3, 5)
    with pytest.raises(ValueError):
        base.expand(0)
    with pytest.raises(ValueError):
        base.expand([2, -1])
    with pytest.raises(TypeError):
        base.expand("4")


def test_linearized_forward_index_is_row_major_over_output_shape():
    cases = [
        Layout((2, 32), lambda i, j: (j, i)),
        Layout((3, 4, 5), lambda i, j, k: (k, i, j)),
        Layout((64,), lambda i: (i // 8, i % 8 ^ (i // 8) % 8)),
    ]
    for L in cases:
        lin = L.get_linearized_forward_index()
        ext = L.output_shape()
        for idx in itertools.product(*(range(s) for s in L.shape)):
            want, phys = 0, L.map(*idx)
            for p, e in zip(phys, ext):
                want = want * e + p
            got = lin_value(lin, L.forward_vars, idx)
            assert got == want, (L, idx)


def lin_value(expr, vars_, idx):
    from tilelang.arith.simplify import const_int
    from tilelang.ir import expr as E
    from tilelang.ir.visitor import substitute

    return const_int(substitute(expr, {v: E.as_expr(i) for v, i in zip(vars_, idx)}))
