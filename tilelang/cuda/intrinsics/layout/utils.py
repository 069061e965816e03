"""Small lane-map helpers named as the public TileLang names them (ldmatrix offsets, store map,
micro tile sizes), written over mma_layout's maps."""
from __future__ import annotations

from .mma_layout import operand_bits, mma_store_coords


def get_ldmatrix_offset(matrix, row_idx, col_idx, stride=None, dtype="float16", transposed=False):
    """(row, col) that lane `row_idx` reads at element `col_idx` of its ldmatrix row, for a 16 x 16
    (16-bit), 16 x 32 (8-bit) or 16 x 8 (32-bit) operand slab.

    16-bit: `transposed` selects the map of a .trans load (A stored K x M, or B stored N x K);
    8- and 32-bit: only A not transposed and B transposed (K contiguous) exist. `stride` is
    accepted for compatibility and unused."""
    if matrix not in ("A", "B"):
        raise ValueError(f"get_ldmatrix_offset: matrix must be 'A' or 'B', got {matrix!r}")
    bits = operand_bits(dtype)
    lane = row_idx
    if bits == 16:
        if transposed:
            return 8 * (lane // 16) + lane % 8, 8 * ((lane % 16) // 8) + col_idx % 8
        return lane % 16, 8 * (lane // 16) + col_idx % 8
    if bits not in (8, 32):
        raise ValueError(f"get_ldmatrix_offset: unsupported dtype {dtype}")
    chunk = 128 // bits  # elements in one 16-byte ldmatrix row
    if matrix == "B" and transposed:
        return 8 * (lane // 16) + lane % 8, chunk * ((lane % 16) // 8) + col_idx % chunk
    if matrix == "A" and not transposed:
        return lane % 16, chunk * (lane // 16) + col_idx % chunk
    raise ValueError("ldmatrix serves 8- and 32-bit operands only with K contiguous (A not transposed, B transposed)")


def mma_store_index_map(thread_id, local_id):
    """(row, col) in a 16 x 16 accumulator tile of element `local_id` (0..7) of lane `thread_id`."""
    return mma_store_coords(thread_id, local_id, 16)


def get_mma_micro_size(dtype):
    """(x, y, k) of the emitter's micro tile: 16 x 16, k = 32 for 8-bit inputs, else 16."""
    k = 32 if str(dtype) in ("int8", "uint8", "float8_e4m3", "float8_e4m3fn", "float8_e5m2") else 16
    return 16, 16, k
