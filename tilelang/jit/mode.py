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


_TENSOR_TYPES = ("Tensor", "StridedTensor", "Buffer")


def is_eager(fn) -> bool:
    """Eager iff the function is kernel code rather than a factory of one:

    - its own body has a `with T.Kernel(...)`, T.const/T.empty, or an `X: T.Tensor(...)`
      declaration, or a signature parameter is annotated as a tensor (`A: T.Tensor(...)`);
    - or it can return nothing but None (no `return <value>`) and defines no @T.prim_func:
      such a function cannot be a factory (a body that only calls a @T.macro is one);
    - or its own body calls a @T.macro (`return copy_impl(A)`).

    Anything else (a nested @T.prim_func, or a call to a helper that builds one) is a lazy
    factory.
    """
    try:
        node = SourceInfo.of(fn).node
    except DSLSyntaxError:
        return False
    lang = {n for n, v in fn.__globals__.items() if getattr(v, "__name__", None) == "tilelang.language"} or {"T"}
    if any(_is_tensor_annotation(a, fn, lang) for a in node.args.args + node.args.kwonlyargs):
        return True
    returns_value = defines_prim_func = False
    for st in _own_nodes(node):
        if isinstance(st, ast.withitem) and _calls(st.context_expr, lang, "Kernel"):
            return True
        if isinstance(st, ast.Call) and _calls(st, lang, "const", "empty"):
            return True
        if isinstance(st, ast.AnnAssign) and st.value is None and _calls(st.annotation, lang, *_TENSOR_TYPES):
            return True
        if isinstance(st, ast.Call) and isinstance(st.func, ast.Name) and _is_macro(_lookup(fn, st.func.id)):
            return True
        if isinstance(st, ast.Return) and st.value is not None:
            returns_value = True
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _names_prim_func(d.func if isinstance(d, ast.Call) else d) for d in st.decorator_list):
            defines_prim_func = True
    return not returns_value and not defines_prim_func


def _names_prim_func(d) -> bool:
    """`@T.prim_func` / `@prim_func` (any module's `prim_func`, as a factory may import it by name)."""
    return (isinstance(d, ast.Attribute) and d.attr == "prim_func") or (isinstance(d, ast.Name) and d.id == "prim_func")


def _is_tensor_annotation(arg: ast.arg, fn, lang: set) -> bool:
    """A parameter annotated `T.Tensor(...)` / `T.Tensor[...]` (or a value Python evaluated to a tensor spec)."""
    if arg.annotation is None:
        return False
    if _calls(arg.annotation, lang, *_TENSOR_TYPES):
        return True
    ann = (getattr(fn, "__annotations__", None) or {}).get(arg.arg)
    return type(ann).__name__ == "TensorSpec"


def _lookup(fn, name: str):
    """What `name` is bound to where `fn` was defined (its closure, then its globals); None if unbound."""
    code = fn.__code__
    if name in code.co_freevars and fn.__closure__:
        try:
            return fn.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:  # an empty cell
            return None
    return fn.__globals__.get(name)


def _is_macro(obj) -> bool:
    """A `@T.macro` helper (told by its type's name: this module imports no language code)."""
    return type(obj).__name__ == "Macro" and type(obj).__module__.startswith("tilelang.")


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
