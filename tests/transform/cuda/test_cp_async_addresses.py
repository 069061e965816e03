"""cp.async source addresses in a pipelined loop: one per-thread pointer per global tile, set
before the loop (`tl_gsrcN`), plus an offset linear in the loop and unroll variables.

The lowered kernel is executed per thread by a small address machine: every cp.async it issues
must copy exactly the element the unpipelined T.copy of that k-tile names (k-tile = commit groups
issued before it), with the zero-fill predicate true exactly for in-range elements, and each
k-tile's copies together must cover the whole shared tile.
"""
import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.visitor import collect
from tilelang.testing import kernels as tk
from tilelang.transform.cuda.lower_tile_ops import Raw

DECL = re.compile(r"^const auto\* (tl_gsrc\d+) = \{0\};$")
HOISTED = re.compile(r"^tl::cp_async_zfill<16>\(\{0(?::smem)?\}, (tl_gsrc\d+) \+ \(\{1\}\), \{2\}\);$")
PLAIN = "tl::cp_async_zfill<16>({0}, {1}, {2});"

_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "//": lambda a, b: a // b,
        "/": lambda a, b: a // b, "%": lambda a, b: a % b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
        "&&": lambda a, b: a and b, "||": lambda a, b: a or b, "&": lambda a, b: a & b, ">>": lambda a, b: a >> b}


def gemm(M, N, K, bM, bN, bK, threads, stages):
    return tk.gemm(M, N, K, bM, bN, bK, threads, stages, out_dtype="float16")


class AddressMachine:
    """Runs one thread's share of the lowered kernel's copies; records (k-tile, tile, (i, j), pred, src)."""

    def __init__(self, env, shapes):
        self.env = dict(env)  # variable name -> int
        self.shapes = shapes  # global buffer name -> concrete shape
        self.ptrs, self.commits, self.copies = {}, 0, []

    def value(self, e):
        e = E.as_expr(e)
        if isinstance(e, E.Const):
            return int(e.value)
        if isinstance(e, E.Var):
            return self.env[e.name]
        if isinstance(e, E.Cast):
            return self.value(e.value)
        if isinstance(e, E.Binary):
            return _OPS[e.op](self.value(e.a), self.value(e.b))
        raise AssertionError(f"cannot evaluate {e}")

    def flat(self, ld: E.BufferLoad) -> int:
        out = 0
        for i, d in zip(ld.indices, self.shapes[ld.buffer.name]):
            out = out * d + self.value(i)
        return out

    def run(self, st):
        if isinstance(st, S.SeqStmt):
            for s in st.stmts:
                self.run(s)
        elif isinstance(st, S.LetStmt):
            self.env[st.var.name] = self.value(st.value)
        elif isinstance(st, S.IfThenElse):
            branch = st.then_case if self.value(st.cond) else st.else_case
            if branch is not None:
                self.run(branch)
        elif isinstance(st, S.For):
            start = self.value(st.start)
            for x in range(start, start + self.value(st.extent)):
                self.env[st.var.name] = x
                self.run(st.body)
        elif isinstance(st, Raw):
            self.raw(st)

    def raw(self, st):
        d, h = DECL.match(st.fmt), HOISTED.match(st.fmt)
        if d:
            self.ptrs[d.group(1)] = (st.args[0].args[0].buffer.name, self.flat(st.args[0].args[0]))
        elif "cp_async_commit" in st.fmt:
            self.commits += 1
        elif h or st.fmt in (PLAIN, PLAIN.replace("({0}", "({0:smem}")):
            dst = st.args[0].args[0]
            if h:
                name, base = self.ptrs[h.group(1)]
                src = (name, base + self.value(st.args[1]))
            else:
                src = (st.args[1].args[0].buffer.name, self.flat(st.args[1].args[0]))
            ij = tuple(self.value(i) for i in dst.indices)
            self.copies.append((self.commits, dst.buffer.name, ij, bool(self.value(st.args[2])), src))


