"""A kernel function's source as the parser reads it: its AST (rewritten), file and line offsets.

Takes a Python function; gives `SourceInfo.of(fn)`, cached per code object, so the
decorator's look at the body (is it an eager kernel?) and the later parse share one read.
Kept apart from the parser so that `@tilelang.jit` can look at a function without
importing the parser and the IR it builds.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

from ..errors import DSLSyntaxError
from .rewrite import Rewriter


class SourceInfo:
    """A function's AST (rewritten), file and line offsets; cached per function object."""

    _cache: dict = {}

    def __init__(self, fn):
        try:
            lines, start = inspect.getsourcelines(fn)
            self.file = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as e:
            raise DSLSyntaxError(f"cannot read the source of {fn.__name__!r} ({e}); kernels must be "
                                 "defined in a file, not typed at an interactive prompt") from None
        text = "".join(lines)
        dedented = textwrap.dedent(text)
        self.indent = len(text.split("\n", 1)[0]) - len(dedented.split("\n", 1)[0])
        tree = ast.parse(dedented)
        ast.increment_lineno(tree, start - 1)
        self.node: ast.FunctionDef = Rewriter().visit(tree).body[0]
        ast.fix_missing_locations(self.node)
        self.codes: dict = {}

    @classmethod
    def of(cls, fn) -> "SourceInfo":
        key = fn.__code__
        src = cls._cache.get(key)
        if src is None:
            src = cls._cache[key] = SourceInfo(fn)
        return src
