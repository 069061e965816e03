"""C source for the CPU backend: one exported function per kernel.

Blocks of the grid are spread over OpenMP threads; each thread allocates the
block-local tiles (shared, fragment, local) once and reuses them for every block
it runs. The function returns 0, or the 1-based index of a failed T.device_assert.
A kernel holding a T.sync_grid that was not split into launches (inside a loop, or with registers
living across it) is a cooperative launch: one OpenMP thread per block, all at once (at most
COOP_MAX_BLOCKS), the grid barrier an `omp barrier`.

    int32_t main_kernel(void* tl_arg0, void* tl_arg1, int64_t m) {
      #pragma omp parallel
      { float* A = tl_arg0; ... float* A_s = tl_alloc(...);
        #pragma omp for schedule(static)
        for (int64_t tl_b = 0; tl_b < n_blocks; ++tl_b) { const int32_t bx = ...; <body> } }
    }
"""
from __future__ import annotations

import functools

from dataclasses import replace

from ..arith.simplify import const_int
from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer
from ..ir.visitor import collect, substitute
from ..op import tile_ops as O
from ..op.thread_ops import DeclBuffer, ImportSource

IMPORTED = ("/* T.import_source: begin */", "/* T.import_source: end */")
from ..transform.split_kernels import workspaces
from .c_expr import CExpr, is_subbyte, storage_type
from .c_source import CSource
from .intrinsics import RNG_STATES


POOL_CALLS = ("tl_cpu_tma_load", "tl_wgmma_desc_make", "tl_cpu_wgmma")  # read shared addresses (cpu/tl_hopper.h)
SHARED_ADDRESS_SPACE = 1 << 18  # bytes a wgmma descriptor's 14-bit start address (in 16 B units) reaches


