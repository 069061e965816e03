"""TVM's expression node classes (`IntImm`, `Var`, `Add`, `EQ`, `Call` ...) over our IR.

Programs written in TVM's style build expressions by constructing nodes; here each class
builds the equivalent node of our IR (`ir/expr.py`), and `isinstance` asks about that node:

    x = T.Add(T.Var("i", "int32"), T.IntImm("int32", 4))   # the same as i + 4
    isinstance(x, T.Add), isinstance(x, T.PrimExpr)           # True, True
    T.Div(a, b)        # TVM's Div: truncated for integers (T.FloorDiv rounds down)
    T.Mod(a, b)        # TVM's Mod: the remainder of T.Div (sign of a); T.FloorMod: sign of b

Vector nodes (`Ramp`, `Broadcast`, `Shuffle`) build parse-time vector values (frontend/vector.py),
expanded to scalar IR where they are stored, loaded, reinterpreted or have a lane extracted.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError
from ..ir import expr as E


class _Node(type):
    """Metaclass: `isinstance(x, cls)` is `cls._is(x)` on our IR node; constructing builds one."""

    def __instancecheck__(cls, obj):
        return cls._is(obj)

    def __subclasscheck__(cls, sub):
        return sub is cls or (isinstance(sub, type) and issubclass(sub, E.Expr) and cls is PrimExpr)


class PrimExpr(metaclass=_Node):
    """Every expression (variables, constants, loads, arithmetic)."""

    def __new__(cls, dtype, span=None):
        raise DSLTypeError("PrimExpr is the base of all expressions and is not constructed itself; build a "
                           "node (T.IntImm, T.Var, T.Add ...) or write the expression (`a + b`)")

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Expr)


class IntImm(metaclass=_Node):
    """An integer (or bool) constant of `dtype`: `T.IntImm("int64", 5)`."""

    def __new__(cls, dtype, value, span=None):
        d = dt.as_dtype(dtype)
        if not (d.is_int or d.is_bool):
            raise DSLTypeError(f"IntImm: {d} is not an integer dtype; use FloatImm for floats")
        return E.const(value, d)

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Const) and (obj.dtype.is_int or obj.dtype.is_bool)


class FloatImm(metaclass=_Node):
    """A floating-point constant of `dtype`: `T.FloatImm("float16", 0.5)`."""

    def __new__(cls, dtype, value, span=None):
        d = dt.as_dtype(dtype)
        if not d.is_float:
            raise DSLTypeError(f"FloatImm: {d} is not a floating-point dtype; use IntImm for integers")
        return E.const(value, d)

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Const) and obj.dtype.is_float


class StringImm(metaclass=_Node):
    """A string literal, as an argument of T.call_extern / T.call_pure_extern (`printf`'s format)."""

    def __new__(cls, value, span=None):
        if not isinstance(value, str):
            raise DSLTypeError(f"StringImm: expected a str, got {type(value).__name__}")
        return E.Const(value, dt.as_dtype("handle"))

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Const) and isinstance(obj.value, str)


class Var(metaclass=_Node):
    """A variable: `T.Var("n", "int32")` (a symbolic dim when used in a parameter's shape)."""

    def __new__(cls, name, dtype, span=None):
        return E.Var(str(name), dt.as_dtype(dtype))

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Var)


class SizeVar(Var):
    """A variable known to be non-negative (the same variable here: ranges come from use)."""


def _binary(name, op, doc):
    def new(cls, a, b, span=None):
        return E.binop(op, a, b)

    def is_(obj):
        return isinstance(obj, E.Binary) and obj.op == op

    return _Node(name, (), {"__new__": new, "_is": staticmethod(is_), "__doc__": doc, "__module__": __name__})


Add = _binary("Add", "+", "`a + b`.")
Sub = _binary("Sub", "-", "`a - b`.")
Mul = _binary("Mul", "*", "`a * b`.")
FloorDiv = _binary("FloorDiv", "//", "`a // b`, rounded down.")
FloorMod = _binary("FloorMod", "%", "`a % b`, with the sign of b.")
EQ = _binary("EQ", "==", "The expression `a == b`.")
NE = _binary("NE", "!=", "The expression `a != b`.")
LT = _binary("LT", "<", "The expression `a < b`.")
LE = _binary("LE", "<=", "The expression `a <= b`.")
GT = _binary("GT", ">", "The expression `a > b`.")
GE = _binary("GE", ">=", "The expression `a >= b`.")


