"""Tensor-core (mma.sync) operand fragments of one warp, as `Fragment`s.

These are the layouts documented at the top of include/tl/mma.h.  Lane names:
g = lane // 4 (0..7), t = lane % 4 (0..3).  A 32-bit register packs 32/bits
elements, lowest index in the low bits, so register slot numbering is

    slot = register * elements_per_register + position inside the register.

Pictures below show `lane:slot` for a few rows (r) and columns (c) of the tile;
tests/layout check that each picture is exactly what the fragment computes.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError
from .fragment_layout import Fragment


def _frag(shape, thread, index) -> Fragment:
    return Fragment(shape, forward_thread_fn=thread, forward_index_fn=index)


# ----------------------------------------------------------------- m16n8k16 (f16 / bf16)

def mma_m16n8k16_a() -> Fragment:
    """A of m16n8k16 (16 x 16, row-major, 16-bit): a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..),
    a[2] = (g, 2t+8..2t+9), a[3] = (g+8, 2t+8..); 8 slots per lane.

             c0   c1   c2   c3   c8   c9
        r0: 0:0  0:1  1:0  1:1  0:4  0:5
        r1: 4:0  4:1  5:0  5:1  4:4  4:5
        r8: 0:2  0:3  1:2  1:3  0:6  0:7
    """
    return _frag((16, 16), lambda i, j: (i % 8) * 4 + (j % 8) // 2,
                 lambda i, j: ((i // 8) + (j // 8) * 2) * 2 + j % 2)


def mma_m16n8k16_b() -> Fragment:
    """B of m16n8k16 (16 x 8 as k x n, 16-bit): b[0] = (rows 2t..2t+1, col g),
    b[1] = (rows 2t+8..2t+9, col g); 4 slots per lane.

             c0   c1   c2   c3
        r0: 0:0  4:0  8:0 12:0
        r1: 0:1  4:1  8:1 12:1
        r2: 1:0  5:0  9:0 13:0
        r8: 0:2  4:2  8:2 12:2
        r9: 0:3  4:3  8:3 12:3
    """
    return _frag((16, 8), lambda k, n: n * 4 + (k % 8) // 2, lambda k, n: (k // 8) * 2 + k % 2)


def mma_m16n8_c() -> Fragment:
    """C / D of every m16n8 shape (16 x 8; f32, s32, or f16 packed in pairs):
    c[0..1] = (g, 2t..2t+1), c[2..3] = (g+8, 2t..2t+1); 4 slots per lane.

             c0   c1   c2   c3   c4   c5   c6   c7
        r0: 0:0  0:1  1:0  1:1  2:0  2:1  3:0  3:1
        r1: 4:0  4:1  5:0  5:1  6:0  6:1  7:0  7:1
        r8: 0:2  0:3  1:2  1:3  2:2  2:3  3:2  3:3
    """
    return _frag((16, 8), lambda i, j: (i % 8) * 4 + j // 2, lambda i, j: (i // 8) * 2 + j % 2)


mma_m16n8k16_c = mma_m16n8_c


# ----------------------------------------------------------------- m16n8k32 (int8 / fp8)

def mma_m16n8k32_a() -> Fragment:
    """A of m16n8k32 (16 x 32, 8-bit): a[0] = (g, 4t..4t+3), a[1] = (g+8, 4t..),
    a[2] = (g, 4t+16..4t+19), a[3] = (g+8, 4t+16..); 16 slots per lane.

              c0    c1    c3    c4   c16   c17
        r0:  0:0   0:1   0:3   1:0   0:8   0:9
        r1:  4:0   4:1   4:3   5:0   4:8   4:9
        r8:  0:4   0:5   0:7   1:4  0:12  0:13
    """
    return _frag((16, 32), lambda i, j: (i % 8) * 4 + (j % 16) // 4,
                 lambda i, j: ((i // 8) + (j // 16) * 2) * 4 + j % 4)


def mma_m16n8k32_b() -> Fragment:
    """B of m16n8k32 (32 x 8 as k x n, 8-bit): b[0] = (rows 4t..4t+3, col g),
    b[1] = (rows 4t+16..4t+19, col g); 8 slots per lane.

             c0   c1   c2
        r0: 0:0  4:0  8:0
        r1: 0:1  4:1  8:1
        r4: 1:0  5:0  9:0
       r16: 0:4  4:4  8:4
    """
    return _frag((32, 8), lambda k, n: n * 4 + (k % 16) // 4, lambda k, n: (k // 16) * 4 + k % 4)


mma_m16n8k32_c = mma_m16n8_c


# ----------------------------------------------------------------- m16n8k8 (tf32)

def mma_m16n8k8_a() -> Fragment:
    """A of m16n8k8 (16 x 8, tf32, one element per register): a[0] = (g, t),
    a[1] = (g+8, t), a[2] = (g, t+4), a[3] = (g+8, t+4); 4 slots per lane.

             c0   c1   c2   c3   c4   c5   c6   c7
        r0: 0:0  1:0  2:0  3:0  0:2  1:2  2:2  3:2
        r1: 4:0  5:0  6:0  7:0  4:2  5:2  6:2  7:2
        r8: 0:1  1:1  2:1  3:1  0:3  1:3  2:3  3:3
    """
    return _frag((16, 8), lambda i, j: (i % 8) * 4 + j % 4, lambda i, j: i // 8 + (j // 4) * 2)


def mma_m16n8k8_b() -> Fragment:
    """B of m16n8k8 (8 x 8 as k x n, tf32): b[0] = (t, g), b[1] = (t+4, g); 2 slots per lane.

             c0   c1   c2   c3   c4   c5   c6   c7
        r0: 0:0  4:0  8:0 12:0 16:0 20:0 24:0 28:0
        r1: 1:0  5:0  9:0 13:0 17:0 21:0 25:0 29:0
        r4: 0:1  4:1  8:1 12:1 16:1 20:1 24:1 28:1
    """
    return _frag((8, 8), lambda k, n: n * 4 + k % 4, lambda k, n: k // 4)


mma_m16n8k8_c = mma_m16n8_c

# Rows/columns each docstring picture shows (tests/layout redraws them and compares).
PICTURES = {
    mma_m16n8k16_a: ([0, 1, 8], [0, 1, 2, 3, 8, 9]),
    mma_m16n8k16_b: ([0, 1, 2, 8, 9], [0, 1, 2, 3]),
    mma_m16n8_c: ([0, 1, 8], list(range(8))),
    mma_m16n8k32_a: ([0, 1, 8], [0, 1, 3, 4, 16, 17]),
    mma_m16n8k32_b: ([0, 1, 4, 16], [0, 1, 2]),
    mma_m16n8k8_a: ([0, 1, 8], list(range(8))),
    mma_m16n8k8_b: ([0, 1, 4], list(range(8))),
}


def make_mma_fragment(operand: str, dtype="float16") -> Fragment:
    """The mma.sync fragment of `operand` ("A", "B" or "C") for input `dtype`:
    16-bit floats -> m16n8k16, 8-bit ints/floats -> m16n8k32, float32/tf32 -> m16n8k8."""
    op = operand.upper()
    if op not in ("A", "B", "C"):
        raise DSLTypeError(f"operand must be 'A', 'B' or 'C', got {operand!r}")
    if op == "C":
        return mma_m16n8_c()
    name = "tfloat32" if str(dtype) in ("tf32", "tfloat32") else dt.as_dtype(dtype).name
    bits = 32 if name == "tfloat32" else dt.as_dtype(name).bits
    table = {16: (mma_m16n8k16_a, mma_m16n8k16_b), 8: (mma_m16n8k32_a, mma_m16n8k32_b),
             32: (mma_m16n8k8_a, mma_m16n8k8_b)}
    if bits not in table or name in ("int32", "uint32", "int16", "uint16", "bool"):
        raise DSLTypeError(f"no mma.sync shape takes {name} inputs; use float16/bfloat16, int8/uint8/"
                           "float8, or float32 (tf32)")
    return table[bits][op == "B"]()
