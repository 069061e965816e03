"""Each named mma.sync fragment, element by element, against the lane ownership in tl/mma.h."""
import re

import pytest

from tilelang.layout import Fragment
from tilelang.layout import mma_layouts as M
from tilelang.layout.fragment import MmaAccFragment


# Transcribed from the comment block of include/tl/mma.h: (row, col, axis) of each register's
# first element as functions of (g, t); the register's elements run along `axis`.
DOC = {
    "m16n8k16_a": ((16, 16), 2, [(lambda g, t: (g, 2 * t), "col"), (lambda g, t: (g + 8, 2 * t), "col"),
                                 (lambda g, t: (g, 2 * t + 8), "col"), (lambda g, t: (g + 8, 2 * t + 8), "col")]),
    "m16n8k16_b": ((16, 8), 2, [(lambda g, t: (2 * t, g), "row"), (lambda g, t: (2 * t + 8, g), "row")]),
    "m16n8_c": ((16, 8), 1, [(lambda g, t: (g, 2 * t), "col"), (lambda g, t: (g, 2 * t + 1), "col"),
                             (lambda g, t: (g + 8, 2 * t), "col"), (lambda g, t: (g + 8, 2 * t + 1), "col")]),
    "m16n8k32_a": ((16, 32), 4, [(lambda g, t: (g, 4 * t), "col"), (lambda g, t: (g + 8, 4 * t), "col"),
                                 (lambda g, t: (g, 4 * t + 16), "col"), (lambda g, t: (g + 8, 4 * t + 16), "col")]),
    "m16n8k32_b": ((32, 8), 4, [(lambda g, t: (4 * t, g), "row"), (lambda g, t: (4 * t + 16, g), "row")]),
    "m16n8k8_a": ((16, 8), 1, [(lambda g, t: (g, t), "col"), (lambda g, t: (g + 8, t), "col"),
                               (lambda g, t: (g, t + 4), "col"), (lambda g, t: (g + 8, t + 4), "col")]),
    "m16n8k8_b": ((8, 8), 1, [(lambda g, t: (t, g), "row"), (lambda g, t: (t + 4, g), "row")]),
}


def documented_owner(name):
    shape, per, regs = DOC[name]
    owner = {}
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for r, (start, axis) in enumerate(regs):
            row, col = start(g, t)
            for p in range(per):
                elem = (row + p, col) if axis == "row" else (row, col + p)
                assert elem not in owner, (name, elem)
                owner[elem] = (lane, r * per + p)
    assert len(owner) == shape[0] * shape[1], name   # the documentation covers the tile once
    return shape, owner


@pytest.mark.parametrize("name", sorted(DOC))
def test_fragment_matches_documented_ownership(name):
    frag = getattr(M, "mma_" + name)()
    shape, owner = documented_owner(name)
    assert frag.shape == shape and frag.threads() == 32
    assert frag.locals_per_thread() == len(owner) // 32
    for (i, j), want in owner.items():
        assert frag.map(i, j) == want, (name, i, j)
    inv = frag.inverse()
    for (i, j), (lane, slot) in owner.items():
        assert inv.map(lane, slot) == (i, j)


def test_c_aliases_and_lowering_accumulator_agree():
    c = M.mma_m16n8_c()
    assert M.mma_m16n8k16_c() == M.mma_m16n8k32_c() == M.mma_m16n8k8_c() == c
    assert c == Fragment.from_mma_acc(MmaAccFragment((16, 8), 1, 1))


@pytest.mark.parametrize("operand,dtype,fn", [
    ("A", "float16", M.mma_m16n8k16_a), ("B", "bfloat16", M.mma_m16n8k16_b), ("A", "int8", M.mma_m16n8k32_a),
    ("B", "float8_e4m3", M.mma_m16n8k32_b), ("A", "float32", M.mma_m16n8k8_a), ("b", "tf32", M.mma_m16n8k8_b),
    ("C", "float16", M.mma_m16n8_c)])
def test_make_mma_fragment_dispatch(operand, dtype, fn):
    assert M.make_mma_fragment(operand, dtype) == fn()


def test_make_mma_fragment_rejects_unknown():
    with pytest.raises(Exception, match="no mma.sync shape"):
        M.make_mma_fragment("A", "int32")


@pytest.mark.parametrize("fn", list(M.PICTURES), ids=lambda f: f.__name__)
def test_docstring_picture_is_what_the_fragment_computes(fn):
    rows, cols = M.PICTURES[fn]
    drawn = [line.split() for line in fn().picture(rows, cols).splitlines()]
    doc = [line.split() for line in fn.__doc__.splitlines()
           if re.match(r"\s*(c\d+\s|r\d+:)", line)]
    assert doc == drawn
