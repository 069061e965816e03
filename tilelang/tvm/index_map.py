"""`tvm.tirx.IndexMap`: a map from n input indices to m output indices, as IR expressions.

User layout helpers build one from a Python function and evaluate it on their own indices:

    m = IndexMap.from_func(lambda i, j: (i * 4 + j // 8, j % 8), index_dtype=T.int32)
    m.initial_indices             # [i0, i1]: the placeholder Vars
    m.final_indices               # [i0 * 4 + i1 // 8, i1 % 8]
    lane, local = m.map_indices([r, c])   # expressions (or ints) substituted, then simplified
    m.map_shape([16, 16])         # [64, 8]: the extent of each output over that input shape
    m.inverse([16, 16])           # the output -> input map of a bijective map on that shape

An inverse is found by enumerating the shape (it has to be constant and small), so it maps
constant indices only; `map_indices` on it with symbolic indices raises.
"""
from __future__ import annotations

import inspect

from ..dtypes import as_dtype
from ..errors import DSLTypeError
from ..ir import expr as E
from ..layout.layout import Layout, as_outputs, check_vars, is_int
from ..layout.layout import substitute as substitute_simplified


class IndexMap:
    """`initial_indices` (Vars) -> `final_indices` (expressions over them)."""

    def __init__(self, initial_indices, final_indices, inverse_index_map=None, *, _table=None):
        self.initial_indices = list(initial_indices)
        self.final_indices = list(final_indices) if final_indices is not None else None
        self._inverse = inverse_index_map
        self._table = _table  # a Layout built by enumeration (what inverse() returns)
        if self._table is None:
            check_vars(tuple(self.final_indices), tuple(self.initial_indices), (), "an IndexMap")

    @classmethod
    def from_func(cls, mapping_function, ndim=None, inverse_index_map=None, *, index_dtype="int64"):
        """The map `mapping_function(*indices)`; `ndim` defaults to its number of positional
        parameters (give it for a `*args` function). The result is one expression or a list."""
        if not callable(mapping_function):
            raise DSLTypeError(f"IndexMap.from_func takes a function of the indices, got {mapping_function!r}")
        if ndim is None:
            ndim = _positional_arity(mapping_function)
        dtype = as_dtype(index_dtype)
        args = [E.Var(f"i{k}", dtype) for k in range(ndim)]
        outs = as_outputs(mapping_function(*args), "IndexMap.from_func's mapping_function")
        if inverse_index_map is not None and not isinstance(inverse_index_map, IndexMap):
            inverse_index_map = cls.from_func(inverse_index_map, len(outs), index_dtype=index_dtype)
        return cls(args, substitute_simplified(outs, {}), inverse_index_map)

    @property
    def ndim(self) -> int:
        return len(self.initial_indices)

    def map_indices(self, indices) -> list:
        """The output indices at `indices` (ints or expressions), simplified."""
        indices = list(indices)
        if len(indices) != self.ndim:
            raise DSLTypeError(f"IndexMap.map_indices: this map takes {self.ndim} indices, got {len(indices)}")
        if self._table is not None:
            if not all(is_int(x) or E.const_value(E.as_expr(x)) is not None for x in indices):
                raise DSLTypeError("IndexMap.map_indices: this map is an inverse found by enumeration and "
                                   f"maps constant indices only, got {indices}")
            out = self._table.map(*(int(x) if is_int(x) else E.const_value(x) for x in indices))
            if out is None:
                raise DSLTypeError(f"IndexMap.map_indices: {indices} is not the image of any index")
            return [E.const(v, self.initial_indices[0].dtype) for v in out]
        return list(substitute_simplified(tuple(self.final_indices), dict(zip(self.initial_indices, indices))))

    def map_shape(self, shape) -> list:
        """The extent of each output index over the (constant) input `shape`."""
        return [E.const(s, self.initial_indices[0].dtype if self.initial_indices else "int32")
                for s in self._layout(shape, "map_shape").output_shape()]

    def inverse(self, shape) -> "IndexMap":
        """The output -> input map of this map on input `shape`; it must be bijective there."""
        if self._inverse is not None:
            return self._inverse
        layout = self._layout(shape, "inverse")
        if not layout.is_bijective():
            raise DSLTypeError(f"IndexMap.inverse: the map is not bijective on shape {list(layout.shape)} "
                               "(some output index is hit twice, or never)")
        dtype = self.initial_indices[0].dtype
        out_vars = [E.Var(f"o{k}", dtype) for k in range(layout.out_ndim())]
        return IndexMap(out_vars, None, self, _table=layout.inverse())

    def is_equivalent_to(self, other_map: "IndexMap") -> bool:
        """Same number of indices and structurally equal outputs on the same inputs."""
        if not isinstance(other_map, IndexMap) or other_map.ndim != self.ndim:
            return False
        if self._table is not None or other_map._table is not None:
            return self._table is other_map._table
        mine = self.final_indices
        theirs = other_map.map_indices(self.initial_indices)
        return len(mine) == len(theirs) and all(E.structurally_equal(a, b) for a, b in zip(mine, theirs))

    def _layout(self, shape, what: str) -> Layout:
        shape = [E.const_value(s) if isinstance(s, E.Expr) else s for s in shape]
        if len(shape) != self.ndim or not all(is_int(s) for s in shape):
            raise DSLTypeError(f"IndexMap.{what} takes {self.ndim} constant extents, got {shape}")
        if self._table is not None:
            raise DSLTypeError(f"IndexMap.{what}: not available on an inverse found by enumeration")
        return Layout(tuple(int(s) for s in shape), lambda *idx: self.map_indices(idx))

    def __repr__(self):
        ins = ", ".join(str(v) for v in self.initial_indices)
        if self._table is not None:
            return f"IndexMap(({ins}) -> inverse of {self._inverse!r} by table)"
        return f"IndexMap(({ins}) -> ({', '.join(str(e) for e in self.final_indices)}))"


def _positional_arity(fn) -> int:
    params = inspect.signature(fn).parameters.values()
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        raise DSLTypeError("IndexMap.from_func: the function takes *args; pass ndim= to say how many indices")
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in params)