def check_copies(kernel, M, N, K, bM, bN, bK, threads, blocks, dims=None, machine=AddressMachine):
    lowered = kernel.artifact.lowered
    kern = next(iter(collect(lowered.body, lambda n: isinstance(n, S.KernelLaunch))))
    n_tiles = -(-K // bK)
    for bx, by in blocks:
        seen = {}
        for tid in range(threads):
            m = machine({"tid": tid, "bx": bx, "by": by, **(dims or {})}, {"A": (M, K), "B": (K, N)})
            m.run(kern.body)
            for t, tile, (i, j), pred, (buf, src) in m.copies:
                r, c = (by * bM + i, t * bK + j) if tile.startswith("A") else (t * bK + i, bx * bN + j)
                rows, cols = (M, K) if buf == "A" else (K, N)
                assert buf == tile[0] and pred == (r < rows and c < cols), (tid, t, tile, i, j, pred)
                if pred:
                    assert src == r * cols + c, f"thread {tid} k-tile {t} {tile}[{i}, {j}]: {src} != {r * cols + c}"
                seen.setdefault((t, tile[0]), set()).add((i, j))
        for t in range(n_tiles):
            assert seen[(t, "A")] == {(i, j) for i in range(bM) for j in range(0, bK, 8)}
            assert seen[(t, "B")] == {(i, j) for i in range(bK) for j in range(0, bN, 8)}


def source_loop(src):
    head, _, body = src.partition("for (int ko = 0;")
    assert body, src
    return head, body.split("tl::cp_async_wait<0>(); __syncthreads();")[0]


@pytest.fixture(scope="module")
def nvrtc():
    mod = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not mod.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


CASES = [(256, 512, 256, 128, 256, 32, 256, 4), (256, 256, 256, 128, 128, 32, 128, 4), (256, 256, 256, 64, 64, 64, 128, 3)]


@pytest.mark.parametrize("shape", CASES)
@pytest.mark.parametrize("target,configs", [("cuda -arch=sm_80", {}), ("cuda -arch=sm_90a", {"tl.disable_wgmma": True})])
def test_pipelined_copies_bump_one_hoisted_pointer_per_tile(shape, target, configs, nvrtc):
    k = tilelang.compile(gemm(*shape), target=target, pass_configs=configs)
    head, loop = source_loop(k.artifact.source)
    decls = re.findall(r"const auto\* (tl_gsrc\d+) = &([AB])\[", head)
    assert sorted(b for _, b in decls) == ["A", "B"] and len({n for n, _ in decls}) == 2
    assert "tl_gsrc" not in head.split(decls[0][0])[0]  # declared once each, before the loop
    copies = re.findall(r"tl::cp_async_zfill<16>\([^;]*;", loop)
    assert copies and all(re.search(r", tl_gsrc\d \+ \(", c) for c in copies), copies
    assert "&A[" not in loop and "&B[" not in loop
    check_copies(k, *shape[:3], *shape[3:7], blocks=[(0, 0), (1, 1)])


def test_odd_waves_walk_k_backwards_through_a_second_stride(nvrtc):
    """One 128x256 block per SM (its accumulators take > 128 registers per thread) on 512 blocks:
    tl_krev is 1 in the blocks of odd waves of the launch order (through the use_swizzle panels),
    which load k-slice n - 1 - k at iteration k: each hoisted source pointer and its k-stride are
    picked once per block. The prologue's slices and guards follow; one wave, or
    tl.disable_k_serpentine, keeps k forward."""
    k = tilelang.compile(gemm(4096, 4096, 4096, 128, 256, 32, 256, 4), target="cuda -arch=sm_80")
    src = k.artifact.source
    head, loop = source_loop(src)
    assert "const int32_t tl_krev = ((((by * 16) + bx) / 132) & 1);" in head  # no use_swizzle: row-major order
    for n, buf, step in ((0, "A", "32LL"), (1, "B", "131072LL")):
        assert re.search(rf"const auto\* tl_gsrc{n} = \(\(tl_krev == 1\)\) \? &{buf}\[.*\] : &{buf}\[.*\]; "
                         rf"const int64_t tl_gstep{n} = \(\(tl_krev == 1\)\) \? -{step} : {step};", head)
        assert f"tl_gsrc{n} + (((((int64_t)(ko)) * tl_gstep{n})" in loop
    assert "(((tl_krev == 1) ? 127 : 0) * 32) + j" in head  # the prologue's first slice
    assert re.findall(r"tl::cp_async_zfill<16>\([^;]*, 1\);", loop)  # in bounds either way: no guards
    off = tilelang.compile(gemm(4096, 4096, 4096, 128, 256, 32, 256, 4), target="cuda -arch=sm_80",
                           pass_configs={"tl.disable_k_serpentine": True}).artifact.source
    one = tilelang.compile(gemm(1024, 1024, 1024, 128, 256, 32, 256, 4), target="cuda -arch=sm_80").artifact.source
    assert "tl_krev" not in off and "tl_krev" not in one and "tl_gstep" not in one


def test_ragged_shapes_keep_their_guards_and_addresses(nvrtc):
    M = N = K = 1000
    k = tilelang.compile(gemm(M, N, K, 128, 128, 32, 128, 4), target="cuda -arch=sm_80")
    _, loop = source_loop(k.artifact.source)
    copies = re.findall(r"tl::cp_async_zfill<16>\(.*, tl_gsrc\d \+ \(.*\), (.*)\);", loop)
    assert len(copies) == 2 and all("1000" in g for g in copies), copies  # predicates, not `1`
    check_copies(k, M, N, K, 128, 128, 32, 128, blocks=[(0, 0), (7, 7), (7, 0)])


def test_symbolic_rows_hoist_and_keep_their_guard(nvrtc):
    """cp.async needs static row lengths; a symbolic M only enters the base pointer and the guard."""
    m = T.dynamic("m")
    k = tilelang.compile(gemm(m, 128, 96, 64, 64, 32, 128, 3), target="cuda -arch=sm_80")
    _, loop = source_loop(k.artifact.source)
    assert loop.count(", tl_gsrc") == 2 and "&A[" not in loop and "&B[" not in loop
    assert re.search(r"tl_gsrc\d \+ \(.*\), .*<= tl_m_lt.*\);", loop)  # i < m in 32 bits (narrow_dims)
    check_copies(k, 200, 128, 96, 64, 64, 32, 128, blocks=[(0, 0), (1, 3)], dims={"m": 200})


def test_a_start_read_from_memory_is_not_hoisted(nvrtc):
    """A T.alloc_var advanced inside the loop is a load, not a loop-invariant value."""

    @T.prim_func
    def walk(A: T.Tensor((128, 1024), "float16"), C: T.Tensor((128, 32), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((128, 32), "float16")
            acc = T.alloc_fragment((128, 32), "float32")
            col = T.alloc_var("int32", init=0)
            T.clear(acc)
            for ko in T.serial(8):
                T.copy(A[0, col * 32 + ko * 32], A_s)
                for i, j in T.Parallel(128, 32):
                    acc[i, j] = acc[i, j] + A_s[i, j]
                col = col + 1
            T.copy(acc, C)

    src = tilelang.compile(walk, target="cuda -arch=sm_80").artifact.source
    assert "tl_gsrc" not in src and "tl::cp_async_zfill<16>(" in src


def test_address_machine_catches_a_wrong_stride(nvrtc):
    """The checker is not vacuous: a pointer one row off fails it."""
    shape = CASES[1]
    k = tilelang.compile(gemm(*shape), target="cuda -arch=sm_80")

    class OffByRow(AddressMachine):
        def raw(self, st):
            super().raw(st)
            if DECL.match(st.fmt) and self.ptrs[DECL.match(st.fmt).group(1)][0] == "B":
                name = DECL.match(st.fmt).group(1)
                self.ptrs[name] = ("B", self.ptrs[name][1] + 256)

    with pytest.raises(AssertionError, match="k-tile"):
        check_copies(k, *shape[:3], *shape[3:7], blocks=[(0, 0)], machine=OffByRow)


# ----------------------------------------------------------------------------- the mma.sync mainloop's SASS
@pytest.mark.parametrize("rows_bytes", [32, 64, 128, 256, 512])
def test_swizzle_repeats_every_8_rows(rows_bytes):
    """MmaWarpTile::load adds kk * LD and mi * 16 * LD as immediates to the K-slice-0 / mi-0
    offsets of row-moving ldmatrix addresses: valid because every tl::swizzle_offset phase
    (mirrored by swizzle_phase) depends on row % 8 only."""
    from tilelang.layout.swizzle import swizzle_phase

    phase = swizzle_phase(rows_bytes)
    assert all(phase(r + 8 * k) == phase(r) for r in range(8) for k in range(64))


_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)[^;]*?(?:0x([0-9a-f]+))?\s*;")


def hot_loop(sass):
    """Opcodes of the backward-branch loop holding the most HMMA."""
    ins = [(int(m.group(1), 16), m.group(2), m.group(3)) for m in _INSN.finditer(sass)]
    best = []
    for addr, op, target in ins:
        if op == "BRA" and target is not None and int(target, 16) < addr:
            body = [o for a, o, _ in ins if int(target, 16) <= a <= addr]
            if body.count("HMMA") > best.count("HMMA"):
                best = body
    return best


# measured: 76 / 66 (sm_80), 80 / 67 (sm_90a). 128x256: 64 / 68 before the staged epilogue (its live
# ranges make ptxas rebuild the B source pointer in the loop: +6) and the k serpentine of odd waves
# (+6, mostly uniform-datapath USEL / UIMAD / UMOV picking the k stride); both measured faster on
# the H200 (docs/STATUS.md). Before the hoisted pointers, byte-offset ldmatrix and rotating stage
# views: 101 / 93 (sm_80), 103 / 93 (sm_90a). TL_ASSUME(0 <= tid < threads): 128x256 +1 IADD3 in the loop
# (ptxas' choice; 81 without it), the whole kernel's SASS 2777 -> 2025 lines
@pytest.mark.parametrize("cfg,target,configs,most", [
    ((128, 256, 32, 256, 4), "cuda -arch=sm_80", {}, 77),
    ((128, 128, 32, 128, 4), "cuda -arch=sm_80", {}, 69),
    ((128, 256, 32, 256, 4), "cuda -arch=sm_90a", {"tl.disable_wgmma": True}, 82),
    ((128, 128, 32, 128, 4), "cuda -arch=sm_90a", {"tl.disable_wgmma": True}, 70)])
def test_mma_mainloop_issues_few_non_hmma_instructions(cfg, target, configs, most, nvrtc):
    """4096^3 mma.sync GEMM, the hot loop per 64 HMMA: cp.async bumps one pointer per tile, and
    ldmatrix addresses are a byte offset (or an immediate) on the stage base."""
    sass_mod = pytest.importorskip("tilelang.backend.cuda.sass")
    if not sass_mod.sass_available():
        pytest.skip("cuobjdump / nvdisasm not installed")
    k = tilelang.compile(gemm(4096, 4096, 4096, *cfg), target=target, pass_configs=configs)
    sass = k.export_sass()
    loop = hot_loop(sass)
    assert loop.count("HMMA") == 64
    assert len(loop) - 64 <= most, f"{len(loop) - 64} non-HMMA instructions per 64 HMMA"
    res = next(iter(sass_mod.resource_usage(k.artifact.compiled.cubin).values()))
    assert res.local == 0 and "LDL" not in sass and "STL" not in sass
    assert res.registers <= 255


@pytest.mark.parametrize("gx,gy,panel", [(16, 32, 10), (7, 5, 3), (9, 17, 4), (1, 6, 8)])
def test_panel_rank_inverts_panel_raster(gx, gy, panel):
    from tilelang.arith.simplify import const_int, simplify
    from tilelang.ir import expr as E
    from tilelang.transform.cuda.raster import panel_rank, panel_raster

    for lin in range(gx * gy):
        bx, by = (const_int(simplify(x)) for x in panel_raster(E.as_expr(lin), gx, gy, panel))
        assert const_int(simplify(panel_rank(E.as_expr(bx), E.as_expr(by), gx, gy, panel))) == lin
