"""Short vector values in kernel bodies: `T.float32x2(a, b)`, `T.Broadcast(x, 4)`, `A[T.Ramp(i, 1, 4)]`,
`T.ldg128(X[i:i + 4])`, `T.atomic_addx2(..., return_prev=True)`, as the public TileLang writes them.

Our IR is scalar. A `VectorValue` exists only while a kernel is parsed: a fixed tuple of scalar
lane expressions and a vector dtype (`float32x2`, `uint32x4` ...). It becomes scalar IR where it
is used:

    Y[i:i + 2] = v                   ->  Y[i] = v0; Y[i + 1] = v1
    A[T.Ramp(i, 2, 2)]               ->  VectorValue(A[i], A[i + 2])
    T.reinterpret(v, "float16x4")    ->  the lanes' bits regrouped (little-endian: lane 0 lowest)
    T.extract_lane(v, 1)             ->  v1
    v * 2 + w, T.cast(v, "float16x2")  ->  lane by lane

`w = v` (a name bound to a vector) holds each lane's value at that point (one let per lane), as a
scalar binding does; `T.alloc_var(T.float32x2)` is a mutable vector: a local array of its lanes.
Passes and codegen never see a vector: a 64/128-bit access is the scalar accesses of its lanes.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..arith.simplify import simplify
from ..errors import DSLTypeError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer, BufferRegion
from ..ir.visitor import collect
from . import builder as B

_BITS = (8, 16, 32, 64)


class VectorValue:
    """A vector of `dtype.lanes` scalar lanes (`values`), all of dtype `dtype.element_of()`."""

    is_tl_vector = True  # the mark ir/expr.py and ir/buffer.py dispatch on (they cannot import us)

    def __init__(self, values, dtype=None):
        values = tuple(values)
        if len(values) < 2:
            raise DSLTypeError(f"a vector needs at least 2 lanes, got {len(values)}")
        if dtype is None:
            first = next((v for v in values if isinstance(v, E.Expr)), None)
            scalar = E.as_expr(values[0] if first is None else first).dtype
        else:
            scalar = dt.as_dtype(dtype).element_of()
        for v in values:
            if getattr(v, "is_tl_vector", False):
                raise DSLTypeError(f"a vector's lanes must be scalars, got the vector {v!r} as a lane")
        self._values = tuple(E.cast(scalar, E.as_expr(v, scalar)) for v in values)
        self.dtype = scalar.with_lanes(len(values))

    @property
    def values(self) -> tuple:
        return self._values

    @property
    def lanes(self) -> int:
        return self.dtype.lanes

    def __repr__(self):
        return f"{self.dtype}({', '.join(str(v) for v in self.values)})"

    def __bool__(self):
        raise DSLTypeError(f"the vector {self!r} was used where Python needs a bool; compare its lanes "
                           "(T.extract_lane) inside the kernel instead")

    __hash__ = object.__hash__

    # lane-wise arithmetic (ir/expr.py's binop / unop / cast come here when an operand is a vector)
    def tl_binop(self, op, a, b):
        n = self.lanes
        return VectorValue([E.binop(op, x, y) for x, y in zip(spread(a, n), spread(b, n))])

    def tl_unop(self, op):
        return VectorValue([E.unop(op, x) for x in self.values])

    def tl_select(self, cond, a, b):
        n = self.lanes
        return VectorValue([E.select(c, x, y) for c, x, y in zip(spread(cond, n), spread(a, n), spread(b, n))])

    def tl_call(self, op, args, dtype=None):
        return self.tl_map(lambda *lane: E.call(op, *lane, dtype=dtype), args)

    def tl_map(self, fn, args):
        """The vector of fn(lane k of each arg) (a scalar arg in every lane)."""
        n = self.lanes
        return VectorValue([fn(*lane) for lane in zip(*(spread(a, n) for a in args))])

    def tl_cast(self, dtype):
        d = dt.as_dtype(dtype)
        if d.lanes not in (1, self.lanes):
            raise DSLTypeError(f"cannot cast the {self.dtype} vector to {d}: the lane counts differ "
                               "(T.reinterpret regroups bits)")
        return VectorValue([E.cast(d.element_of(), x) for x in self.values])

    def astype(self, dtype):
        return self.tl_cast(dtype)

    def tl_gather(self, buffer, idx):
        return gather(buffer, idx)

    def __add__(self, o): return self.tl_binop("+", self, o)
    def __radd__(self, o): return self.tl_binop("+", o, self)
    def __sub__(self, o): return self.tl_binop("-", self, o)
    def __rsub__(self, o): return self.tl_binop("-", o, self)
    def __mul__(self, o): return self.tl_binop("*", self, o)
    def __rmul__(self, o): return self.tl_binop("*", o, self)
    def __truediv__(self, o): return self.tl_binop("/", self, o)
    def __rtruediv__(self, o): return self.tl_binop("/", o, self)
    def __floordiv__(self, o): return self.tl_binop("//", self, o)
    def __rfloordiv__(self, o): return self.tl_binop("//", o, self)
    def __mod__(self, o): return self.tl_binop("%", self, o)
    def __rmod__(self, o): return self.tl_binop("%", o, self)
    def __and__(self, o): return self.tl_binop("&", self, o)
    def __rand__(self, o): return self.tl_binop("&", o, self)
    def __or__(self, o): return self.tl_binop("|", self, o)
    def __ror__(self, o): return self.tl_binop("|", o, self)
    def __xor__(self, o): return self.tl_binop("^", self, o)
    def __rxor__(self, o): return self.tl_binop("^", o, self)
    def __lshift__(self, o): return self.tl_binop("<<", self, o)
    def __rshift__(self, o): return self.tl_binop(">>", self, o)
    def __lt__(self, o): return self.tl_binop("<", self, o)
    def __le__(self, o): return self.tl_binop("<=", self, o)
    def __gt__(self, o): return self.tl_binop(">", self, o)
    def __ge__(self, o): return self.tl_binop(">=", self, o)
    def __eq__(self, o): return self.tl_binop("==", self, o)
    def __ne__(self, o): return self.tl_binop("!=", self, o)
    def __neg__(self): return self.tl_unop("-")
    def __invert__(self): return self.tl_unop("~")
    def __pos__(self): return self
    def __abs__(self): return VectorValue([E.call("abs", x) for x in self.values])


class VectorVar(VectorValue):
    """`T.alloc_var(T.float32x2)`: a mutable vector, held in a local array of its lanes; its value
    is the lanes' current contents, `v = ...` stores every lane."""

    def __init__(self, buffer: Buffer, dtype):
        self.buffer = buffer
        self.dtype = dt.as_dtype(dtype)

    @staticmethod
    def allocate(alloc, dtype, init, name) -> VectorVar:
        """A new vector variable holding `init` (zero when None); `alloc` allocates its local array."""
        var = VectorVar(alloc((dtype.lanes,), dtype.element_of(), "local", "T.alloc_var", name=name), dtype)
        var.assign(B.current("T.alloc_var"), 0 if init is None else init)
        return var

    @property
    def values(self) -> tuple:
        return tuple(E.BufferLoad(self.buffer, (E.const(k),), self.buffer.dtype) for k in range(self.lanes))

    def assign(self, builder, value):
        stores = [S.BufferStore(self.buffer, (E.const(k),), E.cast(self.buffer.dtype, x))
                  for k, x in enumerate(_before_writing(builder, self.buffer, spread(value, self.lanes)))]
        for st in stores:
            builder.emit(st)


