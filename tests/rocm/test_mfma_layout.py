"""AMD MFMA lane maps: bijections onto 64 lanes x locals, inverse pairs, agreeing with the CDNA ISA's
operand tables for v_mfma_f32_16x16x16f16 (written out here); rocm.target predicates; the ROCm
emitters raise."""
import itertools

import pytest

from tilelang.ir.buffer import Buffer
from tilelang.rocm.intrinsics import mfma_layout as L
from tilelang.rocm.intrinsics import utils as U
from tilelang.rocm import target as RT

# (forward (i, j) -> (lane, local), inverse, tile shape, locals per lane)
PAIRS = [
    (L.shared_16x4_to_local_64x1_layout_A, L.thread_id_shared_access_64x1_to_16x4_layout_A, (16, 4), 1),
    (L.shared_4x16_to_local_64x1_layout_B, L.thread_id_shared_access_64x1_to_4x16_layout_B, (4, 16), 1),
    (L.shared_16x16_to_local_64x4_layout_A, L.thread_id_shared_access_64x4_to_16x16_layout_A, (16, 16), 4),
    (L.shared_16x16_to_local_64x4_layout_B, L.thread_id_shared_access_64x4_to_16x16_layout_B, (16, 16), 4),
    (L.shared_16x16_to_local_64x4_layout_C, L.thread_id_shared_access_64x4_to_16x16_layout_C_m_n, (16, 16), 4),
    (L.shared_16x32_to_local_64x8_layout_A, L.thread_id_shared_access_64x8_to_16x32_layout_A, (16, 32), 8),
    (L.shared_16x32_to_local_64x8_layout_B, L.thread_id_shared_access_64x8_to_16x32_layout_B, (32, 16), 8),
    (L.shared_16x64_to_local_64x16_layout_A, L.thread_id_shared_access_64x16_to_16x64_layout_A, (16, 64), 16),
    (L.shared_32x32_to_local_64x16_layout_A, L.thread_id_shared_access_64x16_to_32x32_layout_A, (32, 32), 16),
    (L.shared_32x32_to_local_64x16_layout_B, L.thread_id_shared_access_64x16_to_32x32_layout_B, (32, 32), 16),
    (L.shared_32x32_to_local_64x16_layout_C, L.thread_id_shared_access_64x16_to_32x32_layout_C_m_n, (32, 32), 16),
]


@pytest.mark.parametrize("fwd,inv,shape,nlocal", PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_forward_maps_are_bijections_inverted_by_the_access_maps(fwd, inv, shape, nlocal):
    seen = set()
    for i, j in itertools.product(range(shape[0]), range(shape[1])):
        lane, local = (int(x) for x in fwd(i, j))
        assert 0 <= lane < 64 and 0 <= local < nlocal
        assert tuple(int(x) for x in inv(lane, local)) == (i, j)
        seen.add((lane, local))
    assert len(seen) == 64 * nlocal


def test_16x16x16_maps_match_the_isa_operand_tables():
    for lane, v in itertools.product(range(64), range(4)):
        # A: lane l holds A[l % 16][4 (l // 16) + v]; B: B[4 (l // 16) + v][l % 16]; D the same as B
        a = (lane % 16, 4 * (lane // 16) + v)
        b = (4 * (lane // 16) + v, lane % 16)
        assert L.shared_16x16_to_local_64x4_layout_A(*a) == (lane, v)
        assert L.shared_16x16_to_local_64x4_layout_B(*b) == (lane, v)
        assert L.shared_16x16_to_local_64x4_layout_C(*b) == (lane, v)
        assert U.mfma_store_index_map(lane, v) == (lane % 16, 4 * (lane // 16) + v)
    for lane, v in itertools.product(range(64), range(16)):  # 32x32 D: 4-row groups, 8 apart
        m, n = U.mfma_store_index_map_32x32(lane, v)
        assert (m, n) == (lane % 32, 8 * (v // 4) + 4 * (lane // 32) + v % 4)
    assert L.shared_16x16_to_ldmatrix_64x4_layout([5, 9]) == list(L.shared_16x16_to_local_64x4_layout_C(5, 9))
    assert U.get_mma_micro_size("int8") == (16, 16, 32) and U.get_mma_micro_size("float16") == (16, 16, 16)


def test_mfma_swizzle_permutes_vectors_within_each_row():
    buf = Buffer("S", (32, 64), "float16", "shared")
    lay = L.make_mfma_swizzle_layout(buf)
    for r in range(32):
        cols = [lay.map(r, c)[1] for c in range(64)]
        assert sorted(cols) == list(range(64))
        assert all(lay.map(r, c)[0] == r for c in range(64))
        # 64 fp16 = one 128-byte bank line per row: phase = r % 8; vector v -> v ^ phase
        assert [cols[8 * v] // 8 for v in range(8)] == [v ^ (r % 8) for v in range(8)]


def test_target_predicates_read_the_mcpu():
    assert RT.target_is_gfx950("hip -mcpu=gfx950") and not RT.target_is_gfx950("hip -mcpu=gfx942")
    assert RT.target_is_cdna({"kind": "hip", "mcpu": "gfx90a"}) and not RT.target_is_rdna("hip -mcpu=gfx90a")
    assert RT.target_get_rdna_generation("hip -mcpu=gfx1100") == 11 and RT.target_get_warp_size("hip -mcpu=gfx1201") == 32
    assert RT.target_get_warp_size("hip -mcpu=gfx942") == 64
    import tilelang
    for t in ("cuda", "cuda -arch=sm_90a", tilelang.tvm.target.Target("cpu")):
        assert not (RT.target_is_hip(t) or RT.target_is_cdna(t) or RT.target_is_gfx950(t))
    assert RT.normalize_rocm_arch("gfx942:sramecc+:xnack-") == "gfx942" and RT.normalize_rocm_arch("sm_90") is None
    assert RT.rocm_warp_size_for_arch("gfx1030") == 32 and not RT.check_hip_availability()
    with pytest.raises(tilelang.errors.TileLangError, match="HIP/ROCm targets are not supported"):
        RT.with_rocm_target_attrs("hip -mcpu=gfx942")


def test_mfma_emitters_raise_naming_themselves():
    import tilelang.rocm.intrinsics as RI
    with pytest.raises(NotImplementedError, match="MatrixCoreIntrinEmitter: AMD MFMA"):
        RI.MatrixCoreIntrinEmitter
