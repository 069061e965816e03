"""T.gemm's GemmWarpPolicy on sm_90a wgmma (gemm_paths.wgmma_policy_grid): FullRow puts every
warpgroup along M, FullCol along N, Square keeps the squarest split; a policy the shape does not
allow keeps the squarest split with a PerformanceWarning; tl.disable_wgmma_policy restores the
squarest split for all. The policy's grid is taken only where it costs no more than the squarest
(gemm_paths.grid_cost: reductions crossing warpgroups, then rows + columns a warpgroup);
tl.disable_wgmma_policy_cost (NOCOST below) takes it whenever the shape allows. The accumulator's layout follows the same grid everywhere it is read
(a row reduction, a per-column T.Parallel epilogue, a (rows, Q, H) segment reduction -- the fp8
lighting indexer's pattern, in registers when each warpgroup's columns are whole segments:
tl.disable_split_segment_reduce). Kernels run on the host emulator against float64."""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing.kernels import lighting_indexer

from tests.transform.cuda.test_acc_segments import indexer_kernel, reference as indexer_reference

NOCOST = {"tl.disable_wgmma_policy_cost": True}
POL = {"FullRow": T.GemmWarpPolicy.FullRow, "FullCol": T.GemmWarpPolicy.FullCol, "Square": T.GemmWarpPolicy.Square}


def _compile(fn, arch="sm_90a", **configs):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        kern = tilelang.compile(fn, target=f"cuda -arch={arch}", pass_configs=configs or None)
    return kern, [str(m.message) for m in w]


def _grid(src):
    g = re.search(r"tl::gemm_ss_sm90<(\d+), (\d+), (\d+), (\d+), (\d+),", src)
    assert g, src
    return int(g.group(4)), int(g.group(5))


