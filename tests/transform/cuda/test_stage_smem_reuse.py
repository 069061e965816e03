"""Stage reuse (plan_smem.free_drained_stages; off with tl.disable_stage_smem_reuse): a cp.async
pipeline's stage storage is busy only until its drain (`cp_async_wait<0>(); __syncthreads();` after
the loop), so an epilogue tile written after it takes the stages' bytes. The mma.sync emitter GEMM
of the gemm_intrinsics example (fp16 C through a (8, 8, 16, 16) shared tile) goes from 64 KB to
32 KB; a float32 C tile from 96 KB to 64 KB. Hand-built kernels pin the rule's limits (no drain,
TMA); the lowered kernel passes the independent alias checker and runs on the host emulator
against float64 with the reuse and without."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing.kernels import emitter_gemm
from tilelang import dtypes as dt
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.transform.cuda.lower_tile_ops import Raw
from tilelang.transform.cuda.plan_smem import ATTR, plan

from .conftest import nvrtc_or_skip
from .test_plan_smem import assert_no_alias_race, kernel, lowered, offsets, read, shared, write

OFF = {"tl.disable_stage_smem_reuse": True}
DRAIN = "tl::cp_async_wait<0>(); __syncthreads();"


# ----------------------------------------------------------------------------- hand-built IR


def staged(rest, drain=True, fill="tl::cp_async_zfill<16>({0}, {1}, {2});"):
    """x_stages (8 KB) filled by cp.async through its view x and read in a loop, then `rest`."""
    st, view = shared("x_stages", 2048), shared("x", 1024)
    view.view_of = st
    loop = S.For(E.Var("ko", dt.int32), E.as_expr(0), E.as_expr(4), "serial",
                 S.seq(Raw(fill, writes=(view,)), read(view)))
    body = [loop] + ([Raw(DRAIN)] if drain else []) + list(rest)
    k = kernel(*body)
    return S.KernelLaunch(k.block_vars, k.grid, k.threads, (), S.seq(S.Allocate(st), S.Allocate(view), k.body))


def test_a_tile_after_the_drain_takes_the_stage_bytes():
    c = shared("c", 2048)
    p = plan(staged([write(c), read(c)]))
    assert offsets(p) == {"x_stages": 0, "c": 0} and p.total == 8192 and p.barriers == ()
    off = plan(staged([write(c), read(c)]), stage_reuse=False)
    assert offsets(off) == {"x_stages": 0, "c": 8192} and off.total == 16384


def test_without_a_drain_or_with_tma_the_storage_stays_pinned():
    c = shared("c", 2048)
    for p in (plan(staged([write(c), read(c)], drain=False)),
              plan(staged([write(c), read(c)], fill="tl::tma_load({0}, tl_full[0], 0, 0);"))):
        assert offsets(p)["c"] != offsets(p)["x_stages"] and p.total == 16384, str(p)


def test_a_tile_used_before_the_drain_does_not_overlap():
    c = shared("c", 2048)
    k = staged([])  # c written between the loop and the drain: the stages' cp.async may still land
    stmts = list(k.body.stmts)
    drain_at = next(i for i, st in enumerate(stmts) if isinstance(st, Raw) and st.fmt == DRAIN)
    stmts[drain_at:drain_at] = [write(c), read(c)]
    k = S.KernelLaunch(k.block_vars, k.grid, k.threads, (), S.seq(S.Allocate(c), *stmts))
    p = plan(k)
    assert offsets(p)["c"] != offsets(p)["x_stages"] and p.total == 16384


def wgmma_staged(rest, waited):
    """x_stages filled by cp.async and read by a wgmma tile gemm in the loop; then (if `waited`) a
    top-level `warpgroup_wait<0>`, the drain, and `rest`."""
    st, view = shared("x_stages", 2048), shared("x", 1024)
    view.view_of = st
    loop = S.For(E.Var("ko", dt.int32), E.as_expr(0), E.as_expr(4), "serial",
                 S.seq(Raw("tl::cp_async_zfill<16>({0}, {1}, {2});", writes=(view,)),
                       Raw("tl::gemm_ss_sm90<64, 64, 16, 1, 1, false, 16, 64, tl::half_t, 1>({0}, {0}, acc);",
                           reads=(view,))))
    body = [loop] + ([Raw("tl::warpgroup_wait<0>();")] if waited else []) + [Raw(DRAIN)] + list(rest)
    k = kernel(*body)
    return S.KernelLaunch(k.block_vars, k.grid, k.threads, (), S.seq(S.Allocate(st), S.Allocate(view), k.body))


def test_stages_a_wgmma_reads_are_freed_only_behind_a_full_wgmma_wait():
    c = shared("c", 2048)
    p = plan(wgmma_staged([write(c), read(c)], waited=True))
    assert offsets(p) == {"x_stages": 0, "c": 0} and p.total == 8192, str(p)
    p = plan(wgmma_staged([write(c), read(c)], waited=False))  # a wgmma group may still read x_stages
    assert offsets(p)["c"] != offsets(p)["x_stages"] and p.total == 16384, str(p)


# ----------------------------------------------------------------------------- lowered kernels


@pytest.mark.parametrize("out_dtype,on,off", [("float16", 32768, 65536), ("float32", 65536, 98304)])
def test_lowered_epilogue_tile_reuses_the_stages(out_dtype, on, off):
    func = lowered(emitter_gemm(256, 256, 128, out_dtype, blocked_out=True), "sm_90a")
    p = func.attr(ATTR)
    assert p.total == on and offsets(p)["C_shared"] == 0, str(p)
    assert_no_alias_race(func)
    assert lowered(emitter_gemm(256, 256, 128, out_dtype, blocked_out=True), "sm_90a", OFF).attr(ATTR).total == off


def _compile(arch, off, out_dtype, M=256, N=256, K=128):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(emitter_gemm(M, N, K, out_dtype, blocked_out=True), target=f"cuda -arch={arch}",
                                pass_configs=OFF if off else None)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("off", [False, True])
@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_host_gemm_matches_float64(run_on_host, arch, off, out_dtype):
    nvrtc_or_skip()
    M, N, K = 256, 256, 128
    g = torch.Generator().manual_seed(4321 + 7 * off + (arch == "sm_90a") + 3 * (out_dtype == "float32"))
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(N, K, generator=g).half()
    c = torch.full((M, N), 7.0, dtype=getattr(torch, out_dtype))
    k = _compile(arch, off, out_dtype, M, N, K)
    assert k.artifact.csource.smem_bytes == {("float16", False): 32768, ("float16", True): 65536,
                                             ("float32", False): 65536, ("float32", True): 98304}[(out_dtype, off)]
    run_on_host(k, [a, b, c])
    ref = a.double() @ b.double().T
    tol = (1e-5, 1e-4) if out_dtype == "float32" else (1e-3, 1e-2)  # fp16 C: one rounding of the fp32 sum
    assert torch.allclose(c.double(), ref, rtol=tol[0], atol=tol[1]), (c.double() - ref).abs().max()


@tilelang.jit
def wgmma_then_column_max(M, N, K, threads=512):
    """A cp.async-fed wgmma GEMM of 128x256 tiles in 3 stages (144 KB), then a column max of the
    accumulator through a 128 KB shared copy: over the 227 KB a block may have unless the copy takes the
    drained stages' bytes (a fuzz program, seed 76097, asked for 272 KB at launch)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32"),
             Cmax: T.Tensor((T.ceildiv(M, 128), N), "float32")):
        with T.Kernel(T.ceildiv(N, 256), T.ceildiv(M, 128), threads=threads) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 256), "float16")
            C_l = T.alloc_fragment((128, 256), "float32")
            R = T.alloc_fragment((256,), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_l, policy=T.GemmWarpPolicy.FullCol)
            T.reduce_max(C_l, R, dim=0, clear=True)
            for j in T.Parallel(256):
                Cmax[by, bx * 256 + j] = R[j]
            T.copy(C_l, C[by * 128, bx * 256])
    return main


@pytest.mark.nvrtc
def test_column_max_after_a_wgmma_pipeline_fits_and_matches_float64(run_on_host):
    nvrtc_or_skip()
    M, N, K = 130, 260, 176
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(wgmma_then_column_max.get_tir(M, N, K), target="cuda -arch=sm_90a")
    assert "gemm_ss_sm90<" in k.get_kernel_source()
    assert k.artifact.csource.smem_bytes <= 232448, k.artifact.csource.smem_bytes
    g = torch.Generator().manual_seed(76097)
    a, b = torch.randn(M, K, generator=g).half(), torch.randn(K, N, generator=g).half()
    c, cmax = torch.full((M, N), 7.0), torch.full((2, N), 7.0)
    run_on_host(k, [a, b, c, cmax])
    ref = a.double() @ b.double()
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-4), (c.double() - ref).abs().max()
    for r in range(2):
        want = ref[r * 128:(r + 1) * 128].amax(dim=0)
        if r == 1:  # rows past M are zero-filled, so the second tile's max also sees 0
            want = torch.maximum(want, torch.zeros_like(want))
        assert torch.allclose(cmax[r].double(), want, rtol=1e-5, atol=1e-4)
