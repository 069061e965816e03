"""plan_smem in warp-specialized kernels: lifetimes over the consumers' program.

A kernel with a prefix tile (Q_s, read by every k-iteration), a TMA-staged tile (K_s) and an
epilogue tile (O_s): the epilogue tile may take the prefix tile's bytes (consumer barrier
between them, and round the tile loop of a persistent kernel), and in a one-tile-per-block
kernel also the stage storage's (the producer has written its last stage once the consumers
leave the k-loop), but in a persistent kernel never the stage storage (the producer is
already filling the next tile's stages), and the prefix tile never the stage storage.
"""
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
from tilelang.transform.cuda.lower_tile_ops import Raw, sync
from tilelang.transform.cuda.plan_smem import ATTR, UNUSED, apply, plan
from tilelang.transform.cuda.warp_specialize import WSSplit
from tilelang.transform.pass_manager import PassContext, run_passes

from .test_plan_smem import assert_no_alias_race

tid = E.Var("tid", dt.int32)


def prefix_stage_epilogue(M=128, D=64, K=256, bk=64, stages=2):
    """Out[m, :] = Q[m, :] @ (sum over k-blocks of Kt[k-block]) through Q_s, staged K_s, O_s."""

    @T.prim_func
    def pse(Q: T.Tensor((M, D), "float16"), Kt: T.Tensor((K, D), "float16"), Out: T.Tensor((M, D), "float16")):
        with T.Kernel(M // 64, threads=128) as bx:
            Q_s = T.alloc_shared((64, D), "float16")
            K_s = T.alloc_shared((bk, D), "float16")
            O_s = T.alloc_shared((64, D), "float16")
            acc = T.alloc_fragment((64, D), "float32")
            T.copy(Q[bx * 64, 0], Q_s)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=stages):
                T.copy(Kt[k * bk, 0], K_s)
                T.gemm(Q_s, K_s, acc)
            T.copy(acc, O_s)
            # read out by an element loop: a T.copy(O_s, Out[...]) would make the pair one store
            # through warp specialization's own TMA staging tile (ws_epilogue.fold_staged_store)
            for i, j in T.Parallel(64, D):
                Out[bx * 64 + i, j] = O_s[i, j]

    return pse


