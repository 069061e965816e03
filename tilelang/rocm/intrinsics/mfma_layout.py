"""Which lane of a 64-lane wavefront holds which element of an AMD MFMA operand, both ways.

MFMA operands are spread lane-major: a 16 x K A tile (m, k) puts row m on lanes m, m + 16,
m + 32, m + 48, each lane holding K / 4 consecutive k (its "local" values):

    A 16xK   (m, k)  -> lane m + 16 (k // (K/4)),  local k % (K/4)      K = 4, 16, 32, 64
    B Kx16   (k, n)  -> lane n + 16 (k // (K/4)),  local k % (K/4)      (the same map, transposed)
    A 32x32  (m, k)  -> lane m + 32 (k // 16),     local k % 16
    C 16x16  (m, n)  -> lane n + 16 (m // 4),      local m % 4
    C 32x32  (m, n)  -> lane m + 32 h,             local 4 (n // 8) + n % 4,  h = (n // 4) % 2

`shared_*_to_local_*` maps a tile index to (lane, local); `thread_id_shared_access_*` is its
inverse. Names, argument orders and the `_A` / `_B` / `_C_m_n` / `_C_n_m` conventions are the
public TileLang's (including its 16x64 "_B" map, which indexes B as (n, k) like A).
"""
from __future__ import annotations

__all__ = [
    "shared_16x4_to_local_64x1_layout_A", "thread_id_shared_access_64x1_to_16x4_layout_A",
    "shared_4x16_to_local_64x1_layout_B", "thread_id_shared_access_64x1_to_4x16_layout_B",
    "shared_16x16_to_local_64x4_layout_C", "shared_16x16_to_ldmatrix_64x4_layout",
    "thread_id_shared_access_64x4_to_16x16_layout_A", "shared_16x16_to_local_64x4_layout_A",
    "thread_id_shared_access_64x4_to_16x16_layout_B", "shared_16x16_to_local_64x4_layout_B",
    "shared_16x16_to_local_64x4_layout_m_n", "shared_16x16_to_local_64x4_layout_n_k",
    "shared_16x16_to_local_64x4_layout_n_m", "shared_16x16_to_local_64x4_layout_k_n",
    "thread_id_shared_access_64x4_to_16x16_layout_C_m_n", "thread_id_shared_access_64x4_to_16x16_layout_C_n_m",
    "thread_id_shared_access_64x8_to_16x32_layout_A", "shared_16x32_to_local_64x8_layout_A",
    "thread_id_shared_access_64x8_to_16x32_layout_B", "shared_16x32_to_local_64x8_layout_B",
    "thread_id_shared_access_64x16_to_16x64_layout_A", "shared_16x64_to_local_64x16_layout_A",
    "thread_id_shared_access_64x16_to_16x64_layout_B", "shared_16x64_to_local_64x16_layout_B",
    "shared_32x32_to_local_64x16_layout_C", "thread_id_shared_access_64x16_to_32x32_layout_C_n_m",
    "thread_id_shared_access_64x16_to_32x32_layout_C_m_n", "shared_32x32_to_local_64x16_layout_A",
    "thread_id_shared_access_64x16_to_32x32_layout_A", "shared_32x32_to_local_64x16_layout_B",
    "thread_id_shared_access_64x16_to_32x32_layout_B", "make_mfma_swizzle_layout",
]


# --------------------------------------------------------------- the two shapes of every map

