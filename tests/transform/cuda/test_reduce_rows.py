"""T.reduce_* over the rows of a gemm accumulator whose columns are split over warps (mma
warps_n > 1) or warpgroups (wgmma wg_n > 1): each thread folds its columns and its quad, the
column groups' partials meet in a rows x G shared scratch, and the result lands in a row
fragment (registers) or a shared tile. CPU float64 semantics, NVRTC source checks (no full-tile
scratch copy), and the same kernels on the GPU against float64."""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

REDUCERS = {
    "sum": (T.reduce_sum, lambda x: x.sum(1)),
    "max": (T.reduce_max, lambda x: x.amax(1)),
    "min": (T.reduce_min, lambda x: x.amin(1)),
    "abssum": (T.reduce_abssum, lambda x: x.abs().sum(1)),
    "absmax": (T.reduce_absmax, lambda x: x.abs().amax(1)),
}
FOLD = {"sum": torch.add, "max": torch.maximum, "min": torch.minimum, "absmax": torch.maximum}


def acc_rows_kernel(kind, M, N, K, threads, clear, dst="fragment"):
    """C = A @ B^T (fp16 in, fp32 acc); r = reduce_kind(C, dim=1) (folded into Init when not
    clear); Out = C - r[i] (a read of r across the accumulator's rows); R = r."""
    fn = REDUCERS[kind][0]

    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), Init: T.Tensor((M,), "float32"),
          Out: T.Tensor((M, N), "float32"), R: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads) as _bx:
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((N, K), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32") if dst == "fragment" else T.alloc_shared((M,), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, acc, transpose_B=True, clear_accum=True)
            T.copy(Init, r)
            if clear:
                fn(acc, r, dim=1)
            else:
                fn(acc, r, dim=1, clear=False)
            for i, j in T.Parallel(M, N):
                acc[i, j] = acc[i, j] - r[i]
            T.copy(acc, Out)
            T.copy(r, R)

    return k


def reference(kind, clear, a, b, init):
    c = a.double() @ b.double().T
    r = REDUCERS[kind][1](c)
    if not clear:
        r = FOLD[kind](r, init.double())
    return c - r[:, None], r


def inputs(M, N, K, device="cpu"):
    a = torch.randn(M, K, device=device).half()
    b = torch.randn(N, K, device=device).half()
    init = torch.randn(M, device=device)
    return a, b, init


def run_and_check(kern, kind, clear, M, N, K, device):
    a, b, init = inputs(M, N, K, device)
    out = torch.full((M, N), float("nan"), device=device)
    r = torch.full((M,), float("nan"), device=device)
    kern(a, b, init, out, r)
    ref_out, ref_r = reference(kind, clear, a.cpu(), b.cpu(), init.cpu())
    tol = 1e-3 * K  # fp32 accumulation of K fp16 products, sums of N of them
    torch.testing.assert_close(r.cpu().double(), ref_r, rtol=1e-4, atol=tol)
    torch.testing.assert_close(out.cpu().double(), ref_out, rtol=1e-4, atol=tol)


CASES = [(k, c) for k in REDUCERS for c in (True, False) if not (k == "abssum" and not c)]


@pytest.mark.parametrize("kind,clear", CASES)
def test_accumulator_rows_256_threads_cpu(kind, clear):
    M, N, K = 64, 64, 64
    kern = tilelang.compile(acc_rows_kernel(kind, M, N, K, 256, clear), target="cpu")
    run_and_check(kern, kind, clear, M, N, K, "cpu")


# (M, N, threads, arch, column groups): wgmma 64x64 over 2 warpgroups -> 1 x 2; 128x256 -> 1 x 2
# with two m64 blocks; 128x128 over 4 warpgroups -> 2 x 2; mma 128x64 over 4 warps -> 2 x 2 and
# 64x64 over 8 warps -> 2 x 4
SPLITS = [(64, 64, 256, "sm_90a", 2), (128, 256, 256, "sm_90a", 2), (128, 128, 512, "sm_90a", 2),
          (128, 64, 128, "sm_80", 2), (64, 64, 256, "sm_80", 4)]


def compile_cuda(func, arch, on_device=False):
    """on_device: a cubin only runs on its own arch, so the mma.sync (sm_80) cases are built for the
    GPU's arch with wgmma turned off, which gives them the same mma.sync accumulator layouts."""
    target, configs = f"cuda -arch={arch}", None
    if on_device:
        target = "cuda"
        configs = {"tl.disable_wgmma": True} if arch == "sm_80" else None
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        kern = tilelang.compile(func, target=target, pass_configs=configs)
    return kern, [str(x.message) for x in w]


@pytest.mark.nvrtc
@pytest.mark.parametrize("M,N,threads,arch,groups", SPLITS)
@pytest.mark.parametrize("dst", ["fragment", "shared"])
def test_split_rows_use_a_small_scratch(M, N, threads, arch, groups, dst):
    kern, msgs = compile_cuda(acc_rows_kernel("max", M, N, 64, threads, False, dst), arch)
    src = kern.get_kernel_source()
    assert "acc_red" not in src, "the accumulator was copied to a full-tile scratch"
    assert "tl_quad_max(" in src
    assert f"acc_rows1[(int64_t)i_" in src and f" * {groups} + " in src, src
    if dst == "fragment":  # r and everything reading it stay in registers
        assert not [m for m in msgs if "kept in shared memory" in m], msgs
    scratch = M * groups * 4
    tiles = (M + N) * 64 * 2 + M * 4 * (dst == "shared")
    assert kern.artifact.csource.smem_bytes <= tiles + scratch + 1024, kern.artifact.csource.smem_bytes
    for line in src.splitlines():  # every shuffle a statement of its own (all lanes reach it)
        if "tl_quad_" in line:
            assert "?" not in line, line


@pytest.mark.nvrtc
def test_mla_decode_shape_scratch_is_rows_times_groups(run_on_host):
    """The deepseek_mla decode shape: 64 x 64 scores on 2 warpgroups (columns split), max with
    clear=False then sum: two 64 x 2 float scratches (512 B each), no 64 x 64 copy."""
    def prog():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), Out: T.Tensor((64, 64), "float16"),
              L: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=256) as _bx:
                a_s = T.alloc_shared((64, 64), "float16")
                b_s = T.alloc_shared((64, 64), "float16")
                acc_s = T.alloc_fragment((64, 64), "float32")
                m = T.alloc_fragment((64,), "float32")
                s = T.alloc_fragment((64,), "float32")
                T.copy(A, a_s)
                T.copy(B, b_s)
                T.gemm(a_s, b_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
                T.fill(m, -T.infinity("float32"))
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i, j in T.Parallel(64, 64):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, s, dim=1)
                for i, j in T.Parallel(64, 64):
                    acc_s[i, j] = acc_s[i, j] / s[i]
                T.copy(acc_s, Out)
                T.copy(s, L)

        return k

    kern, msgs = compile_cuda(prog(), "sm_90a")
    src = kern.get_kernel_source()
    assert not [m for m in msgs if "kept in shared memory" in m], msgs
    assert "acc_s_red" not in src
    assert "acc_s_rows1[(int64_t)" in src and "acc_s_rows2[(int64_t)" in src
    # each warpgroup stores its own column half's partial (at row * 2 + tid / 128; shared_index_split
    # prints a static shared tile's index flat, the division as a shift)
    for rows in ("acc_s_rows1", "acc_s_rows2"):
        assert re.search(rows + r"\[[^\]=]*\(tid (?:/ 128|>> 7)\)[^\]=]*\] = rpart", src), src
    assert kern.artifact.csource.smem_bytes <= 2 * 64 * 64 * 2 + 2 * 64 * 2 * 4 + 1024
    # the softmax rows and their sums against float64 on the host emulator
    g = torch.Generator().manual_seed(3)
    a, b = (torch.randn(64, 64, generator=g) / 4).half(), (torch.randn(64, 64, generator=g) / 4).half()
    out, sums = torch.full((64, 64), float("nan")).half(), torch.full((64,), float("nan"))
    run_on_host(kern, [a, b, out, sums])
    s = a.double() @ b.double().T
    p = torch.exp2(s - s.max(1, keepdim=True).values)
    torch.testing.assert_close(sums.double(), p.sum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.double(), p / p.sum(1, keepdim=True), rtol=2e-3, atol=1e-4)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("M,N,threads,arch,groups", SPLITS)
@pytest.mark.parametrize("kind,clear", [("max", False), ("sum", True), ("sum", False), ("absmax", True),
                                        ("min", False), ("abssum", True)])
@pytest.mark.parametrize("dst", ["fragment", "shared"])
def test_split_rows_match_float64_on_gpu(M, N, threads, arch, groups, kind, clear, dst):
    if arch == "sm_90a" and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs an sm_90 GPU")
    kern, _ = compile_cuda(acc_rows_kernel(kind, M, N, 64, threads, clear, dst), arch, on_device=True)
    for _ in range(2):
        run_and_check(kern, kind, clear, M, N, 64, "cuda")
    _ = groups
