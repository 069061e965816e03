"""Scalar expressions of the IR.

Frozen dataclasses compared structurally. Python operators build nodes, so
`bx * 128 + i` written in a kernel evaluates straight to IR. `and`, `or`, `not`
and `x if c else y` cannot be overloaded; the frontend rewrites them (and `==`)
to `compare`, `logical_and` ... before evaluating kernel text. `a == b` evaluated
elsewhere (a plain Python helper a kernel calls) gives an `ExprCompare`: the IR
comparison where a value is expected, structural equality where Python asks for
a bool (dict keys, `in`, `if a == b:`), as TVM's PrimExpr does.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import DSLTypeError

_uid = itertools.count()

ARITH_OPS = ("+", "-", "*", "/", "//", "%", "min", "max")
CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")
LOGIC_OPS = ("&&", "||")
BIT_OPS = ("&", "|", "^", "<<", ">>")


class Expr:
    """Base class of expressions; every node has a `dtype`."""

    dtype: DType

    def __bool__(self):
        raise DSLTypeError(
            f"a run-time value ({self}) was used where Python needs a bool; "
            "use `if` on it inside the kernel, or T.if_then_else(cond, a, b); Python's max()/min() "
            "need a bool too: use T.max/T.min")

    # arithmetic
    def __add__(self, o): return binop("+", self, o)
    def __radd__(self, o): return binop("+", o, self)
    def __sub__(self, o): return binop("-", self, o)
    def __rsub__(self, o): return binop("-", o, self)
    def __mul__(self, o): return binop("*", self, o)
    def __rmul__(self, o): return binop("*", o, self)
    def __truediv__(self, o): return binop("/", self, o)
    def __rtruediv__(self, o): return binop("/", o, self)
    def __floordiv__(self, o): return binop("//", self, o)
    def __rfloordiv__(self, o): return binop("//", o, self)
    def __mod__(self, o): return binop("%", self, o)
    def __rmod__(self, o): return binop("%", o, self)
    def __neg__(self): return unop("-", self)
    def __pos__(self): return self
    def __invert__(self): return unop("~", self)
    def __and__(self, o): return binop("&", self, o)
    def __rand__(self, o): return binop("&", o, self)
    def __or__(self, o): return binop("|", self, o)
    def __ror__(self, o): return binop("|", o, self)
    def __xor__(self, o): return binop("^", self, o)
    def __rxor__(self, o): return binop("^", o, self)
    def __lshift__(self, o): return binop("<<", self, o)
    def __rlshift__(self, o): return binop("<<", o, self)
    def __rshift__(self, o): return binop(">>", self, o)
    def __rrshift__(self, o): return binop(">>", o, self)
    def __lt__(self, o): return binop("<", self, o)
    def __le__(self, o): return binop("<=", self, o)
    def __gt__(self, o): return binop(">", self, o)
    def __ge__(self, o): return binop(">=", self, o)
    def __abs__(self): return call("abs", self)
    def __eq__(self, o): return ExprCompare("==", self, o)
    def __ne__(self, o): return ExprCompare("!=", self, o)

    def __hash__(self):
        return hash((type(self).__name__,) + tuple(getattr(self, f) for f in _compare_fields(type(self))))

    def astype(self, dtype) -> "Expr":
        """Convert to `dtype`, like T.cast(self, dtype): `x.astype("float16")`."""
        return cast(dtype, self)

    def __str__(self) -> str:
        from .printer import expr_str

        return expr_str(self)


def _compare_fields(cls) -> tuple:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls) if f.compare)
    return names


_FIELDS: dict = {}


def structurally_equal(a, b) -> bool:
    """Same node type and equal fields, recursively (what `==` means to Python code)."""
    if a is b:
        return True
    if type(a) is not type(b) or not isinstance(a, Expr):
        return False
    return all(bool(getattr(a, f) == getattr(b, f)) for f in _compare_fields(type(a)))


class ExprCompare:
    """The result of `a == b` / `a != b` on expressions (see the module docstring)."""

    __slots__ = ("op", "a", "b")

    def __init__(self, op, a, b):
        self.op, self.a, self.b = op, a, b

    def __bool__(self):
        same = structurally_equal(self.a, self.b)
        return same if self.op == "==" else not same

    def as_load(self) -> "Expr":  # as_expr() turns it into the IR comparison
        return binop(self.op, self.a, self.b)

    def __and__(self, o): return self.as_load() & o
    def __rand__(self, o): return o & self.as_load()
    def __or__(self, o): return self.as_load() | o
    def __ror__(self, o): return o | self.as_load()
    def __invert__(self): return ~self.as_load()

    def __repr__(self):
        return f"({self.a!r} {self.op} {self.b!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    name: str
    dtype: DType = dt.int32
    uid: int = field(default_factory=lambda: next(_uid))

    def __repr__(self): return f"Var({self.name})"
    __str__ = Expr.__str__
    __hash__ = lambda self: hash(self.uid)  # noqa: E731  (identity of a variable is its uid)


@dataclass(frozen=True, eq=False, repr=False)
class Const(Expr):
    value: object
    dtype: DType

    def __repr__(self): return f"Const({self.value}, {self.dtype})"
    __str__ = Expr.__str__


@dataclass(frozen=True, eq=False, repr=False)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: DType

    def __repr__(self): return f"Binary({self.op}, {self.a!r}, {self.b!r})"
    __str__ = Expr.__str__


@dataclass(frozen=True, eq=False, repr=False)
class Unary(Expr):
    op: str  # "-", "!", "~"
    a: Expr
    dtype: DType

    __repr__ = Expr.__str__
    __str__ = Expr.__str__


@dataclass(frozen=True, eq=False, repr=False)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: DType

    __repr__ = Expr.__str__
    __str__ = Expr.__str__


@dataclass(frozen=True, eq=False, repr=False)
class Cast(Expr):
    dtype: DType
    value: Expr

    __repr__ = Expr.__str__
    __str__ = Expr.__str__


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    """A pure intrinsic: math (`exp`, `max`...), `reinterpret`, ... by name."""

    op: str
    args: tuple
    dtype: DType

    __repr__ = Expr.__str__
    __str__ = Expr.__str__


@dataclass(frozen=True, eq=False, repr=False)
class BufferLoad(Expr):
    buffer: "Buffer"  # noqa: F821
    indices: tuple
    dtype: DType

    __repr__ = Expr.__str__
    __str__ = Expr.__str__

    def __getattr__(self, name):
        raise AttributeError(name)


# ---------------------------------------------------------------- constructors

def const(value, dtype: DType | str | None = None) -> Const:
    if dtype is not None:
        dtype = dt.as_dtype(dtype)
        if dtype.is_float:
            value = float(value)
        elif dtype.is_bool:
            value = bool(value)
        else:
            value = int(value)
        return Const(value, dtype)
    if isinstance(value, bool):
        return Const(value, dt.bool_)
    if isinstance(value, int):
        return Const(value, dt.int32 if -(2**31) <= value < 2**31 else dt.int64)
    if isinstance(value, float):
        return Const(value, dt.float32)
    if hasattr(value, "item") and hasattr(value, "dtype"):  # numpy / torch scalar
        return const(value.item())
    if _vector(value) is not None:
        raise DSLTypeError(f"the {value.dtype} vector {value!r} where a scalar is expected; vectors take lane-wise "
                           "arithmetic, T.cast, T.reinterpret, T.extract_lane and stores into slices (Y[i:i + n] = v)")
    raise DSLTypeError(f"expected a number or an expression, got {type(value).__name__}: {value!r}")


def as_expr(value, like: DType | None = None) -> Expr:
    """Wrap Python scalars; a scalar next to a typed operand takes that operand's dtype."""
    if isinstance(value, Expr):
        return value
    if hasattr(value, "as_load"):  # a scalar buffer (alloc_var) used as a value
        return value.as_load()
    if like is not None and not isinstance(value, bool) and isinstance(value, (int, float)):
        if isinstance(value, int) and (like.is_float or like.is_int):
            if like.is_int and not (-(2**63) <= value < 2**64):
                raise DSLTypeError(f"integer {value} does not fit {like}")
            return Const(float(value) if like.is_float else value, like)
        if isinstance(value, float) and like.is_float:
            return Const(value, like)
    return const(value)


