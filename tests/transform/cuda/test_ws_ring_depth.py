"""ring_depth (warp_specialize): the TMA ring holds more stages than num_stages where shared
memory allows, and the seed program's configuration (128 threads, 128x128x32, 3 stages) takes
the full Hopper path: a producer warpgroup, an 8-stage TMA ring, m64n128k16 wgmmas in flight
across iterations, a deferred TMA-store epilogue -- HGMMA in the SASS and no spills.

Compile-only (NVRTC, sm_90a); the GPU run is tests/backend/cuda/test_ws_single_warpgroup_gpu.py.
"""
import re
import warnings

import pytest

import tilelang
from tilelang.backend.cuda import nvrtc, sass
from tilelang.testing import kernels as tk
from tilelang.transform.cuda.warp_specialize import RING_BYTES, SMEM_MAX

pytestmark = pytest.mark.skipif(not nvrtc.nvrtc_available(), reason="NVRTC wheel not installed")


def compile_gemm(bM, bN, bK, threads, stages, n=4096, configs=None):
    f = tk.gemm(n, n, n, bM, bN, bK, threads, stages, "float16", out_dtype="float16", swizzle=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(f, target="cuda -arch=sm_90a", pass_configs=configs or {})


def ring(src):
    """Stages of the ring: the full/empty barrier pairs the kernel initialises."""
    full = re.findall(r"tl::mbarrier_init\(&tl_full\[(\d+)\], 1\);", src)
    empty = re.findall(r"tl::mbarrier_init\(&tl_empty\[(\d+)\], \d+\);", src)
    assert sorted(full) == sorted(empty), src
    return len(full)


@pytest.fixture(scope="module")
def seed():
    return compile_gemm(128, 128, 32, 128, 3)


def test_seed_config_structure(seed):
    src = seed.get_kernel_source()
    # a producer warpgroup beside the user's 128 threads, one block per SM for setmaxnreg
    assert "__launch_bounds__(256, 1)" in src and "if (tid >= 128) {" in src
    assert "tl::setmaxnreg_dec<24>();" in src and "tl::setmaxnreg_inc<240>();" in src
    # 16 KB per stage: RING_BYTES of loads, the stage index and phase taken modulo 8
    assert ring(src) == RING_BYTES // (16 * 1024) == 8
    # (tl_it & 7 is the floor modulo as the power-of-two floor shifts print it)
    assert re.search(r"tl_stage = (?:tl_floormod_i32\(tl_it, 8\)|\(tl_it & 7\));", src), src
    assert "mbarrier_wait(&tl_full[tl_stage], (tl_it / 8) & 1)" in src
    # both m64 row blocks per k-step, the batch left in flight (wait<1>), previous stage released
    assert "tl::gemm_ss_sm90<128, 128, 32, 1, 1, false, 32, 128, tl::half_t, 1>" in src
    assert "tl::mbarrier_arrive(&tl_empty[(tl_it - 1) % 8]);" in src
    # persistent, and the epilogue's TMA stores run inside the next tile's k-loop
    assert "tl_tile_iter" in src and "C_l_out[64]" in src and "tl::tma_store(&tmap_2" in src
    smem = seed.artifact.csource.smem_bytes
    assert 8 * 16384 + 128 * 64 * 2 <= smem <= SMEM_MAX


def test_seed_config_sass_hgmma_and_no_spills(seed):
    if not sass.sass_available():
        pytest.skip("cuobjdump / nvdisasm not installed")
    cubin = seed.artifact.compiled.cubin
    text = sass.disassemble(cubin)
    ops = sass.opcodes(text)
    assert len(re.findall(r"HGMMA\.64x128x16\.F32 ", text)) >= 4, ops
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in text  # one batch stays in flight
    assert ops["UTMALDG"] >= 3 and ops["UTMASTG"] >= 2 and ops["USETMAXREG"] == 2, ops
    assert ops["LDL"] == 0 and ops["STL"] == 0, ops
    (res,) = sass.resource_usage(cubin).values()
    assert res.local == 0 and res.stack == 0 and res.registers <= 240, res


def test_disable_deep_ring_keeps_num_stages():
    k = compile_gemm(128, 128, 32, 128, 3, n=1024, configs={"tl.disable_deep_ring": True})
    assert ring(k.get_kernel_source()) == 3


@pytest.mark.parametrize("cfg,want", [
    ((128, 256, 64, 256, 3), 3),  # 48 KB stages: a 4th beside the 64 KB staging tile does not fit
    ((256, 128, 64, 256, 3), 3),
    ((128, 128, 64, 128, 3), 4),  # 32 KB: n + 1 for the batch in flight, = RING_BYTES
    ((128, 128, 64, 128, 1), 4),  # no lookahead asked for: still RING_BYTES, as it costs no occupancy
    ((128, 128, 32, 128, 0), 8),  # num_stages=0 (split-K's 16 KB stages): the same
    ((128, 256, 128, 256, 1), 1),  # 96 KB stages: a second beside the staging tile does not fit
    ((128, 128, 32, 128, 10), 11),  # past RING_BYTES: n + 1, the lookahead asked for
])
def test_ring_depth_per_config(cfg, want):
    k = compile_gemm(*cfg, n=1024)
    src = k.get_kernel_source()
    assert ring(src) == want
    assert k.artifact.csource.smem_bytes <= SMEM_MAX
