"""`TensorCoreIntrinEmitter`: per-warp ldmatrix + mma.sync code for a GEMM tile in local arrays.

Takes the tile shape of a block (block_row_warps x block_col_warps warps, each owning a
warp_row_tiles x warp_col_tiles piece of C and `chunk` of K per step) and, called inside a
kernel body, appends per-thread IR: `ldmatrix_a` / `ldmatrix_b` fill the `T.alloc_local`
operand arrays from shared tiles, `mma` accumulates into the local C array, `stmatrix`
writes C to a shared (or global) buffer. Thread tid is lane tid % 32 of warp tid // 32;
warp w owns C rows of warp_m = w % block_row_warps and columns of warp_n =
(w // block_row_warps) % block_col_warps (is_m_first=True swaps the roles).

Local array layouts (per thread; lane maps in ../layout/mma_layout.py):

    A_local[i * local_size_a + s]    slot s of the 16 x k A tile i of this warp's rows
    B_local[j * local_size_b + s]    slot s of the k x n_dim B tile j (n_dim 16: two 8-wide halves)
    C_local[(i * warp_cols + j) * local_size_out + s]     accumulator slot s of tile (i, j)

    mma_emitter.ldmatrix_a(A_local, A_shared, ki)   ->  for i in unroll(warp_rows):
                                                          tl::ldmatrix_frag<4, false>(&A_local[8 i], &A_shared[r(lane), c(lane)])
    mma_emitter.mma(A_local, B_local, C_local)      ->  for i, j: tl::mma_frag<half, half, float, 16, 8, 16>(...) x2
"""
from __future__ import annotations

from .... import dtypes as dt
from ....arith.simplify import simplify
from ....errors import DSLTypeError
from ....frontend import builder as B
from ....ir import expr as E
from ....ir import stmt as S
from ....ir.buffer import Buffer
from ....op import ptx as P
from ..layout.mma_layout import ldmatrix_row, mma_a_coords, mma_b_coords, mma_k
from .warp_tile_ops import (THREAD_LOOP, check_local, emit_unrolled, fill_slots, ldmatrix_call, operand_elem,
                            operand_region)

_ABBREV = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "int8": "int8", "uint8": "uint8",
           "int32": "int32", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}


def _name(d) -> str:
    return dt.as_dtype(str(d)).name


