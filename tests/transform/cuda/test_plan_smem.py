"""plan_smem: shared buffers with disjoint lifetimes share bytes, with a barrier between them.

Hand-built kernels pin the planner's decisions (reuse, pinning, inserted barriers); lowered
kernels are checked by an independent alias checker: two buffers whose bytes overlap must be
used in disjoint top-level spans with a top-level __syncthreads() between them. A two-phase
kernel gets a smaller smem_bytes on CUDA and still computes the right answer on the CPU.
"""
import re
import warnings

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang import dtypes as dt
from tilelang.backend.cuda.pipeline import PASSES, _the_kernel
from tilelang.backend.target import resolve
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.buffer import Buffer
from tilelang.ir.visitor import buffers_used
from tilelang.transform.cuda.lower_tile_ops import Raw, sync
from tilelang.transform.cuda.plan_smem import ATTR, apply, plan
from tilelang.transform.pass_manager import PassContext, run_passes

tid = E.Var("tid", dt.int32)


def shared(name, n=1024):
    return Buffer(name, (n,), "float32", "shared.dyn")  # 4 KB by default


def write(buf):
    return S.BufferStore(buf, (tid,), E.as_expr(1.0, dt.float32))


def read(buf):
    r = Buffer("r", (1,), "float32", "local")
    return S.BufferStore(r, (E.as_expr(0),), E.BufferLoad(buf, ((tid + 1) % 1024,), buf.dtype))


def kernel(*stmts):
    allocs = {}
    for st in stmts:
        for b in buffers_used(st):
            if b.scope == "shared.dyn" and not hasattr(b, "view_of"):
                allocs.setdefault(b.uid, S.Allocate(b))
    return S.KernelLaunch((E.Var("bx", dt.int32),), (1,), (128, 1, 1), (), S.seq(*allocs.values(), *stmts))


def offsets(p):
    return {s.name: s.offset for s in p.slots}


# ----------------------------------------------------------------------------- hand-built IR


def test_disjoint_lifetimes_share_bytes_and_get_a_barrier():
    a, b = shared("a"), shared("b")
    p = plan(kernel(write(a), read(a), write(b), read(b)))
    assert offsets(p) == {"a": 0, "b": 0} and p.total == 4096
    assert p.barriers == (4,)  # before `write(b)` (statements 0, 1 are the allocations)
    body = apply(kernel(write(a), read(a), write(b), read(b)), p).body.stmts
    assert isinstance(body[4], Raw) and "__syncthreads" in body[4].fmt and body[5].buffer is b


def test_no_new_barrier_for_less_than_one_aligned_unit():
    a, s_ = shared("a"), shared("s", 32)  # 4 KB, then 128 B: sharing would save 128 B only
    p = plan(kernel(write(a), read(a), write(s_), read(s_)))
    assert offsets(p) == {"a": 0, "s": 4096} and p.barriers == () and p.total == 4096 + 128


def test_an_existing_barrier_between_the_spans_is_reused():
    a, b = shared("a"), shared("b")
    p = plan(kernel(write(a), read(a), sync(), write(b), read(b)))
    assert offsets(p) == {"a": 0, "b": 0} and p.barriers == ()


def test_overlapping_lifetimes_keep_separate_aligned_slices():
    a, b, c = shared("a", 200), shared("b"), shared("c", 8)
    p = plan(kernel(write(a), write(b), write(c), read(a), read(b), read(c)))
    # a (800 B) and c (32 B) are small and not swizzled: 128-byte aligned, after the large b
    assert offsets(p) == {"b": 0, "a": 4096, "c": 4992} and p.total == 4992 + 32
    assert p.barriers == ()


def test_largest_first_packing_fits_small_buffers_beside_a_big_one():
    big, s1, s2 = shared("big", 2048), shared("s1", 256), shared("s2", 256)
    # s1 and s2 live before big; both fit into big's bytes, one after the other
    p = plan(kernel(write(s1), write(s2), read(s1), read(s2), write(big), read(big)))
    o = offsets(p)
    assert o["big"] == 0 and {o["s1"], o["s2"]} == {0, 1024} and p.total == 8192


def test_loops_count_as_one_statement():
    a, b = shared("a"), shared("b")
    ko = E.Var("ko", dt.int32)
    loop = S.For(ko, E.as_expr(0), E.as_expr(4), "serial", S.seq(write(a), read(b), write(b), read(a)))
    p = plan(kernel(write(b), loop, write(a)))
    assert offsets(p)["a"] != offsets(p)["b"]


