"""Per-thread random numbers: Philox-4x32-10 streams with curand's numbering.

`T.rng_init(seed, subsequence, offset)` starts this thread's stream at element `offset` of
subsequence `subsequence` (by default the thread's own: tx + bx * threads); each `T.rng_rand()`
returns the next uint32. Element e of subsequence s is word e % 4 of
Philox4x32-10(key = seed, counter = (e // 4) + s * 2^64), so values match curand_init/curand
(and Triton's randint4x for subsequence 0). `T.rng_rand_float(bit, dist)` maps the next words
with curand's formulas: uniform float32 u * 2^-32 + 2^-33 (one word), uniform float64
(x ^ y << 21) * 2^-53 + 2^-54 (two words), normal by Box-Muller from two words (float32:
sqrt(-2 ln u1) * (sin, cos)(2 pi u2)) or four (float64: sin/cos of pi * v2), the second value
of each pair kept for the next call.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir import stmt as S
from .kernel import get_block_binding, get_thread_binding
from .thread import EMITTED


def rng_init(seed, seq=None, off=0, generator="curandStatePhilox4_32_10_t"):
    """Start this thread's random stream (see the module docstring for the numbering).

    seq=None gives each thread of the grid its own subsequence, tx + bx * (threads along x).
    Example: `T.rng_init(seed)`, then `x[i] = T.rng_rand_float()`.
    """
    k = B.in_kernel("T.rng_init")
    if generator not in ("curandStatePhilox4_32_10_t", "philox"):
        raise DSLTypeError(f"T.rng_init: only the Philox4x32-10 generator is supported, got {generator!r}")
    if seq is None:
        seq = get_thread_binding(0) + get_block_binding(0) * k.threads[0]
    args = tuple(E.cast(dt.uint64, E.as_expr(a)) for a in (seed, seq, off))
    B.current().emit(S.Evaluate(E.Call("tl_rng_init", args, dt.int32)))
    return EMITTED


def rng_rand():
    """The next uint32 of this thread's stream (after T.rng_init)."""
    B.in_kernel("T.rng_rand")
    return E.Call("tl_rng_rand", (), dt.uint32)


_FLOAT_OPS = {(32, "uniform"): "tl_rng_rand_float", (64, "uniform"): "tl_rng_rand_double",
              (32, "normal"): "tl_rng_normal", (64, "normal"): "tl_rng_normal_double"}


def rng_rand_float(bit=32, dist="uniform"):
    """The next value of the stream as a float: `bit` 32 or 64, `dist` "uniform" (in (0, 1])
    or "normal" (mean 0, variance 1); curand's mappings (module docstring).

    Example: `noise[i] = T.rng_rand_float(dist="normal")`.
    """
    B.in_kernel("T.rng_rand_float")
    op = _FLOAT_OPS.get((bit, dist))
    if op is None:
        raise DSLTypeError(f"T.rng_rand_float(bit, dist): bit must be 32 or 64 and dist 'uniform' or 'normal', "
                           f"got bit={bit!r}, dist={dist!r}")
    return E.Call(op, (), dt.float32 if bit == 32 else dt.float64)