class Div(metaclass=_Node):
    """TVM's Div: `a / b`, truncated toward zero for integers."""

    def __new__(cls, a, b, span=None):
        return E.binop("/", a, b)

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Binary) and obj.op == "/"


class Mod(metaclass=_Node):
    """TVM's Mod: `a - Div(a, b) * b` (the sign of a), as C's `%`."""

    def __new__(cls, a, b, span=None):
        a = E.as_expr(a)
        return a - E.binop("/", a, b) * b

    @staticmethod
    def _is(obj):  # built from other nodes: no node of its own
        return False


class Min(metaclass=_Node):
    """The smaller of two expressions."""

    def __new__(cls, a, b, span=None):
        return E.call("min", a, b)

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Call) and obj.op == "min"


class Max(metaclass=_Node):
    """The larger of two expressions."""

    def __new__(cls, a, b, span=None):
        return E.call("max", a, b)

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Call) and obj.op == "max"


class And(metaclass=_Node):
    """`a and b` of two conditions."""

    def __new__(cls, a, b, span=None):
        return E.logical_and(_cond(a), _cond(b))

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Binary) and obj.op == "&&"


class Or(metaclass=_Node):
    """`a or b` of two conditions."""

    def __new__(cls, a, b, span=None):
        return E.logical_or(_cond(a), _cond(b))

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Binary) and obj.op == "||"


class Not(metaclass=_Node):
    """`not a` of a condition."""

    def __new__(cls, a, span=None):
        return E.logical_not(_cond(a))

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Unary) and obj.op == "!"


def _cond(x):
    return x.as_load() if isinstance(x, E.ExprCompare) else x


def Select(condition, true_value, false_value, span=None) -> E.Expr:  # noqa: N802 - TVM's name
    """`true_value if condition else false_value`, both sides evaluated (T.if_then_else); a Python bool
    condition picks one side while the kernel is built."""
    return E.select(condition, true_value, false_value)


class Cast(metaclass=_Node):
    """`value` converted to `dtype`."""

    def __new__(cls, dtype, value, annotations=None, span=None):
        from ..language import math as tl_math  # T.cast's rounding / saturation annotations

        return tl_math.Cast(dtype, value, annotations, span)

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Cast)


class BufferLoad(metaclass=_Node):
    """The element `buffer[indices]`."""

    def __new__(cls, buffer, indices, predicate=None, span=None):
        if predicate is not None:
            raise DSLTypeError("BufferLoad: a predicated (masked vector) load is not supported; guard the "
                               "load with `if` or T.if_then_else")
        return buffer[tuple(indices)]

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.BufferLoad)


class Ramp(metaclass=_Node):
    """The vector base, base + stride, ... of `lanes` lanes (a parse-time vector, frontend/vector.py):
    `A[T.Ramp(i, 1, 4)]` loads four elements, `Y[T.Ramp(i, 2, 2)] = v` stores two; one lane is `base`."""

    def __new__(cls, base, stride, lanes, span=None):
        from ..frontend.vector import ramp

        return ramp(base, stride, lanes)

    @staticmethod
    def _is(obj):
        return False


class Broadcast(metaclass=_Node):
    """`value` in each of `lanes` lanes (a parse-time vector); one lane is the value itself:
    `packed[0:32] = T.Broadcast(x, 32)`."""

    def __new__(cls, value, lanes, span=None):
        from ..frontend.vector import broadcast

        return broadcast(value, lanes)

    @staticmethod
    def _is(obj):
        return False


class Shuffle(metaclass=_Node):
    """The lanes `indices` (constants) of the concatenated `vectors` (vectors or scalars); one index
    gives that scalar lane: `T.Shuffle([v, w], [0, 2])` is (v0, w0) of two 2-lane vectors."""

    def __new__(cls, vectors, indices, span=None):
        from ..frontend.vector import shuffle

        return shuffle(list(vectors), list(indices))

    @staticmethod
    def _is(obj):
        return False