class TensorCoreIntrinEmitter:
    """Writes ldmatrix / mma.sync / store code for one block's GEMM tile (see the module doc).

    Example::

        emitter = TensorCoreIntrinEmitter(a_dtype=T.float16, b_dtype=T.float16, accum_dtype=T.float32,
                                          b_transposed=True, block_row_warps=2, block_col_warps=2,
                                          warp_row_tiles=64, warp_col_tiles=64, chunk=32)
        ...
        for ki in T.serial(block_K // 16):
            emitter.ldmatrix_a(A_local, A_shared, ki)
            emitter.ldmatrix_b(B_local, B_shared, ki)
            emitter.mma(A_local, B_local, C_local)
        emitter.stmatrix(C_local, C_shared)
    """

    M_DIM = 16
    WARP_SIZE = 32
    is_m_first = False

    def __init__(self, a_dtype="float16", b_dtype="float16", accum_dtype="float16", a_transposed=False,
                 b_transposed=False, block_row_warps=2, block_col_warps=2, warp_row_tiles=8, warp_col_tiles=8,
                 chunk=16, reduce_k=1, num_elems_per_byte=1, is_m_first=False, thread_var=None):
        self.a_dtype, self.b_dtype, self.accum_dtype = _name(a_dtype), _name(b_dtype), _name(accum_dtype)
        self.a_transposed, self.b_transposed = bool(a_transposed), bool(b_transposed)
        self.block_row_warps, self.block_col_warps = int(block_row_warps), int(block_col_warps)
        self.warp_row_tiles, self.warp_col_tiles, self.chunk = int(warp_row_tiles), int(warp_col_tiles), int(chunk)
        self.reduce_k, self.num_elems_per_byte = int(reduce_k), int(num_elems_per_byte)
        if is_m_first is not None:
            self.is_m_first = bool(is_m_first)
        self.thread_var = thread_var
        self._check()
        bits = dt.as_dtype(self.a_dtype).bits
        self.k_dim = min(mma_k(bits), self.chunk)
        m, n, k = P.mma_shape(self.a_dtype, self.b_dtype, self.accum_dtype)
        if k != self.k_dim:
            raise DSLTypeError(f"TensorCoreIntrinEmitter: chunk={chunk} is smaller than the K={k} of mma.sync "
                               f"m16n8k{k} for {self.a_dtype}")
        self.n_dim = 16 if self.warp_col_tiles % 16 == 0 else 8
        self.micro_size_x, self.micro_size_y, self.micro_size_k = self.M_DIM, self.n_dim, self.k_dim
        self.warp_rows = self.warp_row_tiles // self.M_DIM
        self.warp_cols = self.warp_col_tiles // self.n_dim
        self.local_size_a = self.M_DIM * self.k_dim // self.WARP_SIZE
        self.local_size_b = self.n_dim * self.k_dim // self.WARP_SIZE
        self.local_size_out = self.M_DIM * self.n_dim // self.WARP_SIZE
        self.threads = self.WARP_SIZE * self.block_row_warps * self.block_col_warps * self.reduce_k
        self.mma_prefix = f"m{m}n{n}k{k}"
        tf32 = self.a_dtype == "float32"
        self.a_dtype_abbrv = "tf32" if tf32 else _ABBREV[self.a_dtype]
        self.b_dtype_abbrv = "tf32" if tf32 else _ABBREV[self.b_dtype]
        self.accum_dtype_abbrv = _ABBREV[self.accum_dtype]

    def _check(self):
        if self.a_dtype in ("int4", "uint4") or self.b_dtype in ("int4", "uint4"):
            raise DSLTypeError(f"TensorCoreIntrinEmitter: {self.a_dtype} x {self.b_dtype} operands are not supported; "
                               "for 4-bit integer GEMMs use INT4TensorCoreIntrinEmitter on int8 byte tiles "
                               "(two values a byte) or T.gemm on int4 tiles")
        if dt.as_dtype(self.a_dtype).bits == 64:
            raise DSLTypeError("TensorCoreIntrinEmitter: float64 (mma.sync m8n8k4) is not supported")
        P.mma_shape(self.a_dtype, self.b_dtype, self.accum_dtype)  # raises for an unsupported combination
        if self.warp_row_tiles < 16 or self.warp_row_tiles % 16:
            raise DSLTypeError(f"TensorCoreIntrinEmitter: warp_row_tiles must be a multiple of 16, got {self.warp_row_tiles}")
        if self.warp_col_tiles < 8 or self.warp_col_tiles % 8:
            raise DSLTypeError(f"TensorCoreIntrinEmitter: warp_col_tiles must be a multiple of 8, got {self.warp_col_tiles}")

    # ------------------------------------------------------------ threads
    def get_thread_binding(self):
        if self.thread_var is not None:
            return self.thread_var
        from ....language.kernel import get_thread_binding

        return get_thread_binding(0)

    def extract_thread_binding(self, thread_id, is_m_first=None):
        """(lane, warp_n, warp_m) of a thread index."""
        first = self.is_m_first if is_m_first is None else is_m_first
        w = thread_id // self.WARP_SIZE
        lane = thread_id % self.WARP_SIZE
        if first:
            return lane, w % self.block_col_warps, (w // self.block_col_warps) % self.block_row_warps
        return lane, (w // self.block_row_warps) % self.block_col_warps, w % self.block_row_warps

    def _ids(self):
        lane, wn, wm = self.extract_thread_binding(self.get_thread_binding())
        return simplify(E.as_expr(lane)), simplify(E.as_expr(wn)), simplify(E.as_expr(wm))

    # ------------------------------------------------------------ loads
    def ldmatrix_a(self, A_local_buf, A_shared_buf, ki, rk=0):
        """A_local[i * local_size_a + s] <- the warp's A tiles of K step `ki` (chunk step `rk`)."""
        B.in_kernel("TensorCoreIntrinEmitter.ldmatrix_a")
        base, buf = operand_region(A_shared_buf, "ldmatrix_a")
        check_local(A_local_buf, self.warp_rows * self.local_size_a, "ldmatrix_a", "A")
        lane, _, warp_m = self._ids()
        bits, kmajor = dt.as_dtype(self.a_dtype).bits, not self.a_transposed
        i = E.Var("mi", dt.int32)
        wi, wk = warp_m * self.warp_row_tiles + i * self.M_DIM, rk * self.chunk + ki * self.k_dim
        if bits == 16 or kmajor:
            r, c = ldmatrix_row("A", lane, bits, kmajor)
            at = (wi + r, wk + c) if kmajor else (wk + r, wi + c)
            body = ldmatrix_call(not kmajor, 4, operand_elem(buf, base, at), A_local_buf, i * self.local_size_a, "ldmatrix_a")
        else:
            def load(s):
                r, c = mma_a_coords(lane, s, bits)
                return operand_elem(buf, base, (wi + r, wk + c) if kmajor else (wk + c, wi + r))
            body = fill_slots(A_local_buf, i * self.local_size_a, self.local_size_a, load)
        emit_unrolled(i, self.warp_rows, body)

    def ldmatrix_b(self, B_local_buf, B_shared_buf, ki, rk=0):
        """B_local[j * local_size_b + s] <- the warp's B tiles of K step `ki` (chunk step `rk`)."""
        B.in_kernel("TensorCoreIntrinEmitter.ldmatrix_b")
        base, buf = operand_region(B_shared_buf, "ldmatrix_b")
        check_local(B_local_buf, self.warp_cols * self.local_size_b, "ldmatrix_b", "B")
        lane, warp_n, _ = self._ids()
        bits, kmajor = dt.as_dtype(self.b_dtype).bits, self.b_transposed
        j = E.Var("nj", dt.int32)
        wj, wk = warp_n * self.warp_col_tiles + j * self.n_dim, rk * self.chunk + ki * self.k_dim
        if bits == 16 or kmajor:
            num = 4 if self.n_dim == 16 else 2
            r, c = ldmatrix_row("B", lane if num == 4 else lane % 16, bits, kmajor)
            at = (wj + r, wk + c) if kmajor else (wk + r, wj + c)
            body = ldmatrix_call(not kmajor, num, operand_elem(buf, base, at), B_local_buf, j * self.local_size_b, "ldmatrix_b")
        else:
            per_tile = 8 * self.k_dim // self.WARP_SIZE  # slots of one k x 8 B tile

            def load(s):
                kk, n = mma_b_coords(lane, s % per_tile, bits)
                n = n + 8 * (s // per_tile)
                return operand_elem(buf, base, (wj + n, wk + kk) if kmajor else (wk + kk, wj + n))
            body = fill_slots(B_local_buf, j * self.local_size_b, self.local_size_b, load)
        emit_unrolled(j, self.warp_cols, body)

    # ------------------------------------------------------------ mma
    @property
    def mma_num_inst_m(self) -> int:
        return self.warp_rows

    @property
    def mma_num_inst_n(self) -> int:
        return self.warp_cols

    def mma(self, A_local_buf, B_local_buf, C_local_buf, k_inner=0):
        """C_local += A_local @ B_local for every (i, j) tile of this warp."""
        B.in_kernel("TensorCoreIntrinEmitter.mma")
        i, j = E.Var("mi", dt.int32), E.Var("nj", dt.int32)
        body = self._atom(A_local_buf, B_local_buf, C_local_buf, i, j)
        inner = S.For(j, E.as_expr(0), E.as_expr(self.warp_cols), "unroll", body)
        B.current().emit(S.For(i, E.as_expr(0), E.as_expr(self.warp_rows), "unroll", inner, THREAD_LOOP))

    def mma_atom(self, A_local_buf, B_local_buf, C_local_buf, inst_m_idx, inst_n_idx, k_inner=0):
        """The mma.sync of one (inst_m_idx, inst_n_idx) tile (one or two m16n8 instructions)."""
        B.in_kernel("TensorCoreIntrinEmitter.mma_atom")
        B.current().emit(self._atom(A_local_buf, B_local_buf, C_local_buf, inst_m_idx, inst_n_idx))

    def _atom(self, a, b, c, i, j):
        for buf, n, nm in ((a, self.warp_rows * self.local_size_a, "A"), (b, self.warp_cols * self.local_size_b, "B"),
                           (c, self.warp_rows * self.warp_cols * self.local_size_out, "C")):
            check_local(buf, n, "mma", nm)
        m, n, k = P.mma_shape(self.a_dtype, self.b_dtype, self.accum_dtype)
        halves = self.n_dim // 8
        out = []
        for h in range(halves):
            a_at = i * self.local_size_a
            b_at = j * self.local_size_b + h * (self.local_size_b // halves)
            c_at = (i * self.warp_cols + j) * self.local_size_out + h * (self.local_size_out // halves)
            args = tuple(P.address_of(x[simplify(E.as_expr(off))]) for x, off in ((a, a_at), (b, b_at), (c, c_at)))
            out.append(P.PtxCall("mma", args, (a.dtype.name, b.dtype.name, c.dtype.name, m, n, k),
                                 what="TensorCoreIntrinEmitter.mma"))
        return S.seq(*out)

    # ------------------------------------------------------------ store
    def stmatrix(self, C_local_buf, C_buf, pid_m=None, pid_n=None):
        """C_buf <- C_local: C_buf is 2-d (rows, cols of the block's C tile; of the whole C with
        pid_m / pid_n, the block's tile indices) or 4-d (tile row, tile col, 16, n_dim)."""
        B.in_kernel("TensorCoreIntrinEmitter.stmatrix")
        check_local(C_local_buf, self.warp_rows * self.warp_cols * self.local_size_out, "stmatrix", "C")
        nd = len(C_buf.shape) if isinstance(C_buf, Buffer) else 0
        if nd not in (2, 4):
            raise DSLTypeError(f"TensorCoreIntrinEmitter.stmatrix: C must be a 2-d or 4-d buffer, got {C_buf!r}")
        lane, warp_n, warp_m = self._ids()
        i, j, s2, v = E.Var("mi", dt.int32), E.Var("nj", dt.int32), E.Var("s", dt.int32), E.Var("v", dt.int32)
        s = s2 * 2 + v  # slots 2k, 2k + 1 hold adjacent columns: one 2-element vector store
        # mma_store_coords(lane, s, n_dim) with the pair written out: slot s % 4 = 2 (s2 % 2) + v,
        # the 8-column half s // 4 = s2 // 2 (n_dim 16), so the row does not depend on v
        row = lane // 4 + 8 * (s2 % 2)
        col = 2 * (lane % 4) + v + (8 * (s2 // 2) if self.n_dim == 16 else 0)
        ti, tj = warp_m * self.warp_rows + i, warp_n * self.warp_cols + j
        if pid_m is not None and pid_n is not None:
            ti = ti + pid_m * (self.block_row_warps * self.warp_rows)
            tj = tj + pid_n * (self.block_col_warps * self.warp_cols)
        at = (ti * self.M_DIM + row, tj * self.n_dim + col) if nd == 2 else (ti, tj, row, col)
        val = E.BufferLoad(C_local_buf, (simplify((i * self.warp_cols + j) * self.local_size_out + s),), C_local_buf.dtype)
        st = S.BufferStore(C_buf, tuple(simplify(E.as_expr(x)) for x in at), E.cast(C_buf.dtype, val))
        body = S.For(s2, E.as_expr(0), E.as_expr(self.local_size_out // 2), "unroll",
                     S.For(v, E.as_expr(0), E.as_expr(2), "vectorized", st))
        body = S.For(j, E.as_expr(0), E.as_expr(self.warp_cols), "unroll", body)
        B.current().emit(S.For(i, E.as_expr(0), E.as_expr(self.warp_rows), "unroll", body, THREAD_LOOP))


class INT4TensorCoreIntrinEmitter(TensorCoreIntrinEmitter):
    """The int8 emitter's tiles read as packed signed 4-bit integers: mma.sync m16n8k32 .s4.

    Takes a_dtype = b_dtype = int8 (each byte two int4 values, the even k in the low nibble),
    accum_dtype int32, n 16-wide B tiles (warp_col_tiles a multiple of 16). ldmatrix_a /
    ldmatrix_b / stmatrix are the int8 emitter's (a K step `ki` covers 32 bytes, 64 values); `mma`
    issues, per (i, j) tile, four m16n8k32 int4 mma.sync on the int8 fragments:

        A bytes [0, la/2)  x B bytes [0, lb/4)             -> C slots [0, lc/2)    (n 0..7,  k bytes 0..15)
        A bytes [0, la/2)  x B bytes [lb/2, lb/2 + lb/4)   -> C slots [lc/2, lc)   (n 8..15, k bytes 0..15)
        A bytes [la/2, la) x B bytes [lb/4, lb/2)          -> C slots [0, lc/2)    (n 0..7,  k bytes 16..31)
        A bytes [la/2, la) x B bytes [lb/2 + lb/4, lb)     -> C slots [lc/2, lc)   (n 8..15, k bytes 16..31)

    so C[m, n] += sum over the 64 nibbles k of A_nib[m, k] * B_nib[n, k] (sign-extended). Bytes
    holding one value 0..7 in the low nibble (high nibble 0) thus multiply as int8.
    """

    def _check(self):
        super()._check()
        if (self.a_dtype, self.b_dtype) != ("int8", "int8") or self.accum_dtype != "int32":
            raise DSLTypeError(f"INT4TensorCoreIntrinEmitter: expected int8 operand tiles (two int4 values a byte) "
                               f"and an int32 accumulator, got {self.a_dtype} x {self.b_dtype} -> {self.accum_dtype}")
        if self.warp_col_tiles % 16:
            raise DSLTypeError(f"INT4TensorCoreIntrinEmitter: warp_col_tiles must be a multiple of 16, "
                               f"got {self.warp_col_tiles}")

    def _atom(self, a, b, c, i, j):
        for buf, n, nm in ((a, self.warp_rows * self.local_size_a, "A"), (b, self.warp_cols * self.local_size_b, "B"),
                           (c, self.warp_rows * self.warp_cols * self.local_size_out, "C")):
            check_local(buf, n, "mma", nm)
        la, lb, lc = self.local_size_a, self.local_size_b, self.local_size_out
        parts = ((0, 0, 0), (0, lb // 2, lc // 2), (la // 2, lb // 4, 0), (la // 2, lb // 2 + lb // 4, lc // 2))
        out = []
        for da, db, dc in parts:
            offs = ((a, i * la + da), (b, j * lb + db), (c, (i * self.warp_cols + j) * lc + dc))
            args = tuple(P.address_of(x[simplify(E.as_expr(off))]) for x, off in offs)
            out.append(P.PtxCall("mma", args, ("int4", "int4", "int32", 16, 8, 32),
                                 what="INT4TensorCoreIntrinEmitter.mma"))
        return S.seq(*out)


# the Ladder-layout subclass lives next door; importable from here as the public module offers it
from .ladder_macro_generator import TensorCoreIntrinEmitterWithLadderTransform, TransformKind  # noqa: E402,F401
