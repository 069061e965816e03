"""`Layout`: an index map from a logical n-d shape to physical n-d indices.

A layout is written once as IR expressions over placeholder variables, one per
logical dimension, and is then usable two ways: symbolically (`map(i, j)` with IR
expressions substitutes them, for lowering) and numerically (`map(3, 5)` with
ints, or `table()` for every index at once, for checks, inversion and plotting).

    L = Layout((4, 8), lambda i, j: (i, (j // 2) ^ i % 4 * 2 + j % 2))
    L.map(1, 3)          # (1, 3)   ints in, ints out
    L.map(r, c)          # IR expressions in, simplified IR expressions out
    L.inverse().map(1, 3)  # (1, 3)   table-backed: ints only

Layouts built by enumeration (`inverse()`, `from_table`) hold a table instead of
expressions; they need constant indices. A table entry of all -1 is a hole (an
unused physical index); `map` returns None there.
"""
from __future__ import annotations

import itertools

from ..errors import DSLTypeError, DSLValueError, NonConstantShapeError
from ..ir import expr as E
from ..ir.expr import Binary, Call, Cast, Const, Expr, Select, Unary, Var

# Enumeration (inverse, equality, bijectivity, output_shape) is for small static tiles.
MAX_ENUMERATE = 1 << 22

_PY_OPS = {"+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>", "<", "<=", ">", ">=", "==", "!="}


# ----------------------------------------------------------------- evaluation

def _src(e, names: dict) -> str:
    """Python source for an integer IR expression; helpers make it work on ints and arrays."""
    if isinstance(e, Var):
        if e not in names:
            raise DSLTypeError(f"layout expression uses {e.name}, which is not one of its index "
                               "variables; a layout may depend only on the indices it maps")
        return names[e]
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, Binary):
        a, b = _src(e.a, names), _src(e.b, names)
        if e.op in _PY_OPS:
            return f"({a} {e.op} {b})"
        helper = {"/": "_tdiv", "min": "_min", "max": "_max", "&&": "_and", "||": "_or"}.get(e.op)
        if helper:
            return f"{helper}({a}, {b})"
    if isinstance(e, Unary):
        a = _src(e.a, names)
        return {"-": f"(-{a})", "~": f"(~{a})", "!": f"_not({a})"}[e.op]
    if isinstance(e, Select):
        return f"_sel({_src(e.cond, names)}, {_src(e.a, names)}, {_src(e.b, names)})"
    if isinstance(e, Cast):
        return f"_int({_src(e.value, names)})" if not e.dtype.is_bool else f"({_src(e.value, names)} != 0)"
    if isinstance(e, Call) and e.op in ("min", "max", "abs") and len(e.args) in (1, 2):
        return f"_{e.op}({', '.join(_src(a, names) for a in e.args)})"
    raise DSLTypeError(f"a layout expression must be integer index arithmetic, found {e}")


def _scalar_env():
    def tdiv(a, b):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return {"_tdiv": tdiv, "_min": min, "_max": max, "_abs": abs, "_and": lambda a, b: bool(a and b),
            "_or": lambda a, b: bool(a or b), "_not": lambda a: not a, "_int": int,
            "_sel": lambda c, a, b: a if c else b}


