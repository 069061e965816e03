"""Index arithmetic of the CUDA source: swizzled rows split outside the swizzle (codegen/swizzle_rows.py,
`tl.disable_swizzle_row_split`), `0 <= tid < threads` stated to nvcc (`tl.disable_assume_tid_range`),
coordinate lets' floor divisions split (transform/cuda/let_floor_split.py, `tl.disable_let_floor_split`)
and power-of-two floor divisions of indices of unknown sign as shifts (`tl.disable_pow2_floor_shift`).

A hand-written mma.sync GEMM (TensorCoreIntrinEmitter: ldmatrix / mma / stmatrix into a 4-d staging
tile, a pipelined K loop, swizzled operand tiles) runs on the host (tilelang/testing/host_cuda, which also
checks the TL_ASSUME fact) against float64 with every switch on and all off; a gather through
`(i - 32) // 4`, `(i - 32) % 4` runs both ways; split_row is checked against a model of every swizzle
variant of include/tl/gemm_sm80.h."""
import random
import re

import pytest

import tilelang
import tilelang.language as T
from tilelang import dtypes as dt
from tilelang.codegen.swizzle_rows import split_row
from tilelang.cuda.intrinsics import TensorCoreIntrinEmitter, make_mma_swizzle_layout
from tilelang.ir import expr as E
from tilelang.testing.int_eval import int_value

from .conftest import check_gemm_nt, gemm_nt_operands

SM90 = "cuda -arch=sm_90a"
OFF = {"tl.disable_swizzle_row_split": True, "tl.disable_assume_tid_range": True,
       "tl.disable_let_floor_split": True, "tl.disable_pow2_floor_shift": True}


