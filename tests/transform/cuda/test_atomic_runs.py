"""Adjacent float32 atomic adds as one vector reduction (transform/cuda/atomic_runs.py) and gathered
rows copied without a per-element select (transform/cuda/vectorize.py), as in the sparse MLA
backward: rows of a shared tile scattered into a gathered row of dKV by `T.atomic_addx4`, and rows
of KV gathered through an index tensor (out-of-range rows read as zeros)."""

import pytest
import torch

import tilelang
import tilelang.language as T

from .conftest import build_sm90 as build, nvrtc_or_skip

R, D, N = 16, 64, 24  # rows per block, row length, rows of the scattered-into tensor


def scatter(shift=0, pairs=False):
    """Out[Idx[r], :] += V[r, :] through a shared tile, four (or two) elements a statement;
    `shift` moves the scattered columns off the 4-element alignment."""
    W = D + (4 if shift else 0)

    @T.prim_func
    def k(Idx: T.Tensor((R,), T.int32), V: T.Tensor((R, D), T.float32), Out: T.Tensor((N, W), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((R, D), T.float32)
            T.copy(V, s)
            if pairs:
                for r, d in T.Parallel(R, D // 2):
                    T.atomic_add(Out[Idx[r], d * 2 + shift], s[r, d * 2])
                    T.atomic_add(Out[Idx[r], d * 2 + 1 + shift], s[r, d * 2 + 1])
            else:
                for r, d in T.Parallel(R, D // 4):
                    T.atomic_addx4(Out[Idx[r], d * 4 + shift], s[r, d * 4])
    return k


def gather():
    """G[r, :] = KV[Idx[r], :] for the rows Idx names (zeros for out-of-range ones), plus a scale."""
    @T.prim_func
    def k(Idx: T.Tensor((R,), T.int32), KV: T.Tensor((N, D), T.bfloat16), G: T.Tensor((R, D), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((R, D), T.bfloat16)
            for r, d in T.Parallel(R, D):
                s[r, d] = KV[Idx[r], d]
            for r, d in T.Parallel(R, D):
                G[r, d] = s[r, d] * 2.0
    return k




def _host():
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    return host


def _indices(g):
    idx = torch.randint(0, N, (R,), generator=g, dtype=torch.int32)
    idx[3] = idx[5]  # two rows into one: the adds accumulate
    idx[7] = N + 2  # out of range: skipped
    idx[9] = -1
    return idx


@pytest.mark.nvrtc
def test_addx4_is_one_vector_reduction():
    nvrtc_or_skip()
    src = build(scatter()).get_kernel_source()
    assert "tl_atomic_add_v4_f32_from(&Out[" in src and "tl_atomic_add_f32(" not in src, src
    plain = build(scatter(), {"tl.disable_atomic_runs": True}).get_kernel_source()
    assert "tl_atomic_add_v4" not in plain and plain.count("tl_atomic_add_f32(") == 4


@pytest.mark.nvrtc
def test_pairs_and_misaligned_runs():
    nvrtc_or_skip()
    assert "tl_atomic_add_v2_f32_from(&Out[" in build(scatter(pairs=True)).get_kernel_source()
    src = build(scatter(shift=1)).get_kernel_source()  # columns d * 4 + 1 .. + 4: only the middle pair is aligned
    assert "tl_atomic_add_v4" not in src and src.count("tl_atomic_add_f32(") == 2, src
    assert src.count("tl_atomic_add_v2_f32(&Out[") == 1 and "_from" not in src, src  # values at odd columns


@pytest.mark.nvrtc
@pytest.mark.parametrize("shift, pairs, configs", [(0, False, {}), (0, True, {}), (1, False, {}),
                                                   (0, False, {"tl.disable_atomic_runs": True})])
def test_scatter_runs_right_on_host(shift, pairs, configs):
    nvrtc_or_skip()
    host = _host()
    g = torch.Generator().manual_seed(11)
    idx = _indices(g)
    v = torch.randn(R, D, generator=g)
    out0 = torch.randn(N, D + (4 if shift else 0), generator=g)
    out = out0.clone()
    host.HostProgram({"k": build(scatter(shift, pairs), configs)}).run("k", [idx, v, out])
    ref = out0.double()
    for r in range(R):
        if 0 <= idx[r] < N:
            ref[idx[r], shift:shift + D] += v[r].double()
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.nvrtc
def test_gathered_rows_have_no_select():
    nvrtc_or_skip()
    src = build(gather()).get_kernel_source()
    lane = src[src.index("tl::load_vec<8>(KV_v0"):]
    lane = lane[:lane.index("tl::store_vec")]
    assert "?" not in lane and "tl_f32_to_bf16" not in lane, lane


@pytest.mark.nvrtc
def test_gather_runs_right_on_host():
    nvrtc_or_skip()
    host = _host()
    g = torch.Generator().manual_seed(12)
    idx = _indices(g)
    kv = torch.randn(N, D, generator=g).bfloat16()
    out = torch.full((R, D), float("nan"))
    host.HostProgram({"k": build(gather())}).run("k", [idx, kv, out])
    ref = torch.zeros(R, D, dtype=torch.float64)
    for r in range(R):
        if 0 <= idx[r] < N:
            ref[r] = kv[idx[r]].double() * 2.0
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=0)


def staged_scatter():
    """An accumulator staged through a shared tile (swizzled by staging_swizzle) and scattered by
    rows into Out with T.atomic_addx4: the vector reductions read the tile at swizzled addresses."""
    M, NN, K = 64, 128, 32

    @T.prim_func
    def k(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((NN, K), T.bfloat16), Idx: T.Tensor((M,), T.int32),
          Out: T.Tensor((N, NN), T.float32)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), T.bfloat16)
            B_s = T.alloc_shared((NN, K), T.bfloat16)
            C_s = T.alloc_shared((M, NN), T.float32)
            acc = T.alloc_fragment((M, NN), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, C_s)
            for r, d in T.Parallel(M, NN // 4):
                T.atomic_addx4(Out[Idx[r], d * 4], C_s[r, d * 4])
    return k


@pytest.mark.nvrtc
@pytest.mark.parametrize("configs", [{}, {"tl.disable_atomic_runs": True}])
def test_staged_scatter_runs_right_on_host(configs):
    nvrtc_or_skip()
    host = _host()
    src = build(staged_scatter(), configs).get_kernel_source()
    assert "tl_store2(&C_s[tl::swizzle_xor_offset" in src, src
    if not configs:
        assert "tl_atomic_add_v4_f32_from(&Out[" in src and "&C_s[tl::swizzle_xor_offset" in src.split("_from(")[-1]
    g = torch.Generator().manual_seed(13)
    a = torch.randn(64, 32, generator=g).bfloat16()
    b = torch.randn(128, 32, generator=g).bfloat16()
    idx = torch.randint(0, N, (64,), generator=g, dtype=torch.int32)
    idx[0] = N + 5
    out0 = torch.randn(N, 128, generator=g)
    out = out0.clone()
    host.HostProgram({"k": build(staged_scatter(), configs)}).run("k", [a, b, idx, out])
    c = a.double() @ b.double().T
    ref = out0.double()
    for r in range(64):
        if 0 <= idx[r] < N:
            ref[idx[r]] += c[r]
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4)
