"""CUDA lowering fast paths: vector accesses in element loops, ldmatrix into accumulator-layout
tiles, and T.annotate_layout swizzles. Each kernel's CUDA source (NVRTC-compiled for sm_90a or
sm_80) is inspected, and the same kernel runs on the CPU backend against a float64 reference."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout import make_swizzled_layout

SCALAR = "scalar accesses instead of"


def cuda(func, arch="sm_90a"):
    """(CUDA source of the kernel body, warning messages)."""
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        k = tilelang.compile(func, target=f"cuda -arch={arch}")
    src = k.get_kernel_source()
    return src[src.index("__global__"):], [str(w.message) for w in rec]


def run_cpu(func, *inputs, out_shape, out_dtype):
    """Run on the CPU backend with a NaN-poisoned output; returns the output."""
    k = tilelang.compile(func, target="cpu")
    out = torch.full(out_shape, float("nan"), dtype=out_dtype)
    k(*inputs, out)
    return out


def close(got, ref, tol):
    assert not torch.isnan(got).any(), "unwritten output elements"
    err = (got.double() - ref).abs().max().item()
    assert err <= tol * max(1.0, ref.abs().max().item()), err


# ----------------------------------------------------------------------------- kernels


def add_global(M, N, bM=16, bN=64, dtype="float32", out_dtype=None, threads=128):
    """T.Parallel straight over global tensors (guards come from the safe-memory pass)."""
    out_dtype = out_dtype or dtype

    @T.prim_func
    def add_global(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            for i, j in T.Parallel(bM, bN):
                C[by * bM + i, bx * bN + j] = A[by * bM + i, bx * bN + j] * 2 + B[by * bM + i, bx * bN + j]

    return add_global


def tile_add(M, N, bM=32, bN=128, dtype="float32"):
    """The elementwise example: a shared tile plus a register tile, both loaded from global."""

    @T.prim_func
    def tile_add(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bN), dtype)
            B_l = T.alloc_fragment((bM, bN), dtype)
            C_l = T.alloc_fragment((bM, bN), dtype)
            T.copy(A[by * bM, bx * bN], A_s)
            T.copy(B[by * bM, bx * bN], B_l)
            for i, j in T.Parallel(bM, bN):
                C_l[i, j] = A_s[i, j] + B_l[i, j]
            T.copy(C_l, C[by * bM, bx * bN])

    return tile_add


def transpose(M, N, b=32):
    @T.prim_func
    def transpose(A: T.Tensor((M, N), "float32"), B: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(N, b), T.ceildiv(M, b), threads=128) as (bx, by):
            for i, j in T.Parallel(b, b):
                B[bx * b + j, by * b + i] = A[by * b + i, bx * b + j]

    return transpose


def even_columns(M, N, b=64):
    """A load under a condition that differs between neighbouring columns."""

    @T.prim_func
    def even_columns(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, b), T.ceildiv(M, b), threads=128) as (bx, by):
            for i, j in T.Parallel(b, b):
                C[by * b + i, bx * b + j] = T.if_then_else(j % 2 == 0, A[by * b + i, bx * b + j], 0.0)

    return even_columns


def row_sums(M, N, bM=8):
    """Fragments only and a reduction: nothing a vector could serve."""

    @T.prim_func
    def row_sums(A: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bM), threads=128) as bx:
            a = T.alloc_fragment((bM, N), "float32")
            s = T.alloc_fragment((bM,), "float32")
            T.copy(A[bx * bM, 0], a)
            for i, j in T.Parallel(bM, N):
                a[i, j] = a[i, j] * a[i, j]
            T.reduce_sum(a, s, dim=1)
            T.copy(s, S[bx * bM])

    return row_sums


def residual(M=64, N=48, K=32, dtype="float16", row=None):
    """C = A @ B + R, R read from shared into a half tile that takes the accumulator layout."""
    row = row or N

    @T.prim_func
    def residual(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), R: T.Tensor((M, N), dtype),
                 C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), dtype)
            B_s = T.alloc_shared((K, N), dtype)
            R_s = T.alloc_shared((M, row), dtype)
            R_f = T.alloc_fragment((M, N), dtype)
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.copy(R, R_s[0:M, 0:N])
            T.clear(C_f)
            T.gemm(A_s, B_s, C_f)
            T.copy(R_s[0:M, 0:N], R_f)
            for i, j in T.Parallel(M, N):
                C_f[i, j] = C_f[i, j] + R_f[i, j]
            T.copy(C_f, C)

    return residual


def rs_gemm(M=64, N=64, K=32):
    """A tile read from shared into registers, then a register-A gemm (wgmma RS on sm_90a)."""

    @T.prim_func
    def rs_gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            A_f = T.alloc_fragment((M, K), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.copy(A_s, A_f)
            T.clear(C_f)
            T.gemm(A_f, B_s, C_f)
            T.copy(C_f, C)

    return rs_gemm


def annotated(M, N, b=64, layout="swizzled"):
    @T.prim_func
    def annotated(A: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, b), T.ceildiv(M, b), threads=128) as (bx, by):
            A_s = T.alloc_shared((b, b), "float16")
            if layout == "swizzled":
                T.annotate_layout({A_s: make_swizzled_layout(A_s)})
            else:
                T.annotate_layout({A_s: tilelang.layout.Layout((b, b), lambda i, j: (j, i))})
            T.copy(A[by * b, bx * b], A_s)
            for i, j in T.Parallel(b, b):
                A_s[i, j] = A_s[i, j] * 2 + 1
            T.copy(A_s, C[by * b, bx * b])

    return annotated


# ----------------------------------------------------------------------------- T.Parallel vectors


@pytest.mark.parametrize("dtype,vec", [("float32", 4), ("float16", 8)])
def test_parallel_over_global_uses_whole_vector_guards(dtype, vec):
    src, msgs = cuda(add_global(100, 200, dtype=dtype))
    assert f"tl::load_vec<{vec}>(A_v" in src and f"tl::load_vec<{vec}>(B_v" in src
    assert f"tl::store_vec<{vec}>(&C[" in src
    # the store happens for whole vectors: guarded at the group's first column only
    lines = src.splitlines()
    at = next(n for n, line in enumerate(lines) if "tl::store_vec" in line)
    guard = lines[at - 1]
    assert guard.strip().startswith("if (") and "j0) < 200)" in guard and "< 100)" in guard, guard
    assert "j0)]" in lines[at]
    assert not [m for m in msgs if SCALAR in m], msgs


@pytest.mark.parametrize("M,N", [(100, 192), (37, 200), (5, 64)])
def test_parallel_over_global_runs_on_cpu(M, N):
    a, b = torch.randn(M, N), torch.randn(M, N)
    got = run_cpu(add_global(M, N), a, b, out_shape=(M, N), out_dtype=torch.float32)
    close(got, a.double() * 2 + b.double(), 1e-6)


def test_mixed_dtypes_take_the_widest_element_for_the_width():
    src, msgs = cuda(add_global(64, 128, dtype="float16", out_dtype="float32"))
    assert "tl::load_vec<4>(A_v" in src and "tl::store_vec<4>(&C[" in src  # 8-byte half, 16-byte float
    a, b = torch.randn(64, 128).half(), torch.randn(64, 128).half()
    got = run_cpu(add_global(64, 128, dtype="float16", out_dtype="float32"), a, b, out_shape=(64, 128),
                  out_dtype=torch.float32)
    close(got, a.double() * 2 + b.double(), 1e-3)


def test_row_length_not_a_multiple_of_the_width_falls_back_with_a_warning():
    src, msgs = cuda(add_global(100, 202))
    assert "load_vec" not in src and "store_vec" not in src
    warn = [m for m in msgs if SCALAR in m]
    assert len(warn) == 1 and "rows of 202 elements" in warn[0] and "not a multiple of 4" in warn[0], msgs
    a, b = torch.randn(100, 202), torch.randn(100, 202)
    close(run_cpu(add_global(100, 202), a, b, out_shape=(100, 202), out_dtype=torch.float32),
          a.double() * 2 + b.double(), 1e-6)


def test_register_tile_loops_vectorize_their_shared_and_global_accesses():
    src, msgs = cuda(tile_add(300, 500))
    assert "tl::load_vec<4>(A_s_v" in src  # the T.Parallel's shared operand
    assert "tl::load_vec<4>(B_v" in src  # global -> register tile copy
    assert "tl::store_vec<4>(&C[" in src  # register tile -> global copy
    assert not [m for m in msgs if SCALAR in m], msgs
    for M, N in ((300, 500), (33, 132)):
        a, b = torch.randn(M, N), torch.randn(M, N)
        close(run_cpu(tile_add(M, N), a, b, out_shape=(M, N), out_dtype=torch.float32), a.double() + b.double(), 1e-6)


def test_non_contiguous_access_is_reported_with_its_buffer():
    src, msgs = cuda(transpose(96, 64))
    assert "store_vec" not in src and "load_vec" not in src
    warn = [m for m in msgs if SCALAR in m]
    assert len(warn) == 1 and "B[bx * 32 + j, by * 32 + i]" in warn[0] and "changes row" in warn[0], msgs
    a = torch.randn(96, 64)
    close(run_cpu(transpose(96, 64), a, out_shape=(64, 96), out_dtype=torch.float32), a.double().T, 0)


def test_a_guard_that_differs_within_a_vector_is_reported():
    src, msgs = cuda(even_columns(64, 128))
    assert "load_vec" not in src
    warn = [m for m in msgs if SCALAR in m]
    assert len(warn) == 1 and "A[" in warn[0] and "under the condition" in warn[0], msgs
    a = torch.randn(70, 130)
    ref = a.double().clone()
    ref[:, 1::2] = 0
    close(run_cpu(even_columns(70, 130), a, out_shape=(70, 130), out_dtype=torch.float32), ref, 0)


def test_reductions_and_fragment_only_loops_are_not_reported():
    src, msgs = cuda(row_sums(64, 96))
    assert not [m for m in msgs if SCALAR in m], msgs
    a = torch.randn(61, 96)
    close(run_cpu(row_sums(61, 96), a, out_shape=(61,), out_dtype=torch.float32), (a.double() ** 2).sum(1), 1e-5)


def test_examples_take_vector_accesses():
    import importlib.util
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[3] / "examples"

    def load(name):
        spec = importlib.util.spec_from_file_location(name, root / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    src, _ = cuda(load("softmax").softmax.get_tir(300, 200))  # y stays in registers: 16-byte stores to Y
    assert "tl::load_vec<8>(x_shared_v" in src and "tl::store_vec<8>(&Y[" in src
    src, _ = cuda(load("rmsnorm").rmsnorm.get_tir(200, 1000))
    assert "tl::load_vec<8>(w_shared_v" in src and "tl::store_vec<8>(&Y[" in src


def test_vector_groups_cover_the_tile_once_at_aligned_columns(helpers):
    """Evaluate the emitted group coordinates for every thread: the vectors of each loop tile
    the (32, 128) domain exactly once, each starting at a multiple of its width."""
    from tilelang.ir import stmt as S
    from tilelang.ir.visitor import collect
    from tilelang.layout.layout import compile_exprs
    from tilelang.transform.cuda.lower_tile_ops import Raw, lower_kernel

    new, info = lower_kernel(helpers.tile_kernel(tile_add(300, 500), "sm_80"), [].append, 80, True)
    loops = [f for f in collect(new.body, lambda n: isinstance(n, S.For) and n.var.name == "g")]
    assert len(loops) == 3  # B -> B_l, the T.Parallel, C_l -> C
    for loop in loops:
        assert collect(loop.body, lambda n: isinstance(n, Raw) and "_vec<4>" in n.fmt)
        lets = [s for s in loop.body.stmts if isinstance(s, S.LetStmt)]
        fn = compile_exprs((info.tid, loop.var), tuple(s.value for s in lets))
        seen = []
        for tid in range(info.threads):
            for g in range(int(loop.extent.value)):
                i, j0 = fn(tid, g)
                assert j0 % 4 == 0
                seen += [(i, j0 + u) for u in range(4)]
        assert len(seen) == 32 * 128 and set(seen) == {(i, j) for i in range(32) for j in range(128)}


# ----------------------------------------------------------------------------- ldmatrix


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_shared_to_accumulator_layout_tile_uses_ldmatrix(arch):
    src, msgs = cuda(residual(), arch)
    assert "tl::ldmatrix_to<4>(&R_f[" in src, src
    assert not [m for m in msgs if "ldmatrix" in m], msgs
    a, b, r = (torch.randn(*s).half() for s in ((64, 32), (32, 48), (64, 48)))
    got = run_cpu(residual(), a, b, r, out_shape=(64, 48), out_dtype=torch.float32)
    close(got, a.double() @ b.double() + r.double(), 1e-2)


def test_register_a_gemm_fills_its_a_tile_with_ldmatrix():
    src, msgs = cuda(rs_gemm(), "sm_90a")
    assert "tl::ldmatrix_to<4>(&A_f[" in src and "tl::gemm_rs_sm90<" in src, src
    assert not [m for m in msgs if "A_f is kept in shared memory" in m], msgs
    a, b = torch.randn(64, 32).half(), torch.randn(32, 64).half()
    close(run_cpu(rs_gemm(), a, b, out_shape=(64, 64), out_dtype=torch.float32), a.double() @ b.double(), 1e-2)


def test_unaligned_shared_rows_fall_back_to_element_loads_with_a_warning():
    src, msgs = cuda(residual(row=52), "sm_80")
    assert "ldmatrix_to" not in src
    assert any("not with ldmatrix" in m and "52 elements" in m for m in msgs), msgs
    a, b, r = (torch.randn(*s).half() for s in ((64, 32), (32, 48), (64, 48)))
    got = run_cpu(residual(row=52), a, b, r, out_shape=(64, 48), out_dtype=torch.float32)
    close(got, a.double() @ b.double() + r.double(), 1e-2)


@pytest.mark.parametrize("arch,sm", [("sm_80", 80), ("sm_90a", 90)])
def test_ldmatrix_addresses_deliver_each_slot_its_layout_element(helpers, arch, sm):
    """Evaluate the emitted row/col/slot expressions for every thread: ldmatrix matrix m takes its
    rows from lanes 8m..8m+7, and lane l receives row l // 4, cols 2(l % 4) + {0, 1} of it in slots
    2m, 2m + 1 after the given one. Every slot must receive the element the tile's layout puts there."""
    from tilelang.ir import stmt as S
    from tilelang.ir.visitor import collect
    from tilelang.layout.layout import compile_exprs
    from tilelang.transform.cuda.layout_inference import infer_layouts
    from tilelang.transform.cuda.lower_tile_ops import Raw, lower_kernel

    func = rs_gemm() if sm == 90 else residual()
    name = "A_f" if sm == 90 else "R_f"
    k = helpers.tile_kernel(func, arch)
    plan = infer_layouts(k, sm, True)
    buf = next(a.buffer for a in collect(k.body, lambda n: isinstance(n, S.Allocate)) if a.buffer.name == name)
    lay = plan.layout(buf)
    new, info = lower_kernel(k, [].append, sm, True)
    loops = [f for f in collect(new.body, lambda n: isinstance(n, S.For))
             if collect(f.body, lambda n: isinstance(n, Raw) and "ldmatrix_to<4>" in n.fmt)]
    assert len(loops) == 1
    loop = loops[0]
    lets = {s.var.name: s.value for s in loop.body.stmts if isinstance(s, S.LetStmt)}
    raw = next(s for s in loop.body.stmts if isinstance(s, Raw))
    slot = raw.args[0].args[0].indices[0]
    fn = compile_exprs((info.tid, loop.var), (lets["r"], lets["c"], slot))
    seen = set()
    for warp in range(info.threads // 32):
        for p in range(int(loop.extent.value)):
            addr = [fn(warp * 32 + lane, p) for lane in range(32)]
            for lane in range(32):
                for m in range(4):
                    row, col, _ = addr[8 * m + lane // 4]
                    base = addr[lane][2]
                    for h in range(2):
                        want = tuple(int(x) for x in lay.coords(warp * 32 + lane, base + 2 * m + h))
                        assert (row, col + 2 * (lane % 4) + h) == want, (warp, lane, p, m, h)
                        seen.add((warp * 32 + lane, base + 2 * m + h))
    assert len(seen) == info.threads * lay.nlocal  # every slot of every thread, once


# ----------------------------------------------------------------------------- T.annotate_layout


def test_swizzled_annotation_makes_the_shared_tile_swizzled():
    src, msgs = cuda(annotated(128, 192))
    assert "A_s[tl::swizzle_offset<64, sizeof(tl_half)>(" in src
    assert "A_s[(int64_t)" not in src  # every access goes through the swizzle
    assert not [m for m in msgs if "annotate_layout" in m], msgs
    a = torch.randn(128, 192).half()
    close(run_cpu(annotated(128, 192), a, out_shape=(128, 192), out_dtype=torch.float16), a.double() * 2 + 1, 1e-2)


def test_unsupported_annotation_is_reported_not_ignored():
    src, msgs = cuda(annotated(64, 64, layout="transposed"))
    assert "swizzle_offset" not in src
    assert any("T.annotate_layout of A_s is ignored" in m for m in msgs), msgs
    a = torch.randn(64, 64).half()
    close(run_cpu(annotated(64, 64, layout="transposed"), a, out_shape=(64, 64), out_dtype=torch.float16),
          a.double() * 2 + 1, 1e-2)


def vectorized_gemv(N, K, TILE, offset=0):
    """The peer gemv's T.vectorized form: each thread loads TILE contiguous halves of A and B."""
    THREADS = 32

    @T.prim_func
    def main(A: T.Tensor((K,), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((N,), "float32")):
        with T.Kernel(N, threads=THREADS) as bn:
            tk = T.get_thread_binding()
            a = T.alloc_local((TILE,), "float16")
            b = T.alloc_local((TILE,), "float16")
            acc = T.alloc_local((1,), "float32")
            s = T.alloc_shared((1,), "float32")
            if tk == 0:
                s[0] = 0
            acc[0] = 0
            for bk in T.serial((K - offset) // (THREADS * TILE)):
                for k in T.vectorized(TILE):
                    a[k] = A[bk * THREADS * TILE + tk * TILE + k + offset]
                    b[k] = B[bn, bk * THREADS * TILE + tk * TILE + k + offset]
                for k in T.serial(TILE):
                    acc[0] += a[k].astype("float32") * b[k].astype("float32")
            T.atomic_add(s[0], acc[0])
            C[bn] = s[0]

    return main


def test_vectorized_loop_loads_one_vector_per_buffer():
    src, warns = cuda(vectorized_gemv(8, 512, 8))
    assert src.count("tl::load_vec<8>(") == 2, src
    assert not [w for w in warns if "T.vectorized" in w], warns


def test_vectorized_loop_at_an_unaligned_offset_stays_scalar_with_a_warning():
    src, warns = cuda(vectorized_gemv(8, 512 + 3, 8, offset=3))
    assert "load_vec" not in src
    assert any("T.vectorized(8)" in w and "multiple of 8" in w for w in warns), warns


@pytest.mark.parametrize("target", ["cpu", pytest.param("cuda", marks=[
    pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")])])
def test_vectorized_loop_runs(target):
    a, b = torch.randn(512).half(), torch.randn(8, 512).half()
    ref = b.double() @ a.double()
    k = tilelang.compile(vectorized_gemv(8, 512, 8), target=target)
    c = torch.full((8,), float("nan"), device=target)
    k(a.to(target), b.to(target), c)
    close(c.cpu(), ref, 1e-3)


def blocked_tile_store(M, N, blk=16, b=64):
    """A shared tile kept as (b/blk, b/blk, blk, blk) blocks, stored to global row by row (the
    public TileLang's gemm_intrinsics epilogue: C_shared[i // 16, j // 16, i % 16, j % 16])."""

    @T.prim_func
    def blocked_tile_store(A: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // b, M // b, threads=128) as (bx, by):
            S = T.alloc_shared((b // blk, b // blk, blk, blk), "float16")
            for i, j in T.Parallel(b, b):
                S[i // blk, j // blk, i % blk, j % blk] = A[by * b + i, bx * b + j] * 2
            for i, j in T.Parallel(b, b):
                C[by * b + i, bx * b + j] = S[i // blk, j // blk, i % blk, j % blk]

    return blocked_tile_store


def test_blocked_tile_indices_keep_vectors_within_a_block():
    """j // 16 is one value and j % 16 runs through 8 consecutive values over a group of 8 lanes:
    both loops move 16-byte vectors. The CUDA source run on the host matches float64."""
    src, msgs = cuda(blocked_tile_store(128, 128))
    assert not [m for m in msgs if SCALAR in m], msgs
    assert src.count("load_vec<8>") == 2 and src.count("store_vec<8>") == 2, src
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    k = tilelang.compile(blocked_tile_store(128, 128), target="cuda -arch=sm_90a")
    a = torch.randn(128, 128).half()
    c = torch.full((128, 128), float("nan")).half()
    prog = host.HostProgram({"k": k})
    prog.run("k", [a, c])
    prog.close()
    close(c, a.double() * 2, 0)


def test_a_block_narrower_than_the_vector_stays_scalar():
    """Blocks of 4 columns: j // 4 changes inside a group of 8 lanes, so the accesses stay scalar."""
    src, msgs = cuda(blocked_tile_store(64, 64, blk=4))
    warn = [m for m in msgs if SCALAR in m]
    assert warn and "changes row" in warn[0], msgs
    a = torch.randn(64, 64).half()
    out = run_cpu(blocked_tile_store(64, 64, blk=4), a, out_shape=(64, 64), out_dtype=torch.float16)
    close(out, a.double() * 2, 0)


def widen_through_float_tile(M=32, N=256):
    """bf16 rows (8 per thread: 16-byte vectors) widened into a swizzled float32 shared tile and
    read back: each thread's 8 floats are 32 bytes, two 16-byte chunks the swizzle moves apart."""

    @T.prim_func
    def widen_through_float_tile(A: T.Tensor((M, N), "bfloat16"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, N), "bfloat16")
            W = T.alloc_shared((M, N), "float32")
            A_f = T.alloc_fragment((M, N), "bfloat16")
            T.annotate_layout({W: make_swizzled_layout(W)})
            T.copy(A, A_s)
            T.copy(A_s, A_f)
            T.copy(A_f, W)
            for i, j in T.Parallel(M, N):
                A_f[i, j] = W[i, j] * 2
            T.copy(A_f, C)

    return widen_through_float_tile


def test_wide_shared_vectors_move_one_16_byte_chunk_each():
    """8 floats per thread into (and out of) a swizzled shared tile: two 16-byte vectors, each at its
    own chunk's swizzled address (eight 4-byte stores were 8-way bank conflicts); the CUDA source
    run on the host matches float64."""
    src, msgs = cuda(widen_through_float_tile())
    assert not [m for m in msgs if SCALAR in m], msgs
    assert src.count("store_vec<4>(&W[tl::swizzle_offset") == 2, src
    assert "store_vec<4>(&W[tl::swizzle_offset<256, sizeof(float)>(i_2, (j0_1 + 4))]" in src, src
    assert src.count("load_vec<4>(") == 2 and "load_vec<8>(W" not in src, src
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    k = tilelang.compile(widen_through_float_tile(), target="cuda -arch=sm_90a")
    a = torch.randn(32, 256).bfloat16()
    c = torch.full((32, 256), float("nan")).bfloat16()
    prog = host.HostProgram({"k": k})
    prog.run("k", [a, c])
    prog.close()
    close(c, a.double() * 2, 0)


def two_vectorized_reads_of_one_buffer():
    @T.prim_func
    def k(X: T.Tensor((256,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=32):
            t = T.get_thread_binding()
            a = T.alloc_local((4,), "float32")
            b = T.alloc_local((4,), "float32")
            for j in T.vectorized(4):
                a[j] = X[t * 4 + j]
            for j in T.vectorized(4):
                b[j] = X[128 + t * 4 + j]
            for j in T.vectorized(4):
                Y[t * 4 + j] = a[j] * b[j]
    return k


@pytest.mark.nvrtc
def test_vectorized_loops_reading_one_buffer_in_one_scope_have_their_own_registers():
    """Each T.vectorized loop's register copy of X gets its own name (both were X_v0: NVRTC refused it)."""
    from tilelang.testing import host_cuda_or_skip

    host = host_cuda_or_skip()
    src, _ = cuda(two_vectorized_reads_of_one_buffer())
    assert src.count("tl::load_vec<4>(") == 2, src
    x, y = torch.randn(256), torch.full((128,), float("nan"))
    host.HostProgram({"k": tilelang.compile(two_vectorized_reads_of_one_buffer(), target="cuda -arch=sm_90a")}
                     ).run("k", [x, y])
    assert torch.equal(y.double(), (x[:128].double() * x[128:].double()).float().double())
