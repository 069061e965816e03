"""Tail peeling of issue-first cp.async pipelines (software_pipeline._Pipeline.peeled; off with
tl.disable_pipeline_tail_peel): a loop of a constant trip count n >= S runs n - S + 1 iterations
that refill unconditionally, then its last S - 1 iterations without refills (S = 2: one wait<0>;
S > 2: an empty commit and wait<S - 1> each). The gemm_intrinsics GEMM (mma.sync emitter) is
checked in its source and SASS, and on the host emulator against float64 for S = 2 and 3, peeled
and not, with trip counts above, at and below S."""
import re
import warnings

import pytest
import torch

import tilelang

from .conftest import nvrtc_or_skip
from .test_stage_smem_reuse import emitter_gemm

OFF = {"tl.disable_pipeline_tail_peel": True}


def _compile(M, N, K, stages, off, arch="sm_90a"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(emitter_gemm(M, N, K, "float16", stages), target=f"cuda -arch={arch}",
                                pass_configs=OFF if off else None)


def _loops(src):
    return re.findall(r"for \(int (ko\w*) = (\d+); \1 < ([^;]+);", src)


@pytest.mark.nvrtc
def test_two_stages_peel_one_iteration():
    nvrtc_or_skip()
    src = _compile(256, 256, 1024, 2, False).get_kernel_source()
    assert _loops(src) == [("ko", "0", "31"), ("ko_1", "31", "31 + 1")], _loops(src)
    assert "(ko + 1) < 32" not in src
    main, tail = src.split("for (int ko_1")
    assert main.count("tl::cp_async_wait<1>();") == 1 and "tl::cp_async_wait<0>(); __syncthreads();" in tail
    assert "cp_async_zfill" not in tail and "cp_async_commit" not in tail
    off = _compile(256, 256, 1024, 2, True).get_kernel_source()
    assert _loops(off) == [("ko", "0", "32")] and "if (((ko + 1) < 32))" in off


@pytest.mark.nvrtc
def test_three_stages_keep_the_wait_depth_with_empty_commits():
    nvrtc_or_skip()
    src = _compile(256, 256, 256, 3, False).get_kernel_source()
    assert _loops(src) == [("ko", "0", "6"), ("ko_1", "6", "6 + 2")], _loops(src)
    tail = src.split("for (int ko_1")[1]
    assert re.search(r"tl::cp_async_commit\(\);\s*tl::cp_async_wait<2>\(\); __syncthreads\(\);", tail)
    assert "cp_async_zfill" not in tail


@pytest.mark.nvrtc
def test_sass_loop_has_no_refill_branch():
    nvrtc_or_skip()
    k = _compile(256, 256, 1024, 2, False)
    sass = k.export_sass()
    if not sass:
        pytest.skip("no cuobjdump / nvdisasm")
    ins = re.findall(r"/\*([0-9a-f]{4})\*/\s+([^;]*);", sass)
    branches = [(int(a, 16), t) for a, t in ins if "BRA" in t]
    back = [(a, t) for a, t in branches if int(re.search(r"0x([0-9a-f]+)", t).group(1), 16) < a]
    assert len(back) == 1, back  # the k-loop (the self-branch after EXIT targets itself)
    lo = int(re.search(r"0x([0-9a-f]+)", back[0][1]).group(1), 16)
    body = [t for a, t in ins if lo <= int(a, 16) <= back[0][0]]
    assert sum("LDGSTS" in t for t in body) == 8 and sum("BRA" in t for t in body) == 1


@pytest.mark.nvrtc
@pytest.mark.parametrize("stages,K", [(2, 256), (2, 64), (3, 256), (3, 96), (3, 64)])
@pytest.mark.parametrize("off", [False, True])
def test_host_gemm_matches_float64(run_on_host, stages, K, off):
    nvrtc_or_skip()
    M = N = 256
    g = torch.Generator().manual_seed(97 + 5 * stages + K + off)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(N, K, generator=g).half()
    c = torch.full((M, N), 7.0, dtype=torch.float16)
    k = _compile(M, N, K, stages, off)
    peeled = "for (int ko_1" in k.get_kernel_source()
    assert peeled == (not off and K // 32 >= stages)
    run_on_host(k, [a, b, c])
    ref = a.double() @ b.double().T
    assert torch.allclose(c.double(), ref, rtol=1e-3, atol=1e-2), (c.double() - ref).abs().max()
