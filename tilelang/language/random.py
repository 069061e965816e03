"""Per-thread random numbers: Philox-4x32-10 streams with curand's numbering.

`T.rng_init(seed, subsequence, offset)` starts this thread's stream at element `offset` of
subsequence `subsequence`; each `T.rng_rand()` returns the next uint32. Element e of
subsequence s is word e % 4 of Philox4x32-10(key = seed, counter = (e // 4) + s * 2^64),
so values match curand_init/curand (and Triton's randint4x for subsequence 0).
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir import stmt as S
from .thread import EMITTED


def rng_init(seed, seq=0, off=0, generator="curandStatePhilox4_32_10_t"):
    """Start this thread's random stream (see the module docstring for the numbering)."""
    B.in_kernel("T.rng_init")
    if generator not in ("curandStatePhilox4_32_10_t", "philox"):
        raise DSLTypeError(f"T.rng_init: only the Philox4x32-10 generator is supported, got {generator!r}")
    args = tuple(E.cast(dt.uint64, E.as_expr(a)) for a in (seed, seq, off))
    B.current().emit(S.Evaluate(E.Call("tl_rng_init", args, dt.int32)))
    return EMITTED


def rng_rand():
    """The next uint32 of this thread's stream (after T.rng_init)."""
    B.in_kernel("T.rng_rand")
    return E.Call("tl_rng_rand", (), dt.uint32)


def rng_rand_float():
    """The next value of the stream as a float32 in (0, 1] (curand_uniform's mapping)."""
    B.in_kernel("T.rng_rand_float")
    return E.Call("tl_rng_rand_float", (), dt.float32)