def spread(x, n: int) -> list:
    """The n lanes of x: a vector's own (it must have n), or a scalar repeated."""
    if getattr(x, "is_tl_vector", False):
        if x.lanes != n:
            raise DSLTypeError(f"a {x.dtype} vector where {n} lanes are expected")
        return list(x.values)
    if isinstance(x, BufferRegion):  # `Y[T.Ramp(i, 2, 2)] = X[j:j + 2]`: the region's elements, in order
        pos = region_positions(x, "a region as vector lanes")
        if len(pos) != n:
            raise DSLTypeError(f"the region {x!r} holds {len(pos)} elements where {n} lanes are expected")
        return [E.BufferLoad(x.buffer, p, x.buffer.dtype) for p in pos]
    if isinstance(x, Buffer) and x.scope != "local.var":
        raise DSLTypeError(f"expected a scalar or a vector value, got the buffer {x.name}")
    return [once(x)] * n


_SIDE_EFFECTS = ("atomic_", "tl_atomic", "tl_rng")


def once(x):
    """A scalar that goes into several lanes: held in a let first when evaluating it has a side effect
    (`T.Broadcast(T.atomic_add(c[0], 1, return_prev=True), 4)` adds once, as the public TileLang does)."""
    if not isinstance(x, E.Expr) or isinstance(x, (E.Var, E.Const)) or B.active() is None:
        return x
    if not collect(x, lambda e: isinstance(e, E.Call) and e.op.startswith(_SIDE_EFFECTS)):
        return x
    return materialize_lane(B.current(), "once", x)


