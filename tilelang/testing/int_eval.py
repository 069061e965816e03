"""Reference values of integer index expressions, for tests of the passes that rewrite them.

Takes an IR integer expression (Const, Var, Binary) and values for its Vars; gives its value with
the IR's meaning: `//` and `%` floor (Python's own), `>>` arithmetic, `&` / `|` two's complement."""
from __future__ import annotations

import operator

from ..ir import expr as E

_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod,
        ">>": operator.rshift, "<<": operator.lshift, "&": operator.and_, "|": operator.or_, "^": operator.xor}


def int_value(e, env: dict) -> int:
    """e's value for the Vars named in env."""
    if isinstance(e, E.Const):
        return int(e.value)
    if isinstance(e, E.Var):
        return env[e.name]
    return _OPS[e.op](int_value(e.a, env), int_value(e.b, env))
