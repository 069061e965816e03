from .simplify import simplify, prove_lt, const_int  # noqa: F401
