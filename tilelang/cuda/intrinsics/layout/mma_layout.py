"""Which lane holds which element of an mma.sync operand, where ldmatrix reads, and swizzles.

Every map works on ints (checks, plots) and on IR expressions (code generation). Lanes:
g = lane // 4, t = lane % 4. With `bits` the operand width, one 32-bit register packs
e = 32 // bits consecutive elements and the mma K is 256 // bits (16 for f16, 32 for int8,
8 for tf32). Slot s of a lane is register s // e, element s % e (low bits first):

    A (16 x K, row-major)   register r: row g + 8 (r % 2), cols e t .. e t + e-1, + K/2 for r >= 2
    B (K x 8, k x n)        register r: rows e t .. e t + e-1 (+ K/2 for r = 1), col g
    C (16 x 8)              slot s:      row g + 8 (s // 2), col 2 t + s % 2

These are the pictures of tilelang/layout/mma_layouts.py, written from the lane's side.
"""
from __future__ import annotations

from .... import dtypes as dt


def operand_bits(dtype) -> int:
    """Bit width of an mma operand dtype (tf32 counts as 32)."""
    return 32 if str(dtype) in ("tf32", "tfloat32") else dt.as_dtype(str(dtype)).bits


def mma_k(bits: int) -> int:
    """K of the m16n8 mma.sync shape for `bits`-wide inputs."""
    return 256 // bits


def mma_a_coords(lane, slot, bits: int = 16):
    """(row, k) in the 16 x K A tile of slot `slot` of `lane`."""
    e, k = 32 // bits, mma_k(bits)
    r, p = slot // e, slot % e
    return lane // 4 + 8 * (r % 2), (lane % 4) * e + p + (k // 2) * (r // 2)


