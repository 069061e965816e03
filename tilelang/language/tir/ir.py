"""`tilelang.language.tir.ir`: the public TileLang's module path of T.cast (with its rounding
modes) and of the TIR node names it re-exports, for programs and tests that import them from
there. The definitions live in language/math.py and tvm/tirx.py.
"""
from __future__ import annotations

from ...tvm.tirx import Shuffle
from ..math import CAST_ROUNDING_MODES, Cast, cast

# the round= values T.cast accepts, as the public module names them
_VALID_CAST_ROUNDING_MODES = frozenset(CAST_ROUNDING_MODES)

__all__ = ["Cast", "Shuffle", "cast"]