def emitter_gemm(M=128, N=128, K=96, bK=32):
    em = TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32", a_transposed=False,
                                 b_transposed=True, block_row_warps=2, block_col_warps=2, warp_row_tiles=64,
                                 warp_col_tiles=64, chunk=bK)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=128) as (_bx, _by):
            a_s = T.alloc_shared((M, bK), "float16")
            b_s = T.alloc_shared((N, bK), "float16")
            c_s = T.alloc_shared((M // 16, N // 16, 16, 16), "float32")
            a_l = T.alloc_local((4 * 8,), "float16")
            b_l = T.alloc_local((4 * 8,), "float16")
            c_l = T.alloc_local((4 * 4 * 8,), "float32")
            T.annotate_layout({a_s: make_mma_swizzle_layout(a_s), b_s: make_mma_swizzle_layout(b_s)})
            T.clear(c_l)
            for ko in T.Pipelined(K // bK, num_stages=2):
                for i, k in T.Parallel(M, bK):
                    a_s[i, k] = A[i, ko * bK + k]
                for j, k in T.Parallel(N, bK):
                    b_s[j, k] = B[j, ko * bK + k]
                for ki in T.serial(bK // 16):
                    em.ldmatrix_a(a_l, a_s, ki)
                    em.ldmatrix_b(b_l, b_s, ki)
                    em.mma(a_l, b_l, c_l)
            em.stmatrix(c_l, c_s)
            for i, j in T.Parallel(M, N):
                C[i, j] = c_s[i // 16, j // 16, i % 16, j % 16]

    return main


def gather(n=64):
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((n,), "float32"), S: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=64) as _bx:
            for i in T.Parallel(n):
                B[i] = A[(i - S[0]) // 4 + 8] * 10.0 + T.cast((i - S[0]) % 4, "float32")

    return main


def _host(builders):
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    return host_cuda.HostProgram({name: tilelang.compile(f(), target=SM90, pass_configs=cfg)
                                  for name, (f, cfg) in builders.items()})


@pytest.fixture(scope="module")
def prog():
    p = _host({"on": (emitter_gemm, None), "off": (emitter_gemm, OFF),
               "gather_on": (gather, None), "gather_off": (gather, OFF)})
    yield p
    p.close()


@pytest.mark.parametrize("name,seed", [("on", 31), ("off", 32)])
def test_emitter_gemm_matches_float64_on_host(prog, name, seed):
    a, b, c = gemm_nt_operands(128, 128, 96, "float16", "float32", seed)
    prog.run(name, [a, b, c])
    check_gemm_nt(a, b, c, "float16")


@pytest.mark.parametrize("name", ["gather_on", "gather_off"])
def test_negative_floor_division_matches_reference_on_host(prog, name):
    import torch

    a = torch.randn(16, generator=torch.Generator().manual_seed(7))
    b = torch.full((64,), 7.0)
    prog.run(name, [a, b, torch.tensor([32], dtype=torch.int32)])
    ref = [float(a[(i - 32) // 4 + 8]) * 10.0 + (i - 32) % 4 for i in range(64)]  # Python // and %: floor
    assert torch.allclose(b.double(), torch.tensor(ref, dtype=torch.float64), rtol=0, atol=1e-5)


def _src(f, cfg=None):
    return tilelang.compile(f(), target=SM90, pass_configs=cfg).get_kernel_source()


def test_emitter_gemm_source_structure():
    one_loop = {"tl.disable_pipeline_tail_peel": True}  # the peeled tail would repeat the loop body's ldmatrix
    on, off = _src(emitter_gemm, one_loop), _src(emitter_gemm, {**OFF, **one_loop})
    # the ldmatrix rows keep only the lane's row within 8 inside the swizzle; warp / tile rows are added
    # (the lane prints `tid % 32`, or `tid & 31` where shared_index_split reprints a shared index)
    lane_row = r"tl::swizzle_offset<32, sizeof\(tl_half\)>\(\(\(tid (?:% 32|& 31)\) & 7\), "
    assert len(re.findall(lane_row, on)) == 2, on
    assert not re.search(lane_row, off), off
    assert "TL_ASSUME(tid >= 0 && tid < 128);" in on and "TL_ASSUME" not in off
    # the copy-out's coordinates: the unrolled group's row is a constant part, the column the thread's alone
    assert "i_5 = ((g * 4) + (tid / 32));" in on and "j0 = ((tid % 32) * 4);" in on, on
    assert ") >> 7);" in off and ") & 127);" in off, off


def test_gather_source_shifts_only_when_on():
    on, off = _src(gather), _src(gather, OFF)
    assert "tl_floordiv_i32" not in on and "tl_floormod_i32" not in on and ">> 2)" in on and "& 3)" in on
    assert "tl_floordiv_i32" in off and "tl_floormod_i32" in off


# ------------------------------------------------------------------ split_row against the swizzle model
def _swizzle(k_row: int, k_bytes: int, row: int, col: int) -> int:
    """include/tl/gemm_sm80.h swizzle_offset (C's truncating / and % on rows and columns >= 0)."""
    per = 16 // k_bytes
    chunks = k_row // per
    if k_row % per:
        return row * k_row + col
    if chunks % 8 == 0:
        x = row % 8
    elif chunks == 4:
        x = (row // 2) % 4
    elif chunks == 2:
        x = (row // 4) % 2
    else:
        return row * k_row + col
    return row * k_row + ((col // per) ^ x) * per + col % per


@pytest.mark.parametrize("k_row,k_bytes", [(32, 2), (64, 2), (16, 2), (32, 4), (64, 1), (8, 2)])
def test_split_row_keeps_every_swizzle_variant(k_row, k_bytes):
    i32 = dt.int32
    lane, w, t = (E.Var(n, i32) for n in ("lane", "w", "t"))
    nonneg = {lane, w, t}

    def b(op, x, y):
        return E.Binary(op, x, y if isinstance(y, E.Expr) else E.Const(y, i32), i32)

    rows = [b("+", b("+", b("*", w, 64), b("*", t, 16)), b("&", lane, 7)),
            b("+", b("+", b("*", b(">>", lane, 4), 8), b("&", lane, 7)), 21),
            b("+", b("*", t, 24), b("+", b("&", lane, 7), 3)),
            b("+", b("*", t, 8), 5)]
    rng = random.Random(k_row * 7 + k_bytes)
    for row in rows:
        got = split_row(row, lambda e: isinstance(e, E.Var) and e in nonneg
                        or isinstance(e, E.Binary) and e.op in ("&", ">>"))
        assert got is not None, str(row)
        outer, inner = got
        for _ in range(300):
            env = {"lane": rng.randrange(32), "w": rng.randrange(4), "t": rng.randrange(8)}
            col = rng.randrange(k_row)
            r, o, n = int_value(row, env), int_value(outer, env), int_value(inner, env)
            assert o % 8 == 0 and n >= 0 and o + n == r
            assert o * k_row + _swizzle(k_row, k_bytes, n, col) == _swizzle(k_row, k_bytes, r, col)


def test_split_row_needs_a_nonnegative_rest():
    i32 = dt.int32
    x = E.Var("x", i32)
    row = E.Binary("+", E.Binary("*", x, E.Const(16, i32), i32), E.Binary("-", x, E.Const(3, i32), i32), i32)
    assert split_row(row, lambda e: False) is None
