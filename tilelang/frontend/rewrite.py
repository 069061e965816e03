"""AST rewrite applied to kernel source before evaluation.

Python cannot overload `==`, `and`, `or`, `not` or `a if c else b` on IR values, so
they become calls to helpers that fall back to plain Python semantics (with
short-circuiting) when no operand is an IR expression.
"""
from __future__ import annotations

import ast

_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
        ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}


def _call(name: str, *args) -> ast.Call:
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


def _thunk(node: ast.expr) -> ast.Lambda:
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                      body=node)


class Rewriter(ast.NodeTransformer):
    def visit_Compare(self, node: ast.Compare):
        self.generic_visit(node)
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            parts.append(_call("__tl_cmp", ast.Constant(_CMP[type(op)]), left, right))
            left = right
        out = parts[-1]
        for p in reversed(parts[:-1]):
            out = _call("__tl_and", p, _thunk(out))
        return ast.copy_location(out, node)

    def visit_BoolOp(self, node: ast.BoolOp):
        self.generic_visit(node)
        fn = "__tl_and" if isinstance(node.op, ast.And) else "__tl_or"
        out = node.values[-1]
        for v in reversed(node.values[:-1]):
            out = _call(fn, v, _thunk(out))
        return ast.copy_location(out, node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call("__tl_not", node.operand), node)
        return node

    def visit_IfExp(self, node: ast.IfExp):
        self.generic_visit(node)
        out = _call("__tl_select", node.test, _thunk(node.body), _thunk(node.orelse))
        return ast.copy_location(out, node)


def helpers() -> dict:
    from ..ir import expr as E
    from ..ir.buffer import Buffer

    def scalar(x):
        if isinstance(x, Buffer) and x.scope == "local.var":
            return x.as_load()
        return x

    def tl_and(a, thunk):
        a = scalar(a)
        if not isinstance(a, E.Expr) and not a:
            return a
        return E.logical_and(a, scalar(thunk()))

    def tl_or(a, thunk):
        a = scalar(a)
        if not isinstance(a, E.Expr) and a:
            return a
        return E.logical_or(a, scalar(thunk()))

    def tl_select(c, ta, tb):
        c = scalar(c)
        if not isinstance(c, E.Expr):
            return ta() if c else tb()
        return E.select(c, scalar(ta()), scalar(tb()))

    return {
        "__tl_cmp": lambda op, a, b: E.compare(op, scalar(a), scalar(b)),
        "__tl_and": tl_and,
        "__tl_or": tl_or,
        "__tl_not": lambda a: E.logical_not(scalar(a)),
        "__tl_select": tl_select,
    }
