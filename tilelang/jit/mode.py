"""Which mode a `@tilelang.jit` function is in: an eager kernel body or a lazy factory.

Takes the decorated function; gives `is_eager(fn)`, decided from its source (the AST the
parser will read, shared through `SourceInfo`). The decorator asks this of every function,
so this module imports no parser and no IR: a factory whose kernels come from the kernel
cache never needs them.
"""
from __future__ import annotations

import ast

from ..errors import DSLSyntaxError
from ..frontend.source import SourceInfo


def is_eager(fn) -> bool:
    """Eager iff the function's own body is kernel code: a `with T.Kernel(...)`, T.const/T.empty,
    or an `X: T.Tensor(...)` declaration. Anything else (a nested @T.prim_func, or a call to a
    helper that builds one) is a lazy factory.
    """
    try:
        node = SourceInfo.of(fn).node
    except DSLSyntaxError:
        return False
    lang = {n for n, v in fn.__globals__.items() if getattr(v, "__name__", None) == "tilelang.language"} or {"T"}
    for st in _own_nodes(node):
        if isinstance(st, ast.withitem) and _calls(st.context_expr, lang, "Kernel"):
            return True
        if isinstance(st, ast.Call) and _calls(st, lang, "const", "empty"):
            return True
        if isinstance(st, ast.AnnAssign) and st.value is None and _calls(st.annotation, lang, "Tensor"):
            return True
    return False


def _own_nodes(node):
    """Nodes of `node`'s body, not descending into nested functions or classes."""
    stack = list(node.body)
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(n))


def _calls(expr, lang: set, *names) -> bool:
    """`T.<name>(...)` or `T.<name>[...]`, where T is any name bound to tilelang.language."""
    if isinstance(expr, (ast.Call, ast.Subscript)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return (isinstance(expr, ast.Attribute) and expr.attr in names and isinstance(expr.value, ast.Name)
            and expr.value.id in lang)