def _result_dtype(op: str, a: Expr, b: Expr) -> DType:
    if op in CMP_OPS or op in LOGIC_OPS:
        return dt.bool_
    return dt.promote(a.dtype, b.dtype)


def _vector(*xs):
    """The first operand that is a parse-time vector (frontend/vector.py: lane-wise operations)."""
    return next((x for x in xs if getattr(x, "is_tl_vector", False)), None)


def binop(op: str, a, b) -> Expr:
    v = _vector(a, b)
    if v is not None:
        return v.tl_binop(op, a, b)
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        a, b = as_expr(a), as_expr(b)
    elif not isinstance(a, Expr):
        b = as_expr(b)
        a = as_expr(a, b.dtype)
    else:
        a = as_expr(a)
        b = as_expr(b, a.dtype)
    if op in ("&", "|", "^", "<<", ">>") and (a.dtype.is_float or b.dtype.is_float):
        raise DSLTypeError(f"bitwise `{op}` needs integer operands, got {a.dtype} and {b.dtype}")
    dtype = _result_dtype(op, a, b)
    if op in ("<<", ">>"):
        dtype = a.dtype
    return Binary(op, a, b, dtype)


def unop(op: str, a) -> Expr:
    if _vector(a) is not None:
        return a.tl_unop(op)
    a = as_expr(a)
    return Unary(op, a, dt.bool_ if op == "!" else a.dtype)


