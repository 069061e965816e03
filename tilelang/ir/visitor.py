"""Generic traversal over the frozen-dataclass IR.

`Mutator` rebuilds only what changed: override `visit_<NodeClass>` for the nodes you
rewrite and call `self.generic(node)` to recurse into the rest. `Visitor` is the
read-only counterpart. Both reach expressions inside tile ops and regions because
they walk every dataclass field.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .buffer import Buffer
from .expr import BufferLoad, Expr, Var

if TYPE_CHECKING:  # the traversal is generic; statements are imported by whoever builds them
    from .stmt import PrimFunc


_FIELDS: dict = {}  # type -> names of the fields a traversal visits (None: not an IR node)


def _walk_fields(tp):
    """The traversed field names of a dataclass type (not span/dtype), or None; memoised per
    type, since dataclasses.fields() per node visit dominated compile time."""
    try:
        return _FIELDS[tp]
    except KeyError:
        names = None
        if dataclasses.is_dataclass(tp):
            names = tuple(f.name for f in dataclasses.fields(tp) if f.name not in ("span", "dtype"))
        _FIELDS[tp] = names
        return names


def _is_node(x) -> bool:
    return _walk_fields(type(x)) is not None


class Mutator:
    def visit(self, node):
        if isinstance(node, tuple):
            items = tuple(self.visit(x) for x in node)
            return node if all(a is b for a, b in zip(items, node)) else items
        if isinstance(node, list):
            return [self.visit(x) for x in node]
        if not _is_node(node):
            return node
        fn = getattr(self, "visit_" + type(node).__name__, None)
        if fn is not None:
            return fn(node)
        return self.generic(node)

    def generic(self, node):
        changes = {}
        for name in _walk_fields(type(node)):
            old = getattr(node, name)
            new = self.visit(old)
            if new is not old:
                changes[name] = new
        if not changes:
            return node
        if isinstance(node, BufferLoad) and "indices" in changes:
            return BufferLoad(node.buffer, changes["indices"], node.dtype)
        return dataclasses.replace(node, **changes)


class Visitor:
    def visit(self, node):
        if isinstance(node, (tuple, list)):
            for x in node:
                self.visit(x)
            return
        if not _is_node(node):
            return
        fn = getattr(self, "visit_" + type(node).__name__, None)
        if fn is not None:
            fn(node)
        else:
            self.generic(node)

    def generic(self, node):
        for name in _walk_fields(type(node)):
            self.visit(getattr(node, name))


class Substitute(Mutator):
    """Replace variables by expressions."""

    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit_Var(self, v: Var):
        return self.mapping.get(v, v)


def substitute(node, mapping: dict):
    if not mapping:
        return node
    return Substitute(mapping).visit(node)


def collect(node, pred) -> list:
    """All sub-nodes (statements and expressions) satisfying `pred`, in visit order."""
    out = []

    class _C(Visitor):
        def visit(self, n):
            if _is_node(n) and pred(n):
                out.append(n)
            super().visit(n)

    _C().visit(node)
    return out


def buffers_used(node) -> list[Buffer]:
    """Buffers referenced anywhere under `node`, first-use order, no duplicates."""
    seen, out = set(), []

    class _B(Visitor):
        def visit(self, n):
            if isinstance(n, Buffer):
                if n.uid not in seen:
                    seen.add(n.uid)
                    out.append(n)
                return
            super().visit(n)

    _B().visit(node)
    return out


def map_stmts(func: PrimFunc, mutator: Mutator) -> PrimFunc:
    body = mutator.visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)


__all__ = ["Mutator", "Visitor", "substitute", "collect", "buffers_used", "map_stmts", "Expr"]


class ReplaceBuffers(Mutator):
    """Every reference to a buffer whose uid is in `mapping` (loads, stores, regions, tile ops,
    allocations) becomes the mapped buffer."""

    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit(self, node):
        if isinstance(node, Buffer):
            return self.mapping.get(node.uid, node)
        return super().visit(node)

    def visit_BufferLoad(self, e: BufferLoad):
        b = self.mapping.get(e.buffer.uid, e.buffer)
        return BufferLoad(b, tuple(self.visit(i) for i in e.indices), e.dtype)