def shared_pool(k: S.KernelLaunch, allocs) -> tuple[dict, int] | None:
    """({buffer uid: byte offset}, bytes) of the shared buffers of a kernel that addresses shared
    memory by number (POOL_CALLS): one 1024-byte aligned pool, each buffer at a multiple of 1024
    (a swizzle pattern's repeat). None for other kernels: they allocate each buffer on its own."""
    if not collect(k.body, lambda n: isinstance(n, E.Call) and n.op in POOL_CALLS):
        return None
    offsets, top = {}, 0
    for a in allocs:
        b = a.buffer
        if b.scope in ("shared", "shared.dyn"):
            offsets[b.uid] = top
            top += -(-(-(-b.numel() * b.dtype.bits // 8)) // 1024) * 1024
    if top > SHARED_ADDRESS_SPACE:
        raise LoweringError(f"the kernel's shared buffers take {top} bytes; with T.tma_load or wgmma descriptors the "
                            f"CPU backend keeps them at shared addresses below {SHARED_ADDRESS_SPACE}", k.span)
    return offsets, max(top, 1024)


def shape_vars(params) -> list[E.Var]:
    """Symbolic dims used by buffer params that are not themselves scalar params."""
    seen, out = set(), []
    scalars = {p for p in params if isinstance(p, E.Var)}
    for p in params:
        if isinstance(p, Buffer):
            for d in tuple(p.shape) + tuple(p.strides or ()):  # T.StridedTensor's symbolic strides too
                for v in collect(d, lambda n: isinstance(n, E.Var)) if not isinstance(d, int) else []:
                    if v not in seen and v not in scalars:
                        seen.add(v)
                        out.append(v)
    return out


# Identifiers generated code or its headers use: a kernel name must not shadow them.
_RESERVED = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int long
register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
bool true false NULL INFINITY NAN main free malloc printf posix_memalign memcpy memcmp abs fabs fabsf
exp exp2 exp10 log log2 log10 log1p expm1 sqrt pow tanh sin cos erf floor ceil round trunc nearbyint fmax fmin
expf exp2f exp10f logf log2f log10f log1pf expm1f sqrtf powf tanhf sinf cosf erff floorf ceilf roundf truncf
nearbyintf fmaxf fminf q rand srand exit abort
""".split())


_CXX_RESERVED = frozenset("""
class namespace template typename new delete this operator private public protected virtual friend
explicit mutable using try catch throw nullptr constexpr decltype static_assert alignas alignof
""".split())


def entry_name(name: str) -> str:
    """The exported symbol for a kernel: its own name unless that is a C/C++ keyword or clashes."""
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "kernel"
    if safe in _RESERVED or safe in _CXX_RESERVED or safe[0].isdigit() or safe.startswith("__"):
        return "tl_kernel_" + safe
    return safe


def unique_names(func: S.PrimFunc) -> S.PrimFunc:
    """Give every loop/let/block variable and tile buffer a distinct C name.

    Why: lowering introduces variables (`i0`, `r`, `gi` ...) and users name buffers freely,
    so two IR objects may share a name, or a name may be a C keyword or a libm function.
    Scalar parameters and symbolic dims keep their names (the launcher binds them by
    object); tile and parameter buffers are renamed in place (their identity is the uid).
    """
    used = set(_RESERVED)
    used.update(p.name for p in func.params if isinstance(p, E.Var))
    used.update(v.name for v in shape_vars(func.params))

    def fresh(base: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "v"
        if base[0].isdigit() or base.startswith("tl_"):
            base = "v_" + base
        name, n = base, 0
        while name in used:
            n += 1
            name = f"{base}_{n}"
        used.add(name)
        return name

    for p in func.params:
        if isinstance(p, Buffer):
            p.name = fresh(p.name)
    mapping: dict = {}
    renamed: set = set()
    for node in collect(func.body, lambda n: isinstance(n, (S.For, S.LetStmt, S.KernelLaunch, S.Allocate,
                                                            DeclBuffer))):
        if isinstance(node, (S.Allocate, DeclBuffer)):
            if node.buffer.uid not in renamed:
                renamed.add(node.buffer.uid)
                node.buffer.name = fresh(node.buffer.name)
            continue
        binds = (node.var,) if not isinstance(node, S.KernelLaunch) else node.block_vars + node.thread_vars
        for v in binds:
            if v not in mapping:
                mapping[v] = E.Var(fresh(v.name), v.dtype)
    return replace(func, body=substitute(func.body, mapping))


_CUDA_RESERVED = frozenset("""
tid threadIdx blockIdx blockDim gridDim warpSize min max tl __syncthreads __shfl_xor_sync
""".split())


def unique_var_names(func: S.PrimFunc) -> S.PrimFunc:
    """CUDA: give every loop/let/block/thread variable a distinct C name (buffers keep theirs).

    Why: lowering introduces `i`, `j`, `l`, `k` ... inside user loops; a C++ inner declaration
    would shadow a user variable of the same name and the body would silently read the wrong
    one. Buffer names stay: inline device code (pipeline views, barriers) spells them out.
    """
    used = set(_RESERVED) | _CXX_RESERVED | _CUDA_RESERVED
    used.update(p.name for p in func.params)
    used.update(v.name for v in shape_vars(func.params))
    used.update(a.buffer.name for a in collect(func.body, lambda n: isinstance(n, (S.Allocate, DeclBuffer))))

    def fresh(base: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "v"
        if base[0].isdigit() or base.startswith("tl_") or base.startswith("__"):
            base = "v_" + base
        name, n = base, 0
        while name in used:
            n += 1
            name = f"{base}_{n}"
        used.add(name)
        return name

    mapping: dict = {}
    for node in collect(func.body, lambda n: isinstance(n, (S.For, S.LetStmt, S.KernelLaunch))):
        binds = (node.var,) if not isinstance(node, S.KernelLaunch) else node.block_vars + node.thread_vars
        for v in binds:
            if v not in mapping and not v.name.startswith("tl_"):
                mapping[v] = E.Var(fresh(v.name), v.dtype)
    return replace(func, body=substitute(func.body, mapping))


def legal_buffer_names(func: S.PrimFunc) -> S.PrimFunc:
    """CUDA: rename (in place) the buffers whose names are C/C++/CUDA words (`do`, `new`, `tid`).

    Runs before lowering, since inline device code spells buffer names out from then on; all
    other buffer names are kept as the user wrote them.
    """
    bad = _RESERVED | _CXX_RESERVED | _CUDA_RESERVED
    bufs = [p for p in func.params if isinstance(p, Buffer)]
    bufs += [a.buffer for a in collect(func.body, lambda n: isinstance(n, S.Allocate))]
    used = {b.name for b in bufs} | {p.name for p in func.params if isinstance(p, E.Var)}
    for b in bufs:
        if b.name in bad or b.name.startswith("__"):
            base, n = "v_" + b.name.lstrip("_"), 0
            name = base
            while name in used or name in bad:
                n += 1
                name = f"{base}_{n}"
            used.add(name)
            b.name = name
    return func


EMPTY_GRID = "T.Kernel:"  # the message prefix of the empty-grid check (backend/cpu/pipeline.py raises ValueError)
COOP_MAX_BLOCKS = 1024  # a cooperative CPU launch runs this many blocks at once at most (one thread each)


def is_grid_sync(n) -> bool:
    return isinstance(n, E.Call) and n.op == "tl_sync_grid"


class CCodegen:
    UNROLL_PRAGMA = "#pragma GCC unroll 16"
    LOOP_TYPE = "int32_t"

    def __init__(self, func: S.PrimFunc):
        self.func = func
        self.lines: list[str] = []
        self.depth = 0
        self.asserts: list[str] = []
        self.expr = CExpr(self.index, nonneg=(), nibble_fn=self.nibble_ref)
        self.const_loops: set = set()  # counters of loops with a constant start and trip count

    # ---------------------------------------------------------------- helpers
    def emit(self, text: str):
        self.lines.append("  " * self.depth + text)

    def index(self, buf: Buffer, indices) -> str:
        if is_subbyte(buf.dtype):
            raise LoweringError(f"internal: element {buf.name}[...] of {buf.dtype} has no C lvalue (packed two "
                                "per byte); loads and stores go through nibble_ref")
        return f"{buf.name}[{self.flat_offset(buf, indices)}]"

    def nibble_ref(self, buf: Buffer, indices) -> tuple[str, str]:
        """(byte pointer, element offset) of a packed sub-byte element: its byte is offset >> 1."""
        return buf.name, self.flat_offset(buf, indices)

    def nibble_shared(self, buf: Buffer) -> bool:
        """Whether threads other than this one may write the other nibble of a byte of `buf`
        (blocks run in parallel on OpenMP threads; a block's own tiles are private)."""
        return buf.scope == "global"

    def store_nibble(self, buf: Buffer, indices, value: str) -> str:
        base, off = self.nibble_ref(buf, indices)
        fn = "tl_nibble_set_atomic" if self.nibble_shared(buf) else "tl_nibble_set"
        return f"{fn}({base}, {off}, {self.expr.store_value(buf.dtype, value)});"

    def split_inner_sum(self, buf: Buffer) -> bool:
        """Whether the last index of `buf` prints as separate terms of its offset (CUDA, see there)."""
        return False

    def counter_last(self, e) -> list:
        """e as [rest, terms...]: the terms of its sum that read counters of constant-trip loops and
        nothing else (constants once unrolled) apart, last; the rest one sum, as written. (A bare
        constant stays in the sum: split off, it cost a 4096^3 GEMM's hoisted-pointer loop 2 SASS.)"""
        parts = sum_terms(e)
        own = [t for t in parts if (vs := collect(t, lambda n: isinstance(n, E.Var)))
               and all(v in self.const_loops for v in vs)]
        rest = [t for t in parts if not any(t is o for o in own)]
        if not own or not rest:
            return [e]
        return [functools.reduce(lambda a, b: E.Binary("+", a, b, e.dtype), rest), *own]

    def flat_offset(self, buf: Buffer, indices) -> str:
        if buf.ndim == 0 or buf.scope == "local.var":
            return "0"
        if buf.strides is not None and buf.scope == "global":  # T.StridedTensor: its declared strides
            return self.strided_offset(buf, indices)
        terms, stride = [], "1"
        for d in range(buf.ndim - 1, -1, -1):
            if stride == "1" and buf.ndim > 1 and self.split_inner_sum(buf):
                terms.extend(reversed([t for t in map(self.expr, self.counter_last(indices[d])) if t != "0"]))
            else:
                idx = self.expr(indices[d])
                if idx != "0":
                    terms.append(idx if stride == "1" else f"(int64_t){idx} * {stride}")
            dim = buf.shape[d]
            c = const_int(dim) if not isinstance(dim, int) else dim
            dim_text = str(c) if c is not None else f"(int64_t){self.expr(dim)}"
            if stride == "1":
                stride = dim_text
            elif stride.isdigit() and dim_text.isdigit():
                stride = str(int(stride) * int(dim_text))
            else:
                stride = f"{stride} * {dim_text}"
        return ' + '.join(reversed(terms)) or '0'

    def strided_offset(self, buf: Buffer, indices) -> str:
        """sum(index[d] * strides[d]) in 64 bits: a strided view's rows need not be its row length apart."""
        terms = []
        for idx, st in zip(indices, buf.strides):
            i, c = self.expr(idx), const_int(st) if not isinstance(st, int) else st
            if i == "0" or c == 0:
                continue
            terms.append(i if c == 1 else f"(int64_t){i} * {c}" if c is not None
                         else f"(int64_t){i} * (int64_t){self.expr(st)}")
        return ' + '.join(terms) or '0'

    # ---------------------------------------------------------------- entry
    def generate(self) -> CSource:
        f = self.func = unique_names(self.func)
        dims = shape_vars(f.params)
        kinds, args = [], []
        aliased = set(f.attr("tl.non_restrict_params") or ())  # T.annotate_restrict_buffers
        for p in f.params:
            if isinstance(p, Buffer):
                kinds.append(("buffer", p))
                args.append(f"void*{'' if p.name in aliased else ' restrict'} tl_arg{len(args)}")
            else:
                kinds.append(("scalar", p))
                args.append(f"{storage_type(p.dtype)} {p.name}")
        for v in dims:
            kinds.append(("dim", v))
            args.append(f"int64_t {v.name}")
        ws = workspaces(f)
        for b in ws:  # T.alloc_global: allocated by the caller per call
            kinds.append(("alloc_global", b))
            args.append(f"void* restrict tl_arg{len(args)}")
        self.expr.nonneg.update(dims)
        entry = entry_name(f.name)
        self.emit('#include "cpu/tl_cpu.h"')
        self.emit("#include <stdbool.h>")
        self.emit("#include <stdio.h>")
        self.imported_sources(f.body)
        self.emit("static inline void* tl_alloc(size_t n) {")
        self.emit("  void* p = NULL;")
        self.emit("  return posix_memalign(&p, 64, n ? n : 64) == 0 ? p : NULL;")
        self.emit("}")
        self.emit("")
        self.emit(f"int32_t {entry}({', '.join(args) or 'void'}) {{")
        self.depth += 1
        self.emit("int32_t tl_err = 0;")
        for i, p in enumerate(f.params):
            if isinstance(p, Buffer):
                t = storage_type(p.dtype)
                self.emit(f"{t}*{'' if p.name in aliased else ' restrict'} {p.name} = ({t}*)tl_arg{i};")
        for i, b in enumerate(ws, start=len(args) - len(ws)):
            t = storage_type(b.dtype)
            self.emit(f"{t}* restrict {b.name} = ({t}*)tl_arg{i};")
        self.stmt(f.body)
        self.emit("return tl_err;")
        self.depth -= 1
        self.emit("}")
        return CSource("\n".join(self.lines) + "\n", entry, tuple(kinds), tuple(self.asserts))

    # ---------------------------------------------------------------- statements
    def stmt(self, s):
        getattr(self, "s_" + type(s).__name__)(s)

    def s_SeqStmt(self, s):
        for x in s.stmts:
            self.stmt(x)

    def s_KernelLaunch(self, k: S.KernelLaunch):
        grid = [g if isinstance(g, int) else f"(int64_t)({self.expr(g)})" for g in k.grid]
        grid += [1] * (3 - len(grid))
        self.emit("{")
        self.depth += 1
        for n, g in zip(("gx", "gy", "gz"), grid):
            self.emit(f"const int64_t tl_{n} = {g};")
        if any(const_int(g) is None or const_int(g) <= 0 for g in k.grid):
            self.asserts.append(f"{EMPTY_GRID} a grid extent is 0 or less for these arguments; a launch needs at "
                                "least one block along each grid dimension (guard the call for empty inputs)")
            self.emit(f"if (tl_gx <= 0 || tl_gy <= 0 || tl_gz <= 0) return {len(self.asserts)};")
        allocs = [a for a in collect(k.body, lambda n: isinstance(n, S.Allocate))]
        pool = shared_pool(k, allocs)
        coop = self.cooperative(k)
        self.emit(f"#pragma omp parallel{' num_threads((int)tl_nb)' if coop else ''}")
        self.emit("{")
        self.depth += 1
        if pool is not None:
            self.emit("unsigned char* tl_smem = NULL;  /* the shared pool: T.tma_load / wgmma descriptors */")
            self.emit(f"if (posix_memalign((void**)&tl_smem, 1024, {pool[1]}) != 0) tl_smem = NULL;")
            self.emit(f"const uint32_t tl_smem_bytes = {pool[1]}u;")
            self.emit("(void)tl_smem_bytes;")
        for a in allocs:
            b = a.buffer
            t = storage_type(b.dtype)
            if pool is not None and b.uid in pool[0]:
                self.emit(f"{t}* {b.name} = ({t}*)(tl_smem + {pool[0][b.uid]});")
                continue
            self.emit(f"{t}* restrict {b.name} = ({t}*)tl_alloc({b.numel()} * sizeof({t}));")
        if coop:  # every block on its own thread at once: the grid barrier (`omp barrier`) can meet them all
            self.emit("#ifdef _OPENMP")
            self.emit("extern int omp_get_num_threads(void);")
            self.emit("extern int omp_get_thread_num(void);")
            self.emit("const int64_t tl_team = omp_get_num_threads(), tl_rank = omp_get_thread_num();")
            self.emit("#else")
            self.emit("const int64_t tl_team = 1, tl_rank = 0;")
            self.emit("#endif")
            self.emit(f"if (tl_team != tl_nb) __atomic_store_n(&tl_err, {coop}, __ATOMIC_RELAXED);")
            self.emit("else for (int64_t tl_b = tl_rank; tl_b == tl_rank; ++tl_b) {")
        else:
            self.emit("#pragma omp for schedule(static)")
            self.emit("for (int64_t tl_b = 0; tl_b < tl_gx * tl_gy * tl_gz; ++tl_b) {")
        self.depth += 1
        names = [v.name for v in k.block_vars]
        exprs = ["tl_b % tl_gx", "(tl_b / tl_gx) % tl_gy", "tl_b / (tl_gx * tl_gy)"]
        for n, ex in zip(names, exprs):
            self.emit(f"const int32_t {n} = (int32_t)({ex});")
        self.expr.nonneg.update(k.block_vars)
        rng = rng_state_type(k.body)
        if rng is not None:  # one state per thread of the block (cpu_threads indexes it)
            self.emit(f"{rng} tl_rng[{k.threads[0] * k.threads[1] * k.threads[2]}];")
        self.stmt(k.body)
        self.depth -= 1
        self.emit("}")
        for a in allocs:
            if pool is None or a.buffer.uid not in pool[0]:
                self.emit(f"free({a.buffer.name});")
        if pool is not None:
            self.emit("free(tl_smem);")
        self.depth -= 1
        self.emit("}")
        self.depth -= 1
        self.emit("}")

    def s_Allocate(self, s: S.Allocate):
        if s.init is not None:
            for i, v in enumerate(s.init):
                if is_subbyte(s.buffer.dtype):
                    self.emit(f"tl_nibble_set({s.buffer.name}, {i}, {self.expr.store_value(s.buffer.dtype, self.expr(v))});")
                    continue
                self.emit(f"{s.buffer.name}[{i}] = {self.expr.store_value(s.buffer.dtype, self.expr(v))};")

    def s_LetStmt(self, s: S.LetStmt):
        from .c_expr import compute_type

        self.emit(f"const {compute_type(s.var.dtype)} {s.var.name} = {self.expr(s.value)};")

    def s_BufferStore(self, s: S.BufferStore):
        if is_subbyte(s.buffer.dtype):
            self.emit(self.store_nibble(s.buffer, s.indices, self.expr(s.value)))
            return
        val = self.expr.store_expr(s.buffer.dtype, s.value)
        self.emit(f"{self.index(s.buffer, s.indices)} = {val};")

    def imported_sources(self, body):
        """T.import_source texts, once each, in order, at file scope."""
        for src in dict.fromkeys(n.source for n in collect(body, lambda n: isinstance(n, ImportSource))):
            self.lines.append(IMPORTED[0])  # the CPU compiler's errors inside these lines are the user's code
            self.lines.extend(src.splitlines())
            self.lines.append(IMPORTED[1])
        self.emit("")

    def s_ImportSource(self, s):
        pass  # placed at the top of the file (imported_sources)

    def s_DeclBuffer(self, s: DeclBuffer):
        t = storage_type(s.buffer.dtype)
        data = s.data.name if isinstance(s.data, Buffer) else f"(uintptr_t)({self.expr(s.data)})"
        if isinstance(s.data, Buffer) and s.data.dtype != s.buffer.dtype:
            # a T.view with another dtype reads the same bytes: exempt it from type-based aliasing
            self.emit(f"typedef {t} __attribute__((may_alias)) tl_alias_{s.buffer.name};")
            t = f"tl_alias_{s.buffer.name}"
        self.emit(f"{t}* {s.buffer.name} = ({t}*)({data});")

    def s_ThreadAllReduce(self, s):
        raise LoweringError("T.tvm_thread_allreduce combines values across the threads of a block; the CPU "
                            "backend runs a block on one thread (internal: lower_tile_ops_cpu should have "
                            "rejected it)", s.span)

    def cooperative(self, k: S.KernelLaunch) -> int:
        """0, or for a kernel holding a grid barrier: emits the grid-size check (`tl_nb` blocks) and
        returns the error code a run gets when OpenMP cannot give every block its own thread."""
        syncs = collect(k.body, is_grid_sync)
        if not syncs:
            return 0
        n = 1
        for g in k.grid:
            n = n * g if isinstance(g, int) and n is not None else None
        if n is not None and n > COOP_MAX_BLOCKS:
            if all(s.args for s in syncs):  # transform/cluster_cpu.py: cluster barriers made grid barriers
                raise LoweringError(f"T.cluster_sync / T.cluster_wait in a kernel of {n} blocks: the CPU backend runs "
                                    "a cluster barrier as a barrier of the whole grid, every block at once on its own "
                                    f"CPU thread, at most {COOP_MAX_BLOCKS} blocks; launch fewer blocks", k.span)
            raise LoweringError(f"T.sync_grid in a kernel of {n} blocks: a grid barrier that is not split into "
                                "launches (it sits in a loop or a branch, or registers live across it) runs every "
                                f"block at once, one CPU thread each, at most {COOP_MAX_BLOCKS} blocks on target "
                                "cpu; launch fewer blocks (loop over the tiles in each)", k.span)
        self.asserts.append(f"T.sync_grid: the grid's blocks must all run at once (one OpenMP thread each, at most "
                            f"{COOP_MAX_BLOCKS}), and OpenMP did not give every block a thread (check OMP_THREAD_LIMIT "
                            "and that the C compiler has OpenMP)")
        self.emit("const int64_t tl_nb = tl_gx * tl_gy * tl_gz;")
        self.emit(f"if (tl_nb > {COOP_MAX_BLOCKS}) return {len(self.asserts)};")
        return len(self.asserts)

    def s_Evaluate(self, s: S.Evaluate):
        if is_grid_sync(s.value) and self.expr.target != "cuda":  # a cooperative launch (s_KernelLaunch)
            self.emit("#pragma omp barrier")
            return
        self.emit(f"{self.expr(s.value)};")

    def unrolled(self, s: S.For) -> bool:
        """Whether loop s gets the unroll pragma: T.unroll loops of a constant trip count."""
        return s.kind == "unroll" and const_int(s.extent) is not None

    def unroll_pragma(self, s: S.For) -> str | None:
        """The pragma line before loop s: UNROLL_PRAGMA where `unrolled`, else none; a T.unroll
        loop with an unroll_factor is unrolled by that factor."""
        factor = s.annotation("pragma_unroll_factor") if s.kind == "unroll" else None
        if factor is not None:
            return f"{self.UNROLL_PRAGMA.rsplit(' ', 1)[0]} {factor}"
        return self.UNROLL_PRAGMA if self.unrolled(s) else None

    def counted(self, s: S.For) -> bool:
        """Whether loop s is printed counting from 0 (`for (v_n = 0; v_n < extent; ++v_n) { v = start + v_n;`)
        rather than from its start: no loop here; the CUDA codegen says where."""
        return False

    def s_For(self, s: S.For):
        v = s.var.name
        if const_int(s.start) is not None and const_int(s.extent) is not None:
            self.const_loops.add(s.var)
        start, ext = self.expr(s.start), self.expr(s.extent)
        if self.expr.nonnegative(s.start):
            self.expr.nonneg.add(s.var)
        reads_memory = collect(s.extent, lambda n: isinstance(n, E.BufferLoad)) or \
            collect(s.start, lambda n: isinstance(n, E.BufferLoad))
        pragma = self.unroll_pragma(s)
        if self.counted(s):
            if reads_memory:  # bounds that read memory are evaluated once, as the loop's semantics say
                self.emit(f"const int64_t {v}_start = {start}; const int64_t {v}_count = {ext};")
                start, ext = f"{v}_start", f"{v}_count"
            head = [f"for ({self.LOOP_TYPE} {v}_n = 0; {v}_n < {ext}; ++{v}_n) {{",
                    f"  const {self.LOOP_TYPE} {v} = {start} + {v}_n;"]
        else:
            end = ext if start == "0" else f"{start} + {ext}"
            if reads_memory:
                self.emit(f"const int64_t {v}_end = {end};")
                end = f"{v}_end"
            head = [f"for ({self.LOOP_TYPE} {v} = {start}; {v} < {end}; ++{v}) {{"]
        for line in ([pragma] if pragma else []) + head:
            self.emit(line)
        self.depth += 1
        self.stmt(s.body)
        self.depth -= 1
        self.emit("}")

    def s_IfThenElse(self, s: S.IfThenElse):
        self.emit(f"if ({self.expr(s.cond)}) {{")
        self.depth += 1
        self.stmt(s.then_case)
        self.depth -= 1
        if s.else_case is not None:
            self.emit("} else {")
            self.depth += 1
            self.stmt(s.else_case)
            self.depth -= 1
        self.emit("}")

    def s_While(self, s: S.While):
        self.emit(f"while ({self.expr(s.cond)}) {{")
        self.depth += 1
        self.stmt(s.body)
        self.depth -= 1
        self.emit("}")

    def s_Break(self, s):
        self.emit("break;")

    def s_Continue(self, s):
        self.emit("continue;")

    def s_DeviceAssert(self, s: O.DeviceAssert):
        self.asserts.append(s.msg or str(s.cond))
        self.emit(f"if (!({self.expr(s.cond)})) {{ __atomic_store_n(&tl_err, {len(self.asserts)}, __ATOMIC_RELAXED); }}")

    def s_Print(self, s: O.Print):
        obj = s.obj
        msg = s.msg.replace('"', '\\"').replace("%", "%%")
        if isinstance(obj, Buffer):
            self.emit("#pragma omp critical")
            self.emit("{")
            self.emit(f'  printf("{msg} {obj.name} (block %d):\\n", (int)tl_b);')
            self.emit(f"  for (int64_t q = 0; q < {obj.numel()}; ++q) printf(\"%g \", (double){self._load_flat(obj)});")
            self.emit('  printf("\\n");')
            self.emit("}")
        elif obj is None:
            self.emit(f'printf("{msg}\\n");')
        else:
            self.emit(f'printf("{msg} %g\\n", (double)({self.expr(obj)}));')

    def _load_flat(self, b: Buffer) -> str:
        from .c_expr import EMULATED, nibble_value

        k = EMULATED.get(b.dtype.name)
        if is_subbyte(b.dtype):
            return nibble_value(b.dtype, f"tl_nibble_get({b.name}, q)")
        return f"tl_{k}_to_f32({b.name}[q])" if k else f"{b.name}[q]"

    def __getattr__(self, name):
        if name.startswith("s_"):
            raise LoweringError(f"the C backend cannot emit {name[2:]} statements (internal: a pass is missing)")
        raise AttributeError(name)


def sum_terms(e) -> list:
    """The operands of a tree of integer `+` (e itself when it is no sum), left to right."""
    if isinstance(e, E.Binary) and e.op == "+" and e.dtype.is_int:
        return sum_terms(e.a) + sum_terms(e.b)
    return [e]


def rng_state_type(body) -> str | None:
    """The C type of the kernel's per-thread generator state (None when it draws no random
    numbers): the generator its T.rng_init calls name, which must all be the same one."""
    if not collect(body, lambda n: isinstance(n, E.Call) and n.op.startswith("tl_rng_")):
        return None
    inits = collect(body, lambda n: isinstance(n, S.Evaluate) and isinstance(n.value, E.Call)
                    and n.value.op == "tl_rng_init")
    kinds = {}
    for st in inits:
        kinds.setdefault(RNG_STATES[const_int(st.value.args[-1])], st)
    if len(kinds) > 1:
        first, *_, last = kinds.items()
        raise LoweringError(f"T.rng_init: one kernel uses one generator (one state per thread), found {first[0]} "
                            f"and {last[0]}; use the same generator= in every T.rng_init of a kernel", last[1].span)
    return next(iter(kinds), RNG_STATES[0])


def codegen_c(func: S.PrimFunc) -> CSource:
    return CCodegen(func).generate()