def compare(op: str, a, b):
    """`a <op> b`, in Python when neither side is IR (keeps `if is_causal == True:` static)."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        import operator

        fns = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
               "==": operator.eq, "!=": operator.ne, "is": operator.is_, "is not": operator.is_not,
               "in": lambda x, y: x in y, "not in": lambda x, y: x not in y}
        return fns[op](a, b)
    return binop(op, a, b)


def logical_and(a, b):
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        return a and b
    if not isinstance(a, Expr):
        return b if a else False
    if not isinstance(b, Expr):
        return a if b else False
    return Binary("&&", a, b, dt.bool_)


def logical_or(a, b):
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        return a or b
    if not isinstance(a, Expr):
        return True if a else b
    if not isinstance(b, Expr):
        return True if b else a
    return Binary("||", a, b, dt.bool_)


def logical_not(a):
    if not isinstance(a, Expr):
        return not a
    return Unary("!", a, dt.bool_)


def select(cond, a, b) -> Expr:
    if isinstance(cond, ExprCompare):
        cond = cond.as_load()
    v = _vector(cond, a, b)
    if v is not None:
        return v.tl_select(cond, a, b)
    if not isinstance(cond, Expr):
        return a if cond else b
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        a, b = as_expr(a), as_expr(b)
    elif not isinstance(a, Expr):
        a = as_expr(a, as_expr(b).dtype)
    b = as_expr(b, a.dtype)
    a = as_expr(a, b.dtype)
    dtype = dt.promote(a.dtype, b.dtype)
    return Select(as_expr(cond), cast(dtype, a), cast(dtype, b), dtype)


def cast(dtype, value) -> Expr:
    dtype = dt.as_dtype(dtype)
    if _vector(value) is not None:
        return value.tl_cast(dtype)
    value = as_expr(value)
    if value.dtype == dtype:
        return value
    if isinstance(value, Const) and not dtype.is_float and not dtype.is_bool and not value.dtype.is_float:
        from ..arith.simplify import wrap_int

        return Const(wrap_int(int(value.value), dtype), dtype)
    if isinstance(value, Const) and dtype.is_float and not value.dtype.is_bool:
        # NOTE: the literal keeps full precision; codegen rounds it to `dtype` like a cast would.
        return Const(float(value.value), dtype)
    return Cast(dtype, value)


# a Call op: the parser marks a lane of a vector index with it (frontend/vector.py), and
# transform/legalize_negative_index.py reads the mark and drops it
VECTOR_LANE_INDEX = "vector_lane_index"
FLOAT_RESULT = {"exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos",
                "floor", "ceil", "round", "trunc", "pow", "erf", "exp10", "log1p", "expm1"}


def call(op: str, *args, dtype: DType | None = None) -> Expr:
    v = _vector(*args)
    if v is not None:
        return v.tl_call(op, args, dtype)
    args = tuple(as_expr(a) for a in args)
    if dtype is None:
        dtype = args[0].dtype
        for a in args[1:]:
            dtype = dt.promote(dtype, a.dtype)
        if op in FLOAT_RESULT and not dtype.is_float:
            dtype = dt.float32
    return Call(op, tuple(cast(dtype, a) if op in ("max", "min", "pow") else a for a in args), dtype)


def is_const(e, value=None) -> bool:
    if isinstance(e, (int, float)) and not isinstance(e, bool):
        return value is None or e == value
    return isinstance(e, Const) and (value is None or e.value == value)


def const_value(e):
    """The Python value of a constant (int/float or Const), else None."""
    if isinstance(e, bool):
        return e
    if isinstance(e, (int, float)):
        return e
    if isinstance(e, Const):
        return e.value
    return None
