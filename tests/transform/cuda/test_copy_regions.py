"""T.copy / T.fill / T.atomic_add over unit-extent, full-slice (`:`), corner and offset
regions, in every copy direction, with tiles whose rank differs from the region's ((1, N)
vs (N,), unit dims in the middle, trailing unit dims), on every way we can run them:

  cpu        the CPU backend;
  host_cuda  the CUDA source compiled for sm_90a by NVRTC, run on the host (tilelang/testing/host_cuda:
             each block thread is a host thread; no GPU needed);
  gpu        the same CUDA kernels on a GPU (marked cuda, run by the GPU tier).

Every output starts poisoned (NaN) and is compared with a float64 torch reference, so a
copy that drops an index (rms_norm's `A[bx * N + i]` for `A[bx, j]`) or skips elements fails.
"""
from __future__ import annotations

import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

M, N, TH = 8, 64, 128  # rows, columns, threads: tiles smaller and larger than the block
F32 = "float32"


def _load_host_cuda():
    from tilelang.testing import host_cuda as mod
    return mod


# ----------------------------------------------------------------------------- programs
# Each case: (prim_func builder, input shapes, output shapes, reference(inputs, outputs) -> outputs)

def row_fragment_1xn():
    """rms_norm's shape: A[bx:bx+1, :] -> (1, N) fragment -> B[bx:bx+1, :] (global->fragment->global)."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            f = T.alloc_fragment((1, N), F32)
            T.copy(A[bx:bx + 1, :], f)
            for i, j in T.Parallel(1, N):
                f[i, j] = f[i, j] * 2.0
            T.copy(f, B[bx:bx + 1, :])
    return k, lambda a, b: [a * 2]


def row_fragment_n():
    """A[bx, :] (unit row, squeezed) -> (N,) fragment -> B[bx, :]."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            f = T.alloc_fragment((N,), F32)
            T.copy(A[bx, :], f)
            T.copy(f, B[bx, :])
    return k, lambda a, b: [a]


def row_fragment_corner():
    """Corners: T.copy(A[bx, 0], (1, N) fragment) and back to B[bx, 0]."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            f = T.alloc_fragment((1, N), F32)
            T.copy(A[bx, 0], f)
            T.copy(f, B[bx, 0])
    return k, lambda a, b: [a]


def row_fragment_1xn_to_n_slice():
    """(1, N) region into an (N,) fragment and out through an (N,)-shaped row slice, offset columns."""
    @T.prim_func
    def k(A: T.Tensor((M, 2 * N), F32), B: T.Tensor((M, 2 * N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            f = T.alloc_fragment((N,), F32)
            T.copy(A[bx:bx + 1, N // 2:N // 2 + N], f)
            T.copy(f, B[bx, N // 4:N // 4 + N])
    def ref(a, b):
        b = b.clone()
        b[:, N // 4:N // 4 + N] = a[:, N // 2:N // 2 + N]
        return [b]
    return k, ref


def shared_row_1xn():
    """global -> (1, N) shared -> (N,) shared -> global (shared->shared across ranks)."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            s = T.alloc_shared((1, N), F32)
            t = T.alloc_shared((N,), F32)
            T.copy(A[bx:bx + 1, :], s)
            T.copy(s, t)
            T.copy(t, B[bx, :])
    return k, lambda a, b: [a]


def shared_to_fragment_to_shared():
    """global -> (2, N) shared -> (2, N) fragment -> (1, 2, N) shared -> global: every on-chip direction."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M // 2, threads=TH) as bx:
            s = T.alloc_shared((2, N), F32)
            f = T.alloc_fragment((2, N), F32)
            s2 = T.alloc_shared((1, 2, N), F32)
            T.copy(A[bx * 2:(bx + 1) * 2, :], s)
            T.copy(s, f)
            for i, j in T.Parallel(2, N):
                f[i, j] = f[i, j] + 1.0
            T.copy(f, s2)
            T.copy(s2, B[bx * 2, 0])
    return k, lambda a, b: [a + 1]


def column_shared():
    """A[:, bx] (a column: unit last dim) -> (M,) shared -> B[:, bx]; no vectors can apply."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(N, threads=TH) as bx:
            s = T.alloc_shared((M,), F32)
            T.copy(A[:, bx], s)
            T.copy(s, B[:, bx])
    return k, lambda a, b: [a]


