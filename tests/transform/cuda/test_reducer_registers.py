"""T.alloc_reducer folded into across the rows of a flat T.Parallel (gemv: r[i] += a[i, j] * x[j]):
each thread keeps partials of its rows in registers (LaneRowFragment), x stays in registers
(LaneColFragment), and T.finalize_reducer combines the copies with xor shuffles (and, where a row
spans several warps, a small shared scratch). CPU float64 semantics, NVRTC source checks (no
atomics, no shared reducer), and the same kernels on the GPU against float64."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

# (dtype, block_M, block_N, threads, lanes per row): 16 lanes; 64 lanes = 2 warps a row (scratch);
# every thread a piece of every row (W = 4 passes of the block; 2 stages of 4 x 2048 floats fit in shared memory)
# the peer example's configs (the cp.async pipeline); without them sm_90a takes the warp-specialized
# path (a TMA producer; see test_ws_inner_alloc.py), except for the float32 case's 8 KB rows
CONFIGS = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}
CASES = [("float16", 128, 128, 256, 16), ("float16", 32, 512, 128, 64), ("float32", 4, 2048, 128, 128)]


def gemv_kernel(M, N, bM, bN, threads, dtype, op="sum"):
    @T.prim_func
    def k(a: T.Tensor((M, N), dtype), x: T.Tensor((N,), dtype), o: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bM), threads=threads) as i0:
            r = T.alloc_reducer(bM, "float32", op=op, replication="all")
            T.reducer_init(r)
            for i1 in T.Pipelined(T.ceildiv(N, bN), num_stages=2):
                a_s = T.alloc_shared((bM, bN), dtype)
                T.copy(a[i0 * bM, i1 * bN], a_s)
                a_f = T.alloc_fragment((bM, bN), dtype)
                T.copy(a_s, a_f)
                x_f = T.alloc_fragment(bN, dtype)
                T.copy(x[i1 * bN], x_f)
                for i, j in T.Parallel(bM, bN):
                    if op == "sum":
                        r[i] += a_f[i, j].astype("float32") * x_f[j].astype("float32")
                    else:
                        r[i] = T.max(r[i], a_f[i, j].astype("float32") * x_f[j].astype("float32"))
            T.finalize_reducer(r)
            T.copy(r, o[i0 * bM])
    return k


def reference(a, x, op):
    p = a.double() * x.double()[None, :]
    return p.sum(1) if op == "sum" else p.amax(1)


def run(kern, M, N, dtype, op, device):
    dt = getattr(torch, dtype)
    a, x = torch.randn(M, N, dtype=dt, device=device), torch.randn(N, dtype=dt, device=device)
    o = torch.full((M,), float("nan"), device=device)
    kern(a, x, o)
    torch.testing.assert_close(o.double().cpu(), reference(a, x, op).cpu(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype,bM,bN,threads,lanes", CASES)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_reducer_gemv_on_cpu(dtype, bM, bN, threads, lanes, op):
    M, N = 2 * bM, 2 * bN
    run(tilelang.compile(gemv_kernel(M, N, bM, bN, threads, dtype, op), target="cpu"), M, N, dtype, op, "cpu")


@pytest.mark.nvrtc
@pytest.mark.parametrize("dtype,bM,bN,threads,lanes", CASES)
@pytest.mark.parametrize("configs", [CONFIGS, {}], ids=["cp_async", "default"])
def test_reducer_partials_stay_in_registers(dtype, bM, bN, threads, lanes, configs):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        kern = tilelang.compile(gemv_kernel(4 * bM, 4 * bN, bM, bN, threads, dtype), target="cuda -arch=sm_90a",
                                pass_configs=configs)
    src = kern.get_kernel_source()
    assert not [str(m.message) for m in w if "kept in shared memory" in str(m.message)], [str(m.message) for m in w]
    assert "atomic" not in src, src
    rows = bM // (threads // lanes) if lanes < threads else bM
    assert f"float r[{rows}];" in src, src
    assert f"tl_lanes_allreduce_sum(r[0], {min(lanes, 32)})" in src, src
    assert ("r_fin1" in src) == (lanes > 32), src
    if lanes < threads:  # x: one 16-byte vector per thread, in registers
        assert f"x_f[{16 // (2 if dtype == 'float16' else 4)}];" in src, src


@pytest.mark.nvrtc
def test_reducer_outside_a_flat_row_loop_stays_shared_with_atomics():
    M, N = 64, 64

    @T.prim_func
    def k(a: T.Tensor((M, N), "float32"), o: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as _:
            r = T.alloc_reducer(M, "float32")
            T.clear(r)
            for i, j in T.Parallel(M, N):  # no register tile drives this loop
                r[i] += a[i, j]
            T.finalize_reducer(r)
            T.copy(r, o)

    src = tilelang.compile(k, target="cuda -arch=sm_90a").get_kernel_source()
    assert "atomic" in src and "tl_lanes_allreduce" not in src, src
    kern = tilelang.compile(k, target="cpu")
    a, o = torch.randn(M, N), torch.full((M,), float("nan"))
    kern(a, o)
    torch.testing.assert_close(o.double(), a.double().sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("dtype,bM,bN,threads,lanes", CASES)
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("configs", [CONFIGS, {}], ids=["cp_async", "default"])
def test_reducer_gemv_on_gpu(dtype, bM, bN, threads, lanes, op, configs):
    M, N = 4 * bM, 4 * bN
    run(tilelang.compile(gemv_kernel(M, N, bM, bN, threads, dtype, op), target="cuda", pass_configs=configs), M, N, dtype,
        op, "cuda")