def test_reuse_off_gives_the_sequential_layout():
    a, b = shared("a"), shared("b")
    p = plan(kernel(write(a), read(a), write(b), read(b)), allow_reuse=False)
    assert offsets(p) == {"a": 0, "b": 4096} and p.barriers == ()


def test_buffers_named_in_inline_code_are_pinned():
    a, b = shared("a"), shared("b")
    p = plan(kernel(write(a), read(a), Raw("tl::touch(b);"), write(b), read(b)))
    assert offsets(p) == {"a": 0, "b": 4096}
    assert [s.pinned for s in p.slots if s.name == "b"] == ["named in inline code"]


def test_pipeline_stage_storage_and_views_are_pinned():
    a, st = shared("a"), shared("x_stages", 2048)
    view = shared("x")
    view.view_of = st
    k = kernel(write(a), read(a), write(view), read(view))
    k = S.KernelLaunch(k.block_vars, k.grid, k.threads, (), S.seq(S.Allocate(st), S.Allocate(view), k.body))
    p = plan(k)
    assert "x" not in offsets(p)  # a view points into its storage
    assert offsets(p) == {"x_stages": 0, "a": 8192}


def test_wgmma_left_in_flight_pins_its_operands():
    a, b = shared("a"), shared("b")
    gemm = Raw("tl::gemm_ss_sm90<64, 64, 64, 1, 1, false, 64, 64, tl::half_t, -1>({0}, {1}, {2});", reads=(a,))
    p = plan(kernel(write(a), gemm, write(b), read(b)))
    assert offsets(p) == {"a": 0, "b": 4096}
    waited = Raw("tl::gemm_ss_sm90<64, 64, 64, 1, 1, false, 64, 64, tl::half_t, 0>({0}, {1}, {2});", reads=(a,))
    assert offsets(plan(kernel(write(a), waited, write(b), read(b)))) == {"a": 0, "b": 0}


def test_cp_async_writes_live_until_a_full_wait():
    a, b = shared("a"), shared("b")
    cp = Raw("tl::cp_async_zfill<16>({0}, {1}, {2});", writes=(a,))
    wait = Raw("tl::cp_async_commit(); tl::cp_async_wait<0>();")
    # a is only written: its bytes are busy until the wait, so b (used before it) cannot share them
    p = plan(kernel(cp, write(b), read(b), wait))
    assert offsets(p)["a"] != offsets(p)["b"]
    p = plan(kernel(cp, wait, write(b), read(b)))
    assert offsets(p) == {"a": 0, "b": 0}


def test_warp_specialized_kernels_keep_one_slice_per_buffer():
    from tilelang.transform.cuda.warp_specialize import WSSplit

    a, b = shared("a"), shared("b")
    split = WSSplit(128, S.seq(write(a), read(a)), S.seq(write(b), read(b)))
    p = plan(kernel(split, write(a), read(a), write(b), read(b)))
    assert offsets(p) == {"a": 0, "b": 4096}


# ----------------------------------------------------------------------------- lowered kernels