def mma_b_coords(lane, slot, bits: int = 16):
    """(k, n) in the K x 8 B tile of slot `slot` of `lane`."""
    e, k = 32 // bits, mma_k(bits)
    r, p = slot // e, slot % e
    return (lane % 4) * e + p + (k // 2) * r, lane // 4


def mma_c_coords(lane, slot):
    """(row, col) in the 16 x 8 C tile of accumulator slot `slot` (0..3) of `lane`."""
    return lane // 4 + 8 * (slot // 2), (lane % 4) * 2 + slot % 2


def mma_store_coords(lane, local_id, n_dim: int = 16):
    """(row, col) in a 16 x n_dim accumulator tile (one or two m16n8 C tiles side by side)."""
    half, slot = (local_id // 4, local_id % 4) if n_dim == 16 else (0, local_id)
    row, col = mma_c_coords(lane, slot)
    return row, col + 8 * half


def ldmatrix_row(matrix: str, lane, bits: int, kmajor: bool):
    """Where lane `lane` points ldmatrix.x4 for a 16 x 16 (16-bit) / 16 x 32 (8-bit) operand slab.

    matrix "A" covers 16 rows of M; "B" covers 16 columns of N (two m16n8 B tiles). kmajor:
    the tile is stored with K contiguous (A as M x K, B as N x K), loaded without .trans;
    otherwise (16-bit only) stored with M / N contiguous and loaded with .trans. Returns the
    (row, col) of the row start in the tile's storage order. Matrices m = lane // 8 fill
    registers A: a0..a3, B: b0, b1 of the first N half, then b0, b1 of the second.
    """
    chunk = 128 // bits  # elements in one 16-byte ldmatrix row
    m, r = lane // 8, lane % 8
    if matrix == "A":
        # m: (rows +8 if m odd, k +chunk if m >= 2)
        if kmajor:
            return r + 8 * (m % 2), chunk * (m // 2)
        return r + 8 * (m // 2), 8 * (m % 2)  # (k, m) storage, .trans
    if kmajor:  # (n, k) storage: m -> (k +chunk if m odd, n +8 if m >= 2)
        return r + 8 * (m // 2), chunk * (m % 2)
    return r + 8 * (m % 2), 8 * (m // 2)  # (k, n) storage, .trans


def get_swizzle_layout(row_idx, col_idx, row_size, dtype, swizzle_bytes=None):
    """XOR swizzle of a shared tile's row: -> (col_tile, row, swizzled col).

    The row (row_size elements) is cut into tiles of swizzle_bytes (default min(128, row
    bytes)); inside a tile, 16-byte chunk c of row r moves to chunk c ^ ((r % 8) // (8 / n)),
    n = chunks per tile. ldmatrix's 8 row reads of one matrix then hit 8 different bank groups.
    """
    bits = operand_bits(dtype)
    row_bytes = bits * row_size // 8
    if row_bytes % 32:
        raise ValueError(f"get_swizzle_layout: rows of {row_bytes} bytes; the swizzle needs a multiple of 32")
    swizzle_bytes = min(128, row_bytes) if swizzle_bytes is None else int(swizzle_bytes)
    per_chunk = 128 // bits
    chunks = swizzle_bytes // 16
    chunk, inner = col_idx // per_chunk, col_idx % per_chunk
    phase = (row_idx % 8) // (8 // chunks)
    return chunk // chunks, row_idx, ((chunk % chunks) ^ phase) * per_chunk + inner


def make_mma_swizzle_layout(shared_buf, is_smooth: bool = False):
    """The get_swizzle_layout of a shared tile's last two dims as a T.Layout (row-major when the
    rows are not a multiple of 64 bytes, or with is_smooth)."""
    from ....layout import Layout

    shape = tuple(shared_buf.shape)
    bits = operand_bits(shared_buf.dtype)
    if is_smooth or (shape[-1] * bits) % 512:
        return Layout.from_fn(shape, lambda *idx: idx)

    def fn(*idx):
        return (*idx[:-2], *get_swizzle_layout(idx[-2], idx[-1], shape[-1], shared_buf.dtype))

    return Layout.from_fn(shape, fn)


# ------------------------------------------------ shared-tile (i, j) -> (lane, slot) maps
# The inverses of mma_a_coords / mma_b_coords, named as the public TileLang names them:
# shared_16x{K}_to_mma_32x{S}_layout_{sr,rs}_{a,b}. "sr": the tile is indexed (spatial, reduction),
# i.e. A as (m, k) and B as (n, k); "rs": (reduction, spatial). S = K / 2 slots per lane.

def _sr_a(i, j, bits: int):
    """(lane, slot) holding A[m = i, k = j] of a 16 x K operand."""
    e, half = 32 // bits, mma_k(bits) // 2
    lane = 4 * (i % 8) + (j % half) // e
    return lane, e * (2 * (j // half) + i // 8) + j % e


def _sr_b(i, j, bits: int):
    """(lane, slot) holding B[n = i, k = j] of two side-by-side K x 8 operands (16 columns of N):
    the first n8 tile's slots come first."""
    e, half = 32 // bits, mma_k(bits) // 2
    lane = 4 * (i % 8) + (j % half) // e
    return lane, 2 * e * (i // 8) + e * (j // half) + j % e


def shared_16x8_to_mma_32x4_layout_sr_a(i, j):
    """32-bit (tf32) A, 16 x 8 (m, k) -> (lane, slot 0..3)."""
    return _sr_a(i, j, 32)


def shared_16x8_to_mma_32x4_layout_sr_b(i, j):
    """32-bit (tf32) B, 16 x 8 (n, k) -> (lane, slot 0..3)."""
    return _sr_b(i, j, 32)


def shared_16x8_to_mma_32x4_layout_rs_a(i, j):
    """32-bit A indexed (k, m)."""
    return _sr_a(j, i, 32)


def shared_16x8_to_mma_32x4_layout_rs_b(i, j):
    """32-bit B indexed (k, n)."""
    return _sr_b(j, i, 32)


def shared_16x16_to_mma_32x8_layout_sr_a(i, j):
    """16-bit A, 16 x 16 (m, k) -> (lane, slot 0..7)."""
    return _sr_a(i, j, 16)


def shared_16x16_to_mma_32x8_layout_sr_b(i, j):
    """16-bit B, 16 x 16 (n, k) -> (lane, slot 0..7)."""
    return _sr_b(i, j, 16)


def shared_16x16_to_mma_32x8_layout_rs_a(i, j):
    return _sr_a(j, i, 16)


def shared_16x16_to_mma_32x8_layout_rs_b(i, j):
    return _sr_b(j, i, 16)


def shared_16x32_to_mma_32x16_layout_sr_a(i, j):
    """8-bit A, 16 x 32 (m, k) -> (lane, slot 0..15)."""
    return _sr_a(i, j, 8)


def shared_16x32_to_mma_32x16_layout_sr_b(i, j):
    """8-bit B, 16 x 32 (n, k) -> (lane, slot 0..15)."""
    return _sr_b(i, j, 8)


def shared_16x32_to_mma_32x16_layout_rs_a(i, j):
    return _sr_a(j, i, 8)


def shared_16x32_to_mma_32x16_layout_rs_b(i, j):
    return _sr_b(j, i, 8)