def lanes_of(x) -> list:
    """A vector's lanes, or [x] for a scalar expression."""
    return list(x.values) if getattr(x, "is_tl_vector", False) else [E.as_expr(x)]


def _count(n, what) -> int:
    v = E.const_value(n)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise DSLTypeError(f"{what}: the lane count must be a constant integer >= 1, got {n!r}")
    return v


def broadcast(value, lanes):
    """`value` in each of `lanes` lanes (the scalar itself for one lane)."""
    n = _count(lanes, "T.Broadcast")
    if getattr(value, "is_tl_vector", False):
        raise DSLTypeError(f"T.Broadcast takes a scalar value, got the vector {value!r}")
    return E.as_expr(value) if n == 1 else VectorValue([once(E.as_expr(value))] * n)


def ramp(base, stride, lanes):
    """base, base + stride, ..., base + (lanes - 1) * stride."""
    n = _count(lanes, "T.Ramp")
    base = E.as_expr(base)
    if n == 1:
        return base
    stride = E.as_expr(stride, base.dtype)
    return VectorValue([base] + [simplify(base + stride * k) for k in range(1, n)])


def shuffle(vectors, indices):
    """Lanes `indices` (constants) of the concatenated `vectors` (vectors or scalars)."""
    pool = [x for v in vectors for x in lanes_of(v)]
    picks = []
    for i in indices:
        k = E.const_value(i)
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(pool):
            raise DSLTypeError(f"T.Shuffle: each index must be a constant lane in [0, {len(pool)}), got {i!r}")
        picks.append(pool[k])
    if not picks:
        raise DSLTypeError("T.Shuffle needs at least one index")
    return picks[0] if len(picks) == 1 else VectorValue(picks)


def construct(dtype, args):
    """`T.float32x2(a, b)` (one value per lane), `T.float32x2(v)` (a vector cast lane-wise, or a
    scalar in every lane)."""
    d = dt.as_dtype(dtype)
    if len(args) == d.lanes:
        return VectorValue(args, d)
    if len(args) == 1:
        (x,) = args
        return x.tl_cast(d) if getattr(x, "is_tl_vector", False) else VectorValue([once(E.as_expr(x))] * d.lanes, d)
    if not args:
        raise DSLTypeError(f"T.{d}() declares a vector variable TVM style, which is not supported; use "
                           f"T.alloc_var(T.{d}) or build the value from its lanes: T.{d}(a, b, ...)")
    raise DSLTypeError(f"T.{d}(...) takes {d.lanes} lane values (or one value for every lane), got {len(args)}")


def extract(vector, lane: int):
    return vector.values[lane]


