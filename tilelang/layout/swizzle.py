"""Swizzled shared-memory layouts, and the bank arithmetic that justifies them.

Shared memory has 32 banks of 4 bytes; one 128-byte line covers all of them once.
A 16-byte access (ldmatrix row, `uint4` store) occupies 4 consecutive banks, so a
line holds 8 such "bank groups"; 8 threads issuing 16-byte accesses together are
conflict-free exactly when they hit 8 different groups.  Row-major tiles whose
rows are a multiple of 128 bytes put a column of chunks in one group; XOR-ing the
chunk index with bits of the row spreads it over all 8.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError
from .bank_swizzle import (  # noqa: F401 - the public module path of these names
    make_full_bank_swizzled_layout,
    make_half_bank_swizzled_layout,
    make_quarter_bank_swizzled_layout,
    make_wgmma_swizzled_layout,
)
from .fixed_layouts import (  # noqa: F401 - the public module path of these names
    make_fully_replicated_layout_fragment,
    make_gemm_fragment_8x8,
    make_gemm_fragment_8x8_transposed,
    make_linear_layout,
)
from .layout import Layout


def swizzle_phase(rows_bytes: int):
    """(period in rows, function row -> XOR mask) for rows of `rows_bytes`, or None.

    Mirrors `tl::swizzle_offset` in include/tl/gemm_sm80.h: kChunks = row bytes / 16;
    kChunks % 8 == 0 -> row % 8;  == 4 -> (row / 2) % 4;  == 2 -> (row / 4) % 2;  else none.
    """
    if rows_bytes % 16:
        return None
    chunks = rows_bytes // 16
    if chunks % 8 == 0:
        return lambda r: r % 8
    if chunks == 4:
        return lambda r: (r // 2) % 4
    if chunks == 2:
        return lambda r: (r // 4) % 2
    return None


def _dtype_bytes(value) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if value not in (1, 2, 4, 8):
            raise DSLTypeError(f"dtype_bytes must be 1, 2, 4 or 8, got {value}")
        return value
    return dt.as_dtype(value).bytes


def make_swizzled_layout(rows, cols=None, dtype_bytes=None) -> Layout:
    """The 16-byte-chunk XOR swizzle of a row-major (rows x cols) shared tile.

    `make_swizzled_layout(A_shared)` (a 2-d shared buffer) or
    `make_swizzled_layout(64, 32, 2)` (rows, cols, bytes per element or a dtype).
    Maps (row, col) -> (row, col') with the same shape; element offset is
    `row * cols + col'`, exactly what the device header's `swizzle_offset` computes:

        kPer = 16 / bytes elements per chunk, chunk = col / kPer, kChunks = cols / kPer
        col' = (chunk ^ f(row)) * kPer + col % kPer
        f(row) = row % 8 (kChunks % 8 == 0) | (row/2) % 4 (== 4) | (row/4) % 2 (== 2) | 0

    64 fp16 columns (128-byte rows), chunk index stored at each (row, logical chunk):

        row 0:  0 1 2 3 4 5 6 7        row 1:  1 0 3 2 5 4 7 6
        row 2:  2 3 0 1 6 7 4 5        row 7:  7 6 5 4 3 2 1 0

    Row widths of 16/32/64 bytes or a multiple of 128 bytes are conflict-free for
    ldmatrix and 16-byte stores; other widths (e.g. 96 bytes) are left unswizzled.
    """
    if cols is None:
        buf = rows
        shape = getattr(buf, "static_shape", None) or getattr(buf, "shape", None)
        if shape is None or len(shape) != 2:
            raise DSLTypeError(f"make_swizzled_layout takes a 2-d buffer or (rows, cols, dtype_bytes), "
                               f"got {buf!r}")
        rows, cols = (int(s) for s in shape)
        dtype_bytes = _dtype_bytes(buf.dtype if dtype_bytes is None else dtype_bytes)
    elif dtype_bytes is None:
        raise DSLTypeError("make_swizzled_layout(rows, cols, dtype_bytes): dtype_bytes is missing")
    else:
        dtype_bytes = _dtype_bytes(dtype_bytes)
    per = 16 // dtype_bytes if dtype_bytes <= 16 else 1
    phase = swizzle_phase(cols * dtype_bytes) if cols % per == 0 else None
    if phase is None:
        return Layout((rows, cols), lambda i, j: (i, j))
    return Layout((rows, cols), lambda i, j: (i, ((j // per) ^ phase(i)) * per + j % per))


def byte_offset(layout: Layout, row: int, col: int, dtype_bytes: int) -> int:
    """Byte offset of logical (row, col) in the row-major physical tile of `layout`."""
    prow, pcol = layout.map(row, col)
    return (prow * layout.shape[1] + pcol) * dtype_bytes


def bank_groups(offsets) -> list:
    """16-byte bank group (0..7 within a 128-byte line) of each byte offset."""
    return [(off // 16) % 8 for off in offsets]


def banks(offset: int, nbytes: int = 16) -> list:
    """The 4-byte banks (0..31) an access of `nbytes` at byte `offset` touches."""
    return [((offset + k) // 4) % 32 for k in range(0, nbytes, 4)]


def conflict_free(offsets, nbytes: int = 16) -> bool:
    """True when accesses of `nbytes` at `offsets` (one phase: <= 128 bytes in total) hit
    every bank at most once."""
    hit = [b for off in offsets for b in banks(off, nbytes)]
    return len(hit) == len(set(hit))


def ldmatrix_offsets(layout: Layout, row0: int, chunk: int, dtype_bytes: int) -> list:
    """Byte offsets of the 8 row addresses one ldmatrix 8x8 matrix reads: rows row0..row0+7,
    logical 16-byte chunk `chunk`."""
    per = 16 // dtype_bytes
    return [byte_offset(layout, row0 + r, chunk * per, dtype_bytes) for r in range(8)]


def vector_store_offsets(layout: Layout, first: int, dtype_bytes: int, threads: int = 8) -> list:
    """Byte offsets of 16-byte stores by `threads` consecutive threads in row-major chunk order:
    thread t writes logical chunk `first + t` of the tile (the usual coalesced copy mapping)."""
    per = 16 // dtype_bytes
    chunks_per_row = layout.shape[1] // per
    out = []
    for t in range(first, first + threads):
        r, c = divmod(t, chunks_per_row)
        out.append(byte_offset(layout, r, c * per, dtype_bytes))
    return out