def two_phase(R=3, bm=16, N=64):
    """Phase 1 sums row-flipped tiles of A through a_s; phase 2 column-flipped tiles of B through b_s."""

    @T.prim_func
    def two_phase(A: T.Tensor((R * bm, N), "float32"), B: T.Tensor((R * bm, N), "float32"),
                  C: T.Tensor((bm, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((bm, N), "float32")
            b_s = T.alloc_shared((bm, N), "float32")
            acc = T.alloc_fragment((bm, N), "float32")
            T.clear(acc)
            for r in T.serial(R):
                T.copy(A[r * bm, 0], a_s)
                for i, j in T.Parallel(bm, N):
                    acc[i, j] += a_s[bm - 1 - i, j]
            for r in T.serial(R):
                T.copy(B[r * bm, 0], b_s)
                for i, j in T.Parallel(bm, N):
                    acc[i, j] += 2 * b_s[i, N - 1 - j]
            T.copy(acc, C)

    return two_phase


def lowered(func, arch="sm_90a", configs=None):
    ctx = PassContext(target=resolve(f"cuda -arch={arch}"), pass_configs=dict(configs or {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_passes(func, PASSES, ctx)


def _planned_statements(k):
    """(statements, wrap, storages touched by a concurrent producer): the kernel body; in a
    warp-specialized kernel the consumer branch, or the body of its tile loop (wrap)."""
    from tilelang.transform.cuda.warp_specialize import WSSplit

    stmts = k.body.stmts if isinstance(k.body, S.SeqStmt) else (k.body,)
    split = [st for st in stmts if isinstance(st, WSSplit)]
    if not split:
        return stmts, False, set()
    cons = split[0].consumer.stmts if isinstance(split[0].consumer, S.SeqStmt) else (split[0].consumer,)
    produced = {b.uid for b in buffers_used(split[0].producer)}
    produced |= {r.fmt.split("+")[0].split(",")[-1].strip() for r in _raws(split[0].producer) if "tma_load" in r.fmt}
    loops = [st for st in cons if isinstance(st, S.For) and any("tl_full" in r.fmt for r in _raws(st))]
    outer = loops[0]
    body = outer.body.stmts if isinstance(outer.body, S.SeqStmt) else (outer.body,)
    if any(isinstance(st, S.For) and any("tl_full" in r.fmt for r in _raws(st)) for st in body):
        return body, True, produced
    return cons, False, produced


def _raws(node):
    from tilelang.ir.visitor import collect

    return collect(node, lambda x: isinstance(x, Raw))


def assert_no_alias_race(func):
    """Independent of the planner: overlapping bytes => disjoint uses with a barrier between
    (in a warp-specialized kernel, over the consumers' statements; stage storage the producer
    fills is busy from their first statement; in a tile loop, also a barrier round the loop)."""
    k = _the_kernel(func)
    p = func.attr(ATTR)
    stmts, wrap, produced = _planned_statements(k)
    names = {s.name: s.uid for s in p.slots}
    used: dict = {}
    for i, st in enumerate(stmts):
        # a wait for earlier TMA stores' reads of a tile accesses none of its bytes
        waits = isinstance(st, Raw) and st.fmt == "if (tid == 0) tl::tma_store_wait<0>();"
        for b in ([] if isinstance(st, S.Allocate) or waits else buffers_used(st)):
            if b.scope in ("shared", "shared.dyn"):
                uid = b.view_of.uid if hasattr(b, "view_of") else b.uid
                used.setdefault(uid, []).append(i)
    for x in p.slots:
        if x.uid in produced or x.name in produced:
            used[x.uid] = [0, len(stmts) - 1] if wrap else [0] + used.get(x.uid, [])
    barriers = [i for i, st in enumerate(stmts) if isinstance(st, Raw) and "__syncthreads();" in st.fmt]
    for x in p.slots:
        for y in p.slots:
            if x.uid >= y.uid or x.offset >= y.offset + y.nbytes or y.offset >= x.offset + x.nbytes:
                continue
            ux, uy = used.get(x.uid, []), used.get(y.uid, [])
            assert ux and uy, f"{x.name} and {y.name} share bytes but one is never used: pin it"
            first, second = (ux, uy) if max(ux) < min(uy) else (uy, ux)
            assert max(first) < min(second), f"{x.name} and {y.name} share bytes while both live"
            assert any(max(first) < b < min(second) for b in barriers), \
                f"no barrier between the last use of one of {x.name}, {y.name} and the first use of the other"
            assert not wrap or any(b > max(second) or b < min(first) for b in barriers), \
                f"no barrier round the tile loop between {x.name} and {y.name}"
    assert names


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_two_phase_kernel_reuses_and_separates_phases(arch):
    func = lowered(two_phase(), arch)
    p = func.attr(ATTR)
    assert offsets(p) == {"a_s": 0, "b_s": 0} and p.total == 4096
    assert_no_alias_race(func)
    off = lowered(two_phase(), arch, {"tl.disable_smem_reuse": True}).attr(ATTR)
    assert offsets(off) == {"a_s": 0, "b_s": 4096} and off.total == 8192


@pytest.mark.parametrize("name,args,arch,configs", [
    ("gemm", {}, "sm_80", {}),
    ("gemm", {}, "sm_90a", {}),
    ("gemm", {}, "sm_90a", {"tl.disable_warp_specialized": True}),
    ("two_gemms", {}, "sm_80", {}),
    ("two_gemms", {}, "sm_90a", {}),
    ("row_softmax", {"full_row": True}, "sm_80", {"tl.enable_row_fragments": True}),
    ("row_softmax", {}, "sm_90a", {"tl.enable_row_fragments": True}),
])
def test_lowered_kernels_never_race_on_reused_bytes(kernels, name, args, arch, configs):
    assert_no_alias_race(lowered(getattr(kernels, name)(**args), arch, configs))


def _nvrtc_or_skip():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


EXAMPLES = ("softmax", "flash_attention", "dequant_gemm_int4", "rmsnorm", "quickstart", "gemm_splitk")


def example_kernels(name, arch, monkeypatch):
    """The JITKernels an example's main() compiles for CUDA (running them needs a GPU; not done)."""
    import importlib
    import importlib.util
    import pathlib

    jk = importlib.import_module("tilelang.jit.kernel")
    made, init = [], jk.JITKernel.__init__

    def record(self, *a, **kw):
        init(self, *a, **kw)
        made.append(self)

    path = pathlib.Path(__file__).resolve().parents[3] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    jk.JITKernel.__init__ = record
    monkeypatch.setenv("TILELANG_KERNEL_CACHE", "0")  # kernels from the kernel cache skip __init__
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod.main(target=f"cuda -arch={arch}")
    except Exception:  # noqa: BLE001 - no GPU: the launch fails after compilation
        pass
    finally:
        jk.JITKernel.__init__ = init
    return made


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_never_race_on_reused_bytes(name, arch, monkeypatch):
    _nvrtc_or_skip()
    ks = example_kernels(name, arch, monkeypatch)
    assert ks, f"{name} compiled no kernel"
    for k in ks:
        low = k.artifact.lowered
        assert_no_alias_race(low)
        p = low.attr(ATTR)
        assert k.artifact.csource.smem_bytes == p.total
        if (name, arch) == ("flash_attention", "sm_80"):  # (softmax keeps its rows in registers: one tile)
            separate = sum(-(-s.nbytes // 1024) * 1024 for s in p.slots)
            assert p.total < separate - 1024, str(p)


@pytest.mark.nvrtc
def test_two_phase_smem_bytes_in_compiled_cuda():
    _nvrtc_or_skip()
    k = tilelang.compile(two_phase(), target="cuda -arch=sm_90a")
    k_off = tilelang.compile(two_phase(), target="cuda -arch=sm_90a", pass_configs={"tl.disable_smem_reuse": True})
    assert k.artifact.csource.smem_bytes == 4096 and k_off.artifact.csource.smem_bytes == 8192
    decl = dict(re.findall(r"\* (\w+) = reinterpret_cast<\w+\*>\(tl_smem \+ (\d+)\)", k.get_kernel_source()))
    assert decl == {"a_s": "0", "b_s": "0"}
    assert dict(re.findall(r"\* (\w+) = reinterpret_cast<\w+\*>\(tl_smem \+ (\d+)\)",
                           k_off.get_kernel_source())) == {"a_s": "0", "b_s": "4096"}


def test_two_phase_computes_the_right_answer_on_cpu():
    R, bm, N = 3, 16, 64
    k = tilelang.compile(two_phase(R, bm, N), target="cpu")
    a, b = torch.randn(R * bm, N), torch.randn(R * bm, N)
    c = torch.full((bm, N), float("nan"))
    k(a, b, c)
    a64, b64 = a.double().numpy().reshape(R, bm, N), b.double().numpy().reshape(R, bm, N)
    ref = a64[:, ::-1, :].sum(0) + 2 * b64[:, :, ::-1].sum(0)
    np.testing.assert_allclose(c.double().numpy(), ref, rtol=1e-5, atol=1e-5)


def test_small_plain_buffers_cost_no_1k_padding_but_swizzled_ones_keep_it():
    big, s1, s2 = shared("big", 2048), shared("s1", 16), shared("s2", 16)
    body = kernel(write(big), write(s1), write(s2), read(big), read(s1), read(s2))
    p = plan(body)
    assert offsets(p) == {"big": 0, "s1": 8192, "s2": 8192 + 128} and p.total == 8192 + 128 + 64
    p = plan(body, wide=frozenset({s1.uid}))  # a swizzled tile keeps the 1024-byte alignment
    assert offsets(p)["s1"] % 1024 == 0 and offsets(p)["s2"] % 128 == 0