# ------------------------------------------------------------------ bits

def _uint(bits: int):
    return dt.as_dtype(f"uint{bits}")


def _to_uint(x):
    u = _uint(x.dtype.bits)
    if x.dtype == u:
        return x
    if isinstance(x, E.Call) and x.op == "reinterpret" and x.args[0].dtype == u:
        return x.args[0]
    return E.Call("reinterpret", (x,), u)


def _from_uint(w, d):
    if w.dtype == d:
        return w
    if isinstance(w, E.Call) and w.op == "reinterpret" and w.args[0].dtype == d:
        return w.args[0]
    return E.Call("reinterpret", (w,), d)


def reinterpret(value, dtype, what="T.reinterpret"):
    """The bits of `value` (a scalar or a vector) read as `dtype` (a scalar or vector dtype of as
    many bits): lanes are little-endian, lane 0 in the lowest bits."""
    src = lanes_of(value)
    sd, d = src[0].dtype, dt.as_dtype(dtype)
    td = d.element_of()
    total = sd.bits * len(src)
    if total != td.bits * d.lanes:
        raise DSLTypeError(f"{what}: {getattr(value, 'dtype', sd)} has {total} bits, {d} has {td.bits * d.lanes}; "
                           "a reinterpretation keeps the bits, so the widths must match")
    for x in (sd, td):
        if x.bits not in _BITS or x.is_bool:
            raise DSLTypeError(f"{what}: lanes of {x} are not supported (8-, 16-, 32- or 64-bit numbers only)")
    words = [_to_uint(x) for x in src]
    sb, tb = sd.bits, td.bits
    u = _uint(tb)
    if tb == sb:
        outs = words
    elif tb > sb:
        k = tb // sb
        outs = []
        for i in range(d.lanes):
            w = None
            for j in range(k):
                part = E.cast(u, words[i * k + j])
                part = E.binop("<<", part, E.const(sb * j, u)) if j else part
                w = part if w is None else E.binop("|", w, part)
            outs.append(w)
    else:
        k = sb // tb
        outs = [E.cast(u, E.binop(">>", words[i // k], E.const(tb * (i % k), words[i // k].dtype))
                       if i % k else words[i // k]) for i in range(d.lanes)]
    outs = [_from_uint(w, td) for w in outs]
    return outs[0] if d.lanes == 1 else VectorValue(outs, d)


# ------------------------------------------------------------------ memory

def _vector_positions(buffer, idx) -> list:
    """The index tuples of lanes 0..n-1 of `buffer[idx]` where some indices are vectors (Ramp)."""
    vecs = [i for i in idx if getattr(i, "is_tl_vector", False)]
    n = vecs[0].lanes
    if any(v.lanes != n for v in vecs):
        raise DSLTypeError(f"{buffer.name}[...]: vector indices of different lane counts "
                           f"({', '.join(str(v.dtype) for v in vecs)})")
    if any(isinstance(i, slice) for i in idx):
        raise DSLTypeError(f"{buffer.name}[...]: a vector index (T.Ramp) and a slice in one access is not supported")
    return [tuple(_lane_index(i.values[k]) if getattr(i, "is_tl_vector", False) else i for i in idx)
            for k in range(n)]


def _lane_index(x):
    """A lane of a vector index: a signed one that may be negative is marked, for legalize_negative_index to
    count from the end of the dim (at run time where its sign is unknown), as the public TileLang does."""
    x = E.as_expr(x)
    v = E.const_value(x)
    if isinstance(v, int) or not (x.dtype.is_int and x.dtype.is_signed):
        return x
    return E.Call(E.VECTOR_LANE_INDEX, (x,), x.dtype)


def region_positions(region: BufferRegion, what: str) -> list:
    """The index tuples of a constant-extent region, row-major."""
    exts = [E.const_value(e) for e in region.extents]
    if any(not isinstance(e, int) for e in exts):
        raise DSLTypeError(f"{what}: {region!r} needs constant extents to hold vector lanes")
    out = [()]
    for (start, _), e in zip(region.ranges, exts):
        out = [p + (simplify(E.as_expr(start) + k) if k else E.as_expr(start),) for p in out for k in range(e)]
    return out


def gather(buffer: Buffer, idx) -> VectorValue:
    """`buffer[idx]` with vector (Ramp) indices: the vector of the lanes' elements."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    return VectorValue([buffer[p] for p in _vector_positions(buffer, idx)])


def _before_writing(builder, buffer, lanes) -> list:
    """Lanes that read `buffer` become lets first: every lane is read before the first lane is stored."""
    def reads(x):
        return isinstance(x, E.Expr) and collect(x, lambda n: isinstance(n, E.BufferLoad) and n.buffer is buffer)

    if not any(reads(x) for x in lanes):
        return lanes
    return [materialize_lane(builder, "lane", x) if reads(x) else x for x in lanes]


def store(builder, buffer: Buffer, idx, value):
    """`buffer[idx] = value` where idx has slices or vector indices, or value is a vector."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    if any(getattr(i, "is_tl_vector", False) for i in idx):
        positions = _vector_positions(buffer, idx)
    elif any(isinstance(i, slice) for i in idx):
        positions = region_positions(BufferRegion.from_slices(buffer, idx), f"{buffer.name}[...] = {value!r}")
    else:
        raise DSLTypeError(f"cannot store the {value.dtype} vector {value!r} into one element of {buffer.name}; "
                           f"store it into a slice ({buffer.name}[i:i + {value.lanes}]) or with a T.Ramp index")
    if getattr(value, "is_tl_vector", False) and value.lanes != len(positions):
        raise DSLTypeError(f"{buffer.name}[...] = a {value.dtype} vector: the destination has {len(positions)} "
                           f"elements, the vector {value.lanes} lanes")
    lanes = _before_writing(builder, buffer, spread(value, len(positions)))
    for p, x in zip(positions, lanes):
        p = buffer.check_const_indices(tuple(E.as_expr(i) for i in p))
        builder.emit(S.BufferStore(buffer, p, E.cast(buffer.dtype, E.as_expr(x, buffer.dtype))))


def materialize_lane(builder, name, x):
    """x as a let variable holding its value now (a variable or a constant stays itself)."""
    x = E.as_expr(x)
    if isinstance(x, (E.Var, E.Const)):
        return x
    var = E.Var(builder.unique(name), x.dtype)
    builder.emit(S.LetStmt(var, x))
    if not (isinstance(x, E.Call) and x.op.startswith("atomic_")):  # analyses must not repeat a side effect
        builder.lets[var] = x
    return var


def materialize(builder, name, vector) -> VectorValue:
    """The vector with each lane held in a let variable (its value at this point of the kernel)."""
    return VectorValue([materialize_lane(builder, name, x) for x in vector.values], vector.dtype)


def binds(old, value) -> bool:
    """Whether `name = value` (name bound to `old`) is a vector binding, done by `bind`."""
    return getattr(value, "is_tl_vector", False) or (
        isinstance(old, VectorVar) and isinstance(value, (E.Expr, int, float)))


def bind(builder, name, old, value):
    """What `name = value` leaves bound to `name` when old or value is a vector; None when it stored
    into the vector variable `old` (`v = T.alloc_var(T.float32x2)` ... `v = T.float32x2(a, b)`)."""
    fresh_var = isinstance(value, VectorVar) and getattr(value.buffer, "auto_named", False)
    if isinstance(old, VectorVar) and not fresh_var and (getattr(value, "is_tl_vector", False) or
                                                          isinstance(value, (E.Expr, int, float))):
        old.assign(builder, value)
        return None
    if fresh_var:
        value.buffer.name = builder.unique(name)
        value.buffer.auto_named = False
        return value
    return materialize(builder, name, value)