def column_fragment_mx1():
    """A[0:M, bx:bx+1] -> (M, 1) fragment -> B[:, bx]: a trailing unit dim on the tile side."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(N, threads=TH) as bx:
            f = T.alloc_fragment((M, 1), F32)
            T.copy(A[0:M, bx:bx + 1], f)
            for i, j in T.Parallel(M, 1):
                f[i, j] = f[i, j] - 3.0
            T.copy(f, B[:, bx])
    return k, lambda a, b: [a - 3]


def middle_unit_dim():
    """X[r0:r0+2, bx, :] of a 3-d tensor (unit dim in the middle) into a (2, N) fragment and a
    (2, 1, N) shared tile, out through Y[r0:r0+2, bx:bx+1, :]."""
    C = 4

    @T.prim_func
    def k(X: T.Tensor((M, C, N), F32), Y: T.Tensor((M, C, N), F32), Z: T.Tensor((M, C, N), F32)):
        with T.Kernel(C, M // 2, threads=TH) as (bx, by):
            f = T.alloc_fragment((2, N), F32)
            s = T.alloc_shared((2, 1, N), F32)
            T.copy(X[by * 2:by * 2 + 2, bx, :], f)
            T.copy(f, Y[by * 2:by * 2 + 2, bx:bx + 1, :])
            T.copy(X[by * 2:by * 2 + 2, bx:bx + 1, :], s)
            T.copy(s, Z[by * 2:by * 2 + 2, bx, :])
    return k, lambda x, y, z: [x, x]


def fragment_middle_unit_dim():
    """A (2, 1, N) fragment (unit dim in the middle of the tile) to and from 2-d regions."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M // 2, threads=TH) as bx:
            f = T.alloc_fragment((2, 1, N), F32)
            T.copy(A[bx * 2:bx * 2 + 2, :], f)
            for i, u, j in T.Parallel(2, 1, N):
                f[i, u, j] = f[i, u, j] * 0.5
            T.copy(f, B[bx * 2, 0])
    return k, lambda a, b: [a * 0.5]


def partial_row_slice():
    """A[bx, 16:48] -> (32,) fragment -> B[bx, 16:48]: the rest of B must stay poisoned."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            f = T.alloc_fragment((32,), F32)
            T.copy(A[bx, 16:48], f)
            T.copy(f, B[bx, 16:48])
    def ref(a, b):
        b = b.clone()
        b[:, 16:48] = a[:, 16:48]
        return [b]
    return k, ref


def ragged_rows():
    """Blocks of 3 rows over 8 (the last block is partial): fragment (3, N) with guarded copies."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(T.ceildiv(M, 3), threads=TH) as bx:
            f = T.alloc_fragment((3, N), F32)
            T.copy(A[bx * 3:bx * 3 + 3, :], f)
            T.copy(f, B[bx * 3:bx * 3 + 3, :])
    return k, lambda a, b: [a]


def local_replicated():
    """A[bx, 0:4] -> T.alloc_local((4,)): every thread holds all four values (read as q[j % 4]),
    and a cleared (1,) local accumulator is zero on every thread; local -> global back out."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32), C: T.Tensor((M, 4), F32)):
        with T.Kernel(M, threads=TH) as bx:
            q = T.alloc_local((4,), F32)
            acc = T.alloc_local((1,), F32)
            T.clear(acc)
            T.copy(A[bx, 0:4], q)
            for j in T.Parallel(N):
                B[bx, j] = q[j % 4] + acc[0]
            T.copy(q, C[bx, :])
    return k, lambda a, b, c: [a[:, :4].repeat(1, N // 4), a[:, :4]]


def local_to_global_2d():
    """A[bx:bx+1, 0:8] -> (1, 8) local -> B[bx, 8:16] (a rank change on the way out of a local tile)."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            q = T.alloc_local((1, 8), F32)
            T.copy(A[bx:bx + 1, 0:8], q)
            T.copy(q, B[bx, 8:16])
    def ref(a, b):
        b = b.clone()
        b[:, 8:16] = a[:, 0:8]
        return [b]
    return k, ref


def fill_fragment_1xn():
    """T.fill of a (1, N) fragment, copied out through a unit-row region."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            f = T.alloc_fragment((1, N), F32)
            T.fill(f, 7.0)
            for i, j in T.Parallel(1, N):
                f[i, j] = f[i, j] + A[bx, j]
            T.copy(f, B[bx:bx + 1, :])
    return k, lambda a, b: [a + 7]


def atomic_from_fragment_1xn():
    """T.atomic_add(B[bx:bx+1, :], (1, N) fragment): the register-driven atomic maps (0, j) -> j."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            f = T.alloc_fragment((1, N), F32)
            T.copy(A[bx:bx + 1, :], f)
            T.atomic_add(B[bx:bx + 1, :], f)
    return k, lambda a, b: [b + a]


