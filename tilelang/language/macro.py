"""`@T.macro`: a Python function whose body is inlined into the calling kernel."""
from __future__ import annotations

import functools
import inspect

from ..frontend import builder as B


class Macro:
    def __init__(self, fn):
        self.fn = fn
        self.sig = inspect.signature(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        from ..frontend.parser import Parser, ParsedReturn, closure_scope

        b = B.current(f"macro {self.fn.__name__}")
        bound = self.sig.bind(*args, **kwargs)
        bound.apply_defaults()
        scope = closure_scope(self.fn)
        scope.update(bound.arguments)
        parser = Parser(self.fn, b, scope)
        depth = len(b.frames)
        try:
            parser.body(parser.src.node.body)
        except ParsedReturn as r:
            while len(b.frames) > depth:  # a return inside a nested block: fold the open frames
                inner = b.pop()
                b.emit(inner)
            return r.value
        return None


def macro(func=None, *, hygienic=True):
    """Mark a helper whose T.* statements are inlined where it is called inside a kernel.

    Example::

        @T.macro
        def softmax_rescale(acc, scale): ...
    """
    if func is None:
        return lambda f: Macro(f)
    return Macro(func)
