"""CUDA C++ for lowered per-thread IR; device code calls our header (namespace tl).

One `extern "C" __global__` function per kernel; every shared buffer is a slice of
one dynamic shared-memory array; register fragments are local arrays indexed by
unrolled slot loops; swizzled tiles are indexed through tl::swizzle_span_offset (the
gemm swizzle; tl::swizzle_xor_offset for staging tiles).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import dtypes as dt
from ..arith.simplify import const_int, simplify
from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer
from ..ir.visitor import collect
from ..layout.fragment import WGMMA_COMMON_N
from ..op import tile_ops as O
from .c import CCodegen, shape_vars
from .c_expr import is_subbyte, storage_type
from .swizzle_rows import split_row

# the wgmma width of a lowered gemm or raw wgmma call: tl::gemm_ss_sm90<M, N, K, WG_M, WG_N, ...> (N / WG_N
# a warpgroup), tl::gemm_rs_sm90<M, N, ...> (N), tl::wgmma_ss / wgmma_rs<A, B, C, N, ...>
_WGMMA_CALL = re.compile(r"tl::(?:gemm_ss_sm90<\d+, (\d+), \d+, \d+, (\d+),|gemm_rs_sm90<\d+, (\d+),"
                         r"|wgmma_(?:ss|rs)<[^,<>]+, [^,<>]+, [^,<>]+, (\d+)[,>])")


def wgmma_ext(body) -> bool:
    """Whether the kernel's wgmma calls take a width outside tl/wgmma_ops.h's common set: then it defines
    TL_WGMMA_EXT, and tl/wgmma.h reads wgmma_ops_ext.h (the other widths; NVRTC parses them only then)."""
    for r in collect(body, lambda x: type(x).__name__ == "Raw"):
        for m in _WGMMA_CALL.finditer(r.fmt):
            ss_n, ss_wg, rs_n, raw_n = m.groups()
            if (int(ss_n) // int(ss_wg) if ss_n else int(rs_n or raw_n)) not in WGMMA_COMMON_N:
                return True
    return False


@dataclass(frozen=True)
class CudaSource:
    text: str
    entry: str
    arg_kinds: tuple
    signature: tuple  # driver arg kinds: "ptr", "i32", ...
    smem_bytes: int
    threads: int
    grid: tuple  # per dim: int or Expr over params / dims
    asserts: tuple = ()
    cooperative: bool = False  # a T.sync_grid inside: every block must be resident (a cooperative launch)


SMALL_TRIP = 8  # serial loops of at most this many constant iterations are unrolled (CudaCodegen.unrolled)
STREAM_UNROLL = 8  # longer streaming loops are unrolled by this factor (CudaCodegen.unroll_pragma)
_SYNC_WORDS = ("sync", "barrier", "gemm", "wgmma", "wait", "fence", "arrive", "cp_async", "tma")
ASSERT_FLAG = "tl_assert_flag"  # device int: 0, or the 1-based index of the first failed T.device_assert

_SCALAR_KIND = {"int32": "i32", "int64": "i64", "uint32": "u32", "uint64": "u64", "float32": "f32",
                "float64": "f64", "bool": "bool", "int8": "i8", "int16": "i16"}


class CudaCodegen(CCodegen):
    UNROLL_PRAGMA = "#pragma unroll"
    LOOP_TYPE = "int"

    def __init__(self, func: S.PrimFunc, info, kernel: S.KernelLaunch, swizzle_panel: int | None, ws=None):
        super().__init__(func)
        self.ws = ws
        self.info = info
        self.kernel = kernel
        self.swizzle_panel = swizzle_panel
        self.offsets: dict = {}
        self.declared: set = set()
        self.group = None  # (named barrier id, threads) inside a T.ws scope; (None, lane mask) inside one warp
        self.tid_hi = info.threads if info is not None else 1 << 10  # the thread index is below this here
        self.wg_index: dict = {}  # warp group thread index Var -> the mask its let is printed with
        self.expr.target = "cuda"
        self.expr.tf32_exact = set(getattr(info, "tf32_exact", ()) or ())
        self.expr.shift_pow2_floor = getattr(info, "pow2_floor_shift", True)

    def unrolled(self, s: S.For) -> bool:
        """T.unroll loops, and serial loops of at most SMALL_TRIP constant iterations whose body holds
        only straight-line code and constant loops (no barrier, gemm or other inline synchronisation):
        unrolled, the iterations' independent global loads issue together instead of one latency
        each (the mxfp4 dequant's `for i in T.serial(8)`: NVRTC kept it rolled, one scale load in
        flight, where nvcc had unrolled the public build's; ~3x its loop's latency). T.serial
        otherwise keeps the compiler's own choice."""
        if super().unrolled(s):
            return True
        n = const_int(s.extent)
        if s.kind != "serial" or n is None or not 2 <= n <= SMALL_TRIP:
            return False
        return self.straight_line(s.body)

    def counted(self, s: S.For) -> bool:
        """A loop of wgmma calls whose start is not a constant (stream-K's unit [k0, k1) of a k-loop) counts
        from 0: ptxas (NVRTC 13.0 and 13.5) serialized the seed GEMM's wgmma in `for (ko = k0; ko < k0 + n;
        ++ko)` (C7515, "non wgmma instructions defining accumulator registers ... between start and end of
        the pipeline stage") and not in `for (ko_n = 0; ko_n < n; ++ko_n)`, nor with either bound a
        constant. At 8192^3 that loop ran at 397 TFLOP/s where whole tiles ran at 620 (H100)."""
        return (const_int(s.start) is None and s.kind != "unroll"
                and any(_WGMMA_CALL.search(r.fmt) for r in collect(s.body, lambda x: type(x).__name__ == "Raw")))

    def straight_line(self, body) -> bool:
        """Only straight-line code and constant loops: no barrier, gemm or other inline synchronisation."""
        if collect(body, lambda x: isinstance(x, S.For) and (const_int(x.extent) is None or x.kind == "pipelined")
                   or isinstance(x, (S.While, S.KernelLaunch, S.TileOp))):
            return False
        return not any(any(w in r.fmt for w in _SYNC_WORDS) for r in collect(body, lambda x: type(x).__name__ == "Raw"))

    def unroll_pragma(self, s: S.For) -> str | None:
        """`unrolled` loops in full; a longer serial loop that streams global memory into registers
        (straight-line, reads global buffers, writes only thread-local ones: a GEMV's k-loop) by
        STREAM_UNROLL, so that many iterations' loads are in flight at once. The dequant GEMV's
        32-iteration loop: NVRTC unrolled it 4x, nvcc the public build's 8x (4 vs 8 loads of B per
        thread in flight; the kernel is bound by HBM latency x bytes in flight). A T.unroll loop
        with unroll_factor=k: `#pragma unroll k`."""
        if s.kind == "unroll" and s.annotation("pragma_unroll_factor") is not None:
            return f"#pragma unroll {s.annotation('pragma_unroll_factor')}"
        if self.unrolled(s):
            return self.UNROLL_PRAGMA
        n = const_int(s.extent)
        if s.kind != "serial" or n is None or n < 2 * STREAM_UNROLL or not self.straight_line(s.body):
            return None
        reads_global = collect(s.body, lambda x: isinstance(x, E.BufferLoad) and x.buffer.scope == "global")
        writes_shared = collect(s.body, lambda x: isinstance(x, S.BufferStore) and x.buffer.scope != "local"
                                and x.buffer.scope != "local.var") or any(
            r.writes for r in collect(s.body, lambda x: type(x).__name__ == "Raw"))
        return f"#pragma unroll {STREAM_UNROLL}" if reads_global and not writes_shared else None

    def packed(self, buf: Buffer) -> bool:
        """A 16-bit register array stored as pairs in uint32_t words (tl::half_at / tl::set_half):
        two values per register, where a plain array of halves takes one register per value."""
        return getattr(buf, "packed16", False) and buf.dtype.bytes == 2

    def index(self, buf: Buffer, indices, raw: bool = False) -> str:
        """raw: the address is an inline-code argument (a cp.async / vector move destination): the
        span form (swizzle_span_offset) is for loads and stores, whose constant column parts fold
        into immediates; for the 16-byte copies of a pipelined tile it cost registers (sm_80 GEMM,
        4 stages: 4 bytes of spill)."""
        if self.packed(buf):  # read only: stores go through s_BufferStore
            assert len(indices) == 1, f"packed fragment {buf.name} indexed in {len(indices)} dims"
            i = self.expr(indices[0])
            return f"tl::half_at<{storage_type(buf.dtype)}>({buf.name}[({i}) >> 1], ({i}) & 1)"
        terms = self.laid_terms(buf, indices, raw)
        if terms is not None:
            return f"{buf.name}[{' + '.join(terms)}]"
        return super().index(buf, indices)

    def laid_terms(self, buf: Buffer, indices, raw: bool = False):
        """The element offset of a swizzled or paneled tile's element as its added terms (a 3-d tile's
        stage, the row terms that leave the swizzle, the swizzle / panel call); None for other tiles."""
        laid = buf.uid in self.info.panels or buf.uid in self.info.swizzled
        if not (laid and buf.ndim in (2, 3) and len(indices) == buf.ndim):
            return None
        # a 3-d tile is stages of 2-d tiles, each in the 2-d tile's layout
        terms = [] if buf.ndim == 2 else [f"({self.expr(indices[0])}) * {const_int(buf.shape[1]) * const_int(buf.shape[2])}"]
        rows, w = const_int(buf.shape[-2]), const_int(buf.shape[-1])
        r, c = self.expr(indices[-2]), self.expr(indices[-1])
        if buf.uid in self.info.panels:
            fn = "panel_xor_offset" if getattr(self.info, "panel_xor", False) else "panel_offset"
            wide = "" if buf.dtype.bytes == 2 else f", {buf.dtype.bytes}"  # 32-bit panels: 32 columns
            return terms + [f"tl::{fn}<{rows}{wide}>({r}, {c})"]
        t = storage_type(buf.dtype)
        fn = "swizzle_xor_offset" if buf.uid in self.info.xor_swizzled else \
            "swizzle_offset" if raw or getattr(self.info, "no_span_swizzle", False) else "swizzle_span_offset"
        split = split_row(indices[-2], self.expr.nonnegative) if getattr(self.info, "swizzle_row_split", True) else None
        if split is not None:  # rows a multiple of 8 apart share the XOR term: theirs is an added offset
            terms.append(f"({self.expr(split[0])}) * {w}")
            r = self.expr(split[1])
        return terms + [f"tl::{fn}<{w}, sizeof({t})>({r}, {c})"]

    def shared_address(self, ld: E.BufferLoad, split: bool = True) -> str:
        """`{N:smem}` of an inline statement (an ldmatrix source, a cp.async destination): the shared
        element's 32-bit shared-window byte address, tl::smem_addr(tile) plus each term of its element
        offset times the element size. Each term is its own 32-bit product, so a term that is
        constant after unrolling (an unrolled tile row, a warp's rows) stays an added constant, which
        ptxas folds into the instruction's immediate offset. split=False: the whole offset as one term
        (T.ptx_cp_async's destination, lower_async.py)."""
        b = ld.buffer.dtype.bytes
        terms = self.laid_terms(ld.buffer, ld.indices, raw=True) if split else None
        if terms is None:
            ref = self.index(ld.buffer, ld.indices, raw=True)
            assert ref.startswith(ld.buffer.name + "[") and ref.endswith("]"), ref
            terms = [ref[len(ld.buffer.name) + 1:-1]]
        return f"(tl::smem_addr({ld.buffer.name})" + "".join(
            f" + static_cast<uint32_t>({t}) * {b}u" for t in terms) + ")"

    def split_inner_sum(self, buf: Buffer) -> bool:
        """A global tensor's last index `u * 64 + (tid & 7) * 8` prints as `... + u * 64 + (tid & 7) * 8`:
        each term widens to 64 bits on its own, so the unrolled copies' constant parts become immediate
        offsets of one address (as one 32-bit sum widened, nvcc computes a 64-bit address per copy)."""
        return buf.scope == "global" and getattr(self.info, "split_global_index", False)

    def narrow_dims(self, dims) -> None:
        """Each int32 dim (a T.dynamic size, passed as int64_t) gets two int32 constants at entry,
        min(n - 1, INT32_MAX) and min(n, INT32_MAX), that bound checks of int32 indices compare against
        in 32 bits (c_expr.narrow_bound): `i < n` of an int64_t n sign-extends i and compares twice
        (the fp8 lighting indexer's scale loads and logit stores: 8 of each a k-step)."""
        for v in dims:
            if v.dtype.name != "int32" or v.dtype.lanes != 1:
                continue
            lt, le = f"tl_{v.name}_lt", f"tl_{v.name}_le"
            self.emit(f"const int {lt} = (int)({v.name} - 1 < 2147483647LL ? {v.name} - 1 : 2147483647LL);")
            self.emit(f"const int {le} = (int)({v.name} < 2147483647LL ? {v.name} : 2147483647LL);")
            self.expr.narrow[v] = (lt, le)

    def nibble_ref(self, buf: Buffer, indices) -> tuple[str, str]:
        if buf.uid in self.info.panels or buf.uid in self.info.swizzled or self.packed(buf):
            raise LoweringError(f"buffer {buf.name} of {buf.dtype} (packed two per byte) cannot have a swizzled "
                                "or paneled layout on the cuda backend; use a plain T.alloc_shared tile")
        return super().nibble_ref(buf, indices)

    def nibble_shared(self, buf: Buffer) -> bool:
        return buf.scope in ("global", "shared", "shared.dyn")

    def generate(self) -> CudaSource:
        f, k = self.func, self.kernel
        dims = shape_vars(f.params)
        kinds, args, sig = [], [], []
        aliased = set(f.attr("tl.non_restrict_params") or ())  # T.annotate_restrict_buffers
        for p in f.params:
            if isinstance(p, Buffer):
                kinds.append(("buffer", p))
                args.append(f"{storage_type(p.dtype)}*{'' if p.name in aliased else ' __restrict__'} {p.name}")
                sig.append("ptr")
            else:
                kinds.append(("scalar", p))
                args.append(f"{storage_type(p.dtype)} {p.name}")
                sig.append(_SCALAR_KIND[p.dtype.name])
        for v in dims:
            kinds.append(("dim", v))
            args.append(f"int64_t {v.name}")
            sig.append("i64")
        for d in [*(self.ws.descs if self.ws else []), *getattr(self.info, "tma_descs", ())]:
            if getattr(d, "raw", None) is None and getattr(d.buffer, "strides", None) is not None:
                from ..transform.cuda.ws_epilogue import strided_tma_unfit

                why = strided_tma_unfit(d.buffer)
                if why is not None:  # every planner checks this; never encode a map that would be wrong
                    raise LoweringError(f"internal: a TMA tensor map over {d.buffer.name}: {why}")
        for d in (self.ws.descs if self.ws else []):
            kinds.append(("tensormap", d))
            args.append(f"const __grid_constant__ tl::TensorMap {d.name}")
            sig.append("tensormap")
        for d in getattr(self.info, "tma_descs", ()):  # T.tma_copy (warp specialization by hand)
            kinds.append(("tensormap", d))
            args.append(f"const __grid_constant__ tl::TensorMap {d.name}")
            sig.append("tensormap")
        for b in (self.ws.workspace if self.ws else ()):
            kinds.append(("workspace", b))
            args.append(f"{storage_type(b.dtype)}* __restrict__ {b.name}")
            sig.append("ptr")
        if collect(k.body, lambda n: isinstance(n, O.DeviceAssert)):  # kernels without asserts pay nothing
            kinds.append(("assert_flag", None))
            args.append(f"int* __restrict__ {ASSERT_FLAG}")
            sig.append("ptr")
        self.expr.nonneg.update(dims)
        self.expr.nonneg.update(k.block_vars)
        smem = self.plan_smem()
        T = self.info.threads + (128 if self.ws else 0)
        if not getattr(self.info, "mma_split_chains", True):
            self.emit("#define TL_MMA_SPLIT_CHAINS 0")
        if not getattr(self.info, "ldsm_lane_offsets", True):
            self.emit("#define TL_LDSM_LANE_OFFSETS 0")
        if not getattr(self.info, "bf16_pack_convert", True):
            self.emit("#define TL_BF16_PACK_CVT 0")
        if not getattr(self.info, "wgmma_clear_undef", True):
            self.emit("#define TL_WGMMA_CLEAR_UNDEF 0")
        if not getattr(self.info, "mbarrier_suspend_hint", True):
            self.emit("#define TL_MBAR_SUSPEND_HINT 0")
        if wgmma_ext(k.body):
            self.emit("#define TL_WGMMA_EXT 1")
        self.emit('#include "tl/tl.h"')
        self.emit('#include "tl/gemm_sm80.h"')
        if self.info.sm >= 90:
            self.emit('#include "tl/gemm_sm90.h"')
        self.emit('#include "tl/c_compat.h"')
        self.emit("")
        self.imported_sources(k.body)
        # minBlocksPerSM 1 always (setmaxnreg needs a known entry budget): with the thread count alone ptxas
        # kept the dequant GEMV at 32 registers and its 8 unrolled iterations' loads interleaved with their
        # math (4 in flight); told one block per SM suffices, it issues all 16 first (55 registers), as the
        # public build does (it declares (threads, 1) on every kernel)
        bounds = f"{T}, {self.func.attr('tl.min_blocks_per_sm') or 1}"  # T.annotate_min_blocks_per_sm
        if self.ws and self.ws.cluster > 1:  # fixed at compile time: a plain cuLaunchKernel launches it
            bounds += f") __cluster_dims__({self.ws.cluster}, 1, 1"
        elif tuple(k.cluster) != (1, 1, 1):  # T.ClusterKernel: likewise, the grid forms whole clusters
            bounds += f") __cluster_dims__({', '.join(str(c) for c in k.cluster)}"
        from .c import is_grid_sync, entry_name

        cooperative = bool(collect(k.body, is_grid_sync))
        if cooperative:  # T.sync_grid's arrival count and generation (tl::sync_grid, tl/sync.h)
            self.emit("__device__ unsigned tl_grid_bar[2];")
        order = getattr(self.ws, "tile_order", ()) if self.ws else ()
        if order:  # a persistent kernel's tile table (transform/cuda/persistent.balanced_order)
            self.emit(f"__constant__ int tl_tile_order[{len(order)}] = {{{', '.join(map(str, order))}}};")
        self.emit(f'extern "C" __global__ void __launch_bounds__({bounds}) {entry_name(f.name)}({", ".join(args)}) {{')
        self.depth += 1
        self.emit("extern __shared__ __align__(1024) unsigned char tl_smem[];")
        self.emit("const int tid = threadIdx.x;")
        if getattr(self.info, "assume_tid_range", True):
            # nvcc does not carry threadIdx.x's range through the int: `tid / 32`, `tid % 32` and the lets
            # built on them kept sign fix-ups (the mma emitter's ldmatrix addresses: 9 SASS a K step)
            self.emit(f"TL_ASSUME(tid >= 0 && tid < {T});")
        self.expr.nonneg.add(self.info.tid)
        if getattr(self.info, "narrow_dims", False):
            self.narrow_dims(dims)
        from .c import rng_state_type

        rng = rng_state_type(k.body)
        if rng is not None:
            self.emit(f"{rng} tl_rng;")
        self.block_indices(k)
        for tv in k.thread_vars:
            d = {"tx": 0, "ty": 1, "tz": 2}.get(tv.name, 0)
            x, y = k.threads[0], k.threads[1]
            ex = ["tid % " + str(x), f"(tid / {x}) % {y}", f"tid / {x * y}"][d]
            self.emit(f"const int {tv.name} = {ex};")
            self.expr.nonneg.add(tv)
        for a in collect(k.body, lambda n: isinstance(n, S.Allocate)):
            b = a.buffer
            if b.scope in ("shared", "shared.dyn") and b.uid not in self.declared:
                self.declared.add(b.uid)
                t = storage_type(b.dtype)
                if hasattr(b, "view_of"):  # a movable window onto a multi-stage tile
                    self.emit(f"{t}* {b.name} = {b.view_of.name};")
                else:
                    self.emit(f"{t}* {b.name} = reinterpret_cast<{t}*>(tl_smem + {self.offsets[b.uid]});")
        self.stmt(k.body)
        self.depth -= 1
        self.emit("}")
        return CudaSource("\n".join(self.lines) + "\n", entry_name(f.name), tuple(kinds), tuple(sig), smem, T, tuple(k.grid),
                          tuple(self.asserts), cooperative)

    def block_indices(self, k: S.KernelLaunch):
        names = [v.name for v in k.block_vars]
        raw = ["(int)blockIdx.x", "(int)blockIdx.y", "(int)blockIdx.z"]
        persistent = self.ws is not None and self.ws.persistent  # its tile loop orders the tiles
        if self.swizzle_panel and len(names) >= 2 and not persistent:
            from ..transform.cuda.raster import panel_raster

            gx, gy, lin = (E.Var(n, dt.int32) for n in ("tl_gx", "tl_gy", "tl_lin"))
            self.expr.nonneg.update((gx, gy, lin))
            self.emit("const int tl_gx = gridDim.x, tl_gy = gridDim.y;")
            self.emit("const int tl_lin = blockIdx.y * tl_gx + blockIdx.x;")
            for n, e in zip(names, panel_raster(lin, gx, gy, self.swizzle_panel)):
                self.emit(f"const int {n} = {self.expr(simplify(e))};")
            for n, r in zip(names[2:], raw[2:]):
                self.emit(f"const int {n} = {r};")
            return
        for n, r in zip(names, raw):
            self.emit(f"const int {n} = {r};")

    def plan_smem(self) -> int:
        """Offsets from the plan_smem pass ("tl.smem_plan"), else one slice per buffer."""
        from ..transform.cuda.plan_smem import ATTR, sequential_plan, shared_allocs

        plan = self.func.attr(ATTR) or sequential_plan(shared_allocs(self.kernel.body))
        self.offsets.update(plan.offsets())
        return plan.total

    def s_KernelLaunch(self, k):
        raise AssertionError("nested kernel")

    def s_Allocate(self, s: S.Allocate):
        b = s.buffer
        t = storage_type(b.dtype)
        if b.scope in ("shared", "shared.dyn"):
            pass  # declared at the top of the kernel
        elif self.packed(b):
            self.emit(f"uint32_t {b.name}[{(b.numel() + 1) // 2}];")
        elif is_subbyte(b.dtype):
            self.emit(f"{t} {b.name}[{(b.numel() + 1) // 2}];")
        else:
            self.emit(f"{t} {b.name}[{b.numel()}];")
        if s.init is not None:
            for i, v in enumerate(s.init):
                if is_subbyte(b.dtype):
                    self.emit(f"tl_nibble_set({b.name}, {i}, {self.expr.store_value(b.dtype, self.expr(v))});")
                    continue
                self.emit(f"{b.name}[{i}] = {self.expr.store_value(b.dtype, self.expr(v))};")

    def s_BufferStore(self, s: S.BufferStore):
        if not self.packed(s.buffer):
            return super().s_BufferStore(s)
        assert len(s.indices) == 1, f"packed fragment {s.buffer.name} indexed in {len(s.indices)} dims"
        i = self.expr(s.indices[0])
        val = self.expr.store_expr(s.buffer.dtype, s.value)
        self.emit(f"tl::set_half<{storage_type(s.buffer.dtype)}>({s.buffer.name}[({i}) >> 1], ({i}) & 1, {val});")

    def s_LetStmt(self, s: S.LetStmt):
        from .c_expr import compute_type

        v = s.value
        if isinstance(v, E.Call) and v.op == "tl_fresh_index" and v.args and v.args[0] == self.info.tid \
                and getattr(self.info, "thread_ranges", False):
            # the thread index is below the enclosing branch's end: a mask of that many bits keeps
            # its value and tells the compiler its range, which the opaque copy hides
            v = E.Binary("&", v, E.Const((1 << (self.tid_hi - 1).bit_length()) - 1, v.dtype), v.dtype)
        elif s.var in self.wg_index:  # `tid - lo` of a warp group's branch: below its thread count
            v = E.Binary("&", v, E.Const(self.wg_index[s.var], v.dtype), v.dtype)
        if self.expr.nonnegative(s.value):
            self.expr.nonneg.add(s.var)
            if collect(s.value, lambda n: isinstance(n, E.Call) and n.op == "tl_fresh_index"
                       or isinstance(n, E.Var) and n in self.expr.opaque):
                self.expr.opaque.add(s.var)
        self.emit(f"const {compute_type(s.var.dtype)} {s.var.name} = {self.expr(v)};")

    def s_Raw(self, s):
        fmt = s.fmt
        if ":smem}" in fmt:  # an argument the callee also takes as a 32-bit shared address
            on = getattr(self.info, "shared_address_slots", False)
            args = list(s.args)

            def slot(m):
                a = args[int(m.group(1))]
                if on and isinstance(a, E.Call) and a.op == "address_of" and isinstance(a.args[0], E.BufferLoad) \
                        and a.args[0].buffer.scope in ("shared", "shared.dyn"):
                    return self.shared_address(a.args[0]).replace("{", "{{").replace("}", "}}")
                return "{" + m.group(1) + "}"
            fmt = re.sub(r"\{(\d+):smem\}", slot, fmt)
        text = fmt.format(*[self.raw_arg(a) for a in s.args])
        barrier = self.scope_barrier()
        if barrier is None and self.ws:  # consumers only: the producer warpgroup never reaches these barriers
            barrier = f"tl::barrier_sync<{self.barrier_ids().consumers()}, {self.info.threads}>();"
        # wgmma / TMA-store kernels: transform/cuda/proxy_fences put fence.proxy.async where needed
        self.emit(text.replace("__syncthreads();", barrier or "__syncthreads();"))

    def scope_barrier(self) -> str | None:
        """The barrier of the innermost thread scope (T.ws, `if tx < 128`, lanes of one warp), or None."""
        if self.group is not None and self.group[0] is None:  # a branch inside one warp: its lanes' mask
            return f"__syncwarp({self.group[1]:#x}u);"
        if self.group is not None:  # only the scope's warps reach it
            return f"tl::barrier_sync<{self.group[0]}, {self.group[1]}>();"
        return None

    def s_Evaluate(self, s: S.Evaluate):
        v = s.value
        barrier = self.scope_barrier()
        if isinstance(v, E.Call) and v.op == "tl_sync_grid":
            self.emit("tl::sync_grid(tl_grid_bar);")
            return
        if barrier and isinstance(v, E.Call) and v.op == "tl_sync_threads" and not v.args:
            self.emit(barrier)  # the program's T.sync_threads() inside a thread scope: its threads' barrier
            return
        super().s_Evaluate(s)

    def s_WarpGroupScope(self, s):
        lo, hi = s.t_lo, s.t_hi
        self.emit(f"if (tid >= {lo} && tid < {hi}) {{" if lo else f"if (tid < {hi}) {{")
        self.depth += 1
        outer = self.group
        if s.unit == 1:  # inside one warp (transform/thread_scopes): __syncwarp over its lanes
            self.group = (None, ((1 << s.threads) - 1) << (lo % 32))
        else:
            bar = self.scope_default_ids()[(lo, hi)]
            if bar > 15:
                raise LoweringError(f"a thread-index branch over threads [{lo}, {hi}) needs named barrier {bar}; the "
                                    f"GPU has 16 (0-15): start the branch below thread {32 * 15} or use warp groups",
                                    s.span)
            bar = self.barrier_ids().branch(bar, f"the barriers of the branch over threads [{lo}, {hi})")
            self.group = (bar, s.threads)
        first = s.body.stmts[0] if isinstance(s.body, S.SeqStmt) and s.body.stmts else s.body
        if isinstance(first, S.LetStmt) and first.var.name.startswith("tid_wg"):  # tid - 128 lo >= 0 here
            self.expr.nonneg.add(first.var)
            self.expr.opaque.add(first.var)
            if getattr(self.info, "thread_ranges", False):
                self.wg_index[first.var] = (1 << (s.threads - 1).bit_length()) - 1
        outer_hi, self.tid_hi = self.tid_hi, min(self.tid_hi, hi)
        self.stmt(s.body)
        self.tid_hi = outer_hi
        self.group = outer
        self.depth -= 1
        self.emit("}")

    def scope_default_ids(self) -> dict:
        """(first thread, end thread) of each warp or warp-group scope in the kernel -> its barrier's default id
        (BarrierIds.branch maps it clear of the program's ids): 1 + its first warp group (unit 128) or warp
        (unit 32), named barrier 0 being __syncthreads'. Two ranges with one default (`if tx < 96:` then
        `if tx < 128:`: warp 0 and warp group 0) would meet at one barrier with different thread counts
        (a hang): the later range takes the lowest id no range has by default."""
        ids = getattr(self, "_scope_ids", None)
        if ids is not None:
            return ids
        ranges, natural = [], {}
        for sc in collect(self.kernel.body, lambda n: type(n).__name__ == "WarpGroupScope" and n.unit != 1):
            if (sc.t_lo, sc.t_hi) not in natural:
                ranges.append((sc.t_lo, sc.t_hi))
                natural[ranges[-1]] = 1 + (sc.lo if sc.unit == 128 else sc.t_lo // 32)
        ids, pending = {}, []
        for r in ranges:
            (pending.append(r) if natural[r] in ids.values() else ids.__setitem__(r, natural[r]))
        for r in pending:
            taken = set(ids.values()) | set(natural.values())
            ids[r] = next((i for i in range(1, 64) if i not in taken), 64)
        self._scope_ids = ids
        return ids

    def barrier_ids(self):
        """The kernel's named barrier ids clear of the program's own (transform/cuda/barrier_ids.py)."""
        ids = getattr(self.info, "barrier_ids", None)
        if ids is None:
            from ..transform.cuda.barrier_ids import BarrierIds

            ids = self.info.barrier_ids = BarrierIds()
        return ids

    def s_WSSplit(self, s):
        self.emit(f"if (tid >= {s.consumers}) {{")
        self.depth += 1
        self.stmt(s.producer)
        self.depth -= 1
        self.emit("} else {")
        self.depth += 1
        self.stmt(s.consumer)
        self.depth -= 1
        self.emit("}")

    def raw_arg(self, a):
        if isinstance(a, E.Call) and a.op == "shared_byte_address":  # lower_async.py: a cp.async destination
            return self.shared_address(a.args[0], split=False)
        if isinstance(a, E.Call) and a.op == "address_of":
            ld = a.args[0]
            if all(const_int(i) == 0 for i in ld.indices):
                return ld.buffer.name
            if len(ld.indices) == 1 and ld.buffer.ndim > 1:  # a flat element offset (a tile's stage or panel)
                return f"({ld.buffer.name} + {self.expr(ld.indices[0])})"
            return f"&{self.index(ld.buffer, ld.indices, raw=True)}"
        return self.expr(a)

    def s_DeviceAssert(self, s):
        """The first failing thread records the assert's 1-based index in the flag and prints where.

        No __trap()/assert(): they leave the context with a sticky error. The thread returns
        (an exited thread releases __syncthreads), except in warp-specialized kernels, where a
        counted named barrier or an mbarrier wait would hang on it: there it only records.
        """
        self.asserts.append(s.msg or str(s.cond))
        msg = (s.msg or "T.device_assert failed").replace('"', "'").replace("%", "%%")
        first = f"atomicCAS({ASSERT_FLAG}, 0, {len(self.asserts)}) == 0"
        report = (f'printf("T.device_assert failed: {msg} (block %d, thread %d)\\n", (int)blockIdx.x, '
                  '(int)threadIdx.x);')
        stop = "" if self.ws else " return;"
        self.emit(f"if (!({self.expr(s.cond)})) {{ if ({first}) {{ {report} }}{stop} }}")

    def s_Print(self, s):
        obj = s.obj
        msg = s.msg.replace('"', "'").replace("%", "%%")
        if isinstance(obj, Buffer):
            self.emit(f'if (tid == {s.lane}) {{ for (int q = 0; q < {obj.numel()}; ++q) printf("{msg} %g\\n", '
                      f'(double){self._load_flat(obj)}); }}')
        elif obj is None:
            self.emit(f'printf("{msg}\\n");')
        else:
            self.emit(f'printf("{msg} %g\\n", (double)({self.expr(obj)}));')
