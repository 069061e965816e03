"""The 32-, 64- and 128-byte XOR swizzles of shared tiles, as the public TileLang builds them:
`make_quarter_bank_swizzled_layout`, `make_half_bank_swizzled_layout`,
`make_full_bank_swizzled_layout`; and `make_wgmma_swizzled_layout`, which picks the widest of
them that the tile's row divides (a row-major tile when none does).

Each takes a shared buffer (rank >= 2, constant last two dims) or `(rows, cols, element_bits)`
and gives a Layout of the same logical shape whose physical index is

    (*leading, col_tile, row_tile, offset)        W = swizzle bytes / 16 chunks per row

a stack of tiles of 8 rows x W 16-byte chunks (col_tile = chunk // W, row_tile = row // 8), each
tile stored row-major with the chunk index XOR-ed by bits of the row (s = row % 8, c = chunk % W):

    128 B (W = 8):  c' = c ^ s            64 B (W = 4):  c' = c ^ (s // 2)
     32 B (W = 2):  c' = c ^ (s // 4)     offset = (s * W + c') * vec + col % vec

with vec = 128 / element_bits elements per chunk. When a row is exactly one swizzle wide the flat
offsets equal those of `make_swizzled_layout`, which the CUDA lowering indexes through
`tl::swizzle_offset`; wider rows keep whole tiles contiguous (the TMA swizzle-mode order).
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError
from .layout import Layout

__all__ = [
    "bank_swizzle_layout",
    "make_full_bank_swizzled_layout",
    "make_half_bank_swizzled_layout",
    "make_quarter_bank_swizzled_layout",
    "make_wgmma_swizzled_layout",
]


def _element_bits(value, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        bits = value
    else:
        bits = dt.as_dtype(str(value)).bits
    if bits not in (8, 16, 32, 64):
        raise DSLTypeError(f"{what}: element size must be 8, 16, 32 or 64 bits, got {value!r}")
    return bits


def _shape_of(args, what: str):
    """-> (leading dims, rows, cols, element bits) from a buffer or (rows, cols, element_bits)."""
    if len(args) == 1:
        buf = args[0]
        buf = getattr(buf, "buffer", buf)  # a BufferRegion / BufferLoad names its buffer
        shape = getattr(buf, "static_shape", None) or getattr(buf, "shape", None)
        if shape is None or not hasattr(buf, "dtype"):
            raise DSLTypeError(f"{what} takes a shared buffer or (rows, cols, element_bits), got {buf!r}")
        shape = tuple(shape)
        if len(shape) < 2:
            raise DSLTypeError(f"{what}: the buffer must have rank >= 2, got shape {shape}")
        try:
            rows, cols = int(shape[-2]), int(shape[-1])
        except TypeError:
            raise DSLTypeError(f"{what}: the last two dims of {getattr(buf, 'name', buf)} must be "
                               f"constant, got {shape}") from None
        return tuple(shape[:-2]), rows, cols, _element_bits(buf.dtype, what)
    if len(args) == 3:
        rows, cols, bits = args
        return (), int(rows), int(cols), _element_bits(bits, what)
    raise DSLTypeError(f"{what} takes a shared buffer or (rows, cols, element_bits), got {len(args)} arguments")


def bank_swizzle_layout(swizzle_bytes: int, *args, what: str = "bank swizzle") -> Layout:
    """The layout described in the module docstring for a 32/64/128-byte swizzle."""
    chunks = {32: 2, 64: 4, 128: 8}.get(swizzle_bytes)
    if chunks is None:
        raise DSLTypeError(f"{what}: swizzle width must be 32, 64 or 128 bytes, got {swizzle_bytes}")
    leading, rows, cols, bits = _shape_of(args, what)
    vec = 128 // bits
    if rows != 4 and rows % 8:
        raise DSLTypeError(f"{what}: the tile's rows ({rows}) must be a multiple of 8 (or exactly 4)")
    if cols % (vec * chunks):
        raise DSLTypeError(f"{what}: the tile's columns ({cols}) must be a multiple of {vec * chunks} "
                           f"({swizzle_bytes} bytes of {bits}-bit elements)")
    shift = {2: 2, 4: 1, 8: 0}[chunks]  # s >> shift selects the XOR bits

    def fwd(*idx):
        i, j = idx[-2], idx[-1]
        s, chunk = i % 8, j // vec
        c = (chunk % chunks) ^ (s // (1 << shift))
        return (*idx[:-2], chunk // chunks, i // 8, (s * chunks + c) * vec + j % vec)

    return Layout((*leading, rows, cols), fwd)


def make_full_bank_swizzled_layout(*args) -> Layout:
    """128-byte swizzle (3 XOR bits): `make_full_bank_swizzled_layout(buf)` or `(rows, cols, bits)`."""
    return bank_swizzle_layout(128, *args, what="make_full_bank_swizzled_layout")


def make_half_bank_swizzled_layout(*args) -> Layout:
    """64-byte swizzle (2 XOR bits): `make_half_bank_swizzled_layout(buf)` or `(rows, cols, bits)`."""
    return bank_swizzle_layout(64, *args, what="make_half_bank_swizzled_layout")


def make_quarter_bank_swizzled_layout(*args) -> Layout:
    """32-byte swizzle (1 XOR bit): `make_quarter_bank_swizzled_layout(buf)` or `(rows, cols, bits)`."""
    return bank_swizzle_layout(32, *args, what="make_quarter_bank_swizzled_layout")


def make_wgmma_swizzled_layout(buffer, continuity=None, k_major: bool = True) -> Layout:
    """The swizzle a wgmma operand tile is stored in: rows a multiple of 8 take the widest of the
    128 / 64 / 32-byte swizzles whose width divides the row; otherwise (or when none divides) the
    tile stays row-major, which needs rows of whole 16-byte chunks. `continuity` (elements
    contiguous along the row, default the row length) and `k_major` matter for 64-bit elements
    only, whose K-major / MN-major tiles (continuity a multiple of 16) take dedicated float64
    layouts that are not implemented here (DSLTypeError)."""
    from .fixed_layouts import make_linear_layout

    what = "make_wgmma_swizzled_layout"
    leading, rows, cols, bits = _shape_of((buffer,), what)
    cont = cols if continuity is None else int(continuity)
    if bits == 64:
        if cont % 16 == 0:
            raise DSLTypeError(f"{what}: the float64 {'K' if k_major else 'MN'}-major wgmma layout "
                               f"(continuity {cont}, a multiple of 16) is not implemented")
        if rows % 8:
            return make_linear_layout((*leading, rows, cols))
        return bank_swizzle_layout(32, buffer, what=what)
    vec = 128 // bits
    if rows % 8 == 0:
        for nbytes, chunks in ((128, 8), (64, 4), (32, 2)):
            if cols % (vec * chunks) == 0:
                return bank_swizzle_layout(nbytes, buffer, what=what)
    if cols % vec:
        raise DSLTypeError(f"{what}: a tile of {rows} x {cols} {bits}-bit elements has rows that are not "
                           f"whole 16-byte chunks; no wgmma layout holds it")
    return make_linear_layout((*leading, rows, cols))