class Let(metaclass=_Node):
    """TVM's `tirx.Let(var, value, body)`: `body` with `var` standing for `value` (substituted)."""

    def __new__(cls, var, value, body, span=None):
        from ..ir.visitor import substitute

        if not isinstance(var, E.Var):
            raise DSLTypeError(f"Let: expected a Var to bind, got {var!r}")
        return substitute(E.as_expr(body), {var: E.as_expr(value, var.dtype)})

    @staticmethod
    def _is(obj):
        return False


class Call(metaclass=_Node):
    """A call of an intrinsic by name: `T.Call("float32", "tirx.exp", [x])`; see T.call_intrin."""

    def __new__(cls, dtype, op, args, annotations=None, span=None):
        return intrinsic(dtype, op, tuple(args), "Call")

    @staticmethod
    def _is(obj):
        return isinstance(obj, E.Call)


# TVM intrinsic name -> ours, where the meaning is the same
_INTRINSICS = {"exp": "exp", "exp2": "exp2", "exp10": "exp10", "log": "log", "log2": "log2", "log10": "log10",
               "log1p": "log1p", "expm1": "expm1", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh",
               "sigmoid": "sigmoid", "sin": "sin", "cos": "cos", "erf": "erf", "floor": "floor", "ceil": "ceil",
               "round": "round", "nearbyint": "round", "trunc": "trunc", "pow": "pow", "fabs": "abs",
               "abs": "abs", "reinterpret": "reinterpret"}


def intrinsic(dtype, op, args, what) -> E.Expr:
    """The call of TVM intrinsic `op` ("tirx.exp", "tir.exp" or "exp"; an Op's `.name`) on `args`."""
    name = getattr(op, "name", op)
    if not isinstance(name, str):
        raise DSLTypeError(f"{what}: expected the intrinsic's name, got {op!r}")
    short = name.split(".", 1)[1] if name.startswith(("tirx.", "tir.")) else name
    d = dt.as_dtype("handle" if dtype in (None, "void") else dtype)
    if short in ("call_extern", "call_pure_extern"):
        if not args or not isinstance(E.const_value(args[0]) if isinstance(args[0], E.Expr) else args[0], str):
            raise DSLTypeError(f"{what}: {short} takes the function's name (a str) first")
        fn = args[0] if isinstance(args[0], str) else args[0].value
        return E.Call("extern:" + fn, tuple(E.as_expr(a) for a in args[1:]), d)
    if short == "if_then_else" and len(args) == 3:
        return E.select(*args)
    if short in ("likely",) and len(args) == 1:
        return E.as_expr(args[0])
    ours = _INTRINSICS.get(short)
    if ours is None:
        raise DSLTypeError(f"{what}: the intrinsic {name!r} is not supported; supported: "
                           f"{', '.join(sorted(_INTRINSICS))}, call_extern, call_pure_extern, if_then_else, likely "
                           "(or call device code with T.call_extern)")
    return E.cast(d, E.call(ours, *args, dtype=d if ours == "reinterpret" else None))


__all__ = ["PrimExpr", "IntImm", "FloatImm", "StringImm", "Var", "SizeVar", "Add", "Sub", "Mul", "Div", "Mod",
           "FloorDiv", "FloorMod", "Min", "Max", "EQ", "NE", "LT", "LE", "GT", "GE", "And", "Or", "Not",
           "Select", "Cast", "BufferLoad", "Ramp", "Broadcast", "Shuffle", "Let", "Call", "intrinsic"]


class Range:
    """The half-open interval [begin, end): `min` (= begin) and `extent` (= end - begin)."""

    def __init__(self, begin, end=None, span=None):
        if end is None:
            begin, end = 0, begin
        self.min, self.extent = begin, end - begin if not (E.is_const(begin, 0)) else end

    @property
    def begin(self):
        return self.min

    @property
    def end(self):
        return self.min + self.extent

    @staticmethod
    def from_min_extent(min_value, extent, span=None):
        r = Range(0, 0)
        r.min, r.extent = min_value, extent
        return r

    def __repr__(self):
        return f"Range({self.min}, {self.end})"


ramp, broadcast = Ramp, Broadcast  # TVM's lowercase spellings

__all__ += ["Range", "ramp", "broadcast"]