def gemm_kernel(M, N, K, threads, policy, bK=32):
    """C = A @ B^T through a 2-stage K loop (fp16 in, fp32 accumulator)."""

    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as _bx:
            a_s = T.alloc_shared((M, bK), "float16")
            b_s = T.alloc_shared((N, bK), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            for ko in T.Pipelined(K // bK, num_stages=2):
                T.copy(A[0, ko * bK], a_s)
                T.copy(B[0, ko * bK], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True, policy=policy)
            T.copy(acc, C)

    return k


def epilogue_kernel(M, N, K, threads, policy):
    """acc = A @ B^T; r = rowsum(acc); Out[i, j] = acc[i, j] * s[j] + r[i] (a per-column fragment
    read across the accumulator and a row fragment read across it)."""

    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), Sc: T.Tensor((N,), "float32"),
          Out: T.Tensor((M, N), "float32"), R: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads) as _bx:
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((N, K), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            s = T.alloc_fragment((N,), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(Sc, s)
            T.gemm(a_s, b_s, acc, transpose_B=True, clear_accum=True, policy=policy)
            T.reduce_sum(acc, r, dim=1)
            for i, j in T.Parallel(M, N):
                acc[i, j] = acc[i, j] * s[j] + r[i]
            T.copy(acc, Out)
            T.copy(r, R)

    return k


def _check_indexer_on_host(run_on_host, kern, M, Q, H, K, seed, blocks=2):
    """Run an indexer kernel over `blocks` row tiles of fresh inputs and compare with float64."""
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(blocks * M, K, generator=g).half()
    B = torch.randn(Q * H, K, generator=g).half()
    Scale = torch.rand(blocks * M, generator=g) + 0.5
    W = torch.randn(Q, H, generator=g)
    Out = torch.full((Q, blocks * M), float("nan"))
    run_on_host(kern, [A, B, Scale, W, Out])
    torch.testing.assert_close(Out.double(), indexer_reference(A, B, Scale, W), rtol=1e-4, atol=1e-2)


def _ab(M, N, K, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, K, generator=g).half(), torch.randn(N, K, generator=g).half()


# (M, N, threads): the grid each policy gets (wg_m, wg_n); None: the policy is not honoured
GRIDS = [
    ((256, 128, 512), {"FullRow": (4, 1), "FullCol": (1, 4), "Square": (4, 1)}),
    ((256, 64, 512), {"FullRow": (4, 1), "FullCol": (1, 4), "Square": (4, 1)}),
    ((128, 256, 512), {"FullRow": None, "FullCol": (1, 4), "Square": (2, 2)}),
    ((128, 128, 256), {"FullRow": (2, 1), "FullCol": (1, 2), "Square": (2, 1)}),
]


@pytest.mark.nvrtc
@pytest.mark.parametrize("shape,grids", GRIDS)
@pytest.mark.parametrize("policy", ["FullRow", "FullCol", "Square"])
def test_policy_picks_the_grid(shape, grids, policy):
    M, N, threads = shape
    kern, msgs = _compile(gemm_kernel(M, N, 64, threads, POL[policy]), **NOCOST)
    want = grids[policy]
    assert _grid(kern.get_kernel_source()) == (want or grids["Square"])
    assert bool([m for m in msgs if "not honoured" in m]) == (want is None), msgs
    off, msgs = _compile(gemm_kernel(M, N, 64, threads, POL[policy]), **{"tl.disable_wgmma_policy": True})
    assert _grid(off.get_kernel_source()) == grids["Square"]  # the squarest split, whatever the policy
    assert not [m for m in msgs if "not honoured" in m], msgs


@pytest.mark.nvrtc
def test_policy_the_shape_cannot_take_warns_and_keeps_the_square_split():
    # FullRow over 4 warpgroups needs 256 rows; 128 x 256 keeps (2, 2)
    kern, msgs = _compile(gemm_kernel(128, 256, 64, 512, T.GemmWarpPolicy.FullRow))
    assert _grid(kern.get_kernel_source()) == (2, 2)
    assert [m for m in msgs if "policy=FullRow is not honoured" in m and "64 rows" in m], msgs
    # FullCol over 4 warpgroups of 20 columns is no wgmma width (a multiple of 8): (4, 1)
    kern, msgs = _compile(gemm_kernel(256, 80, 64, 512, T.GemmWarpPolicy.FullCol))
    assert _grid(kern.get_kernel_source()) == (4, 1)
    assert [m for m in msgs if "policy=FullCol is not honoured" in m and "20 columns" in m], msgs


@pytest.mark.parametrize("shape,policy", [((256, 64, 512), "FullRow"), ((256, 64, 512), "FullCol"),
                                          ((128, 256, 512), "Square"), ((128, 256, 512), "FullCol"),
                                          ((64, 256, 512), "FullCol"), ((128, 128, 256), "FullCol")])
def test_policy_gemm_on_host(shape, policy, run_on_host):
    M, N, threads = shape
    K = 64
    kern, _ = _compile(gemm_kernel(M, N, K, threads, POL[policy]), **NOCOST)
    wg_m, wg_n = _grid(kern.get_kernel_source())
    assert (wg_m == 1) if policy == "FullCol" else (wg_n == 1) if policy == "FullRow" else True
    a, b = _ab(M, N, K, seed=M + N + len(policy))
    c = torch.full((M, N), float("nan"))
    run_on_host(kern, [a, b, c])
    torch.testing.assert_close(c.double(), a.double() @ b.double().T, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("cost", [True, False])
@pytest.mark.parametrize("policy", ["FullCol", "FullRow", "Square"])
def test_row_sum_and_column_epilogue_on_host(policy, cost, run_on_host):
    M, N, K, threads = 256, 128, 32, 512
    kern, _ = _compile(epilogue_kernel(M, N, K, threads, POL[policy]), **({} if cost else NOCOST))
    src = kern.get_kernel_source()
    # FullCol's 1 x 4 splits every row sum over 4 warpgroups and reads 256 + 32 rows a k-step: not taken
    assert _grid(src) == {"FullCol": (4, 1) if cost else (1, 4), "FullRow": (4, 1), "Square": (4, 1)}[policy]
    a, b = _ab(M, N, K, seed=7 + len(policy))
    sc = torch.rand(N) + 0.5
    out, r = torch.full((M, N), float("nan")), torch.full((M,), float("nan"))
    run_on_host(kern, [a, b, sc, out, r])
    c = a.double() @ b.double().T
    rs = c.sum(1)
    torch.testing.assert_close(r.double(), rs, rtol=1e-4, atol=1e-2)
    torch.testing.assert_close(out.double(), c * sc.double()[None] + rs[:, None], rtol=1e-4, atol=1e-2)


# (M, Q, H, K, threads): 1 segment a warpgroup (the indexer at 512 threads), 2 segments a warpgroup,
# a segment over 2 warpgroups (pool_mqa_fp8's 64 heads), over 4
SEGMENTS = [(256, 4, 32, 64, 512), (128, 4, 32, 64, 256), (128, 8, 16, 32, 256), (256, 2, 64, 64, 512),
            (64, 1, 128, 32, 512)]


@pytest.mark.parametrize("M,Q,H,K,threads", SEGMENTS)
@pytest.mark.parametrize("split", [True, False])
def test_indexer_pattern_full_col_on_host(M, Q, H, K, threads, split, run_on_host):
    """The fp8 lighting indexer's body in fp16 under FullCol: the gemm's warpgroups split N, the
    weights are the thread's columns, the per-row scales its rows, and the segment sums stay in
    registers (no `_red` scratch) unless tl.disable_split_segment_reduce."""
    cfg = {**NOCOST, **({} if split else {"tl.disable_split_segment_reduce": True})}
    kern, msgs = _compile(indexer_kernel(M, Q, H, K, threads, policy=T.GemmWarpPolicy.FullCol), **cfg)
    src = kern.get_kernel_source()
    assert _grid(src) == (1, threads // 128)
    assert ("s3_red" in src) != split, src
    assert ("s3_segs" in src) == (split and H > Q * H // (threads // 128)), src  # partials of spanned segments
    if split:
        assert not [m for m in msgs if "reduces through a shared-memory copy" in m], msgs
        assert "float w[" in src, src  # the weights: the thread's columns, in registers
    else:
        assert [m for m in msgs if "reduces through a shared-memory copy" in m
                and "tl.disable_split_segment_reduce is set" in m], msgs
    _check_indexer_on_host(run_on_host, kern, M, Q, H, K, seed=M * Q + H)


@pytest.mark.parametrize("Q,H", [(4, 32), (2, 64), (8, 16)])
def test_segments_over_split_warps_on_host_sm80(Q, H, run_on_host):
    """mma.sync (sm_80) with the columns split over 4 warps of 32 columns each (2 x 4 warps): each
    warp's columns are one segment (H 32), two (H 16), or half of one (H 64: the two warps'
    partials meet in shared memory); no full-tile scratch."""
    M, K, threads = 128, 64, 256
    kern, _ = _compile(indexer_kernel(M, Q, H, K, threads, policy=T.GemmWarpPolicy.Square), arch="sm_80")
    src = kern.get_kernel_source()
    assert "s3_red" not in src and "tl::gemm_ss<128, 128, 64, 2, 4," in src, src
    assert ("s3_segs" in src) == (H == 64), src
    _check_indexer_on_host(run_on_host, kern, M, Q, H, K, seed=11)


@pytest.mark.parametrize("cost", [True, False])
@pytest.mark.parametrize("Q,H", [(4, 32), (2, 64)])
def test_pipelined_indexer_on_host(Q, H, cost, run_on_host):
    NKV, M, K, threads = 768, 256, 64, 512
    kern, msgs = _compile(lighting_indexer(NKV, M, Q, H, K, threads), **({} if cost else NOCOST))
    src = kern.get_kernel_source()
    # FullCol's 1 x 4 reads 256 + 32 rows a warpgroup a k-step against 4 x 1's 64 + 128 (and, at H 64,
    # splits each head segment over 2 warpgroups): the policy is not taken unless NOCOST
    assert _grid(src) == ((4, 1) if cost else (1, 4)) and "s3_red" not in src, src
    assert ("s3_segs" in src) == (not cost and H == 64), src
    assert "tl::mbarrier_wait" in src, src  # the warp-specialized loop
    g = torch.Generator().manual_seed(Q * H + 3)
    kv = torch.randn(NKV, K, generator=g).half()
    qm = torch.randn(Q * H, K, generator=g).half()
    scale = torch.rand(NKV, generator=g) + 0.5
    w = torch.randn(Q, H, generator=g)
    out = torch.full((Q, NKV), float("nan"))
    run_on_host(kern, [kv, qm, scale, w, out])
    torch.testing.assert_close(out.double(), indexer_reference(kv, qm, scale, w), rtol=1e-4, atol=1e-2)


def test_grid_cost_counts_crossing_reductions_then_operand_rows():
    from tilelang.transform.cuda.gemm_paths import grid_cost

    # pool_mqa_fp8: 64-head segments of a 256 x 128 tile; 1 x 4 splits each over 2 warpgroups
    assert grid_cost(256, 128, (4, 1), (("n", 64),)) == (0, 192)
    assert grid_cost(256, 128, (1, 4), (("n", 64),)) == (1, 288)
    # the lighting indexer's 32-head segments stay whole either way: only the operand rows differ
    assert grid_cost(256, 128, (1, 4), (("n", 32),)) == (0, 288)
    # a row max over 128 x 256 on 2 warpgroups: 1 x 2 reads less but splits every row over both
    assert grid_cost(128, 256, (1, 2), (("n", 256),)) == (1, 256) > grid_cost(128, 256, (2, 1), (("n", 256),))
    assert grid_cost(256, 128, (4, 1), (("m", 256),)) == (1, 192)  # a column sum crosses the 4 row blocks


# (M, N, threads, policy, row sum) -> the grid taken: FullCol's where it costs no more than the squarest
COSTED = [((256, 128, 512, "FullCol", False), (4, 1)), ((256, 128, 512, "FullCol", True), (4, 1)),
          ((128, 256, 512, "FullCol", False), (1, 4)), ((128, 128, 256, "FullCol", False), (1, 2)),
          ((128, 256, 256, "FullRow", False), (2, 1)), ((128, 256, 256, "FullRow", True), (2, 1))]  # FullRow: always


@pytest.mark.parametrize("case,grid", COSTED)
def test_policy_grid_taken_where_it_costs_no_more_on_host(case, grid, run_on_host):
    M, N, threads, policy, row_sum = case
    K = 32
    fn = (epilogue_kernel if row_sum else gemm_kernel)(M, N, K, threads, POL[policy])
    kern, msgs = _compile(fn)
    assert _grid(kern.get_kernel_source()) == grid
    assert not [m for m in msgs if "not honoured" in m], msgs
    a, b = _ab(M, N, K, seed=M * 3 + N + threads + row_sum)
    c = a.double() @ b.double().T
    if not row_sum:
        out = torch.full((M, N), float("nan"))
        run_on_host(kern, [a, b, out])
        torch.testing.assert_close(out.double(), c, rtol=1e-4, atol=1e-3)
        return
    sc = torch.rand(N, generator=torch.Generator().manual_seed(M + N)) + 0.5
    out, r = torch.full((M, N), float("nan")), torch.full((M,), float("nan"))
    run_on_host(kern, [a, b, sc, out, r])
    rs = c.sum(1)
    torch.testing.assert_close(r.double(), rs, rtol=1e-4, atol=1e-2)
    torch.testing.assert_close(out.double(), c * sc.double()[None] + rs[:, None], rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("M,Q,H,K,threads", SEGMENTS)
def test_indexer_pattern_costed_grid_on_host(M, Q, H, K, threads, run_on_host):
    """The indexer under FullCol with the cost check: 256-row tiles at 512 threads keep 4 x 1 (m64n128,
    whole segments a warpgroup); 128 x 128 at 256 threads costs the same either way and takes 1 x 2;
    64 rows allow only 1 x 4."""
    kern, _ = _compile(indexer_kernel(M, Q, H, K, threads, policy=T.GemmWarpPolicy.FullCol))
    src = kern.get_kernel_source()
    groups = threads // 128
    assert _grid(src) == ((groups, 1) if M == 256 else (1, groups))
    assert "s3_red" not in src, src
    _check_indexer_on_host(run_on_host, kern, M, Q, H, K, seed=M * Q + H + 1)