def _array_env():
    import numpy as np

    def tdiv(a, b):
        return np.where((np.asarray(a) >= 0) == (np.asarray(b) >= 0), 1, -1) * (np.abs(a) // np.abs(b))
    return {"_tdiv": tdiv, "_min": np.minimum, "_max": np.maximum, "_abs": np.abs, "_and": np.logical_and,
            "_or": np.logical_or, "_not": np.logical_not, "_int": lambda a: np.asarray(a).astype(np.int64),
            "_sel": np.where}


def compile_exprs(args: tuple, outs: tuple, array: bool = False):
    """A Python function of `args` (Vars) returning the tuple `outs` (exprs or ints)."""
    names = {v: f"a{k}" for k, v in enumerate(args)}
    body = ", ".join(_src(E.as_expr(o), names) for o in outs)
    src = f"lambda {', '.join(names.values())}: ({body},)"
    return eval(src, _array_env() if array else _scalar_env())


def evaluate_grid(args: tuple, outs: tuple, shape: tuple):
    """int64 array of shape `shape + (len(outs),)`: every output at every index of `shape`."""
    import numpy as np

    check_enumerable(shape)
    fn = compile_exprs(args, outs, array=True)
    grid = np.indices(shape, dtype=np.int64) if shape else np.zeros((0,), np.int64)
    vals = fn(*grid)
    return np.stack([np.broadcast_to(np.asarray(v, dtype=np.int64), shape) for v in vals], axis=-1)


def check_enumerable(shape) -> None:
    if not all(isinstance(s, int) for s in shape):
        raise NonConstantShapeError(f"this layout operation enumerates every index, so the shape "
                                    f"must be constant; got {shape}")
    n = 1
    for s in shape:
        n *= s
    if n > MAX_ENUMERATE:
        raise DSLTypeError(f"layout shape {shape} has {n} elements, too many to enumerate "
                           f"(limit {MAX_ENUMERATE})")


def as_shape(shape) -> tuple:
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    out = []
    for s in shape:
        v = s
        if isinstance(s, Expr) and E.const_value(s) is not None:
            v = E.const_value(s)
        if isinstance(v, bool) or not isinstance(v, (int, Expr)) or (isinstance(v, int) and v <= 0):
            raise DSLTypeError(f"a layout shape takes positive ints (or symbolic extents), got {shape}")
        out.append(int(v) if isinstance(v, int) else v)
    return tuple(out)


def index_vars(ndim: int, prefix: str = "i") -> tuple:
    return tuple(Var(f"{prefix}{k}") for k in range(ndim))


def as_outputs(value, what: str) -> tuple:
    """A forward function's result as a tuple of expressions."""
    if isinstance(value, (list, tuple)):
        items = tuple(value)
    else:
        items = (value,)
    if not items:
        raise DSLTypeError(f"{what} returned no index")
    for x in items:
        if isinstance(x, bool) or not isinstance(x, (int, Expr)):
            raise DSLTypeError(f"{what} must return index expressions (or a list of them), got {value!r}")
    return tuple(E.as_expr(x) for x in items)


def check_vars(outs: tuple, allowed: tuple, shape: tuple, what: str) -> None:
    """Reject expressions over variables other than the index vars (and symbolic extents)."""
    from ..ir.visitor import Visitor

    ok = {v.uid for v in allowed} | {s.uid for s in shape if isinstance(s, Var)}
    found = []

    class _Vars(Visitor):
        def visit_Var(self, v):
            if v.uid not in ok:
                found.append(v.name)
    _Vars().visit(tuple(outs))
    if found:
        raise DSLTypeError(f"{what} uses {found[0]}, which is not one of its index variables; "
                           "a layout may depend only on the indices it maps")


def substitute(outs: tuple, mapping: dict) -> tuple:
    from ..arith.simplify import simplify
    from ..ir.visitor import Substitute

    sub = Substitute({k: E.as_expr(v) for k, v in mapping.items()})
    return tuple(simplify(sub.visit(o)) for o in outs)


def is_int(x) -> bool:
    """A Python or numpy integer (not a bool, not an IR expression)."""
    return not isinstance(x, (bool, Expr)) and hasattr(x, "__index__")


def prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


# ----------------------------------------------------------------- Layout

class Layout:
    """Logical index (i0, ..., i{n-1}) in `shape` -> physical index (p0, ..., p{m-1}).

    `forward_fn` receives one index Var per logical dimension and returns the
    physical index: one expression or a list of them (ints are fine too).
    """

    def __init__(self, shape, forward_fn=None, *, _table=None):
        self.shape = as_shape(shape)
        self.forward_vars = index_vars(len(self.shape))
        self._table = _table
        self._grid = None
        self._scalar_fn = None
        if _table is not None:
            self.forward_index = None
            return
        if not callable(forward_fn):
            raise DSLTypeError(f"Layout(shape, forward_fn) needs a function of the indices, got {forward_fn!r}")
        outs = as_outputs(forward_fn(*self.forward_vars), "a Layout's forward_fn")
        check_vars(outs, self.forward_vars, self.shape, "a Layout's forward_fn")
        self.forward_index = substitute(outs, {})

    # ---- constructors
    @classmethod
    def from_fn(cls, shape, fn) -> Layout:
        """`Layout.from_fn((8, 64), lambda i, j: (i, j ^ (i * 8)))`; what `T.Layout` calls."""
        return cls(shape, fn)

    @classmethod
    def identity(cls, shape) -> Layout:
        return cls(shape, lambda *idx: idx)

    @classmethod
    def from_table(cls, table) -> Layout:
        """A layout given by enumeration: `table[idx]` is the physical index of `idx`."""
        import numpy as np

        t = np.asarray(table, dtype=np.int64)
        if t.ndim < 2:
            raise DSLTypeError("Layout.from_table takes an array of shape `shape + (out_ndim,)`")
        return cls(tuple(int(s) for s in t.shape[:-1]), _table=t)

    # ---- queries
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_table(self) -> bool:
        return self._table is not None

    def out_ndim(self) -> int:
        return self._table.shape[-1] if self.is_table else len(self.forward_index)

    def table(self):
        """int64 array `shape + (out_ndim,)`: the physical index of every logical index."""
        if self._table is not None:
            return self._table
        if self._grid is None:  # expressions stay the source of truth; the grid is a cache
            self._grid = evaluate_grid(self.forward_vars, self.forward_index, self.shape)
        return self._grid

    def output_shape(self) -> tuple:
        """Extent of each physical dimension: 1 + the largest index the layout produces."""
        t = self.table()
        used = t[(t >= 0).all(axis=-1)] if self.is_table else t.reshape(-1, t.shape[-1])
        if (used < 0).any():
            raise DSLTypeError(f"layout {self} maps some index to a negative physical index")
        return tuple(int(x) + 1 for x in used.max(axis=0))

    def map(self, *indices) -> tuple | None:
        """The physical index of `indices`: ints -> tuple of ints; IR exprs -> simplified exprs."""
        if len(indices) == 1 and isinstance(indices[0], (list, tuple)):
            indices = tuple(indices[0])
        if len(indices) != self.ndim:
            raise DSLTypeError(f"layout of shape {self.shape} maps {self.ndim} indices, got {len(indices)}")
        if all(is_int(x) for x in indices) and all(isinstance(s, int) for s in self.shape):
            return self._map_ints(tuple(int(x) for x in indices))
        if self.is_table:
            raise DSLTypeError("this layout was built by enumeration (inverse / from_table) and maps "
                               "constant indices only")
        return substitute(self.forward_index, dict(zip(self.forward_vars, indices)))

    __call__ = map

    def _map_ints(self, idx: tuple):
        for i, s in zip(idx, self.shape):
            if isinstance(s, int) and not 0 <= i < s:
                raise DSLTypeError(f"index {idx} is outside layout shape {self.shape}")
        if self.is_table:
            out = tuple(int(x) for x in self._table[idx])
            return None if all(x == -1 for x in out) else out
        if self._scalar_fn is None:
            self._scalar_fn = compile_exprs(self.forward_vars, self.forward_index)
        return tuple(int(x) for x in self._scalar_fn(*idx))

    # ---- properties by enumeration
    def is_injective(self) -> bool:
        return self.first_collision() is None

    def first_collision(self) -> tuple | None:
        """Two logical indices that land on one physical index, with that index, as
        `(a, b, physical)`; None for an injective layout."""
        import numpy as np

        t = self.table().reshape(-1, self.out_ndim())
        keep = np.flatnonzero((t >= 0).all(axis=-1)) if self.is_table else np.arange(len(t))
        if len(np.unique(t[keep], axis=0)) == len(keep):
            return None
        seen: dict = {}
        for k in keep.tolist():
            phys = tuple(int(x) for x in t[k])
            if phys in seen:
                unravel = lambda f: tuple(int(x) for x in np.unravel_index(f, self.shape))
                return unravel(seen[phys]), unravel(k), phys
            seen[phys] = k
        return None

    def is_bijective(self) -> bool:
        """Every physical index in `output_shape()` is hit exactly once (and nothing else)."""
        t = self.table().reshape(-1, self.out_ndim())
        if (t < 0).any():
            return False
        return self.is_injective() and len(t) == prod(self.output_shape())

    def inverse(self) -> Layout:
        """The physical -> logical map of a bijective layout, as a table-backed Layout."""
        import numpy as np

        if not self.is_bijective():
            raise DSLTypeError(f"only a bijective layout has an inverse; {self} is not "
                               "(some physical index is hit twice, or never)")
        t = self.table().reshape(-1, self.out_ndim())
        inv = np.empty(self.output_shape() + (self.ndim,), dtype=np.int64)
        inv[tuple(t.T)] = np.stack(np.unravel_index(np.arange(len(t)), self.shape), axis=-1)
        return Layout.from_table(inv)

    # ---- algebra
    def compose(self, other: Layout) -> Layout:
        """`f.compose(g)` maps x to f(g(x)): g runs first, its physical index feeds f.

        Example: `swizzle.compose(Layout((64, 64), lambda i, j: (j, i)))` is the swizzled
        layout of the transposed tile.
        """
        if not isinstance(other, Layout):
            raise DSLTypeError(f"Layout.compose takes a Layout, got {type(other).__name__}")
        if other.out_ndim() != self.ndim:
            raise DSLTypeError(f"cannot compose: the inner layout produces {other.out_ndim()} indices, "
                               f"the outer one takes {self.ndim}")
        if not self.is_table and not other.is_table:
            outs = substitute(self.forward_index, dict(zip(self.forward_vars, other.forward_index)))
            return Layout(other.shape, _expr_fn(other.forward_vars, outs))
        inner = other.table()
        holes = (inner < 0).all(axis=-1)
        if not holes.all() and (inner[~holes] >= self.shape).any():
            raise DSLTypeError(f"cannot compose: the inner layout reaches outside {self.shape}")
        import numpy as np

        outer = self.table()
        out = outer[tuple(np.where(holes, 0, inner[..., k]) for k in range(self.ndim))]
        out[holes] = -1
        return Layout.from_table(out)

    def repeat(self, repeats=None, factor=None, *, dim=None) -> Layout:
        """Two forms.

        - `L.repeat(dim, factor)` (the public TileLang's): dimension `dim` grows `factor` times
          and the copy number becomes a new leading physical index:
          `L'(..., i, ...) = (i // s, *L(..., i % s, ...))` with `s` the old extent of `dim`.
          `factor == 1` returns `L` itself.
        - `L.repeat(repeats)` (one count per dimension, or an int for the first): tile the
          layout: shape s -> s * r per dimension; block b of the tiling lands at physical block
          b (physical index + b * output extent, per dimension).
        """
        if dim is not None or factor is not None:
            return self._repeat_dim(repeats if dim is None else dim, factor)
        reps = repeat_counts(repeats, self.ndim)
        if self.out_ndim() != self.ndim:
            raise DSLTypeError("Layout.repeat needs as many physical as logical dimensions")
        ext = self.output_shape()
        new_shape = tuple(s * r for s, r in zip(self.shape, reps))

        def fwd(*idx):
            inner = self.map(*(i % s for i, s in zip(idx, self.shape)))
            if inner is None:
                return None
            return tuple(p + (i // s) * e for p, i, s, e in zip(inner, idx, self.shape, ext))
        if self.is_table:
            return Layout.from_table(_table_of(fwd, new_shape))
        return Layout(new_shape, fwd)

    def _repeat_dim(self, dim, factor) -> Layout:
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise DSLTypeError(f"Layout.repeat: dim must be an int, got {type(dim).__name__}")
        if not isinstance(factor, int) or isinstance(factor, bool):
            raise DSLTypeError(f"Layout.repeat: factor must be an int, got {type(factor).__name__}")
        if factor < 1:
            raise DSLValueError(f"Layout.repeat: factor must be >= 1, got {factor}")
        if factor == 1:
            return self
        if self.ndim == 0:
            raise DSLValueError("Layout.repeat: cannot repeat a 0-dim layout")
        d = dim + self.ndim if dim < 0 else dim
        if not 0 <= d < self.ndim:
            raise DSLValueError(f"Layout.repeat: dim {dim} is out of range for a {self.ndim}-dim layout")
        ext = self.shape[d]
        new_shape = self.shape[:d] + (ext * factor,) + self.shape[d + 1:]

        def fwd(*idx):
            inner = self.map(*idx[:d], idx[d] % ext, *idx[d + 1:])
            return None if inner is None else (idx[d] // ext, *inner)
        if self.is_table:
            return Layout.from_table(_table_of(fwd, new_shape))
        return Layout(new_shape, fwd)

    def expand(self, leading_shape) -> Layout:
        """Prepend new leading dimensions that pass through unchanged:
        `L.expand([I])` maps (i, *idx) -> (i, *L(*idx)). An empty shape returns `L` itself."""
        if isinstance(leading_shape, int) and not isinstance(leading_shape, bool):
            leading_shape = [leading_shape]
        if not isinstance(leading_shape, (list, tuple)):
            raise DSLTypeError(f"Layout.expand: leading_shape must be an int or a sequence, got "
                               f"{type(leading_shape).__name__}")
        if not leading_shape:
            return self
        for n, ext in enumerate(leading_shape):
            if isinstance(ext, int) and not isinstance(ext, bool):
                if ext <= 0:
                    raise DSLValueError(f"Layout.expand: leading_shape[{n}] must be > 0, got {ext}")
            elif not isinstance(ext, Expr):
                raise DSLTypeError(f"Layout.expand: leading_shape[{n}] must be an int or an expression, "
                                   f"got {type(ext).__name__}")
        lead = len(leading_shape)
        new_shape = tuple(leading_shape) + self.shape

        def fwd(*idx):
            inner = self.map(*idx[lead:])
            return None if inner is None else (*idx[:lead], *inner)
        if self.is_table:
            return Layout.from_table(_table_of(fwd, as_shape(new_shape)))
        return Layout(new_shape, fwd)

    def get_linearized_forward_index(self) -> Expr:
        """The physical index as one row-major offset over `output_shape()` (an expression in
        the forward variables): `Layout([2, 32], lambda i, j: [j, i])` gives `j * 2 + i`."""
        if self.is_table:
            raise DSLTypeError("get_linearized_forward_index: this layout was built by enumeration "
                               "and has no index expressions")
        ext = self.output_shape()
        lin = E.as_expr(0)
        for p, e in zip(self.forward_index, ext):
            lin = lin * e + p
        from ..arith.simplify import simplify

        return simplify(lin)

    # ---- equality, printing, compatibility names
    def __eq__(self, other):
        if not isinstance(other, Layout) or type(other) is not type(self):
            return NotImplemented
        if self.shape != other.shape or self.out_ndim() != other.out_ndim():
            return False
        if all(isinstance(s, int) for s in self.shape) and prod(self.shape) <= MAX_ENUMERATE:
            import numpy as np

            return bool(np.array_equal(self.table(), other.table()))
        return other.map(*self.forward_vars) == substitute(self.forward_index, {})

    def __hash__(self):
        return hash(("Layout", self.shape))

    def is_equal(self, other) -> bool:
        return self == other

    def __repr__(self):
        if self.is_table:
            return f"Layout(shape={self.shape}, table -> {self.output_shape()})"
        args = ", ".join(v.name for v in self.forward_vars)
        outs = ", ".join(str(o) for o in self.forward_index)
        return f"Layout({self.shape}: ({args}) -> ({outs}))"

    def get_input_shape(self) -> tuple:
        return self.shape

    def get_output_shape(self) -> tuple:
        return self.output_shape()

    def get_forward_vars(self) -> tuple:
        return self.forward_vars

    def get_forward_index(self) -> tuple:
        return self.forward_index

    def map_forward_index(self, indices) -> tuple:
        return self.map(*indices)


# ----------------------------------------------------------------- helpers shared with Fragment

def _expr_fn(args: tuple, outs: tuple):
    """A forward_fn re-expressing `outs` (over `args`) in the caller's fresh variables."""
    def fn(*fresh):
        return substitute(outs, dict(zip(args, fresh)))
    return fn


def repeat_counts(repeats, ndim: int) -> tuple:
    if isinstance(repeats, int):
        repeats = (repeats,) + (1,) * (ndim - 1)
    reps = tuple(repeats)
    if len(reps) != ndim or not all(isinstance(r, int) and r >= 1 for r in reps):
        raise DSLTypeError(f"repeat takes one positive int per dimension ({ndim}), got {repeats!r}")
    return reps


def _table_of(fn, shape: tuple):
    """Enumerate an int-valued function of the index into a table (holes: None -> -1)."""
    import numpy as np

    check_enumerable(shape)
    rows = []
    for idx in itertools.product(*(range(s) for s in shape)):
        rows.append(fn(*idx))
    width = len(next(r for r in rows if r is not None))
    t = np.array([r if r is not None else (-1,) * width for r in rows], dtype=np.int64)
    return t.reshape(shape + (width,))
