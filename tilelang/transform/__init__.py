"""Passes over our IR (one module each); the public names programs import from here.

    from tilelang.transform import PassConfigKey, simplify_prim_func
"""
from .pass_config import PassConfigKey  # noqa: F401
from .simplify import apply_simplify, simplify_prim_func  # noqa: F401
