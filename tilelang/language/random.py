"""Per-thread random numbers: Philox-4x32-10 (curand's numbering), XORWOW and MRG32k3a streams.

`T.rng_init(seed, subsequence, offset, generator)` starts this thread's stream at element `offset`
of subsequence `subsequence` (by default the thread's own: tx + bx * threads); each `T.rng_rand()`
returns the next uint32. A kernel uses one generator (the state type is per kernel).

Philox ("curandStatePhilox4_32_10_t", the default): element e of subsequence s is word e % 4 of
Philox4x32-10(key = seed, counter = (e // 4) + s * 2^64), so values match curand_init/curand
(and Triton's randint4x for subsequence 0).

XORWOW ("curandStateXORWOW_t") and MRG32k3a ("curandStateMRG32k3a_t") run the published
recurrences (Marsaglia 2003, "Xorshift RNGs": five xorshift words plus the Weyl counter
d += 362437, output x4 + d; L'Ecuyer 1999: p1 = 1403580 s1[1] - 810728 s1[0] mod
m1 = 4294967087, p2 = 527612 s2[2] - 1370589 s2[0] mod m2 = 4294944443, output
z = (p1 - p2) mod m1 taken in [1, m1] as the uint32). Their seeding is ours, NOT curand's, so
the streams are not curand's bit for bit: with mix(x) the splitmix64 output function of
x + 0x9E3779B97F4A7C15 and t = mix(mix(seed) ^ subsequence), seeding word i is
mix(t + i * 0x9E3779B97F4A7C15). XORWOW takes words 0..2 as (x0 | x1 << 32, x2 | x3 << 32,
x4 | d << 32); MRG32k3a takes s1[i] = word i mod m1 and s2[i] = word 3 + i mod m2 (an all-zero
component gets its first word set to 1). `offset` then skips that many elements at init, in time
logarithmic in the offset: XORWOW applies x^offset mod its characteristic polynomial to the
xorshift words (stepping offsets below 1024) and advances d, MRG32k3a multiplies by the step
matrices raised to the offset (square-and-multiply).

`T.rng_rand_float(bit, dist)` maps the next words with curand's formulas, for every generator:
uniform float32 u * 2^-32 + 2^-33 (one word), uniform float64 (x ^ y << 21) * 2^-53 + 2^-54
(two words), normal by Box-Muller from two words (float32: sqrt(-2 ln u1) * (sin, cos)(2 pi u2))
or four (float64: sin/cos of pi * v2), the second value of each pair kept for the next call.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir import stmt as S
from .kernel import get_block_binding, get_thread_binding
from .thread import EMITTED


# generator name -> the index codegen/intrinsics.RNG_STATES gives a state type
GENERATORS = {"curandStatePhilox4_32_10_t": 0, "philox": 0, "curandStateXORWOW_t": 1, "xorwow": 1,
              "curandStateMRG32k3a_t": 2, "mrg32k3a": 2}


def rng_init(seed, seq=None, off=0, generator="curandStatePhilox4_32_10_t"):
    """Start this thread's random stream (see the module docstring for the numbering).

    seq=None gives each thread of the grid its own subsequence, tx + bx * (threads along x).
    generator: "curandStatePhilox4_32_10_t" (default; curand's Philox stream bit for bit),
    "curandStateXORWOW_t" or "curandStateMRG32k3a_t" (the published recurrences with our own
    seeding: their streams are NOT curand's bit for bit; module docstring).
    Example: `T.rng_init(seed, generator="curandStateMRG32k3a_t")`, then `x[i] = T.rng_rand_float()`.
    """
    k = B.in_kernel("T.rng_init")
    gen = GENERATORS.get(generator) if isinstance(generator, str) else None
    if gen is None:
        raise DSLTypeError("T.rng_init: generator must be one of 'curandStatePhilox4_32_10_t', "
                           f"'curandStateXORWOW_t', 'curandStateMRG32k3a_t', got {generator!r}")
    if seq is None:
        seq = get_thread_binding(0) + get_block_binding(0) * k.threads[0]
    args = tuple(E.cast(dt.uint64, E.as_expr(a)) for a in (seed, seq, off)) + (E.as_expr(gen),)
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