def gemm_row_times_matrix():
    """T.gemm((1, K) shared, (K, N) shared, (1, N) fragment): a one-row C (CUDA cores) reads A
    along its columns, not its always-zero row coordinate."""
    K = 16

    @T.prim_func
    def k(A: T.Tensor((M, K), F32), W: T.Tensor((K, N), F32), C: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            a = T.alloc_shared((1, K), F32)
            w = T.alloc_shared((K, N), F32)
            c = T.alloc_fragment((1, N), F32)
            T.copy(A[bx:bx + 1, :], a)
            T.copy(W, w)
            T.gemm(a, w, c, clear_accum=True)
            T.copy(c, C[bx:bx + 1, :])
    return k, lambda a, w, c: [a @ w], 2


def gemm_matrix_times_column():
    """T.gemm((M, K), (K, 1), (M, 1) fragment) with transpose_B (B stored (1, K)): a one-column C."""
    K = 16

    @T.prim_func
    def k(A: T.Tensor((M, K), F32), V: T.Tensor((N, K), F32), C: T.Tensor((M, N), F32)):
        with T.Kernel(N, threads=TH) as bx:
            a = T.alloc_shared((M, K), F32)
            v = T.alloc_shared((1, K), F32)
            c = T.alloc_fragment((M, 1), F32)
            T.copy(A, a)
            T.copy(V[bx:bx + 1, :], v)
            T.clear(c)
            T.gemm(a, v, c, transpose_B=True)
            T.copy(c, C[:, bx])
    return k, lambda a, v, c: [a @ v.T], 2


def fragment_1xn_to_fragment_n():
    """(1, N) fragment -> (N,) fragment (register to register across ranks) -> global."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            f = T.alloc_fragment((1, N), F32)
            g = T.alloc_fragment((N,), F32)
            T.copy(A[bx:bx + 1, :], f)
            T.copy(f, g)
            T.copy(g, B[bx, :])
    return k, lambda a, b: [a]


def flat_1d_into_1xn():
    """X[bx*N:(bx+1)*N] of a 1-d tensor -> (1, N) fragment -> (N, 1) shared -> Y[bx*N:(bx+1)*N]."""
    @T.prim_func
    def k(X: T.Tensor((M * N,), F32), Y: T.Tensor((M * N,), F32)):
        with T.Kernel(M, threads=TH) as bx:
            f = T.alloc_fragment((1, N), F32)
            s = T.alloc_shared((N, 1), F32)
            T.copy(X[bx * N:(bx + 1) * N], f)
            T.copy(f, s)
            T.copy(s, Y[bx * N:(bx + 1) * N])
    return k, lambda x, y: [x]


def shared_1xn_to_fragment_n():
    """(1, N) shared -> (N,) fragment -> (1, N) shared -> B[bx:bx+1, :] (shared <-> fragment across ranks)."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            s = T.alloc_shared((1, N), F32)
            f = T.alloc_fragment((N,), F32)
            t = T.alloc_shared((1, N), F32)
            T.copy(A[bx, 0], s)
            T.copy(s, f)
            T.copy(f, t)
            T.copy(t, B[bx:bx + 1, :])
    return k, lambda a, b: [a]


def rms_norm_rows():
    """The rms_norm pattern end to end: one row per block in a (1, N) fragment, a row sum of
    squares, rsqrt, scale, store through the same unit-row region."""
    @T.prim_func
    def k(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(M, threads=TH) as bx:
            x = T.alloc_fragment((1, N), F32)
            sq = T.alloc_fragment((1, N), F32)
            ss = T.alloc_fragment((1,), F32)
            T.copy(A[bx:(bx + 1), :], x)
            for i, j in T.Parallel(1, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(1):
                ss[i] = T.rsqrt(ss[i] / N + 1e-12)
            for i, j in T.Parallel(1, N):
                x[i, j] *= ss[i]
            T.copy(x, B[bx:(bx + 1), :])
    return k, lambda a, b: [a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-12)]


CASES = {f.__name__: f for f in (
    rms_norm_rows, flat_1d_into_1xn, shared_1xn_to_fragment_n, gemm_row_times_matrix, gemm_matrix_times_column, fragment_1xn_to_fragment_n,
    row_fragment_1xn, row_fragment_n, row_fragment_corner, row_fragment_1xn_to_n_slice, shared_row_1xn,
    shared_to_fragment_to_shared, column_shared, column_fragment_mx1, middle_unit_dim, fragment_middle_unit_dim,
    partial_row_slice, ragged_rows, local_replicated, local_to_global_2d, fill_fragment_1xn,
    atomic_from_fragment_1xn)}
ZERO_INIT = {"atomic_from_fragment_1xn"}  # outputs that start at zero (accumulated into), not NaN


def build(name):
    """(prim_func, reference, number of inputs): the inputs are the first params, the rest outputs."""
    out = CASES[name]()
    return out if len(out) == 3 else (*out, 1)


def tensors(name, func, n_in, device="cpu"):
    """Fresh random float32 inputs and poisoned (NaN) outputs."""
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    shapes = [tuple(int(s) for s in p.shape) for p in func.params]
    fill = 0.0 if name in ZERO_INIT else float("nan")
    ts = [torch.randn(s, generator=g) for s in shapes[:n_in]] + [torch.full(s, fill) for s in shapes[n_in:]]
    return [t.to(device) for t in ts]


def check(name, ref, n_in, ts, before):
    expect = ref(*[t.double() for t in before])
    assert len(expect) == len(ts) - n_in
    for what, (got, want) in enumerate(zip(ts[n_in:], expect)):
        got = got.double().cpu()
        bad = torch.isnan(got) != torch.isnan(want)
        assert not bad.any(), f"{name}: output {what}: {int(bad.sum())} elements poisoned / unpoisoned wrongly"
        ok = ~torch.isnan(want)
        err = (got[ok] - want[ok]).abs().max().item() if ok.any() else 0.0
        assert err <= 1e-4, f"{name}: output {what}: max error {err}"


def compile_quiet(func, target, configs=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(func, target=target, pass_configs=configs or {})


# ----------------------------------------------------------------------------- cpu backend
@pytest.mark.parametrize("name", sorted(CASES))
def test_cpu_backend_matches_float64(name):
    func, ref, n_in = build(name)
    k = compile_quiet(func, "cpu")
    ts = tensors(name, func, n_in)
    before = [t.clone() for t in ts]
    k(*ts)
    check(name, ref, n_in, ts, before)


# ----------------------------------------------------------------------------- CUDA on the host
_CUDA_CONFIGS = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}


@pytest.fixture(scope="module")
def host_program():
    host = _load_host_cuda()
    if not host.available():
        pytest.skip("g++ not installed")
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    kernels, funcs = {}, {}
    for name in CASES:
        funcs[name] = build(name)
        kernels[name] = compile_quiet(funcs[name][0], "cuda -arch=sm_90a", _CUDA_CONFIGS)
    return host.HostProgram(kernels), kernels, funcs


@pytest.mark.nvrtc
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_source_run_on_host_matches_float64(host_program, name):
    prog, kernels, funcs = host_program
    func, ref, n_in = funcs[name]
    ts = tensors(name, func, n_in)
    before = [t.clone() for t in ts]
    prog.run(name, ts)
    check(name, ref, n_in, ts, before)


@pytest.mark.nvrtc
def test_rms_norm_row_copy_reads_the_column(host_program):
    """The rms_norm bug as source text: the (1, N) fragment's load and store index A / B by
    the column (`bx * 64 + j...`), never by the always-zero row coordinate."""
    _, kernels, _ = host_program
    src = kernels["row_fragment_1xn"].get_kernel_source()
    loads = [ln for ln in src.splitlines() if "&A[" in ln or "A[(int64_t)" in ln]
    stores = [ln for ln in src.splitlines() if "&B[" in ln or "B[(int64_t)" in ln]
    assert loads and stores, src
    for ln in loads + stores:
        assert "bx * 64 + j" in ln.replace("(", "").replace(")", ""), ln


# ----------------------------------------------------------------------------- on a GPU
@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("configs", [{}, _CUDA_CONFIGS], ids=["default", "no_tma"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_matches_float64(name, configs):
    func, ref, n_in = build(name)
    k = compile_quiet(func, "cuda", configs)
    ts = tensors(name, func, n_in, "cuda")
    before = [t.clone() for t in ts]
    k(*ts)
    torch.cuda.synchronize()
    check(name, ref, n_in, [t.cpu() for t in ts], [t.cpu() for t in before])
