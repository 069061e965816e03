"""TensorCoreIntrinEmitterWithLadderTransform: for every transform kind, B (and A) tiles permuted the
way the kind describes give, through the emitted ldmatrix / copies and mma.sync (run on the warp
simulator of test_mma_emitter), the exact GEMM of the unpermuted operands."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tilelang import dtypes as dt
from tilelang.cuda.intrinsics.layout.mma_layout import ldmatrix_row, mma_a_coords, mma_b_coords
from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitterWithLadderTransform
from tilelang.errors import DSLTypeError
from tilelang.ir import expr as E
from tilelang.ir.buffer import Buffer

_spec = importlib.util.spec_from_file_location("mma_sim", Path(__file__).with_name("test_mma_emitter.py"))
SIM = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(SIM)


def ladder(tile, kind, operand, bits):
    """A 2-d (rows, K) K-contiguous tile -> the 4-d layout of `kind` (16 x k micro tiles)."""
    kd = 256 // bits
    rows, K = tile.shape
    t4 = tile.reshape(rows // 16, 16, K // kd, kd).transpose(0, 2, 1, 3).copy()
    if kind == 1:
        return t4
    out = np.zeros_like(t4)
    size = 16 * kd // 32
    per_row = 128 // bits
    for a in range(t4.shape[0]):
        for b in range(t4.shape[1]):
            micro, flat = t4[a, b], out[a, b].reshape(-1)
            for lane in range(32):
                if kind == 2:  # lane's ldmatrix row, stored at flat lane * size
                    r, c = ldmatrix_row(operand, lane, bits, True)
                    flat[lane * size:lane * size + per_row] = micro[r, c:c + per_row]
                else:  # kind 3: lane's fragment slots, in slot order
                    for s in range(size):
                        if operand == "A":
                            r, c = mma_a_coords(lane, s, bits)
                        else:
                            half, s8 = divmod(s, size // 2)
                            c, r = mma_b_coords(lane, s8, bits)
                            r += 8 * half
                        flat[lane * size + s] = micro[r, c]
    return out


@pytest.mark.parametrize("dtype,acc", [("float16", "float32"), ("int8", "int32")])
@pytest.mark.parametrize("ka,kb", [(0, 1), (0, 2), (0, 3), (1, 1), (2, 3), (3, 0)])
def test_each_transform_kind_computes_the_gemm(dtype, acc, ka, kb):
    rng = np.random.default_rng(ka * 10 + kb)
    bits = dt.as_dtype(dtype).bits
    tid = E.Var("tx", dt.int32)
    em = TensorCoreIntrinEmitterWithLadderTransform(
        a_dtype=dtype, b_dtype=dtype, accum_dtype=acc, a_transposed=False, b_transposed=True, block_row_warps=2,
        block_col_warps=2, warp_row_tiles=32, warp_col_tiles=32, chunk=2 * em_k(bits), transform_kind_a=ka,
        transform_kind_b=kb, thread_var=tid)
    bm, bn, bk, kd = 64, 64, em.chunk, em.k_dim
    a = rng.integers(-8, 8, (bm, bk)).astype(np.float64)
    b = rng.integers(-8, 8, (bn, bk)).astype(np.float64)  # (n, k)
    shape4 = lambda rows: (rows // 16, bk // kd, 16, kd)
    A_s = Buffer("A_s", shape4(bm) if ka else (bm, bk), dtype, "shared.dyn")
    B_s = Buffer("B_s", shape4(bn) if kb else (bn, bk), dtype, "shared.dyn")
    C_s = Buffer("C_s", (bm, bn), acc, "shared.dyn")
    A_l = Buffer("A_l", (em.warp_rows * em.local_size_a,), dtype, "local")
    B_l = Buffer("B_l", (em.warp_cols * em.local_size_b,), dtype, "local")
    C_l = Buffer("C_l", (em.warp_rows * em.warp_cols * em.local_size_out,), acc, "local")
    sim = SIM.WarpSim(em.threads, tid)
    for buf in (A_s, B_s, C_s, A_l, B_l, C_l):
        sim.alloc(buf)
    sim.mem[A_s.uid][...] = ladder(a, ka, "A", bits) if ka else a
    sim.mem[B_s.uid][...] = ladder(b, kb, "B", bits) if kb else b
    ki = E.Var("ki", dt.int32)
    steps = [SIM.capture(lambda: em.ldmatrix_a(A_l, A_s, ki), em.threads),
             SIM.capture(lambda: em.ldmatrix_b(B_l, B_s, ki), em.threads),
             SIM.capture(lambda: em.mma(A_l, B_l, C_l), em.threads)]
    for k in range(bk // kd):
        sim.env[ki] = k
        for st in steps:
            sim.run(st)
    sim.run(SIM.capture(lambda: em.stmatrix(C_l, C_s), em.threads))
    np.testing.assert_array_equal(sim.mem[C_s.uid], a @ b.T)


def em_k(bits):
    return 256 // bits


def test_bad_kinds_and_storage_raise():
    with pytest.raises(DSLTypeError, match="transform_kind_b must be 0, 1, 2 or 3"):
        TensorCoreIntrinEmitterWithLadderTransform(b_transposed=True, warp_row_tiles=16, warp_col_tiles=16,
                                                   transform_kind_b=5)
    with pytest.raises(DSLTypeError, match="needs B stored K-contiguous"):
        TensorCoreIntrinEmitterWithLadderTransform(b_transposed=False, warp_row_tiles=16, warp_col_tiles=16,
                                                   transform_kind_b=1)