def lowered(func, configs=None):
    ctx = PassContext(target=resolve("cuda -arch=sm_90a"), pass_configs=dict(configs or {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_passes(func, PASSES, ctx)


def slot(p, name):
    return next(s for s in p.slots if s.name == name)


def overlap(a, b):
    return a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes


TILE_LOOP_M = 64 * 512  # more tiles than any GPU has SMs: the kernel keeps its tile loop


NO_PREFIX = {"tl.disable_persistent_prefix_tma": True}  # the consumers load Q per tile (ws_tile_prefix off)


@pytest.mark.parametrize("M,configs,where", [(TILE_LOOP_M, NO_PREFIX, "tile"), (128, {}, "consumer"),
                                             (128, {"tl.disable_persistent": True}, "consumer")])
def test_epilogue_tile_reuses_dead_bytes_in_a_warp_specialized_kernel(M, configs, where):
    func = lowered(prefix_stage_epilogue(M), configs)
    k = _the_kernel(func)
    assert [st for st in k.body.stmts if isinstance(st, WSSplit)], "the kernel is not warp-specialized"
    p = func.attr(ATTR)
    q, o, st = slot(p, "Q_s"), slot(p, "O_s"), slot(p, "K_s_stages")
    assert not q.pinned and not o.pinned and not overlap(q, st)
    assert overlap(o, q) or overlap(o, st)
    assert p.where == where
    if where == "tile":
        assert not overlap(o, st) and o.offset == q.offset
    else:  # one tile per block: the producer loads Q_s first, on tl_pre; O_s takes its bytes after the loop
        assert any("&tl_pre[0], Q_s" in r.fmt for r in _raws(k)) and q.first == 0 and q.last < o.first
    off = lowered(prefix_stage_epilogue(M), {**configs, "tl.disable_smem_reuse": True}).attr(ATTR)
    assert p.total <= off.total - 64 * 64 * 2  # O_s (8 KB) costs nothing of its own
    assert_no_alias_race(func)


def test_persistent_reuse_has_a_consumer_barrier_both_ways_round_the_tile_loop():
    func = lowered(prefix_stage_epilogue(TILE_LOOP_M), NO_PREFIX)
    k = _the_kernel(func)
    split = next(st for st in k.body.stmts if isinstance(st, WSSplit))
    tile = next(st for st in split.consumer.stmts if isinstance(st, S.For))
    body = tile.body.stmts
    uses = {n: [i for i, st in enumerate(body)
                if not isinstance(st, S.Allocate) and any(b.name == n for b in _used(st))] for n in ("Q_s", "O_s")}
    bars = [i for i, st in enumerate(body) if isinstance(st, Raw) and st.fmt == "__syncthreads();"]
    assert any(max(uses["Q_s"]) < b < min(uses["O_s"]) for b in bars)
    assert any(b > max(uses["O_s"]) or b < min(uses["Q_s"]) for b in bars)


def test_q_loaded_by_the_producer_is_reused_behind_a_consumer_barrier_after_the_last_wgmma_wait():
    func = lowered(prefix_stage_epilogue())
    split = next(st for st in _the_kernel(func).body.stmts if isinstance(st, WSSplit))
    body = split.consumer.stmts
    uses = {n: [i for i, st in enumerate(body)
                if not isinstance(st, S.Allocate) and any(b.name == n for b in _used(st))] for n in ("Q_s", "O_s")}
    waits = [i for i, st in enumerate(body) if any("warpgroup_wait<0>" in r.fmt for r in _raws(st))]
    bars = [i for i, st in enumerate(body) if isinstance(st, Raw) and st.fmt == "__syncthreads();"]
    assert uses["Q_s"] and uses["O_s"] and max(uses["Q_s"]) < min(uses["O_s"])
    assert any(max(uses["Q_s"]) <= w < b < min(uses["O_s"]) for w in waits for b in bars)
    assert not any(b < max(uses["Q_s"]) for b in bars if "Q_s" in {x.name for x in _used(body[b])})


@pytest.mark.nvrtc
def test_q_loaded_by_the_producer_then_the_epilogue_matches_float64_on_host(run_on_host):
    M, D, K = 256, 64, 256
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(prefix_stage_epilogue(M, D, K), target="cuda -arch=sm_90a")
    p = k.artifact.lowered.attr(ATTR)
    assert "tl_pre[0], Q_s" in k.get_kernel_source() and slot(p, "Q_s").last < slot(p, "O_s").first
    g = torch.Generator().manual_seed(11)
    q, kt = torch.randn(M, D, generator=g).half(), torch.randn(K, D, generator=g).half()
    out = torch.full((M, D), float("nan")).half()
    run_on_host(k, [q, kt, out])
    ref = q.double().numpy() @ kt.double().numpy().reshape(K // 64, 64, D).sum(0)
    np.testing.assert_allclose(out.double().numpy(), ref, rtol=2e-2, atol=2e-1)


def _raws(st):
    from tilelang.ir.visitor import collect

    return collect(st, lambda x: isinstance(x, Raw))


def _used(st):
    from tilelang.ir.visitor import buffers_used

    return buffers_used(st)


# ----------------------------------------------------------------------------- hand-built IR


def shared(name, n=1024):
    return Buffer(name, (n,), "float32", "shared.dyn")


def write(buf):
    return S.BufferStore(buf, (tid,), E.as_expr(1.0, dt.float32))


def read(buf):
    r = Buffer("r", (1,), "float32", "local")
    return S.BufferStore(r, (E.as_expr(0),), E.BufferLoad(buf, ((tid + 1) % 1024,), buf.dtype))


FULL = Raw("tl::mbarrier_wait(&tl_full[0], 0);")


def ws_kernel(producer, consumer, *allocs):
    return S.KernelLaunch((E.Var("bx", dt.int32),), (1,), (128, 1, 1), (),
                          S.seq(*[S.Allocate(b) for b in allocs], WSSplit(128, producer, consumer)))


def kloop(*body):
    return S.For(E.Var("ko", dt.int32), E.as_expr(0), E.as_expr(4), "serial", S.seq(FULL, *body), ())


def test_consumer_only_buffers_share_bytes_behind_a_consumer_barrier():
    a, b = shared("a"), shared("b")
    k = ws_kernel(Raw("tl::setmaxnreg_dec<40>();"), S.seq(write(a), kloop(read(a)), write(b), read(b)), a, b)
    p = plan(k)
    assert p.where == "consumer" and slot(p, "a").offset == slot(p, "b").offset and p.total == 4096
    assert p.barriers == (2,)
    cons = apply(k, p).body.stmts[-1].consumer.stmts
    assert isinstance(cons[2], Raw) and cons[2].fmt == "__syncthreads();" and cons[3].buffer is b


def test_a_buffer_the_producer_touches_keeps_its_bytes():
    a, b = shared("a"), shared("b")
    k = ws_kernel(write(a), S.seq(kloop(read(a)), write(b), read(b)), a, b)
    p = plan(k)
    assert slot(p, "a").pinned == "used by the producer" and not overlap(slot(p, "a"), slot(p, "b"))


def test_a_tile_loop_needs_a_barrier_round_it():
    a, b = shared("a"), shared("b")
    t = E.Var("tl_tile_iter", dt.int32)
    tile = S.For(t, E.as_expr(0), E.as_expr(3), "serial", S.seq(write(a), kloop(read(a)), write(b), read(b)), ())
    k = ws_kernel(Raw("tl::setmaxnreg_dec<40>();"), S.seq(tile), a, b)
    p = plan(k)
    assert p.where == "tile" and slot(p, "a").offset == slot(p, "b").offset
    assert set(p.barriers) == {2, 4}  # before write(b), and after read(b): the next tile's write(a)
    body = [st for st in apply(k, p).body.stmts[-1].consumer.stmts if isinstance(st, S.For)][0].body.stmts
    assert [i for i, st in enumerate(body) if isinstance(st, Raw) and st.fmt == "__syncthreads();"] == [2, 5]


def test_an_existing_barrier_at_the_loop_top_serves_the_way_round():
    a, b = shared("a"), shared("b")
    tile = S.For(E.Var("tl_tile_iter", dt.int32), E.as_expr(0), E.as_expr(3), "serial",
                 S.seq(sync(), write(a), kloop(read(a)), sync(), write(b), read(b)), ())
    p = plan(ws_kernel(Raw("tl::setmaxnreg_dec<40>();"), S.seq(tile), a, b))
    assert slot(p, "a").offset == slot(p, "b").offset and p.barriers == ()


def test_unused_buffers_get_no_bytes():
    a, u = shared("a"), shared("u", 4096)
    p = plan(ws_kernel(Raw("tl::setmaxnreg_dec<40>();"), S.seq(write(a), kloop(read(a))), a, u))
    assert slot(p, "u").pinned == UNUSED and slot(p, "u").nbytes == 0 and p.total == 4096


# ----------------------------------------------------------------------------- compiled, and run on the CPU


@pytest.mark.nvrtc
def test_smem_bytes_in_compiled_cuda_shrink_with_reuse():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(prefix_stage_epilogue(), target="cuda -arch=sm_90a")
        k_off = tilelang.compile(prefix_stage_epilogue(), target="cuda -arch=sm_90a",
                                 pass_configs={"tl.disable_smem_reuse": True})
    src = k.get_kernel_source()
    assert "if (tid >= 128) {" in src and "tl::barrier_sync<1, 128>();" in src
    assert k.artifact.csource.smem_bytes == k.artifact.lowered.attr(ATTR).total
    assert k.artifact.csource.smem_bytes <= k_off.artifact.csource.smem_bytes - 8192


def test_prefix_stage_epilogue_computes_the_right_answer_on_cpu():
    M, D, K = 128, 64, 256
    k = tilelang.compile(prefix_stage_epilogue(M, D, K), target="cpu")
    q, kt = torch.randn(M, D).half(), torch.randn(K, D).half()
    out = torch.full((M, D), float("nan")).half()
    k(q, kt, out)
    kt64 = kt.double().numpy().reshape(K // 64, 64, D).sum(0)
    ref = q.double().numpy() @ kt64
    np.testing.assert_allclose(out.double().numpy(), ref, rtol=2e-2, atol=2e-1)


# ---- a tile TMA stores read: asynchronous reads until the consumers' final wait
def tma_store_kernel(end_wait=True):
    a, c = shared("a"), shared("c_tma")
    wait = Raw("if (tid == 0) tl::tma_store_wait<0>();", reads=(c,))
    store = Raw("if (tid == 0) {{ tl::tma_store(&tmap_0, c_tma + 0, 0); tl::tma_store_commit(); }}", reads=(c,))
    tail = [Raw("if (tid == 0) tl::tma_store_wait_all();")] if end_wait else []
    return ws_kernel(Raw("tl::setmaxnreg_dec<40>();"), S.seq(write(a), kloop(read(a)), wait, sync(), write(c),
                                                            sync(), store, *tail), a, c)


def test_a_tile_tma_stores_read_takes_bytes_dead_before_it_when_the_consumers_end_waiting():
    p = plan(tma_store_kernel())
    a, c = slot(p, "a"), slot(p, "c_tma")
    assert not c.pinned and c.offset == a.offset and p.total == 4096
    assert p.barriers == ()  # the barrier after the wait for earlier stores separates the two
    assert (c.first, c.last) == (4, 7)  # from its first write (not the wait) to the final wait


@pytest.mark.parametrize("why", ["no final wait", "switched off"])
def test_a_tile_tma_stores_read_keeps_its_bytes_otherwise(why):
    k = tma_store_kernel(end_wait=why != "no final wait")
    p = plan(k, tma_spans=why != "switched off")
    assert slot(p, "c_tma").pinned == "read by TMA stores" and p.total == 8192


def attention_like(M=128, D=128, K=256):
    """O = Q (sum of K-blocks), stored through the kernel's own O_s: warp specialization folds the
    pair into its TMA-store epilogue, whose staging tile then takes Q_s's or the stages' bytes."""

    @T.prim_func
    def att(Q: T.Tensor((M, D), "float16"), Kt: T.Tensor((K, D), "float16"), Out: T.Tensor((M, D), "float16")):
        with T.Kernel(M // 128, threads=128) as bx:
            Q_s = T.alloc_shared((128, D), "float16")
            K_s = T.alloc_shared((D, D), "float16")
            O_s = T.alloc_shared((128, D), "float16")
            acc = T.alloc_fragment((128, D), "float32")
            T.copy(Q[bx * 128, 0], Q_s)
            T.clear(acc)
            for k in T.Pipelined(K // D, num_stages=1):
                T.copy(Kt[k * D, 0], K_s)
                T.gemm(Q_s, K_s, acc)
            T.copy(acc, O_s)
            T.copy(O_s, Out[bx * 128, 0])

    return att


@pytest.mark.parametrize("M,shares", [(128, True), (TILE_LOOP_M, False)], ids=["one-tile", "persistent"])
def test_attention_output_staging_tile_shares_bytes_only_in_a_kernel_of_one_tile_per_block(M, shares):
    func = lowered(attention_like(M))
    p = func.attr(ATTR)
    o = slot(p, "Out_tma")
    others = [s for s in p.slots if s.name != "Out_tma" and s.nbytes]
    assert any(overlap(o, s) for s in others) == shares and bool(o.pinned) != shares
    off = lowered(attention_like(M), {"tl.disable_tma_store_reuse": True}).attr(ATTR)
    assert slot(off, "Out_tma").pinned and p.total == off.total - (128 * 128 * 2 if shares else 0)
    assert_no_alias_race(func)