def _spread(row, red, rows: int, per: int):
    """(lane, local) of element `red` of row `row`: rows on lanes row + rows * (red // per)."""
    return row + rows * (red // per), red % per


def _gather(lane, local, rows: int, per: int):
    """Inverse of _spread: (row, red)."""
    return lane % rows, (lane // rows) * per + local


# A tiles are (m, k) -> spread over (m, k); B tiles (k, n) -> spread over (n, k).

def shared_16x4_to_local_64x1_layout_A(i, j):
    return _spread(i, j, 16, 1)


def thread_id_shared_access_64x1_to_16x4_layout_A(thread_id, local_id):
    return _gather(thread_id, local_id, 16, 1)


def shared_4x16_to_local_64x1_layout_B(i, j):
    return _spread(j, i, 16, 1)


def thread_id_shared_access_64x1_to_4x16_layout_B(thread_id, local_id):
    n, k = _gather(thread_id, local_id, 16, 1)
    return k, n


def shared_16x16_to_local_64x4_layout_A(i, j):
    return _spread(i, j, 16, 4)


def thread_id_shared_access_64x4_to_16x16_layout_A(thread_id, local_id):
    return _gather(thread_id, local_id, 16, 4)


def shared_16x16_to_local_64x4_layout_B(i, j):
    return _spread(j, i, 16, 4)


def thread_id_shared_access_64x4_to_16x16_layout_B(thread_id, local_id):
    n, k = _gather(thread_id, local_id, 16, 4)
    return k, n


def shared_16x16_to_local_64x4_layout_C(i, j):
    """C 16x16 (m, n): lane n + 16 (m // 4), local m % 4."""
    return _spread(j, i, 16, 4)


def shared_16x16_to_ldmatrix_64x4_layout(ind):
    """The C map taking and giving a list: [i, j] -> [lane, local]."""
    return list(shared_16x16_to_local_64x4_layout_C(ind[0], ind[1]))


shared_16x16_to_local_64x4_layout_m_n = shared_16x16_to_local_64x4_layout_A
shared_16x16_to_local_64x4_layout_n_k = shared_16x16_to_local_64x4_layout_A
shared_16x16_to_local_64x4_layout_n_m = shared_16x16_to_local_64x4_layout_B
shared_16x16_to_local_64x4_layout_k_n = shared_16x16_to_local_64x4_layout_B


def thread_id_shared_access_64x4_to_16x16_layout_C_m_n(thread_id, local_id):
    """(lane, local) -> (m, n) of the 16x16 C tile."""
    return thread_id_shared_access_64x4_to_16x16_layout_B(thread_id, local_id)


def thread_id_shared_access_64x4_to_16x16_layout_C_n_m(thread_id, local_id):
    """(lane, local) -> (n, m) of the 16x16 C tile."""
    return _gather(thread_id, local_id, 16, 4)


def shared_16x32_to_local_64x8_layout_A(i, j):
    return _spread(i, j, 16, 8)


def thread_id_shared_access_64x8_to_16x32_layout_A(thread_id, local_id):
    return _gather(thread_id, local_id, 16, 8)


def shared_16x32_to_local_64x8_layout_B(i, j):
    return _spread(j, i, 16, 8)


def thread_id_shared_access_64x8_to_16x32_layout_B(thread_id, local_id):
    n, k = _gather(thread_id, local_id, 16, 8)
    return k, n


def shared_16x64_to_local_64x16_layout_A(i, j):
    return _spread(i, j, 16, 16)


def thread_id_shared_access_64x16_to_16x64_layout_A(thread_id, local_id):
    return _gather(thread_id, local_id, 16, 16)


def shared_16x64_to_local_64x16_layout_B(i, j):
    """B indexed (n, k), as the public map does (the same arithmetic as A)."""
    return _spread(i, j, 16, 16)


def thread_id_shared_access_64x16_to_16x64_layout_B(thread_id, local_id):
    """(lane, local) -> (k, n) of a 64 x 16 B tile."""
    n, k = _gather(thread_id, local_id, 16, 16)
    return k, n


def shared_32x32_to_local_64x16_layout_A(i, j):
    return _spread(i, j, 32, 16)


def thread_id_shared_access_64x16_to_32x32_layout_A(thread_id, local_id):
    return _gather(thread_id, local_id, 32, 16)


def shared_32x32_to_local_64x16_layout_B(i, j):
    return _spread(j, i, 32, 16)


def thread_id_shared_access_64x16_to_32x32_layout_B(thread_id, local_id):
    n, k = _gather(thread_id, local_id, 32, 16)
    return k, n


def shared_32x32_to_local_64x16_layout_C(i, j):
    """C 32x32 (m, n) of the 32x32 MFMA: lane m + 32 ((n // 4) % 2), local 4 (n // 8) + n % 4."""
    half = (j // 4) % 2
    return i + 32 * half, 4 * (j // 8) + j % 4


def thread_id_shared_access_64x16_to_32x32_layout_C_m_n(thread_id, local_id):
    """(lane, local) -> (m, n) of the 32x32 C tile."""
    return thread_id % 32, 8 * (local_id // 4) + 4 * (thread_id // 32) + local_id % 4


thread_id_shared_access_64x16_to_32x32_layout_C_n_m = thread_id_shared_access_64x16_to_32x32_layout_C_m_n


def make_mfma_swizzle_layout(shared_buf, vecSize=8):  # noqa: N803 - the public argument name
    """XOR swizzle of a shared tile's rows for MFMA loads (vectors of `vecSize` elements): row r's
    vector v moves to v ^ ((r // per_phase) % max_phase), where per_phase rows share one 128-byte
    bank line and max_phase = min(16 / per_phase, vectors per row)."""
    from ... import dtypes as dt
    from ...layout import Layout

    shape = tuple(shared_buf.shape)
    inner = int(shape[-1])
    bits = dt.as_dtype(str(shared_buf.dtype)).bits
    per_phase = max(1, (32 * 32 // bits) // inner)
    max_phase = max(1, min(16 // per_phase, inner // vecSize))

    def fwd(*idx):
        row, col = idx[-2], idx[-1]
        phase = (row // per_phase) % max_phase
        return (*idx[:-2], row, ((col // vecSize) ^ phase) * vecSize + col % vecSize)

    return Layout.from_fn(shape, fwd)
