"""Scalar math usable anywhere in a kernel: `T.exp2(x)`, `T.max(a, b)`, `T.atan2(y, x)`, `T.if_then_else(c, a, b)`.

Every function takes IR expressions or Python numbers and returns an expression (Python
numbers fold where the result is plain Python). Float math on bf16 / fp16 / fp8 values runs
in float and rounds back once; on integers it runs in float32. `span=` (the public
TileLang's source location argument) is accepted and ignored: our IR takes its spans from
the parser. IEEE rounding-mode arithmetic and the packed x2 ops are in math_ieee.py.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError, DSLValueError
from ..ir import expr as E


def _unary(op):
    def fn(x):
        x = x if getattr(x, "is_tl_vector", False) else E.as_expr(x)  # a vector: lane by lane
        return E.call(op, x)
    fn.__name__ = op
    fn.__doc__ = f"Elementwise `{op}` of a scalar expression (float result)."
    return fn


exp, exp2, log, log2, log10, sqrt, rsqrt, tanh, sigmoid = (_unary(n) for n in (
    "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid"))
sin, cos, erf, log1p, expm1, exp10 = (_unary(n) for n in ("sin", "cos", "erf", "log1p", "expm1", "exp10"))


def _is_ir(x) -> bool:
    """An IR value (an expression or a parse-time vector), not a Python number."""
    return isinstance(x, E.Expr) or getattr(x, "is_tl_vector", False)


def _operands(*xs) -> list:
    """IR operands; a Python number beside a typed operand takes that operand's dtype."""
    xs = [x if isinstance(x, (bool, int, float)) else E.as_expr(x) for x in xs]
    like = next((x.dtype for x in xs if isinstance(x, E.Expr)), None)
    return [E.as_expr(x, like) for x in xs]


def _float_dtype(xs) -> dt.DType:
    """The dtype float math on `xs` returns: their promoted dtype, float32 where that is not a float."""
    d = xs[0].dtype
    for x in xs[1:]:
        d = dt.promote(d, x.dtype)
    return d if d.is_float else dt.float32


def _float_call(op: str, *xs) -> E.Expr:
    v = next((x for x in xs if getattr(x, "is_tl_vector", False)), None)
    if v is not None:  # lane by lane: `T.exp(T.float32x2(a, b))`
        return v.tl_map(lambda *lane: _float_call(op, *lane), xs)
    xs = _operands(*xs)
    d = _float_dtype(xs)
    return E.Call(op, tuple(E.cast(d, x) for x in xs), d)


def _float_fn(op: str, doc: str, arity: int = 1):
    if arity == 1:
        def fn(x):
            return _float_call(op, x)
    else:
        def fn(x1, x2):
            return _float_call(op, x1, x2)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return fn


