"""software_pipeline (sm_80 cp.async): staged tiles, prologue, wait depth, and fallbacks with a warning.

The pipelined tile-level IR is also executed by a small cp.async machine (commit groups,
wait_group<N>, barriers): at every T.gemm the stage it reads must hold exactly the tile the
unpipelined loop would have copied in that iteration, its commit group must have completed,
and no refill may start before the barrier that follows the stage's last reader.
"""
import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.arith.simplify import const_int
from tilelang.backend.cuda.pipeline import PerformanceWarning
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.visitor import collect
from tilelang.op import tile_ops as O
from tilelang.transform.cuda.lower_tile_ops import Raw
from tilelang.transform.cuda.software_pipeline import pipeline_kernel

_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "//": lambda a, b: a // b,
        "%": lambda a, b: a % b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
        "&&": lambda a, b: a and b, "||": lambda a, b: a or b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
        ">>": lambda a, b: a >> b, "<<": lambda a, b: a << b}
VIEW = re.compile(r"^(\w+) = (\w+) \+ \(\{0\}\) \* (\d+);$")


def gemm_from(start, stages, K=256, bK=32):
    """A GEMM over the K blocks start..n-1 (the shape of a causal or split loop)."""

    @T.prim_func
    def gemm_from(A: T.Tensor((128, K), "float16"), B: T.Tensor((K, 128), "float16"), C: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, bK), "float16")
            B_s = T.alloc_shared((bK, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(start, K // bK, num_stages=stages):
                T.copy(A[by * 128, ko * bK], A_s)
                T.copy(B[ko * bK, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])

    return gemm_from


# ----------------------------------------------------------------------------- the cp.async machine


class CpAsyncMachine:
    def __init__(self, kernel, expected):
        self.env = {v: E.as_expr(1) for v in kernel.block_vars}
        self.expected = expected  # tile name -> src region of the unpipelined copy
        self.views, self.holds, self.last_read = {}, {}, {}
        self.committed, self.done, self.last_barrier, self.t = 0, 0, -1, 0
        self.reads = []  # (iteration, tile) checked

    def value(self, e):
        e = E.as_expr(e)
        if isinstance(e, E.Const):
            return int(e.value)
        if isinstance(e, E.Var):
            return self.value(self.env[e])
        if isinstance(e, E.Binary):
            a, b = self.value(e.a), self.value(e.b)
            return _OPS[e.op](a, b)  # // and % are floor division / modulo, as in Python
        raise AssertionError(f"cannot evaluate {e}")

    def run(self, st):
        self.t += 1
        if isinstance(st, S.SeqStmt):
            for s in st.stmts:
                self.run(s)
        elif isinstance(st, S.IfThenElse):
            branch = st.then_case if self.value(st.cond) else st.else_case
            if branch is not None:
                self.run(branch)
        elif isinstance(st, S.For) and st.kind == "serial":
            start, n = self.value(st.start), self.value(st.extent)
            for v in range(start, start + n):
                self.env[st.var] = E.as_expr(v)
                self.run(st.body)
        elif isinstance(st, Raw):
            self.raw(st)
        elif isinstance(st, O.Copy) and st.async_group:
            key = self.views[st.dst.buffer.name]
            assert key not in self.last_read or self.last_read[key] < self.last_barrier, \
                f"stage {key} refilled before the barrier after its last reader"
            self.holds[key] = (st.src.buffer.name, self.region(st.src), self.committed)
        elif isinstance(st, O.Gemm):
            for r in (st.A, st.B):
                self.read(r.buffer.name)

    def raw(self, st):
        m = VIEW.match(st.fmt)
        if m:
            self.views[m.group(1)] = (m.group(2), self.value(st.args[0]))
        if "cp_async_commit" in st.fmt:
            self.committed += 1
        w = re.search(r"cp_async_wait<(\d+)>", st.fmt)
        if w:
            self.done = max(self.done, self.committed - int(w.group(1)))  # groups [0, done) complete
        if "__syncthreads()" in st.fmt:
            self.last_barrier = self.t

    def region(self, r):
        return tuple(self.value(s) for s in r.starts)

    def read(self, name):
        key = self.views[name]
        src, starts, group = self.holds.get(key, (None, None, None))
        want = (self.expected[name].buffer.name, self.region(self.expected[name]))
        assert (src, starts) == want, f"{name} reads stage {key[1]} holding {src}{starts}, expected {want[0]}{want[1]}"
        assert group < self.done, f"{name}: stage {key[1]} read before its cp.async group completed"
        self.last_read[key] = self.t
        self.reads.append(name)


def run_pipeline(func, helpers):
    k = helpers.tile_kernel(func, "sm_80")
    msgs = []
    piped, _ = pipeline_kernel(k, msgs.append)
    loop = next(s for s in collect(k.body, lambda n: isinstance(n, S.For)) if s.kind == "pipelined")
    expected = {c.dst.buffer.name: c.src for c in collect(loop.body, lambda n: isinstance(n, O.Copy))}
    m = CpAsyncMachine(k, expected)
    m.run(piped.body)
    return m, piped, msgs, const_int(loop.extent)


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_every_iteration_reads_its_own_completed_tile(stages, kernels, helpers):
    m, _, msgs, n = run_pipeline(kernels.gemm(stages=stages), helpers)
    assert not msgs
    assert m.reads == ["A_s", "B_s"] * n


@pytest.mark.parametrize("start", [1, 2])
def test_pipelined_loop_with_a_start_offset_reads_its_own_tiles(start, helpers):
    m, _, _, n = run_pipeline(gemm_from(start, 3), helpers)
    assert m.reads == ["A_s", "B_s"] * n


def test_pipeline_machine_catches_a_wrong_wait_depth(kernels, helpers):
    """The checker is not vacuous: wait_group<num_stages - 1> lets the gemm read a tile still in flight."""
    k = helpers.tile_kernel(kernels.gemm(stages=3), "sm_80")
    piped, _ = pipeline_kernel(k, [].append)
    loop = next(s for s in collect(k.body, lambda n: isinstance(n, S.For)) if s.kind == "pipelined")
    expected = {c.dst.buffer.name: c.src for c in collect(loop.body, lambda n: isinstance(n, O.Copy))}

    class Loose(CpAsyncMachine):
        def raw(self, st):
            super().raw(Raw(st.fmt.replace("cp_async_wait<1>", "cp_async_wait<2>"), st.args))

    with pytest.raises(AssertionError, match="before its cp.async group completed"):
        Loose(k, expected).run(piped.body)


# ----------------------------------------------------------------------------- the emitted kernel


@pytest.mark.parametrize("case,stages", [("gemm-sm80", 3), ("gemm-sm80-4stages", 4)])
def test_source_has_prologue_wait_and_staged_tiles(case, stages, build):
    b = build(case)
    src = b.source
    assert not b.messages(PerformanceWarning), b.warnings
    head, _, body = src.partition("for (int ko = 0; ko < 8; ++ko) {")
    assert body, src
    # prologue: stages 0 .. S-2 issued, one commit group each
    assert head.count("tl::cp_async_commit();") == stages - 1
    for name in ("A_s_w", "B_s_w"):  # then the view points at the stage the loop's first refill fills
        issued = [int(x) for x in re.findall(rf"{name} = \w+_stages \+ \((\d+)\) \* 4096;", head)]
        assert issued == list(range(stages - 1)) + [stages - 1]
    # the mma.sync mainloop: stage 0 made visible and its first fragments loaded before the loop;
    # inside, the wait (S-2 groups left in flight) and barrier happen within gemm_ss_pipe
    assert head.rstrip().endswith(f"tl::gemm_ss_preload<128, 128, 32, 2, 2, false, false, 32, 128, true, true, "
                                  f"tl::half_t>(A_s, B_s, tl_mma_state);")
    assert f"tl::cp_async_wait<{stages - 2}>(); __syncthreads();" in head
    assert "__syncthreads" not in body.split("tl::gemm_ss_pipe<")[0]
    # rotating views: the next stage is computed once; the stage just read is the next refill's
    mod = f"& {stages - 1}" if stages & (stages - 1) == 0 else f"% {stages}"  # a power of two: a mask
    assert f"auto* tl_A_s_next = A_s_stages + (((ko + 1) {mod})) * 4096;" in body
    assert f"tl::half_t, {stages - 2}>(A_s, B_s, C_l, tl_A_s_next, tl_B_s_next, tl_mma_state);" in body
    assert "A_s_w = A_s; A_s = tl_A_s_next; B_s_w = B_s; B_s = tl_B_s_next;" in body
    assert "A_s_w = A_s_stages" not in body and "A_s = A_s_stages" not in body
    assert body.count("tl::cp_async_wait<") == 1  # the drain after the loop
    assert "tl::cp_async_wait<0>(); __syncthreads();" in body
    # staged tiles: S copies of A_s (128 x 32) and of B_s (32 x 128), both float16
    allocs = {a.buffer.name: a.buffer for a in collect(b.lowered.body, lambda n: isinstance(n, S.Allocate))}
    assert tuple(const_int(x) for x in allocs["A_s_stages"].shape) == (stages * 128, 32)
    assert tuple(const_int(x) for x in allocs["B_s_stages"].shape) == (stages * 32, 128)
    assert b.kernel.artifact.csource.smem_bytes == stages * (128 * 32 + 32 * 128) * 2


def test_rows_of_8_byte_multiples_pipeline_with_8_byte_cp_async(kernels):
    """K = 100: A's rows are 200 bytes, so its tiles move as 8-byte cp.async (said once), still
    pipelined; B keeps 16-byte ones."""
    with pytest.warns(PerformanceWarning) as rec:
        k = tilelang.compile(kernels.gemm(K=100), out_idx=[-1], target="cuda -arch=sm_80")
    msgs = [str(w.message) for w in rec]
    note = ("T.Pipelined: T.copy A -> A_s uses 8-byte cp.async, not 16-byte "
            "(A: row length 100 is not a multiple of 8 elements)")
    assert sum(note in m for m in msgs) == 1, msgs
    src = k.artifact.source
    # destinations as 32-bit shared addresses (tl.disable_shared_address_slots)
    assert "A_s_stages" in src and "tl::cp_async_zfill<8>((tl::smem_addr(A_s_w) + " in src and \
        "tl::cp_async_zfill<16>((tl::smem_addr(B_s_w) + " in src


def test_copy_that_cannot_use_cp_async_runs_unpipelined_with_a_warning(kernels):
    with pytest.warns(PerformanceWarning) as rec:
        k = tilelang.compile(kernels.gemm(K=99), out_idx=[-1], target="cuda -arch=sm_80")
    msgs = [str(w.message) for w in rec]
    assert any("T.Pipelined(num_stages=3) runs unpipelined: T.copy A -> A_s cannot use 4-, 8- or 16-byte "
               "cp.async (A: row length 99 is not a multiple of 8 elements)" in m for m in msgs), msgs
    src = k.artifact.source
    assert "_stages" not in src and "cp_async_wait<1>" not in src
    assert k.artifact.csource.smem_bytes == (128 * 32 + 32 * 128) * 2


def test_disable_pipeline_keeps_one_buffer_per_tile(build):
    b = build("gemm-sm80-nopipe")
    src = b.source
    assert not b.warnings
    assert "_stages" not in src and "cp_async_wait<1>" not in src
    assert b.kernel.artifact.csource.smem_bytes == (128 * 32 + 32 * 128) * 2
    loop = src.split("for (int ko = 0; ko < 8; ++ko) {")[1]
    # synchronous copies, both in flight before one wait (cp_async_waits.py): a barrier, the gemm,
    # a barrier before the next refill
    assert loop.count("tl::cp_async_wait<0>();") == 1 and loop.count("tl::cp_async_commit();") == 2
    assert loop.index("__syncthreads();") < loop.index("tl::gemm_ss<")
    assert loop.split("tl::gemm_ss<")[1].split("}")[0].count("__syncthreads();") == 1


def test_loop_not_starting_with_copies_pipelines_its_later_copy(helpers):
    @T.prim_func
    def scale(A: T.Tensor((64, 256), "float32"), B: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((64, 32), "float32")
            A_s = T.alloc_shared((64, 32), "float32")
            T.clear(acc)
            for ko in T.Pipelined(8, num_stages=2):
                for i, j in T.Parallel(64, 32):
                    acc[i, j] = acc[i, j] * 0.5
                T.copy(A[0, ko * 32], A_s)
                for i, j in T.Parallel(64, 32):
                    acc[i, j] = acc[i, j] + A_s[i, j]
            T.copy(acc, B)

    k = helpers.tile_kernel(scale, "sm_80")
    msgs = []
    piped, views = pipeline_kernel(k, msgs.append)
    assert [v[0].name for v in views] == ["A_s"] and not msgs
    assert all(c.async_group for c in collect(piped.body, lambda x: isinstance(x, O.Copy) and x.src.buffer.name == "A"))


def test_loop_without_stageable_copies_warns_and_runs_unpipelined(helpers):
    @T.prim_func
    def scale(A: T.Tensor((64, 256), "float32"), B: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((64, 32), "float32")
            A_s = T.alloc_shared((64, 32), "float32")
            T.clear(acc)
            T.clear(A_s)
            for ko in T.Pipelined(8, num_stages=2):
                for i, j in T.Parallel(64, 32):
                    acc[i, j] = acc[i, j] * 0.5 + A_s[i, j]  # reads the tile before this iteration's copy
                T.copy(A[0, ko * 32], A_s)
                for i, j in T.Parallel(64, 32):
                    acc[i, j] = acc[i, j] + A_s[i, j]
            T.copy(acc, B)

    k = helpers.tile_kernel(scale, "sm_80")
    msgs = []
    piped, views = pipeline_kernel(k, msgs.append)
    assert piped is k and not views
    assert len(msgs) == 2 and "does not start with global -> shared T.copy" in msgs[1], msgs
    assert "T.copy A -> A_s stays a synchronous copy: the body uses A_s before it" in msgs[0], msgs


# ----------------------------------------------------------------------------- the fused mma mainloop
PIPE = re.compile(r"^tl::gemm_ss_pipe<.*, (\d+)>\(\{0\}, \{1\}, \{2\}, (\w+), (\w+), \w+\);$")
NEXT = re.compile(r"^auto\* (\w+) = (\w+) \+ \(\{0\}\) \* (\d+);$")
ROTATE = re.compile(r"^(?:\w+ = \w+; ?)+$")


class FusedLoopMachine(CpAsyncMachine):
    """Runs the lowered sm_80 kernel's staging statements: views are pointers into a tile's stages
    (`X = X_stages + (s) * n`, `auto* next = ...`, rotations `X_w = X; X = next;`); the per-thread
    cp.async loop writing through X_w refills the stage X_w points at with tile X's next k-tile;
    gemm_ss_preload / gemm_ss_pipe read stages, the latter waiting and synchronizing between its
    current-stage and next-stage reads."""

    def __init__(self, kernel, n_tiles):
        super().__init__(kernel, {})
        self.n_tiles = n_tiles
        self.issued = {}  # tile storage -> k-tiles issued so far
        self.iteration = 0

    def run(self, st):
        if isinstance(st, S.LetStmt):
            self.env[st.var] = st.value
            return
        if isinstance(st, S.For) and st.annotation("tl.thread_loop", False):
            cps = collect(st, lambda n: isinstance(n, Raw) and n.fmt.startswith("tl::cp_async_zfill<"))
            if cps:
                self.refill({c.args[0].args[0].buffer.name for c in cps})
            return
        if isinstance(st, S.For) and st.kind == "serial":
            start, n = self.value(st.start), self.value(st.extent)
            for v in range(start, start + n):
                self.env[st.var] = E.as_expr(v)
                self.iteration = v - start
                self.run(st.body)
            return
        super().run(st)

    def refill(self, names):
        (name,) = names
        key = self.views[name]
        assert key not in self.last_read or self.last_read[key] < self.last_barrier, \
            f"stage {key} refilled before the barrier after its last reader"
        t = self.issued.get(key[0], 0)
        self.issued[key[0]] = t + 1
        self.holds[key] = (t, self.committed)

    def raw(self, st):
        m = VIEW.match(st.fmt) or NEXT.match(st.fmt)
        if m:
            self.views[m.group(1)] = (m.group(2), self.value(st.args[0]))
            return
        if ROTATE.match(st.fmt):
            for a, b in re.findall(r"(\w+) = (\w+);", st.fmt):
                self.views[a] = self.views[b]
            return
        if st.fmt.startswith("tl::gemm_ss_preload<"):
            for a in st.args[:2]:
                self.read_stage(self.views[a.args[0].buffer.name], 0)
            return
        p = PIPE.match(st.fmt)
        if p:
            for a in st.args[:2]:
                self.read_stage(self.views[a.args[0].buffer.name], self.iteration)
            self.done = max(self.done, self.committed - int(p.group(1)))
            self.t += 1
            self.last_barrier = self.t
            self.t += 1
            if self.iteration + 1 < self.n_tiles:
                for name in (p.group(2), p.group(3)):
                    self.read_stage(self.views[name], self.iteration + 1)
            return
        super().raw(st)

    def read_stage(self, key, want):
        tile, group = self.holds.get(key, (None, None))
        assert tile == want, f"stage {key} holds k-tile {tile}, iteration reads k-tile {want}"
        assert group < self.done, f"stage {key} read before its cp.async group completed"
        self.last_read[key] = self.t
        self.reads.append((key[0], want))


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_fused_mma_mainloop_reads_completed_tiles_and_refills_after_the_barrier(stages, kernels):
    k = tilelang.compile(kernels.gemm(stages=stages), out_idx=[-1], target="cuda -arch=sm_80")
    assert "tl::gemm_ss_pipe<" in k.artifact.source
    kern = next(iter(collect(k.artifact.lowered.body, lambda n: isinstance(n, S.KernelLaunch))))
    m = FusedLoopMachine(kern, 8)
    m.run(kern.body)
    assert m.reads == [(x, 0) for x in ("A_s_stages", "B_s_stages")] + [
        (x, t) for i in range(8) for t in ([i, i + 1] if i + 1 < 8 else [i]) for x in ("A_s_stages", "B_s_stages")]


def test_fused_loop_machine_catches_a_missing_wait(kernels):
    """The checker is not vacuous: waiting for one group fewer reads the next stage while it lands."""
    k = tilelang.compile(kernels.gemm(stages=3), out_idx=[-1], target="cuda -arch=sm_80")
    kern = next(iter(collect(k.artifact.lowered.body, lambda n: isinstance(n, S.KernelLaunch))))

    class Loose(FusedLoopMachine):
        def raw(self, st):
            super().raw(Raw(st.fmt.replace("tl::half_t, 1>(", "tl::half_t, 2>("), st.args))

    with pytest.raises(AssertionError, match="before its cp.async group completed"):
        Loose(kern, 8).run(kern.body)


def test_fused_loop_machine_catches_a_refill_of_the_wrong_stage(kernels):
    """The checker is not vacuous: a write view that does not rotate refills one stage forever."""
    k = tilelang.compile(kernels.gemm(stages=3), out_idx=[-1], target="cuda -arch=sm_80")
    kern = next(iter(collect(k.artifact.lowered.body, lambda n: isinstance(n, S.KernelLaunch))))

    class Stuck(FusedLoopMachine):
        def raw(self, st):
            super().raw(Raw(st.fmt.replace("A_s_w = A_s; ", ""), st.args))

    with pytest.raises(AssertionError, match="holds k-tile"):
        Stuck(kern, 8).run(kern.body)


@pytest.mark.parametrize("start", [1, 2])
def test_fused_mainloop_with_a_start_offset_rotates_its_views(start):
    k = tilelang.compile(gemm_from(start, 3), out_idx=[-1], target="cuda -arch=sm_80")
    assert "tl_A_s_next" in k.artifact.source
    kern = next(iter(collect(k.artifact.lowered.body, lambda n: isinstance(n, S.KernelLaunch))))
    m = FusedLoopMachine(kern, 8 - start)
    m.run(kern.body)
    n = 8 - start
    assert m.reads == [(x, 0) for x in ("A_s_stages", "B_s_stages")] + [
        (x, t) for i in range(n) for t in ([i, i + 1] if i + 1 < n else [i]) for x in ("A_s_stages", "B_s_stages")]


def test_mma_mainloop_that_would_spill_keeps_the_plain_loop(build):
    """128 x 128 x 64 on 4 warps: the double-buffered fragments do not fit beside the accumulator."""
    b = build("gemm", "sm_80", {}, bK=64)
    assert "tl::gemm_ss_pipe<" not in b.source and "tl::gemm_ss<" in b.source


def staged_copy(annotate_inside: bool):
    """A pipelined copy through a swizzled shared tile, declared at the kernel's top or at the top
    of the loop body (as the peer suite's deepseek_mhc pre kernel does)."""
    from tilelang.layout import make_swizzled_layout

    @T.prim_func
    def main(A: T.Tensor((64, 512), "float16"), B: T.Tensor((64, 512), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            if annotate_inside:
                for k in T.Pipelined(8, num_stages=2):
                    s = T.alloc_shared((64, 64), "float16")
                    T.annotate_layout({s: make_swizzled_layout(s)})
                    T.copy(A[0, k * 64], s)
                    T.copy(s, B[0, k * 64])
            else:
                s = T.alloc_shared((64, 64), "float16")
                T.annotate_layout({s: make_swizzled_layout(s)})
                for k in T.Pipelined(8, num_stages=2):
                    T.copy(A[0, k * 64], s)
                    T.copy(s, B[0, k * 64])

    return main


@pytest.mark.parametrize("inside", [False, True])
def test_pipelined_tile_keeps_its_swizzle_and_declarations_in_the_body_pipeline(inside):
    import warnings

    import torch

    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC not installed")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        src = tilelang.compile(staged_copy(inside), target="cuda -arch=sm_80").get_kernel_source()
    assert not [w for w in rec if "unpipelined" in str(w.message)], [str(w.message) for w in rec]
    assert "s_stages" in src and "tl::cp_async_wait<0>(); __syncthreads();" in src
    writes = [ln for ln in src.splitlines() if "cp_async_zfill<16>((tl::smem_addr(s_w) + " in ln]  # tl.disable_shared_address_slots
    reads = [ln for ln in src.splitlines() if "&s[" in ln]
    assert writes and reads and all("swizzle_offset<64" in ln for ln in writes + reads), src
    a = torch.randn(64, 512).half()
    b = torch.zeros_like(a)
    tilelang.compile(staged_copy(inside), target="cpu")(a, b)
    assert torch.equal(a, b)


def later_copy(stages, read_first=False, K=256, bK=32):
    """Body: two leading copies, a gemm, then a third copy its second gemm reads (flash attention's
    backward loads dO and lse after its first gemm). read_first: the third tile is read before its copy."""

    @T.prim_func
    def later_copy(A: T.Tensor((64, K), "float16"), B: T.Tensor((K, 64), "float16"), D: T.Tensor((K, 64), "float16"),
                   C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, bK), "float16")
            B_s = T.alloc_shared((bK, 64), "float16")
            D_s = T.alloc_shared((bK, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            T.clear(D_s)
            for ko in T.Pipelined(K // bK, num_stages=stages):
                T.copy(A[by * 64, ko * bK], A_s)
                T.copy(B[ko * bK, bx * 64], B_s)
                if read_first:
                    T.gemm(A_s, D_s, C_l)
                T.gemm(A_s, B_s, C_l)
                T.copy(D[ko * bK, bx * 64], D_s)
                T.gemm(A_s, D_s, C_l)
            T.copy(C_l, C[by * 64, bx * 64])

    return later_copy


@pytest.mark.parametrize("stages", [2, 3])
def test_copy_after_compute_joins_the_stage_group(stages, helpers):
    m, piped, msgs, n = run_pipeline(later_copy(stages), helpers)
    assert not msgs
    assert m.reads == ["A_s", "B_s", "A_s", "D_s"] * n
    staged = {c.dst.buffer.name for c in collect(piped.body, lambda x: isinstance(x, O.Copy) and x.async_group)}
    assert staged == {"A_s_w", "B_s_w", "D_s_w"}


def test_copy_whose_tile_is_read_first_stays_in_place(helpers):
    k = helpers.tile_kernel(later_copy(3, read_first=True), "sm_80")
    msgs = []
    piped, _ = pipeline_kernel(k, msgs.append)
    assert msgs == ["T.Pipelined(num_stages=3): T.copy D -> D_s stays a synchronous copy: the body uses D_s before it"]
    sync = [c for c in collect(piped.body, lambda x: isinstance(x, O.Copy)) if c.dst.buffer.name == "D_s"]
    assert len(sync) == 1 and not sync[0].async_group  # it still overwrites the tile the first gemm read


def later_copy_padded(pad_rows):
    """later_copy(2) beside a (pad_rows, 1024) fp16 shared tile, so the kernel is past 99 KB
    (flash attention's GQA backward: 123 KB before dO / lse / Delta join the stage group)."""

    @T.prim_func
    def later_copy_padded(A: T.Tensor((64, 256), "float16"), B: T.Tensor((256, 64), "float16"),
                          D: T.Tensor((256, 64), "float16"), C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            D_s = T.alloc_shared((32, 64), "float16")
            pad = T.alloc_shared((pad_rows, 1024), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            T.clear(pad)
            for ko in T.Pipelined(8, num_stages=2):
                T.copy(A[by * 64, ko * 32], A_s)
                T.copy(B[ko * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_l)
                T.copy(D[ko * 32, bx * 64], D_s)
                T.gemm(A_s, D_s, C_l)
            T.copy(C_l, C[by * 64, bx * 64])

    return later_copy_padded


@pytest.mark.parametrize("pad_rows,staged", [(56, True), (45, False), (40, True), (32, True)])
def test_later_copy_past_99_kb_is_staged_while_the_blocks_per_sm_hold(pad_rows, staged, helpers):
    """Shared memory before D_s's second stage (4 KB), A_s and B_s's second stages counted:
    56 rows 132 KB, one block per SM before and after: staged. 45 rows 110 KB: the stage would drop
    an SM from two blocks to one: it stays synchronous, saying so. 40 rows 100 KB: two blocks
    before and after: staged. 32 rows 84 KB: under 99 KB, staged as before."""
    k = helpers.tile_kernel(later_copy_padded(pad_rows), "sm_90a")
    msgs = []
    piped, _ = pipeline_kernel(k, msgs.append, smem_limit=232448)
    names = {c.dst.buffer.name for c in collect(piped.body, lambda x: isinstance(x, O.Copy) and x.async_group)}
    if staged:
        assert not msgs and names == {"A_s_w", "B_s_w", "D_s_w"}, (msgs, names)
    else:
        assert names == {"A_s_w", "B_s_w"}, names
        assert msgs == ["T.Pipelined(num_stages=2): T.copy D -> D_s stays a synchronous copy: its 2 stages "
                        "would take the kernel's shared memory past 99 KB"], msgs
    if staged:  # every iteration still reads its own completed tiles
        loop = next(s for s in collect(k.body, lambda n: isinstance(n, S.For)) if s.kind == "pipelined")
        expected = {c.dst.buffer.name: c.src for c in collect(loop.body, lambda n: isinstance(n, O.Copy))}
        m = CpAsyncMachine(k, expected)
        m.run(piped.body)
        assert m.reads == ["A_s", "B_s", "A_s", "D_s"] * 8


def masked_sum(stages):
    """Block-sparse shape: the body is one `if Mask[bx, k]` over the copy and its use."""

    @T.prim_func
    def masked_sum(A: T.Tensor((128, 256), "float32"), Mask: T.Tensor((2, 8), "int32"),
                   O: T.Tensor((128, 32), "float32")):
        with T.Kernel(2, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float32")
            acc = T.alloc_fragment((64, 32), "float32")
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=stages):
                if Mask[bx, k] != 0:
                    T.copy(A[bx * 64, k * 32], A_s)
                    for i, j in T.Parallel(64, 32):
                        acc[i, j] += A_s[i, j] * (k + 1)
            T.copy(acc, O[bx * 64, 0])

    return masked_sum


@pytest.mark.parametrize("stages", [2, 3])
def test_body_under_one_if_is_staged_under_the_condition_and_runs_right_on_host(stages):
    import os
    import warnings

    import torch

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(masked_sum(stages), target="cuda -arch=sm_80")
    assert not any("runs unpipelined" in str(w.message) for w in got)
    src = kern.get_kernel_source()
    assert f"cp_async_wait<{stages - 2}>" in src and f"Mask[(int64_t)bx * 8 + {stages - 1} + k]" in src, src
    from tilelang.testing import host_cuda as host
    if not host.available():
        pytest.skip("g++ not installed")
    a = torch.randn(128, 256)
    mask = torch.randint(0, 2, (2, 8), dtype=torch.int32)
    o = torch.full((128, 32), float("nan"))
    host.HostProgram({"m": kern}).run("m", [a, mask, o])
    w = (torch.arange(1, 9, dtype=torch.float64)[None, :] * mask.double()).repeat_interleave(32, dim=1)  # (2, 256)
    ref = (a.double().reshape(2, 64, 256) * w[:, None, :]).reshape(2, 64, 8, 32).sum(2).reshape(128, 32)
    torch.testing.assert_close(o.double(), ref, rtol=1e-5, atol=1e-4)
