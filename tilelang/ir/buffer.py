"""Buffers (global tensors, shared/fragment/local tiles, scalar vars) and regions of them."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import DSLTypeError
from .expr import BufferLoad, Expr, as_expr, const, const_value

_uid = itertools.count()

SCOPES = ("global", "shared", "shared.dyn", "fragment", "local", "local.var")


class Buffer:
    """A named n-d array. Identity matters: two buffers with one name are different buffers.

    `A[i, j]` is a load (or a corner for T.copy); `A[a:b, c]` is a `BufferRegion`.
    """

    def __init__(self, name: str, shape, dtype, scope: str = "global", strides=None):
        assert scope in SCOPES, scope
        self.name = name
        self.shape = tuple(_dim(s) for s in shape)
        self.dtype: DType = dt.as_dtype(dtype)
        self.scope = scope
        self.strides = strides
        self.uid = next(_uid)

    def __repr__(self):
        dims = ", ".join(str(s) for s in self.shape)
        return f"Buffer({self.name}, ({dims}), {self.dtype}, {self.scope})"

    @property
    def data(self) -> "Buffer":
        """The buffer's storage, as T.ptx_mma takes it (`A_local.data`): the buffer itself here."""
        return self

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def static_shape(self) -> tuple | None:
        vals = tuple(const_value(s) for s in self.shape)
        return None if any(v is None for v in vals) else vals

    def numel(self) -> int:
        n = 1
        for s in self.static_shape:
            n *= s
        return n

    def _indices(self, idx) -> tuple:
        return idx if isinstance(idx, tuple) else (idx,)

    def __getitem__(self, idx):
        idx = self._indices(idx)
        if self.scope == "local.var" and idx == ():
            idx = (0,)
        if len(idx) != self.ndim and not (self.scope == "local.var"):
            raise DSLTypeError(f"buffer {self.name} has {self.ndim} dims, indexed with {len(idx)}")
        if any(isinstance(i, slice) for i in idx):
            return BufferRegion.from_slices(self, idx)
        vec = next((i for i in idx if getattr(i, "is_tl_vector", False)), None)
        if vec is not None:  # a T.Ramp index: the vector of its lanes' elements (frontend/vector.py)
            return vec.tl_gather(self, idx)
        loads = tuple(as_expr(i) for i in idx)
        if self.scope != "local.var":
            loads = self.check_const_indices(loads)
        return BufferLoad(self, loads, self.dtype)

    def check_const_indices(self, idx) -> tuple:
        """idx with each negative constant index counted from the end of its dim, Python style
        (`A[-1]` is `A[extent - 1]`, as the public TileLang wraps it); a constant index still outside a
        constant dim (`A[16]` or `A[-17]` of 16 elements) is an error."""
        out = list(idx)
        for d, (i, s) in enumerate(zip(idx, self.shape)):
            iv, sv = const_value(i), const_value(s)
            if not isinstance(iv, int) or isinstance(iv, bool) or iv >= 0:
                continue
            if not isinstance(sv, int):
                out[d] = as_expr(s) + i  # a symbolic dim: N - 1
            elif iv >= -sv:
                out[d] = const(iv + sv, i.dtype)
        idx, out = tuple(idx), tuple(out)
        for d, (i, s) in enumerate(zip(idx, self.shape)):
            iv, sv = const_value(i), const_value(s)
            if isinstance(iv, int) and isinstance(sv, int) and not -sv <= iv < sv:
                shown = ", ".join(str(const_value(x) if const_value(x) is not None else x) for x in idx)
                raise DSLTypeError(f"{self.name}[{shown}]: index {iv} is out of range for dim {d} of "
                                   f"{self.name}{tuple(self.shape)} (valid: {-sv} .. {sv - 1})")
        return out

    def as_load(self):
        if self.scope != "local.var":
            raise DSLTypeError(f"buffer {self.name} used as a scalar value; index it, e.g. {self.name}[i]")
        return BufferLoad(self, (as_expr(0),), self.dtype)

    def region(self) -> "BufferRegion":
        return BufferRegion(self, tuple((as_expr(0), s) for s in self.shape))

    # A local.var buffer behaves like a scalar in expressions.
    def _scalar(self):
        return self.as_load()

    def __add__(self, o): return self._scalar() + o
    def __radd__(self, o): return o + self._scalar()
    def __sub__(self, o): return self._scalar() - o
    def __rsub__(self, o): return o - self._scalar()
    def __mul__(self, o): return self._scalar() * o
    def __rmul__(self, o): return o * self._scalar()
    def __truediv__(self, o): return self._scalar() / o
    def __rtruediv__(self, o): return o / self._scalar()
    def __floordiv__(self, o): return self._scalar() // o
    def __mod__(self, o): return self._scalar() % o
    def __lt__(self, o): return self._scalar() < o
    def __le__(self, o): return self._scalar() <= o
    def __gt__(self, o): return self._scalar() > o
    def __ge__(self, o): return self._scalar() >= o
    def __neg__(self): return -self._scalar()


def storage_root(b: Buffer) -> Buffer:
    """The buffer whose memory `b` names: a T.view alias's base (`view_base`), a stage window's ring
    (`view_of`), followed up to four links; `b` itself when it aliases nothing."""
    for _ in range(4):
        base = getattr(b, "view_base", None) or getattr(b, "view_of", None)
        if base is None:
            break
        b = base
    return b


@dataclass(frozen=True)
class BufferRegion:
    """A box of a buffer: per dim (start, extent). Extents of 1 from integer indices are kept."""

    buffer: Buffer
    ranges: tuple  # ((start: Expr, extent: int | Expr), ...)

    @staticmethod
    def from_slices(buffer: Buffer, idx: tuple) -> "BufferRegion":
        ranges = []
        for i, s in enumerate(idx):
            if isinstance(s, slice):
                if s.step not in (None, 1):
                    raise DSLTypeError(f"slices with a step are not supported (buffer {buffer.name})")
                start = as_expr(0 if s.start is None else s.start)
                stop = buffer.shape[i] if s.stop is None else s.stop
                ext = _sub(stop, start)
                ranges.append((start, ext))
            else:
                ranges.append((as_expr(s), 1))
        return BufferRegion(buffer, tuple(ranges))

    @property
    def starts(self) -> tuple:
        return tuple(r[0] for r in self.ranges)

    @property
    def extents(self) -> tuple:
        return tuple(r[1] for r in self.ranges)

    def __repr__(self):
        rs = ", ".join(f"{s}:{s}+{e}" for s, e in self.ranges)
        return f"{self.buffer.name}[{rs}]"


def _dim(s):
    v = const_value(s)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(s, Expr):
        return s
    raise DSLTypeError(f"a buffer dimension must be an integer or an integer expression, got {s!r}")


def _sub(stop, start):
    from ..arith.simplify import simplify

    a, b = const_value(stop), const_value(start)
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    e = simplify(as_expr(stop) - start)
    v = const_value(e)
    if not isinstance(v, int):  # `H1 = H0 + 64` in a kernel: H1 - H0 is 64 once the names are inlined
        from ..frontend.builder import inline_lets

        v = const_value(simplify(inline_lets(as_expr(stop)) - inline_lets(as_expr(start))))
    return v if isinstance(v, int) else e
