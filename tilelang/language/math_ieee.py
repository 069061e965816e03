"""Float arithmetic with a stated rounding: `T.ieee_add(a, b, "rz")`, `T.fma(a, b, c)`, `T.fmul(a, b)`,
`T.fast_rcp(x)`; and the packed x2 ops (`T.add2` ...) on float32x2 / float16x2 / bfloat16x2 vector values.

`rounding_mode` is one of "rn" (to nearest, ties to even), "rz" (toward zero), "ru" (toward
+inf), "rd" (toward -inf). On CUDA these print as CUDA's own intrinsics (`__fadd_rz`,
`__dsqrt_ru` ...); the CPU backend runs the operation with the FPU in that mode. float16 and
bfloat16 take "rn" only (CUDA has no directed-rounding half intrinsics; neither has the public
TileLang): they compute in float and round once.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError, DSLValueError
from ..ir import expr as E

_MODES = ("rn", "rz", "ru", "rd")
_IEEE_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _same_float(name: str, *xs) -> list:
    """Operands of one float dtype (a Python number takes it from the typed operands)."""
    xs = [x if isinstance(x, (bool, int, float)) else E.as_expr(x) for x in xs]
    like = next((x.dtype for x in xs if isinstance(x, E.Expr)), dt.float32)
    xs = [E.as_expr(x, like) for x in xs]
    if any(x.dtype != xs[0].dtype for x in xs):
        raise DSLTypeError(f"T.{name} expects all operands of one dtype, got {[str(x.dtype) for x in xs]}")
    if not xs[0].dtype.is_float:
        raise DSLTypeError(f"T.{name} only supports floating-point operands, got {xs[0].dtype}")
    return xs


def _ieee(name: str, op: str, xs, rounding_mode: str) -> E.Expr:
    if rounding_mode not in _MODES:
        raise DSLValueError(f"T.{name}: Invalid rounding mode {rounding_mode!r}; use one of {list(_MODES)}")
    xs = _same_float(name, *xs)
    d = xs[0].dtype
    if d.name not in _IEEE_DTYPES:
        raise DSLTypeError(f"T.{name} supports {', '.join(_IEEE_DTYPES)}, got {d}")
    if d.bits == 16 and rounding_mode != "rn":
        raise DSLValueError(f"T.{name}: Only rounding mode 'rn' is available for half precision ({d}); CUDA "
                            "has no directed-rounding half intrinsics. Compute in float32 and cast")
    return E.Call(f"ieee_{op}_{rounding_mode}", tuple(xs), d)


def ieee_add(x, y, rounding_mode="rn"):
    """x + y rounded once in `rounding_mode`: `T.ieee_add(a[i], b[i], "rd")` (a lower bound of the sum)."""
    return _ieee("ieee_add", "fadd", (x, y), rounding_mode)


def ieee_sub(x, y, rounding_mode="rn"):
    """x - y rounded once in `rounding_mode`: `T.ieee_sub(a[i], b[i], "ru")`."""
    return _ieee("ieee_sub", "fsub", (x, y), rounding_mode)


def ieee_mul(x, y, rounding_mode="rn"):
    """x * y rounded once in `rounding_mode` (never fused into an fma): `T.ieee_mul(a[i], b[i], "rz")`."""
    return _ieee("ieee_mul", "fmul", (x, y), rounding_mode)


def ieee_fmaf(x, y, z, rounding_mode="rn"):
    """x * y + z with one rounding, in `rounding_mode`: `T.ieee_fmaf(a[i], b[i], c[i], "rn")`."""
    return _ieee("ieee_fmaf", "fmaf", (x, y, z), rounding_mode)


def ieee_fdiv(x, y, rounding_mode="rn"):
    """x / y correctly rounded in `rounding_mode`: `T.ieee_fdiv(a[i], b[i], "rd")`."""
    return _ieee("ieee_fdiv", "fdiv", (x, y), rounding_mode)


def ieee_frcp(x, rounding_mode="rn"):
    """1 / x correctly rounded in `rounding_mode`: `T.ieee_frcp(x[i], "ru")`."""
    return _ieee("ieee_frcp", "frcp", (x,), rounding_mode)


def ieee_fsqrt(x, rounding_mode="rn"):
    """sqrt(x) correctly rounded in `rounding_mode`: `T.ieee_fsqrt(x[i], "rz")`."""
    return _ieee("ieee_fsqrt", "fsqrt", (x,), rounding_mode)


def ieee_frsqrt(x):
    """1 / sqrt(x) rounded to nearest (CUDA's __frsqrt_rn; float64 has none): `T.ieee_frsqrt(x[i])`."""
    e = _ieee("ieee_frsqrt", "frsqrt", (x,), "rn")
    if e.dtype == dt.float64:
        raise DSLValueError("T.ieee_frsqrt: frsqrt is not supported for float64 (CUDA has no float64 "
                            "reciprocal square root intrinsic); write T.ieee_frcp(T.ieee_fsqrt(x))")
    return e


def fma(x, y, z):
    """x * y + z as one fused multiply-add (one rounding, to nearest): `acc = T.fma(a[i], b[i], acc)`."""
    xs = _same_float("fma", x, y, z)
    return E.Call("fma", tuple(xs), xs[0].dtype)


def fmul(x, y):
    """x * y rounded to nearest, never contracted with a following add into an fma: `T.fmul(a[i], b[i])`."""
    xs = _same_float("fmul", x, y)
    return E.Call("fmul", tuple(xs), xs[0].dtype)


def fast_rcp(x):
    """An approximate 1 / x (CUDA: rcp.approx.ftz.f32, about 1 ulp, subnormals flushed to zero;
    exact division on the CPU and for float64): `inv = T.fast_rcp(l[i])`."""
    (x,) = _same_float("fast_rcp", x)
    return E.Call("fast_rcp", (x,), x.dtype)


_PACKED_X2 = ("float32x2", "float16x2", "bfloat16x2")


def _packed(name: str, fn, *xs):
    """The packed x2 op `name` on vector values of one of float32x2 / float16x2 / bfloat16x2: `fn` on
    each lane pair (frontend/vector.py), each lane rounded to its dtype as the scalar op rounds."""
    from ..frontend.vector import VectorValue

    for x in xs:
        if not getattr(x, "is_tl_vector", False) and not isinstance(x, E.Expr):
            raise TypeError(f"T.{name}: expected a packed x2 value ({', '.join(_PACKED_X2)}), got {type(x).__name__}")
        if str(x.dtype) not in _PACKED_X2:
            raise ValueError(f"T.{name}: expected dtype in {list(_PACKED_X2)}, got '{x.dtype}'")
    if len({str(x.dtype) for x in xs}) > 1:
        raise ValueError(f"T.{name}: expected all packed x2 arguments to have the same dtype, got "
                         f"{[str(x.dtype) for x in xs]}")
    for x in xs:
        if not getattr(x, "is_tl_vector", False):
            raise DSLTypeError(f"T.{name}: {x} is an expression of dtype {x.dtype}, which this implementation "
                               f"does not have; build the value from its lanes: T.{x.dtype}(a, b)")
    return VectorValue([fn(*lane) for lane in zip(*(x.values for x in xs))], xs[0].dtype)


# The packed x2 ops of the public TileLang, on float32x2 / float16x2 / bfloat16x2 vector values
# (`T.float16x2(a, b)`, `T.reinterpret(w, T.bfloat16x2)` ...): lane by lane.
def add2(x, y):
    """Packed element-wise x + y: `T.add2(T.float16x2(a, b), T.float16x2(c, d))` is (a + c, b + d)."""
    return _packed("add2", lambda a, b: a + b, x, y)


def sub2(x, y):
    """Packed element-wise x - y."""
    return _packed("sub2", lambda a, b: a - b, x, y)


def mul2(x, y):
    """Packed element-wise x * y."""
    return _packed("mul2", lambda a, b: a * b, x, y)


def fma2(x, y, z):
    """Packed element-wise x * y + z, each lane fused (one rounding)."""
    return _packed("fma2", fma, x, y, z)


def _nan_ignoring(op):
    # through float32, whose max / min ignore a NaN operand (fmaxf): exact, the result is an operand
    def f(a, b):
        return E.cast(a.dtype, E.call(op, E.cast(dt.float32, a), E.cast(dt.float32, b)))
    return f


def max2(x, y):
    """Packed element-wise maximum (a NaN lane is ignored, as CUDA's fmaxf / __hmax2)."""
    return _packed("max2", _nan_ignoring("max"), x, y)


def min2(x, y):
    """Packed element-wise minimum (a NaN lane is ignored, as CUDA's fminf / __hmin2)."""
    return _packed("min2", _nan_ignoring("min"), x, y)


def abs2(x):
    """Packed element-wise |x|."""
    return _packed("abs2", lambda a: E.call("abs", a), x)
