"""TensorCoreIntrinEmitter: the per-thread IR it writes computes a GEMM.

No GPU here, so the emitted statements run on a small warp simulator: every thread's
values at once (numpy, one row per thread); ldmatrix follows the PTX rule (lanes 8m..8m+7
give the rows of matrix m, lane l receives row l // 4, 16-bit columns 2 (l % 4), +1) and
mma.sync gathers its operands through tilelang.layout.mma_layouts, the fragments the
T.gemm tensor-core path already runs on the GPU. The CUDA source is compiled with NVRTC.
"""
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import dtypes as dt
from tilelang.cuda.intrinsics import get_ldmatrix_offset, get_swizzle_layout, make_mma_swizzle_layout
from tilelang.cuda.intrinsics.layout import mma_layout as ML
from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter
from tilelang.frontend import builder as FB
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.buffer import Buffer
from tilelang.layout import mma_layouts as L
from tilelang.op.ptx import PtxCall

NP = {"float16": np.float64, "int8": np.int64, "float32": np.float64, "int32": np.int64}


class WarpSim:
    """Runs emitted per-thread statements for `threads` threads in lockstep."""

    def __init__(self, threads, tid_var):
        self.T = threads
        self.env = {tid_var: np.arange(threads)}
        self.mem = {}

    def alloc(self, buf, data=None):
        shape = (self.T, buf.numel()) if buf.scope == "local" else tuple(buf.shape)
        self.mem[buf.uid] = np.zeros(shape, NP[buf.dtype.name]) if data is None else data.astype(NP[buf.dtype.name])

    def ev(self, e):
        if isinstance(e, E.Var):
            return self.env[e]
        if isinstance(e, E.Const):
            return e.value
        if isinstance(e, E.Cast):
            return self.ev(e.value)
        if isinstance(e, E.Binary):
            a, b = self.ev(e.a), self.ev(e.b)
            return {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide,
                    "%": np.mod}[e.op](a, b)
        if isinstance(e, E.BufferLoad):
            return self.load(e.buffer, e.indices)
        raise NotImplementedError(type(e))

    def flat(self, buf, indices):
        f = 0
        for i, d in zip(indices, buf.shape):
            f = f * d + np.broadcast_to(self.ev(i), (self.T,))
        return f

    def load(self, buf, indices):
        f = self.flat(buf, indices)
        m = self.mem[buf.uid]
        return m[np.arange(self.T), f] if buf.scope == "local" else m.reshape(-1)[f]

    def run(self, st):
        if isinstance(st, S.SeqStmt):
            for x in st.stmts:
                self.run(x)
        elif isinstance(st, S.For):
            for v in range(self.ev(st.start), self.ev(st.start) + self.ev(st.extent)):
                self.env[st.var] = v
                self.run(st.body)
        elif isinstance(st, S.BufferStore):
            val = np.broadcast_to(self.ev(st.value), (self.T,))
            f = self.flat(st.buffer, st.indices)
            m = self.mem[st.buffer.uid]
            if st.buffer.scope == "local":
                m[np.arange(self.T), f] = val
            else:
                m.reshape(-1)[f] = val
        elif isinstance(st, PtxCall):
            getattr(self, "ptx_" + st.op)(st)
        else:
            raise NotImplementedError(type(st))

    def _ptr(self, addr):
        ld = addr.args[0]
        return ld.buffer, self.flat(ld.buffer, ld.indices)

    def ptx_ldmatrix(self, st):
        trans, num, src, dst = st.args
        sbuf, sf = self._ptr(src)
        dbuf, df = self._ptr(dst)
        per_row = 16 // sbuf.dtype.bytes  # elements in a 16-byte row
        flat, local = self.mem[sbuf.uid].reshape(-1), self.mem[dbuf.uid]
        for w in range(self.T // 32):
            lanes = np.arange(32) + 32 * w
            for m in range(num):
                rows = sf[lanes[8 * m:8 * m + 8]]  # 8 row starts
                mat = np.stack([flat[r:r + per_row] for r in rows])  # 8 x (8 b16 units)
                if sbuf.dtype.bytes == 4:  # one 32-bit element is two b16 columns
                    assert not trans
                    mat = mat.reshape(8, 4, 1)
                    pick = [(l // 4, l % 4, l % 4 + 1) for l in range(32)]
                else:
                    mat = mat.reshape(8, 8, -1)  # rows, b16 columns, elements per b16
                    if trans:
                        mat = mat.transpose(1, 0, 2)
                    pick = [(l // 4, 2 * (l % 4), 2 * (l % 4) + 2) for l in range(32)]
                for l, (r, c0, c1) in enumerate(pick):
                    vals = mat[r, c0:c1].reshape(-1)
                    n = len(vals)
                    local[lanes[l], df[lanes[l]] + m * n:df[lanes[l]] + (m + 1) * n] = vals

    def ptx_mma(self, st):
        a, b, c = (self._ptr(x) for x in st.args)
        ta = st.types[0]
        fa, fb = L.make_mma_fragment("A", ta), L.make_mma_fragment("B", ta)
        fc = L.make_mma_fragment("C")
        for w in range(self.T // 32):
            lanes = np.arange(32) + 32 * w

            def gather(p, frag):
                buf, f = p
                th, ix = frag.thread_table()[0], frag.index_table()
                loc = self.mem[buf.uid]
                return loc[lanes[th], f[lanes[th]] + ix]
            d = gather(c, fc) + gather(a, fa) @ gather(b, fb)
            th, ix = fc.thread_table()[0], fc.index_table()
            self.mem[c[0].uid][lanes[th], c[1][lanes[th]] + ix] = d


def capture(fn, threads):
    b = FB.Builder()
    b.kernel = FB.KernelContext(block_vars=(), grid=(1,), threads=(threads, 1, 1))
    with FB.activate(b):
        fn()
    return S.seq(*b.frames[0])


def run_gemm(in_dtype, acc, a_t, b_t, wr=32, wc=32, brw=2, bcw=2, chunk=32, c4d=False, seed=0):
    rng = np.random.default_rng(seed)
    tid = E.Var("tx", dt.int32)
    em = TensorCoreIntrinEmitter(a_dtype=in_dtype, b_dtype=in_dtype, accum_dtype=acc, a_transposed=a_t,
                                 b_transposed=b_t, block_row_warps=brw, block_col_warps=bcw, warp_row_tiles=wr,
                                 warp_col_tiles=wc, chunk=chunk, thread_var=tid)
    bm, bn, bk = brw * wr, bcw * wc, chunk
    K = 2 * bk
    if in_dtype == "int8":
        a = rng.integers(-8, 8, (bm, K))
        bb = rng.integers(-8, 8, (K, bn))
    else:
        a = rng.integers(-8, 8, (bm, K)) / 4.0  # exact in f16 and in every partial sum
        bb = rng.integers(-8, 8, (K, bn)) / 4.0
    A_s = Buffer("A_s", (bk, bm) if a_t else (bm, bk), in_dtype, "shared.dyn")
    B_s = Buffer("B_s", (bn, bk) if b_t else (bk, bn), in_dtype, "shared.dyn")
    nd = em.n_dim
    C_s = Buffer("C_s", (bm // 16, bn // nd, 16, nd) if c4d else (bm, bn), acc, "shared.dyn")
    A_l = Buffer("A_l", (em.warp_rows * em.local_size_a,), in_dtype, "local")
    B_l = Buffer("B_l", (em.warp_cols * em.local_size_b,), in_dtype, "local")
    C_l = Buffer("C_l", (em.warp_rows * em.warp_cols * em.local_size_out,), acc, "local")
    sim = WarpSim(em.threads, tid)
    for buf in (A_s, B_s, C_s, A_l, B_l, C_l):
        sim.alloc(buf)
    sim.mem[C_s.uid][...] = np.nan if acc != "int32" else -(1 << 40)  # poison: unwritten elements fail
    ki = E.Var("ki", dt.int32)
    steps = [capture(lambda: em.ldmatrix_a(A_l, A_s, ki), em.threads),
             capture(lambda: em.ldmatrix_b(B_l, B_s, ki), em.threads),
             capture(lambda: em.mma(A_l, B_l, C_l), em.threads)]
    for ko in range(K // bk):
        ta, tb = a[:, ko * bk:(ko + 1) * bk], bb[ko * bk:(ko + 1) * bk]
        sim.mem[A_s.uid][...] = ta.T if a_t else ta
        sim.mem[B_s.uid][...] = tb.T if b_t else tb
        for k in range(bk // em.k_dim):
            sim.env[ki] = k
            for st in steps:
                sim.run(st)
    sim.run(capture(lambda: em.stmatrix(C_l, C_s), em.threads))
    got = sim.mem[C_s.uid]
    if c4d:
        got = got.transpose(0, 2, 1, 3).reshape(bm, bn)
    np.testing.assert_array_equal(got, a.astype(np.float64) @ bb.astype(np.float64))
    return em


@pytest.mark.parametrize("a_t,b_t", [(False, True), (False, False), (True, True), (True, False)])
def test_f16_gemm_all_transposes(a_t, b_t):
    run_gemm("float16", "float32", a_t, b_t, c4d=(a_t, b_t) == (False, True))


def test_f16_narrow_warp_columns_use_ldmatrix_x2():
    em = run_gemm("float16", "float32", False, True, wr=16, wc=24, brw=1, bcw=2, chunk=16)
    assert em.n_dim == 8 and em.warp_cols == 3


@pytest.mark.parametrize("a_t,b_t", [(False, True), (False, False), (True, True)])
def test_int8_gemm(a_t, b_t):
    em = run_gemm("int8", "int32", a_t, b_t, chunk=64)
    assert em.k_dim == 32 and em.mma_prefix == "m16n8k32"


def test_tf32_gemm():
    run_gemm("float32", "float32", False, True, chunk=16)


def test_lane_maps_match_the_gpu_checked_fragments():
    for name, bits in (("float16", 16), ("int8", 8), ("float32", 32)):
        fa, fb = L.make_mma_fragment("A", name), L.make_mma_fragment("B", name)
        for frag, coords in ((fa, ML.mma_a_coords), (fb, ML.mma_b_coords)):
            th, ix = frag.thread_table()[0], frag.index_table()
            for (r, c), lane in np.ndenumerate(th):
                assert coords(int(lane), int(ix[r, c]), bits) == (r, c)
    fc = L.make_mma_fragment("C")
    for (r, c), lane in np.ndenumerate(fc.thread_table()[0]):
        assert ML.mma_c_coords(int(lane), int(fc.index_table()[r, c])) == (r, c)


def test_ldmatrix_offsets_and_swizzle():
    # 16-bit: the row starts of lanes 0, 8, 16, 24 (non-transposed and .trans storage)
    assert [get_ldmatrix_offset("A", t, 0, 32) for t in (0, 8, 16, 24)] == [(0, 0), (8, 0), (0, 8), (8, 8)]
    assert [get_ldmatrix_offset("B", t, 0, 32, transposed=True) for t in (0, 8, 16, 24)] == \
        [(0, 0), (0, 8), (8, 0), (8, 8)]
    assert get_ldmatrix_offset("A", 17, 3, 64, "int8") == (1, 19)
    with pytest.raises(ValueError):
        get_ldmatrix_offset("A", 0, 0, 64, "int8", transposed=True)
    # 64-byte rows: chunks of row r are XORed with (r % 8) // 2; a permutation of every row
    for r in range(16):
        cols = [get_swizzle_layout(r, c, 32, "float16")[2] for c in range(32)]
        assert sorted(cols) == list(range(32))
        assert cols[0] == 8 * ((r % 8) // 2)
    lay = make_mma_swizzle_layout(Buffer("s", (128, 32), "float16", "shared.dyn"))
    assert lay.map(3, 9) == (0, 3, 9 ^ 8)


def test_cuda_source_uses_ldmatrix_and_mma_sync():
    func = _gemm_kernel()
    for arch in ("sm_80", "sm_90a"):
        kern = tilelang.compile(func, target=f"cuda -arch={arch}")
        src = kern.get_kernel_source()
        assert src.count("tl::ldmatrix_frag<4, false>") == 2
        assert src.count("tl::mma_frag<tl::half_t, tl::half_t, float, 16, 8, 16>") == 2
        # T.clear of a local array: every thread clears all of it
        assert re.search(r"for \(int (\w+) = 0; \1 < 32; \+\+\1\) \{\s*C_local\[\1\] = 0.0f;", src)
        # the (col_tile, row, col) swizzle of 64-byte rows is the header's swizzle_offset, of the lane's row
        # within 8 (the warp's and tile's rows, multiples of 8, are added outside: codegen/swizzle_rows.py);
        # the lane is `tid % 32`, or `tid & 31` where shared_index_split rewrote the index; the source is
        # the tile's 32-bit shared address plus byte terms (tl.disable_shared_address_slots)
        assert re.search(r"tl::ldmatrix_frag<4, false>\(&A_local\[\(mi \* 8\)\], \(tl::smem_addr\(A_shared\) \+ "
                         r"static_cast<uint32_t>\(\(.*\) \* 32\) \* 2u \+ static_cast<uint32_t>\("
                         r"tl::swizzle_offset<32, sizeof\(tl_half\)>\(\(\(tid (% 32|& 31)\) & 7\), ", src), src
        # stmatrix stores each accumulator pair (adjacent columns) as one 2-element vector
        assert "tl::store_vec<2>(&C_shared[" in src, src


def test_gemm_runs_on_the_cpu_backend():
    import torch

    a, b = torch.randn(128, 64).half(), torch.randn(64, 64).half()
    c = torch.full((128, 64), float("nan"))
    tilelang.compile(_gemm_kernel(128, 64, 64), target="cpu")(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double().T, rtol=1e-4, atol=1e-4)


def _gemm_kernel(M=256, N=256, K=256):
    em = TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32",
                                 b_transposed=True, block_row_warps=2, block_col_warps=2,
                                 warp_row_tiles=32, warp_col_tiles=32, chunk=32)

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 64, M // 64, threads=128) as (bx, by):
            A_shared = T.alloc_shared((64, 32), "float16")
            B_shared = T.alloc_shared((64, 32), "float16")
            C_shared = T.alloc_shared((64, 64), "float32")
            A_local = T.alloc_local((em.warp_rows * em.local_size_a,), "float16")
            B_local = T.alloc_local((em.warp_cols * em.local_size_b,), "float16")
            C_local = T.alloc_local((em.warp_rows * em.warp_cols * em.local_size_out,), "float32")
            T.annotate_layout({A_shared: make_mma_swizzle_layout(A_shared), B_shared: make_mma_swizzle_layout(B_shared)})
            T.clear(C_local)
            for ko in T.serial(K // 32):
                T.copy(A[by * 64, ko * 32], A_shared)
                T.copy(B[bx * 64, ko * 32], B_shared)
                for ki in T.serial(2):
                    em.ldmatrix_a(A_local, A_shared, ki)
                    em.ldmatrix_b(B_local, B_shared, ki)
                    em.mma(A_local, B_local, C_local)
            em.stmatrix(C_local, C_shared)
            T.copy(C_shared, C[by * 64, bx * 64])
    return gemm