_TRIG = "Elementwise `{0}` (float result; integers compute in float32): `y = T.{0}(x[i])`."
acos, acosh, asin, asinh, atan, atanh, cosh, sinh, tan = (_float_fn(n, _TRIG.format(n)) for n in (
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh", "tan"))
atan2 = _float_fn("atan2", "The angle of the point (x2, x1): `T.atan2(y[i], x[i])`, in [-pi, pi].", 2)
hypot = _float_fn("hypot", "sqrt(x1**2 + x2**2) without overflow in the squares: `T.hypot(a[i], b[i])`.", 2)
copysign = _float_fn("copysign", "|x1| with the sign bit of x2 (NaN and -0.0 included): `T.copysign(a[i], b[i])`.", 2)


def nextafter(x1, x2):
    """The next value of the operands' float dtype after x1 in the direction of x2 (x2 itself when
    equal; NaN when either is NaN): `T.nextafter(x[i], T.infinity("float32"))`."""
    x1, x2 = _operands(x1, x2)
    d = _float_dtype([x1, x2])
    x, y = E.cast(d, x1), E.cast(d, x2)
    if d.bits >= 32:
        return E.Call("nextafter", (x, y), d)
    # narrower floats compute in float, whose nextafterf steps float's grid: step the bits instead
    u = dt.as_dtype(f"uint{d.bits}")
    bits = E.call("reinterpret", x, dtype=u)
    away = E.binop("==", E.binop("<", x, y), E.binop(">", x, E.const(0.0, d)))  # |x| grows
    step = E.call("reinterpret", E.select(away, bits + 1, bits - 1), dtype=d)
    tiny = E.call("reinterpret", E.select(E.binop(">", y, E.const(0.0, d)), E.const(1, u),
                                          E.const((1 << (d.bits - 1)) | 1, u)), dtype=d)
    nan = E.logical_or(E.binop("!=", x, x), E.binop("!=", y, y))
    same = E.binop("==", x, y)
    return E.select(nan, x + y, E.select(same, y, E.select(E.binop("==", x, E.const(0.0, d)), tiny, step)))


def floor(x, span=None):
    """Largest integer value <= x (float result): `T.floor(x[i])`."""
    return E.call("floor", E.as_expr(x))


def ceil(x, span=None):
    """Smallest integer value >= x (float result): `T.ceil(x[i])`."""
    return E.call("ceil", E.as_expr(x))


def trunc(x, span=None):
    """x rounded toward zero (float result): `T.trunc(x[i])`."""
    return E.call("trunc", E.as_expr(x))


def round(x, rounding_mode="ties-to-even", span=None):
    """x rounded to an integer value (float result).

    `rounding_mode` is "ties-to-even" (2.5 -> 2.0, the default) or "ties-away-from-zero"
    (2.5 -> 3.0, -2.5 -> -3.0, as C's `round`). A non-string second positional argument is
    taken as the span, as the public TileLang does::

        Y[i] = T.round(X[i], rounding_mode="ties-away-from-zero")
    """
    if rounding_mode is None or not isinstance(rounding_mode, str):
        rounding_mode = "ties-to-even"
    if rounding_mode == "ties-to-even":
        return E.call("round", E.as_expr(x))
    if rounding_mode == "ties-away-from-zero":
        return _float_call("round_away", x)
    raise DSLTypeError(f"T.round: rounding_mode must be 'ties-to-even' or 'ties-away-from-zero', got {rounding_mode!r}")


def nearbyint(x, span=None):
    """x rounded to an integer value in the default rounding mode, ties to even (as T.round): `T.nearbyint(x[i])`."""
    return _float_call("nearbyint", x)


def fmod(x, y):
    """Remainder of x / y with the sign of x (C's fmod; `%` on integers truncates): `T.fmod(a[i], 3.0)`.

    Python's `%` on kernel values is the floor remainder (sign of y); this is the truncated one.
    """
    x, y = _operands(x, y)
    d = dt.promote(x.dtype, y.dtype)
    if not d.is_float:
        return truncmod(x, y)
    return E.Call("fmod", (E.cast(d, x), E.cast(d, y)), d)


def ldexp(x1, x2):
    """x1 * 2**x2, exactly (x2 an integer; a float x2 is truncated): `T.ldexp(m[i], e[i])`."""
    x1, x2 = _operands(x1, x2)
    d = x1.dtype if x1.dtype.is_float else dt.float32
    return E.Call("ldexp", (E.cast(d, x1), E.cast(dt.int32, x2)), d)


def _classify(op, int_value):
    def fn(x, span=None):
        x = E.as_expr(x)
        if not x.dtype.is_float:
            return E.const(int_value, dt.bool_)
        return E.Call(op, (x,), dt.bool_)
    fn.__name__ = op
    return fn


isnan = _classify("isnan", False)
isnan.__doc__ = "True where x is NaN (bool; integers never are): `T.if_then_else(T.isnan(x[i]), 0, x[i])`."
isinf = _classify("isinf", False)
isinf.__doc__ = "True where x is +inf or -inf (bool; integers never are): `bad = T.isinf(x[i])`."
isfinite = _classify("isfinite", True)
isfinite.__doc__ = "True where x is neither inf nor NaN (bool; integers always are): `ok = T.isfinite(x[i])`."


def _int_operand(name, x) -> E.Expr:
    x = E.as_expr(x)
    if not x.dtype.is_int:
        raise DSLTypeError(f"T.{name} needs an integer operand, got {x.dtype}")
    return x


def popcount(x):
    """Number of set bits of x's two's-complement bits (dtype of x): `T.popcount(mask[i])`."""
    x = _int_operand("popcount", x)
    return E.Call("popcount", (x,), x.dtype)


def clz(x):
    """Number of leading zero bits of x in its own width (int32; clz(0) is the width): `T.clz(v[i])`."""
    x = _int_operand("clz", x)
    return E.Call("clz", (x,), dt.int32)


def __ffs(value):
    """One-based position of the least significant set bit of an integer (0 for 0), as CUDA's __ffs /
    __ffsll for 32- / 64-bit operands: `T.__ffs(T.ballot(p))` (int32)."""
    x = _int_operand("__ffs", value)
    return E.Call("ffs", (x,), dt.int32)


def __fns(mask, base, offset):
    """Zero-based position of the offset-th set bit of the 32-bit mask, searching from bit `base` up
    (offset > 0) or down (offset < 0; offset 0: `base` itself if set); 0xFFFFFFFF when there is none,
    as CUDA's __fns / PTX fns.b32 (uint32)."""
    m, b, o = (_int_operand("__fns", v) for v in (mask, base, offset))
    return E.Call("fns", (E.cast(dt.uint32, m), E.cast(dt.uint32, b), E.cast(dt.int32, o)), dt.uint32)


def abs(x, span=None):
    """|x| (keeps the dtype): `T.abs(x[i])`."""
    return E.call("abs", x)


fabs = abs

# CUDA's fast-math spellings: here the accurate function (a valid approximation of the fast one)
fast_exp, fast_exp2, fast_log, fast_log2 = exp, exp2, log, log2


def _fast_intrinsic(name: str, fn):
    """T.<name> (CUDA's `__exp` ...): fn for a 16-, 32- or 64-bit float operand (a Python float is float32);
    any other operand (bool, ints, float8) is a TypeError, as in the public TileLang."""

    def intrinsic(x):
        e = E.as_expr(x)
        if not (e.dtype.is_float and e.dtype.name in ("float16", "bfloat16", "float32", "float64")):
            raise TypeError(f"T.{name} only supports floating-point inputs, but got {e.dtype.name}")
        return fn(e)

    intrinsic.__name__ = intrinsic.__qualname__ = name
    intrinsic.__doc__ = f"{name}(x) = {fn.__name__}(x) of a float operand: {fn.__doc__ or ''}"
    return intrinsic


__exp, __exp2, __log, __log2, __log10, __exp10 = (_fast_intrinsic(f"__{f.__name__}", f)
                                                  for f in (exp, exp2, log, log2, log10, exp10))
__sin, __cos, __tan = (_fast_intrinsic(f"__{f.__name__}", f) for f in (sin, cos, tan))


def max(a, b, *rest):
    """The larger of the arguments (a NaN operand is ignored, as CUDA's fmaxf): `T.max(x[i], 0)`."""
    if not _is_ir(a) and not _is_ir(b) and not rest:
        return a if a >= b else b  # noqa: FURB136 - a NaN `a` gives `b` (builtin max would keep it)
    out = E.call("max", a, b)
    for r in rest:
        out = E.call("max", out, r)
    return out


def min(a, b, *rest):
    """The smaller of the arguments (a NaN operand is ignored, as CUDA's fminf): `T.min(x[i], 6)`."""
    if not _is_ir(a) and not _is_ir(b) and not rest:
        return a if a <= b else b  # noqa: FURB136 - a NaN `a` gives `b` (builtin min would keep it)
    out = E.call("min", a, b)
    for r in rest:
        out = E.call("min", out, r)
    return out


def pow(x, y, span=None):
    """x ** y (float result): `T.pow(x[i], 2.0)`."""
    return E.call("pow", x, y)


def if_then_else(cond, t, f, span=None):
    """`t` where cond holds, else `f` (both evaluated): `T.if_then_else(x[i] > 0, x[i], 0)`."""
    return E.select(cond, t, f)


def Select(condition, true_value, false_value, span=None):
    """TVM's spelling of T.if_then_else."""
    return E.select(condition, true_value, false_value)


def likely(cond, span=None):
    """A branch hint on `cond`; the value is `cond` itself: `if T.likely(i < n): ...`."""
    return cond


def cdiv(lhs, rhs, span=None):
    """ceil(lhs / rhs) for non-negative integers (Python ints fold at parse time): `T.cdiv(N, block_N)`."""
    if isinstance(lhs, int) and isinstance(rhs, int):
        return -(-lhs // rhs)
    return (E.as_expr(lhs) + rhs - 1) // rhs


ceildiv = cdiv


def align_up(x, y):
    """x rounded up to a multiple of y (non-negative integers): `T.align_up(K, 64)`."""
    return cdiv(x, y) * y


def floordiv(a, b, span=None):
    """a // b rounded toward -inf (Python's `//`)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return E.binop("//", a, b)


def floormod(a, b, span=None):
    """a - floordiv(a, b) * b: the sign of b (Python's `%`)."""
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return E.binop("%", a, b)


def truncdiv(a, b, span=None):
    """a / b rounded toward zero (C's integer `/`)."""
    return E.binop("/", E.as_expr(a), b)


def truncmod(a, b, span=None):
    """a - truncdiv(a, b) * b: the sign of a (C's `%`)."""
    a = E.as_expr(a)
    return a - E.binop("/", a, b) * b


def bitwise_and(x, y, span=None): return E.binop("&", x, y)
def bitwise_or(x, y, span=None): return E.binop("|", x, y)
def bitwise_xor(x, y, span=None): return E.binop("^", x, y)
def bitwise_not(x, span=None): return E.unop("~", x)
def shift_left(x, y, span=None): return E.binop("<<", x, y)
def shift_right(x, y, span=None): return E.binop(">>", x, y)
def And(a, b, span=None): return E.logical_and(a, b)
def Or(a, b, span=None): return E.logical_or(a, b)
def Not(a, span=None): return E.logical_not(a)


def reinterpret(value, dtype, span=None):
    """Bit-cast to a same-width dtype: `T.reinterpret(x[i], "int32")` (the older
    `T.reinterpret(dtype, value)` order is accepted too). Vectors regroup their bits, lane 0 in the
    lowest: `T.reinterpret(T.ldg64(X[i:i + 2]), T.float32x2)`, `T.reinterpret(w, T.float16x2)` of a uint32."""
    if _is_dtype(value) and not _is_dtype(dtype):
        value, dtype = dtype, value
    d = dt.as_dtype(dtype)
    if d.lanes > 1 or getattr(value, "is_tl_vector", False):
        from ..frontend.vector import reinterpret as vector_reinterpret

        return vector_reinterpret(value, d)
    return E.call("reinterpret", value, dtype=d)


def _is_dtype(x) -> bool:
    if isinstance(x, dt.DType):
        return True
    if not isinstance(x, str):
        return False
    try:
        dt.as_dtype(x)
    except (TypeError, ValueError):
        return False
    return True


def clamp(dst, min_val, max_val):
    """dst limited to [min_val, max_val], as torch.clamp: a NaN operand gives NaN, and
    min_val > max_val gives max_val: `T.clamp(x[i], -1.0, 1.0)`."""
    if not any(isinstance(v, E.Expr) or hasattr(v, "as_load") for v in (dst, min_val, max_val)):
        return min(max(dst, min_val), max_val)
    xs = _operands(dst, min_val, max_val)
    d = _float_dtype(xs) if any(x.dtype.is_float for x in xs) else None
    if d is None:
        return min(max(xs[0], xs[1]), xs[2])
    return E.Call("clamp", tuple(E.cast(d, x) for x in xs), d)


def q_multiply_shift(x, y, q, s):
    """round(x * y * 2**-(q + s)) of two int32 Q-numbers with q fractional bits, rounding half up,
    computed in int64 (int32 result); a negative s shifts left: `T.q_multiply_shift(a[i], m, 31, 3)`."""
    x, y, q, s = (E.as_expr(v) for v in (x, y, q, s))
    s64 = E.cast(dt.int64, s)
    lshift = E.select(s64 < 0, -s64, E.const(0, dt.int64))
    rshift = E.select(s64 > 0, s64, E.const(0, dt.int64)) + E.cast(dt.int64, q)
    prod = (E.cast(dt.int64, x) << lshift) * E.cast(dt.int64, y)
    one = E.const(1, dt.int64)
    return E.cast(dt.int32, (prod + (one << (rshift - 1))) >> rshift)


# ---------------------------------------------------------------- casts

CAST_ROUNDING_MODES = ("", "rn", "rz", "rp", "rm", "rs")  # T.cast(round=): the public spellings


def cast(value, dtype, round="", sat=True, rbits=None, span=None):
    """Convert `value` to `dtype`: `T.cast(x[i], "float16")`.

    Float to float8 saturates by default (`sat=True`: past the largest finite value the result
    is +-max, inf included, as CUDA's `.satfinite`; NOTE: float8_e5m2 on the CPU backend
    follows torch's conversion instead and overflows to inf). `sat=False` lets it overflow on
    both backends: to NaN for float8_e4m3fn (which has no inf), to +-inf for float8_e5m2.
    float8_e8m0fnu always saturates (to 2^127; `sat` is ignored, as the public TileLang's CUDA
    conversion is satfinite either way). Other dtypes never saturate (`sat` changes nothing
    there). `round` is "" or "rn" (both round to nearest even), or a directed rounding: "rz"
    (toward zero), "rp" (toward +inf), "rm" (toward -inf), for the narrowing float casts
    float32 -> float16 / bfloat16 and float64 -> float32 (CUDA's __float2half_rz ...
    conversions; exact bit-level emulation on the CPU), and float32 / float16 / bfloat16 ->
    float8_e4m3fn / float8_e5m2 (computed, the same way on both backends). A directed rounding
    toward zero stops at the largest finite value (rz of 1e6 to float16 is 65504); one away
    from zero past it gives inf (rp of 1e6 is inf), for float8 +-max under sat=True (the
    default; an infinite input too) and with sat=False inf (e5m2) or NaN (e4m3fn). Other pairs
    (float4 / e8m0 targets, float64 -> float16, integer sources ...) are an error naming the
    pair, and so is "rs", stochastic rounding, an sm_100a instruction. Bad round / sat / rbits
    arguments are ValueErrors::

        Q[i] = T.cast(X[i] * scale, "float8_e4m3fn", sat=False)   # overflow shows as NaN
        H[i] = T.cast(X[i], "float16", round="rz")                # truncate the mantissa
    """
    if round not in CAST_ROUNDING_MODES:
        raise DSLValueError(f"T.cast: Invalid round {round!r}: round must be one of {list(CAST_ROUNDING_MODES)}")
    if not isinstance(sat, bool):
        raise DSLValueError(f"T.cast: Invalid sat {sat!r}: sat must be a bool (True: saturate to finite)")
    if round == "rs" and rbits is None:
        raise DSLValueError("T.cast: rbits is required when round='rs' (stochastic rounding takes the random bits)")
    if round != "rs" and rbits is not None:
        raise DSLValueError("T.cast: rbits is only valid with round='rs' (stochastic rounding)")
    if round == "rn":  # round to nearest even: what every cast does
        round = ""
    d = dt.as_dtype(dtype)
    if getattr(value, "is_tl_vector", False):  # lane by lane: `T.cast(v, "float16x2")`
        from ..frontend.vector import VectorValue

        if d.lanes not in (1, value.lanes):
            return value.tl_cast(d)  # the error that says the lane counts differ
        return VectorValue([cast(x, d.element_of(), round, sat, rbits) for x in value.values])
    if round == "rs":
        raise DSLTypeError("T.cast(round='rs'): stochastic rounding lowers to cvt.rs.satfinite, which needs "
                           "sm_100a / sm_103a; this implementation targets sm_80, sm_90a and the CPU. Round to "
                           "nearest (round='') or add the noise to the value before the cast")
    if round:
        return _directed_cast(value, d, round, sat)
    if not sat and d.name in ("float8_e4m3fn", "float8_e5m2"):
        v = E.as_expr(value)
        if v.dtype.is_float or v.dtype.is_int:
            return E.Call("cast_nosat", (E.cast(dt.float32, v),), d)
    if not sat and d.name == "float4_e2m1fn":
        raise DSLTypeError("T.cast(..., 'float4_e2m1fn', sat=False): float4_e2m1fn has no inf or NaN to "
                           "overflow to; its conversions always saturate")
    return E.cast(d, value)


# (source, target) float pairs a directed-rounding cast is lowered for
_DIRECTED_PAIRS = {("float32", "float16"), ("float32", "bfloat16"), ("float64", "float32")}


# float8 targets: from a float32 value (float16 / bfloat16 ones convert to it exactly)
_DIRECTED_FP8 = ("float8_e4m3fn", "float8_e5m2")
_DIRECTED_FP8_SOURCES = ("float32", "float16", "bfloat16")


def _directed_cast(value, d, round, sat):
    """`value` converted to `d` rounding toward zero / +inf / -inf: Call(cast_<round>, value), and
    for a float8 `d` Call(cast_<round>, value as float32, sat)."""
    v = E.as_expr(value)
    if d.name in _DIRECTED_FP8 and v.dtype.name in _DIRECTED_FP8_SOURCES:
        return E.Call(f"cast_{round}", (E.cast(dt.float32, v), E.const(sat, dt.bool_)), d)
    if (v.dtype.name, d.name) not in _DIRECTED_PAIRS:
        pairs = ", ".join([f"{a} -> {b}" for a, b in sorted(_DIRECTED_PAIRS)]
                          + ["float32 / float16 / bfloat16 -> " + " / ".join(_DIRECTED_FP8)])
        raise DSLTypeError(f"T.cast(round={round!r}): directed rounding of {v.dtype.name} -> {d.name} is not "
                           f"supported; it is lowered for {pairs} (cast to float32 first, or round='rn')")
    return E.Call(f"cast_{round}", (v,), d)


def Cast(dtype, value, annotations=None, span=None):
    """TVM's spelling of T.cast (dtype first); `annotations` may hold round / sat / rbits."""
    a = dict(annotations or {})
    unknown = set(a) - {"round", "sat", "rbits"}
    if unknown:
        raise DSLTypeError(f"T.Cast: unknown annotations {sorted(unknown)} (known: round, sat, rbits)")
    return cast(value, dtype, round=a.get("round", ""), sat=bool(a.get("sat", True)), rbits=a.get("rbits"))


# ---------------------------------------------------------------- constants of a dtype

def infinity(dtype, span=None):
    """+inf of a float dtype: `-T.infinity(accum_dtype)` initializes a max reduction."""
    return E.const(float("inf"), dt.as_dtype(dtype))


def max_value(dtype, span=None):
    """The largest finite value of `dtype`: `T.max_value("float16")` is 65504."""
    d = dt.as_dtype(dtype)
    if d.is_float:
        return E.const({"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
                        "float64": 1.7976931348623157e308, "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}[d.name], d)
    return E.const((1 << (d.bits - 1)) - 1 if d.kind == "int" else (1 << d.bits) - 1, d)


def min_value(dtype, span=None):
    """The smallest finite value of `dtype`: `T.min_value("int8")` is -128."""
    d = dt.as_dtype(dtype)
    if d.is_float:
        return -max_value(d)
    return E.const(-(1 << (d.bits - 1)) if d.kind == "int" else 0, d)
