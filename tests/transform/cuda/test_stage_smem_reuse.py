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
from tilelang.cuda.intrinsics import make_mma_swizzle_layout
from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter
from tilelang import dtypes as dt
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.transform.cuda.lower_tile_ops import Raw
from tilelang.transform.cuda.plan_smem import ATTR, plan

from .conftest import nvrtc_or_skip
from .test_plan_smem import assert_no_alias_race, kernel, lowered, offsets, read, shared, write

OFF = {"tl.disable_stage_smem_reuse": True}
DRAIN = "tl::cp_async_wait<0>(); __syncthreads();"


def emitter_gemm(M, N, K, out_dtype="float16", stages=2):
    """C = A @ B.T: 2 x 2 warps of 64 x 64, k-chunks of 32; C leaves through a 16 x 16-blocked shared tile."""
    em = TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32",
                                 b_transposed=True, block_row_warps=2, block_col_warps=2,
                                 warp_row_tiles=64, warp_col_tiles=64, chunk=32)
    bm = bn = 128
    bk = 32

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), "float16", scope="shared.dyn")
            B_shared = T.alloc_shared((bn, bk), "float16", scope="shared.dyn")
            C_shared = T.alloc_shared((bm // 16, bn // 16, 16, 16), out_dtype, scope="shared.dyn")
            A_local = T.alloc_local((em.warp_rows * em.local_size_a,), "float16")
            B_local = T.alloc_local((em.warp_cols * em.local_size_b,), "float16")
            C_local = T.alloc_local((em.warp_rows * em.warp_cols * em.local_size_out,), "float32")
            T.annotate_layout({A_shared: make_mma_swizzle_layout(A_shared),
                               B_shared: make_mma_swizzle_layout(B_shared)})
            T.clear(C_local)
            for ko in T.Pipelined(K // bk, num_stages=stages):
                for i, k in T.Parallel(bm, bk):
                    A_shared[i, k] = A[by * bm + i, ko * bk + k]
                for j, k in T.Parallel(bn, bk):
                    B_shared[j, k] = B[bx * bn + j, ko * bk + k]
                for ki in T.serial(bk // 16):
                    em.ldmatrix_a(A_local, A_shared, ki)
                    em.ldmatrix_b(B_local, B_shared, ki)
                    em.mma(A_local, B_local, C_local)
            em.stmatrix(C_local, C_shared)
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = C_shared[i // 16, j // 16, i % 16, j % 16]
    return gemm


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


# ----------------------------------------------------------------------------- lowered kernels


@pytest.mark.parametrize("out_dtype,on,off", [("float16", 32768, 65536), ("float32", 65536, 98304)])
def test_lowered_epilogue_tile_reuses_the_stages(out_dtype, on, off):
    func = lowered(emitter_gemm(256, 256, 128, out_dtype), "sm_90a")
    p = func.attr(ATTR)
    assert p.total == on and offsets(p)["C_shared"] == 0, str(p)
    assert_no_alias_race(func)
    assert lowered(emitter_gemm(256, 256, 128, out_dtype), "sm_90a", OFF).attr(ATTR).total == off


def _compile(arch, off, out_dtype, M=256, N=256, K=128):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(emitter_gemm(M, N, K, out_dtype), target=f"cuda -arch={arch}",
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
