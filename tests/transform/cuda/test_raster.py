"""panel_raster: T.use_swizzle's block order, used by the codegen and by persistent kernels."""
import pytest

from tilelang.ir import expr as E
from tilelang.transform.cuda.raster import panel_raster


def _eval(e, env):
    e = E.as_expr(e)
    if isinstance(e, E.Const):
        return int(e.value)
    if isinstance(e, E.Var):
        return env[e]
    a, b = _eval(e.a, env), _eval(e.b, env)
    ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a // b,
           "%": lambda: a % b, "min": lambda: min(a, b)}
    return ops[e.op]()


def test_docstring_example():
    lin = E.Var("lin")
    bx, by = panel_raster(lin, 3, 4, 2)
    order = [(_eval(bx, {lin: i}), _eval(by, {lin: i})) for i in range(12)]
    assert order == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 2), (2, 3)]


@pytest.mark.parametrize("gx,gy,panel", [(5, 11, 4), (16, 32, 10), (1, 7, 3), (7, 1, 10), (3, 3, 1)])
def test_every_block_once_and_panels_walked_down_their_rows(gx, gy, panel):
    lin = E.Var("lin")
    bx, by = panel_raster(lin, gx, gy, panel)
    seen = [(_eval(bx, {lin: i}), _eval(by, {lin: i})) for i in range(gx * gy)]
    assert sorted(seen) == [(x, y) for x in range(gx) for y in range(gy)]
    for i in range(1, gx * gy):  # consecutive blocks: same column one row down, or the next column / panel
        (x0, y0), (x1, y1) = seen[i - 1], seen[i]
        assert (x1 == x0 and y1 == y0 + 1) or y1 % panel == 0 or y1 == y0 - (y0 % panel)
