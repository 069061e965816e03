"""warp_specialize (sm_90a): a TMA producer warpgroup and mbarrier-synchronised consumers.

The emitted CUDA is checked for its structure (branch, TMA calls, barrier counts, register
split, launch bounds, tensor-map parameters), and the full/empty protocol it prints is run
by a small mbarrier model under an eager-producer and an eager-consumer schedule: no
deadlock, each iteration reads the tile loaded for it, no stage refilled before release.
"""
import re
import warnings

import pytest

import tilelang
import tilelang.language as T
from tilelang.backend.cuda.pipeline import PerformanceWarning


def tma_loads(src, helpers):
    return helpers.call_args(src, "tl::tma_load")


@pytest.mark.parametrize("case,threads,stages,ndim,tiles", [
    # A_s 128x32 (64-byte rows: one box), B_s 32x128 (256-byte rows: two 64-column panels);
    # num_stages=3 of 16 KB: the ring deepens to 128 KB (ring_depth), 8 stages
    ("gemm-sm90-ws", 128, 8, 2, [("tmap_0", 1, 128 * 32), ("tmap_1", 2, 32 * 128)]),
    # 3 of 48 KB: a 4th beside the 64 KB staging tile would not fit, the user's 3 stay
    ("gemm-sm90-ws-256", 256, 3, 2, [("tmap_0", 1, 128 * 64), ("tmap_1", 4, 64 * 256)]),
    # 2 of 32 KB: 4 (128 KB)
    ("bgemm-sm90-ws", 128, 4, 3, [("tmap_0", 1, 128 * 64), ("tmap_1", 2, 64 * 128)]),
])
def test_producer_consumer_structure(case, threads, stages, ndim, tiles, build, helpers):
    b = build(case)
    src = b.source
    assert not b.warnings, b.warnings
    cs = b.kernel.artifact.csource
    # one extra warpgroup; at most one block per SM so setmaxnreg can rebalance registers
    assert f"__launch_bounds__({threads + 128}, 1)" in src and cs.threads == threads + 128
    producer, _, consumer = src.partition(f"if (tid >= {threads}) {{")
    producer, _, consumer = consumer.partition("} else {")
    assert consumer, src
    assert "tl::setmaxnreg_dec<24>();" in producer and f"if ((tid == {threads}))" in producer
    assert re.search(r"tl::setmaxnreg_inc<(\d+)>\(\);", consumer)
    assert int(re.search(r"setmaxnreg_inc<(\d+)>", consumer).group(1)) * threads + 24 * 128 <= 65536
    assert "tma_load" not in consumer and "gemm_ss_sm90<" in consumer and "gemm_ss_sm90<" not in producer
    # barriers: full[s] waits for the producer's one arrival (+ bytes), empty[s] for every consumer warp
    inits = re.findall(r"tl::mbarrier_init\(&tl_(full|empty)\[(\d+)\], (\d+)\);", src)
    assert sorted(inits) == sorted([("full", str(s), "1") for s in range(stages)]
                                   + [("empty", str(s), str(threads // 32)) for s in range(stages)])
    # every tensor map (the loads' and the epilogue's): prefetched by thread 0 before the barrier setup
    params = re.findall(r"const __grid_constant__ tl::TensorMap (\w+)", src)
    pre = "if (tid == 0) { " + " ".join(f"tl::tma_prefetch_descriptor(&{n});" for n in params) + " }"
    assert {n for n, _, _ in tiles} <= set(params)
    assert pre in src and src.index(pre) < src.index("tl::mbarrier_init("), src
    # TMA: one call per box, coordinates innermost first, one per global dimension
    loads = tma_loads(producer, helpers)
    assert [a[0] for a in loads] == [f"&{name}" for name, boxes, _ in tiles for _ in range(boxes)]
    assert all(len(a) == 3 + ndim for a in loads), loads
    assert all(a[1] == "&tl_full[tl_stage]" for a in loads)
    if ndim == 3:
        assert all(a[-1] == "bz" for a in loads)  # the batch index is the outermost coordinate
    tx = int(re.search(r"mbarrier_arrive_expect_tx\(&tl_full\[tl_stage\], (\d+)\)", producer).group(1))
    assert tx == sum(elems * 2 for _, _, elems in tiles)
    # panels of one tile: consecutive 64-column boxes at consecutive offsets
    for name, boxes, elems in tiles:
        own = [a for a in loads if a[0] == f"&{name}"]
        offs = [int(re.search(r"\+ (\d+)$", a[2]).group(1)) for a in own]
        assert offs == [q * elems // boxes for q in range(boxes)]
    # the tensor maps are kernel parameters the host fills per call
    # (fp16 C, 2-d or batched 3-d: one more map, for the TMA-store epilogue)
    stores = [f"tmap_{len(tiles)}"]
    params = re.findall(r"const __grid_constant__ tl::TensorMap (tmap_\d+)", src)
    assert params == [name for name, _, _ in tiles] + stores
    assert [k for k, _ in cs.arg_kinds].count("tensormap") == len(tiles) + len(stores)
    assert cs.signature.count("tensormap") == len(tiles) + len(stores)
    assert ("tl::tma_store(" in consumer) == bool(stores)


# ----------------------------------------------------------------------------- the mbarrier protocol


class Protocol:
    """The full/empty waits and releases as printed, evaluated with Python ints (all operands >= 0).

    `blocks` is the cluster size: each block's producer writes its share of every stage into
    every block, and a consumer releases a stage to every block (lane r arrives on block r)."""

    def __init__(self, src):
        def c(e, names="tl_it"):  # C int expression -> Python function of `names`
            e = e.replace("tl_cbase[0]", "tl_cbase").replace("/", "//").replace("&&", "and")
            return eval(f"lambda {names}: " + e)

        m = re.search(r"if \(tl_it >= (\d+)\) tl::mbarrier_wait\(&tl_empty\[tl_stage\], (.+)\);", src)
        self.stages, self.empty_parity = int(m.group(1)), c(m.group(2))
        self.full_parity = c(re.search(r"tl::mbarrier_wait\(&tl_full\[tl_stage\], (.+)\);", src).group(1))
        self.blocks = 2 if "__cluster_dims__(2, 1, 1)" in src else 1
        inits = re.findall(r"tl::mbarrier_init\(&tl_empty\[0\], (\d+)\);", src)
        self.empty_count = int(inits[0]) // (int(re.search(r"if \(tid >= (\d+)\)", src).group(1)) // 32)
        arrive = r"if \(tid % 32 (?:== 0|< 2)\) tl::mbarrier_arrive(?:_cluster)?\(&tl_empty\[(.+?)\](?:, tid % 32)?\);"
        loop = re.search(r"for \(int ko = (\w+); ko < (.+?); \+\+ko\)", src)
        # whole tiles: ko in [0, k_steps); stream-K units: ko in [tl_k0, tl_k1), the counters
        # running on by tl_k1 - tl_k0 per unit
        self.k_steps = int(loop.group(2)) if loop.group(1) == "0" else None
        rel = re.search(r"if \((.+?)\) \{ " + arrive + " }", src)
        if rel:  # overlapped wgmma: iteration it releases it - 1, the unit's last one after the loop
            self.release_if = c(rel.group(1), "ko, tl_k0=0")
            self.release_stage = c(rel.group(2), "tl_it")
            tail = re.search(r"if \((\d+|\(tl_k1 - tl_k0\)) > 0\) \{ " + arrive + " }", src)
            self.tail_stage = c(tail.group(2), "tl_cbase, tl_k0=0, tl_k1=0")
        else:
            rel = re.search(r"__syncwarp\(\); " + arrive, src)
            self.release_if = lambda ko, tl_k0=0: True
            self.release_stage = c(rel.group(1).replace("tl_stage", f"(tl_it % {self.stages})"))
            self.tail_stage = None


def simulate(p: Protocol, tiles, order):
    """Run `tiles` tiles of p.k_steps iterations (or, for stream-K, a list of units' (k0, k1)) on
    every block of a cluster; `order(actors)` picks which ready actor ("producer"/"consumer",
    block) moves next. Fails on a deadlock, on a stage overwritten before every block released
    it, and on a read of a stage not holding its iteration."""
    units = [(0, p.k_steps)] * tiles if isinstance(tiles, int) else tiles
    starts = [sum(k1 - k0 for k0, k1 in units[:u]) for u in range(len(units))]
    S, B, n = p.stages, p.blocks, sum(k1 - k0 for k0, k1 in units)
    full = [[0] * S for _ in range(B)]    # completed phases
    empty = [[0] * S for _ in range(B)]
    arrivals = [[0] * S for _ in range(B)]  # empty arrivals in the running phase
    holds = [[[None] * B for _ in range(S)] for _ in range(B)]  # block, stage, writer -> iteration
    released = [set() for _ in range(B)]
    it_p, it_c = [0] * B, [0] * B

    def release(stage):
        for b in range(B):
            arrivals[b][stage] += 1
            if arrivals[b][stage] == p.empty_count:
                arrivals[b][stage], empty[b][stage] = 0, empty[b][stage] + 1

    while min(it_c) < n:
        ready = []
        for b in range(B):
            i = it_p[b]
            if i < n and (i < S or (empty[b][i % S] & 1) != p.empty_parity(i)):
                ready.append(("producer", b))
            i = it_c[b]
            if i < n and (full[b][i % S] & 1) != p.full_parity(i):
                ready.append(("consumer", b))
        if not ready:
            raise AssertionError(f"deadlock: producers at {it_p}, consumers at {it_c}")
        role, b = order(ready)
        if role == "producer":
            i, s = it_p[b], it_p[b] % S
            for d in range(B):  # this block's share lands in every block of the cluster
                old = holds[d][s][b]
                assert old is None or old in released[d], f"stage {s} refilled while iteration {old} reads it"
                holds[d][s][b] = i
                if all(h == i for h in holds[d][s]):  # every share landed: the phase completes
                    full[d][s] += 1
            it_p[b] += 1
        else:
            i, s = it_c[b], it_c[b] % S
            assert holds[b][s] == [i] * B, f"iteration {i} reads stage {s} holding iterations {holds[b][s]}"
            u = max(x for x in range(len(units)) if starts[x] <= i)
            (k0, k1), base = units[u], starts[u]
            ko = k0 + i - base
            if p.release_if(ko, k0):
                r = p.release_stage(i)
                released[b].add(i - 1 if p.tail_stage else i)
                release(r)
            if p.tail_stage and ko == k1 - 1:
                release(p.tail_stage(base, k0, k1))
                released[b].add(i)
            it_c[b] += 1


def _orders():
    import random

    rng = random.Random(7)
    yield lambda ready: ready[0]                          # producers first, block 0 first
    yield lambda ready: ready[-1]                         # consumers first, last block first
    for _ in range(4):
        yield lambda ready: rng.choice(ready)


@pytest.mark.parametrize("case", ["gemm-sm90-ws-cl", "bgemm-sm90-ws-cl", "gemm-sm90-ws-256-cl", "gemm-sm90-ws",
                                  "bgemm-sm90-ws", "gemm-sm90-sk"])
def test_full_empty_protocol_runs_every_iteration_on_its_tile(case, build):
    p = Protocol(build(case).source)
    assert p.blocks == (2 if case.endswith("-cl") else 1)
    assert (p.k_steps is None) == case.endswith("-sk")
    runs = [[(0, 3), (0, 3), (1, 3), (0, 2)], [(2, 3), (0, 1)], [(0, 7), (5, 7)]] if p.k_steps is None \
        else (1, 2, 3)
    for order in _orders():
        for tiles in runs:
            simulate(p, tiles, order)


def test_protocol_model_catches_an_off_by_one_phase(build):
    for case in ("gemm-sm90-ws-cl", "gemm-sm90-ws"):
        p = Protocol(build(case).source)
        p.empty_parity = lambda it: (it // p.stages) & 1  # takes the still-running phase for released
        with pytest.raises(AssertionError, match="refilled while"):
            simulate(p, 2, lambda ready: ready[0])
        p = Protocol(build(case).source)
        p.full_parity = lambda it: ((it // p.stages) + 1) & 1  # reads before the load lands
        with pytest.raises(AssertionError, match="reads stage"):
            simulate(p, 2, lambda ready: ready[-1])
    p = Protocol(build("gemm-sm90-ws-cl").source)
    p.empty_count = 1  # a producer that waits for its own block's release only
    with pytest.raises(AssertionError, match="refilled while"):
        simulate(p, 2, lambda ready: ready[0] if ready[0] != ("consumer", 0) else ready[-1])


def test_cluster_pairs_share_the_tile_they_multicast(build, helpers):
    """A 2-block cluster: __cluster_dims__, half of the shared tile's boxes per block, multicast to
    both; empty barriers count both blocks' warps; cluster syncs after init and before exit."""
    src = build("gemm-sm90-ws-256-cl").source  # 128x256 tiles: B (32 KB) is shared along by
    assert "__launch_bounds__(384, 1) __cluster_dims__(2, 1, 1)" in src
    producer, _, consumer = src.partition("} else {")
    a = helpers.call_args(producer, "tl::tma_load")
    m = helpers.call_args(producer, "tl::tma_load_multicast")
    assert [x[0] for x in a] == ["&tmap_0"] and [x[0] for x in m] == ["&tmap_1"] * 2
    assert all(x[3] == "(uint16_t)3" for x in m)
    assert m[0][2].endswith("+ (tl_rank * 4096)") and m[1][2].endswith("+ ((tl_rank * 4096) + 8192)")
    # (a grid of 2 blocks in x: thread_ranges folds bx % 2 to bx)
    assert ("tl_rank = (bx % 2);" in producer or "tl_rank = bx;" in producer) \
        and "by = ((tl_tile * 2) + tl_rank);" in producer
    assert re.search(r"mbarrier_arrive_expect_tx\(&tl_full\[tl_stage\], 49152\)", producer)  # all 48 KB land here
    assert src.count("tl::mbarrier_init(&tl_empty[0], 16);") == 1
    assert src.count("tl::cluster_sync();") == 2 and src.rstrip().endswith("tl::cluster_sync();\n}")
    # 128x32 A tiles shared along bx: one 64-row half box each
    src = build("gemm-sm90-ws-cl").source
    m = helpers.call_args(src, "tl::tma_load_multicast")
    assert [x[0] for x in m] == ["&tmap_0"] and m[0][-1] == "((by * 128) + (tl_rank * 64))"
    assert build("gemm-sm90-ws-cl").kernel.artifact.csource  # compiled by NVRTC
    assert "__cluster_dims__" not in build("gemm-sm90-ws").source  # clusters are opt-in


# ----------------------------------------------------------------------------- fallbacks


def test_row_not_a_multiple_of_16_bytes_falls_back_with_a_warning(kernels):
    with pytest.warns(PerformanceWarning) as rec:
        k = tilelang.compile(kernels.gemm(K=100), out_idx=[-1], target="cuda -arch=sm_90a")
    msgs = [str(w.message) for w in rec]
    assert any("no warp specialization (TMA pipeline): T.copy A -> A_s: A's rows (100 elements) are not a "
               "multiple of 16 bytes" in m for m in msgs), msgs
    src = k.artifact.source
    assert "tma_load" not in src and "setmaxnreg" not in src and "mbarrier" not in src
    assert "__launch_bounds__(128, 1)" in src and "TensorMap" not in src


def test_copy_with_disable_tma_keeps_the_loop_off_tma_with_a_warning():
    @T.prim_func
    def g(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"), C: T.Tensor((256, 256), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            for ko in T.Pipelined(4, num_stages=2):
                T.copy(A[by * 128, ko * 64], A_s, disable_tma=True)
                T.copy(B[ko * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * 128, bx * 128])

    with pytest.warns(PerformanceWarning) as rec:
        k = tilelang.compile(g, target="cuda -arch=sm_90a")
    assert any("T.copy A -> A_s: it asks for disable_tma=True" in str(w.message) for w in rec)
    assert "tma_load" not in k.get_kernel_source()


def test_box_past_256_rows_falls_back_to_cp_async_with_wgmma(build):
    b = build("gemm_nt-sm90-box")
    msgs = b.messages(PerformanceWarning)
    assert len(msgs) == 1 and "exceeds TMA's 256-element box limit" in msgs[0], b.warnings
    src = b.source
    assert "tma_load" not in src and "setmaxnreg" not in src
    assert "A_s_stages" in src and "tl::cp_async_wait<0>();" in src  # the 2-stage cp.async pipeline
    assert "tl::gemm_ss_sm90<512, 8, 32, 1, 1, true," in src


@pytest.mark.parametrize("case", ["gemm-sm90-no-ws", "gemm-sm90-no-tma"])
def test_pass_configs_turn_warp_specialization_off(case, build):
    b = build(case)
    src = b.source
    assert not b.warnings
    assert "tma_load" not in src and "setmaxnreg" not in src and "mbarrier" not in src and "TensorMap" not in src
    assert "__launch_bounds__(128, 1)" in src  # no producer warpgroup
    # cp.async pipeline instead, still on wgmma; the gemm's batch stays in flight (wgmma_inflight) and
    # the refill two stages ahead follows it after a barrier, so the stage wait leaves one group pending
    assert "tl::cp_async_wait<1>();" in src and "A_s_stages" in src
    assert "tl::gemm_ss_sm90<128, 128, 32, 1, 1, false," in src and "tl::half_t, 1>(A_s, B_s, C_l)" in src
    assert "tl::warpgroup_wait<0>();" in src


@pytest.mark.parametrize("case", ["gemm-sm90-no-ws-no-inflight"])
def test_no_ws_gemm_without_inflight_refills_before_the_wait(case, build):
    src = build(case).source
    # wgmma_inflight off: on sm_90 the refill goes out before the wait, 3 stages in flight
    assert "tl::cp_async_wait<2>();" in src and "A_s_stages" in src
    assert "tl::gemm_ss_sm90<128, 128, 32, 1, 1, false," in src and "warpgroup_wait<0>" not in src


# ----------------------------------------------------------------------------- persistent tile loop


def _swizzled_gemm(M, N, panel, bN=128, K=64):
    @T.prim_func
    def sgemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, 128), threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, bN), "float16")
            C_l = T.alloc_fragment((128, bN), "float32")
            if panel:
                T.use_swizzle(panel_size=panel, enable=True)
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, 64), num_stages=2):
                T.copy(A[by * 128, ko * 64], A_s)
                T.copy(B[ko * 64, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * bN])

    return sgemm


@pytest.mark.parametrize("M,N,bN,panel,sms,axis", [
    (1408, 640, 128, 4, 7, None), (1408, 640, 128, None, 7, None),    # odd grid: one block per cluster
    (256, 256, 128, 10, 132, 0), (1280, 1280, 128, 10, 3, 0),         # A (by only) shared along bx
    (1408, 1024, 128, 4, 7, 0), (1024, 1280, 256, 10, 10, 1),          # B (32 KB) shared along by
    (1024, 1280, 256, 3, 132, 1), (1024, 1280, 256, None, 6, 1)])
def test_persistent_blocks_cover_every_tile_once(M, N, bN, panel, sms, axis, helpers):
    """Every (bx, by) of the original grid is computed by exactly one block, in both branches; the
    two blocks of a cluster always hold neighbouring tiles that share the multicast operand."""
    from tilelang.ir.visitor import collect
    from tilelang.transform.cuda.warp_specialize import WSSplit, warp_specialize

    k = helpers.tile_kernel(_swizzled_gemm(M, N, panel, bN), "sm_90a")
    gx, gy = -(-N // bN), -(-M // 128)
    new, info = warp_specialize(k, [].append, sms, clusters=True, stream_k=False)
    assert info is not None and info.cluster == (1 if axis is None else 2)
    blocks = helpers.eval_int(new.grid[0], {})
    c = info.cluster
    assert blocks == c * min(gx * gy // c, sms // c) and all(helpers.eval_int(g, {}) == 1 for g in new.grid[1:])
    split = next(iter(collect(new.body, lambda n: isinstance(n, WSSplit))))
    for branch in (split.producer, split.consumer):
        seen, by_cluster = [], {}
        for b, it, env in helpers.tile_units(k, branch, "tl_tile_iter", lambda n: n in ("tl_cta", "tl_rank"), blocks):
            tile = (env[k.block_vars[0]], env[k.block_vars[1]])
            seen.append(tile)
            by_cluster.setdefault((b // c, it), []).append(tile)
        assert sorted(seen) == [(x, y) for x in range(gx) for y in range(gy)]
        if axis is not None:
            for pair in by_cluster.values():
                assert len(pair) == 2 and pair[0][1 - axis] == pair[1][1 - axis], pair
                assert pair[0][axis] % 2 == 0 and pair[1][axis] == pair[0][axis] + 1, pair


@pytest.mark.parametrize("M,N,K,panel,sms", [
    (3072, 3072, 4096, 10, 132),   # 576 tiles of 64 k-steps on 132 blocks: 48 left for stream-K
    (1408, 640, 640, 4, 12),       # 55 tiles: 7 left, 10 k-steps each
    (4096, 4096, 4096, 10, 132),   # 1024 tiles: a last wave of 100 of 132 keeps whole tiles
    (1024, 1280, 8192, None, 7),   # 80 tiles: 3 left -> 7 ranges of 54 k-steps, tiles split in 3
    (256, 256, 2048, None, 132),   # 4 tiles, fewer than blocks: all stream-K (split-K), 32 k-steps
    (512, 512, 256, None, 132),    # 16 tiles of 4 k-steps: a range per tile (never below 8 k-steps)
    (1280, 1280, 64, 10, 100),     # 100 tiles on 100 blocks: whole waves, no stream-K
    (512, 512, 128, None, 132),    # 16 tiles of 2 k-steps: ranges of whole tiles, no stream-K
    (256, 1024, 8192, None, 132)])  # 16 tiles of 128 k-steps: 96 ranges (MAX_FANIN a tile), not 132
def test_stream_k_units_cover_every_k_step_once(M, N, K, panel, sms, helpers):
    """Every k-step of every tile is run by exactly one unit, in both branches alike; the unit
    with a split tile's last k-step finishes it, as the last unit of its block, after the blocks
    first .. cta - 1 that hold the rest -- each of which wrote it as its first stream-K unit, its
    only partial. Every block's stream-K part starts at k = 0 (the blocks share k-slices in L2)."""
    from tilelang.ir import stmt as S
    from tilelang.ir.visitor import collect
    from tilelang.transform.cuda.warp_specialize import WSSplit, warp_specialize

    k = helpers.tile_kernel(_swizzled_gemm(M, N, panel, 128, K), "sm_90a")
    gx, gy, ki = -(-N // 128), -(-M // 128), -(-K // 64)
    new, info = warp_specialize(k, [].append, sms)
    from tilelang.transform.cuda.stream_k import ranges

    if ranges(gx * gy, ki, sms) == (gx * gy) % sms:
        assert info.workspace == () and info.persistent  # whole tiles per block, known at compile time
        assert not collect(new.body, lambda n: isinstance(n, S.For) and n.var.name == "tl_unit")
        return
    assert info is not None and [b.name for b in info.workspace] == ["tl_sk_ws", "tl_sk_flags"]
    assert [helpers.eval_int(g, {}) for g in new.grid] == [sms, 1]
    split = next(iter(collect(new.body, lambda n: isinstance(n, WSSplit))))
    runs = []
    for branch in (split.producer, split.consumer):
        units = []
        head = lambda n: n == "tl_cta" or n.startswith("tl_sk_") and n not in ("tl_sk_first", "tl_sk_lt")
        for b, it, env in helpers.tile_units(k, branch, "tl_unit", head, sms):
            names = {v.name: x for v, x in env.items() if isinstance(x, int)}
            units.append((b, it, (names["bx"], names["by"]), names["tl_k0"], names["tl_k1"], names["tl_sk_first"]))
        runs.append(units)
    assert runs[0] == runs[1]
    units = runs[0]
    steps = sorted((t, x) for _, _, t, k0, k1, _ in units for x in range(k0, k1))
    assert steps == [((x, y), s) for x in range(gx) for y in range(gy) for s in range(ki)]
    whole = (gx * gy) // sms
    partials = [u for u in units if u[4] < ki]
    assert len({u[0] for u in partials}) == len(partials)  # one partial (one ws slot) per block
    for b, it, tile, k0, k1, first in units:
        if it == whole:  # a block's stream-K part starts at k = 0, or inside [0, KI - its length]
            span = sum(u[4] - u[3] for u in units if u[0] == b and u[1] >= whole)
            assert k0 <= ki - span
        if k1 < ki:
            assert it == whole  # the block's first stream-K unit: written before any wait
            continue
        if k0 > 0:  # a split tile's end: the blocks before this one hold the rest, each as a partial
            assert it == max(i for bb, i, *_ in units if bb == b)  # the block's last unit
            rest = [u for u in partials if u[2] == tile]
            assert sorted(u[0] for u in rest) == list(range(first, b)) and first < b
        else:
            assert first == b
    if M * N // (128 * 128) % sms == 0:
        assert not partials
    from collections import Counter

    from tilelang.transform.cuda.stream_k import MAX_FANIN
    cut = Counter(u[2] for u in units if u[1] >= whole)  # stream-K units a tile is cut into
    if ranges(gx * gy, ki, sms) == (gx * gy) % sms * MAX_FANIN:
        assert set(cut.values()) == {MAX_FANIN}, cut


def test_persistent_counters_run_on_across_tiles(build):
    """Stage and phase counters continue from tile to tile: each branch adds the k-loop's extent."""
    src = build("gemm", "sm_90a", {"tl.disable_deferred_epilogue": True}).source
    producer, _, consumer = src.partition("} else {")
    assert "tl_it = (tl_pbase[0] + ko);" in producer and "tl_pbase[0] = (tl_pbase[0] + 8);" in producer
    assert "tl_it = (tl_cbase[0] + ko);" in consumer and "tl_cbase[0] = (tl_cbase[0] + 8);" in consumer
    # the epilogue follows the counter update, inside the tile loop
    assert consumer.index("tl_cbase[0] = (tl_cbase[0] + 8);") < consumer.index("tl::stmatrix_pack<4>(")


def test_disable_persistent_keeps_one_block_per_tile(build):
    b = build("gemm", "sm_90a", {"tl.disable_persistent": True})
    assert "tl_tile_iter" not in b.source and "tl_pbase" not in b.source
    assert [int(str(g)) for g in b.kernel.artifact.csource.grid] == [2, 2]


def test_persistent_gemm_walks_k_backwards_on_every_other_tile(kernels):
    """The producer of a persistent plain k-reduction loads iteration ko's k-slice from
    n - 1 - ko on the block's odd tiles (tl_pdir flips after each tile); the consumers never see
    k, so they are unchanged. tl.disable_k_serpentine keeps k forward."""
    f = kernels.gemm(2048, 2048, 512, 128, 128, 64, 128, 3)  # 8 k-steps per tile
    src = tilelang.compile(f, out_idx=[-1], target="cuda -arch=sm_90a").artifact.source
    producer, _, consumer = src.partition("} else {")
    assert "tl_pdir[0] = ((tl_pdir[0] * -1) + 1);" in producer
    loads = re.findall(r"tl::tma_load\(.*\);", producer)
    assert loads and all("(((tl_pdir[0] != 0) ? ((ko * -1) + 7) : ko) * 64)" in ld for ld in loads)
    assert "tl_pdir" not in consumer
    off = tilelang.compile(f, out_idx=[-1], target="cuda -arch=sm_90a",
                           pass_configs={"tl.disable_k_serpentine": True}).artifact.source
    assert "tl_pdir" not in off and "(ko * 64)" in off


def test_a_loop_that_is_not_a_plain_reduction_keeps_k_forward():
    """A loop body that does more than accumulate one gemm (here it rescales the accumulator,
    so the order of the k-steps changes the result) keeps the producer's k order."""
    @T.prim_func
    def decay(A: T.Tensor((1024, 512), "float16"), B: T.Tensor((512, 1024), "float16"),
              C: T.Tensor((1024, 1024), "float16")):
        with T.Kernel(8, 8, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(8, num_stages=2):
                T.copy(A[by * 128, ko * 64], A_s)
                T.copy(B[ko * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
                for i, j in T.Parallel(128, 128):
                    C_l[i, j] = C_l[i, j] * 0.5
            T.copy(C_l, C[by * 128, bx * 128])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = tilelang.compile(decay, target="cuda -arch=sm_90a").artifact.source
    assert "tl_tile_iter" in src and "tl_pdir" not in src


# ----------------------------------------------------------------------------- tl.debug_timeline


@pytest.mark.parametrize("shape", [(2048, 2048, 512), (1536, 1536, 512)])  # whole tiles; stream-K units
def test_timeline_records_each_unit_of_each_block(shape, kernels):
    """Consumer thread 0 stamps a unit's start, the end of its k-loop (after the last wgmma wait)
    and its end, plus the tile index, into the hidden int64 [blocks, 64, 4] argument."""
    M, N, K = shape
    k = tilelang.compile(kernels.gemm(M, N, K, 128, 128, 32, 128, 3), out_idx=[-1], target="cuda -arch=sm_90a",
                         pass_configs={"tl.debug_timeline": True})
    cs = k.artifact.csource
    bufs = [obj for kind, obj in cs.arg_kinds if kind == "workspace"]
    assert bufs[-1].name == "tl_timeline" and [int(d) for d in bufs[-1].shape] == [132, 64, 4]
    consumer = k.artifact.source.partition("} else {")[2]
    stamps = re.findall(r"tl_timeline\[.*?\* 4 \+ (\d)\] = (.+?);", consumer)
    assert [s for s, _ in stamps] == ["0", "3", "1", "2"]
    assert stamps[1][1] == "((by * 12) + bx)" if M == 1536 else stamps[1][1] == "((by * 16) + bx)"
    body = consumer[consumer.index("* 4 + 0]"):]
    assert body.index("warpgroup_wait<0>") < body.index("* 4 + 1]") < body.index("* 4 + 2]")
    producer = k.artifact.source.partition("} else {")[0].partition("if (tid >= ")[2]
    assert producer and "tl_timeline" not in producer  # the producer records nothing
    plain = tilelang.compile(kernels.gemm(M, N, K, 128, 128, 32, 128, 3), out_idx=[-1], target="cuda -arch=sm_90a")
    assert "tl_timeline" not in plain.artifact.source


def test_timeline_summary_per_wave():
    from tilelang.tools.timeline import rows, summarize

    us = 1000
    tl = [[[10 * us, 50 * us, 52 * us, 0], [52 * us, 100 * us, 101 * us, 3], [0, 0, 0, 0]],
          [[11 * us, 55 * us, 56 * us, 1], [0, 0, 0, 0], [0, 0, 0, 0]]]
    r = rows(tl)
    assert [x["blocks"] for x in r] == [2, 1]
    assert r[0]["start_us"] == 0.5 and r[0]["loop_min_us"] == 40 and r[0]["loop_max_us"] == 44
    assert r[0]["end_max_us"] == 46 and r[1]["epilogue_us"] == 1 and r[1]["end_max_us"] == 91
    assert summarize(tl).splitlines()[0].startswith("unit") and len(summarize(tl).splitlines()) == 3
    assert summarize([[[0, 0, 0, 0]]]) == "no units recorded"


# ----------------------------------------------------------------------------- int8 on wgmma


def test_int8_gemm_takes_the_k32_wgmma_with_int32_accumulators(build):
    """int8 x int8 -> int32 with K-major operands: TMA + warp specialization, gemm_ss_sm90 on
    int8_t into int32_t registers (IGMMA in the SASS test), no fallback warning."""
    b = build("gemm_int8-sm90")
    assert not b.warnings, b.warnings
    src = b.source
    assert "tl::tma_load(" in src and "setmaxnreg" in src
    assert "tl::gemm_ss_sm90<128, 128, 64, 1, 1, true, 64, 64, int8_t, 1, int32_t>" in src
    assert re.search(r"int32_t C_l\[\d+\];", src)


def test_int8_gemm_with_an_n_major_b_says_why_it_leaves_wgmma():
    from tilelang.testing import kernels as tk

    f = tk.gemm(128, 128, 128, 64, 64, 32, 128, 1, "int8", out_dtype="int32", acc_dtype="int32")
    with pytest.warns(PerformanceWarning) as rec:
        tilelang.compile(f, out_idx=[-1], target="cuda -arch=sm_90a")
    msgs = [str(w.message) for w in rec]
    assert any("int8 operands must be K-major: A as (M, K) and B as (N, K) with transpose_B=True" in m
               for m in msgs), msgs


def test_fp16_accumulators_take_the_f16_wgmma(build):
    """fp16 x fp16 into a float16 accumulator: the .f16 wgmma form (HGMMA ... .F16), two halves
    per accumulator register, and the TMA-store epilogue without a conversion."""
    b = build("gemm_f16acc-sm90")
    assert not b.warnings, b.warnings
    src = b.source
    assert "tl::gemm_ss_sm90<128, 128, 64, 1, 1, false, 64, 128, tl::half_t, 1, tl::half_t>" in src
    assert re.search(r"tl_half C_l\[128\];", src) and "tl::tma_store(" in src
    from tilelang.backend.cuda import sass

    if sass.sass_available():
        hgmma = re.findall(r"HGMMA\.\S+", b.sass())
        assert hgmma and all(h.endswith(".F16") for h in hgmma), hgmma


def test_tensor_map_prefetch_is_switchable(build):
    on = build("gemm", "sm_90a", {}).source
    off = build("gemm", "sm_90a", {"tl.disable_tma_descriptor_prefetch": True}).source
    line = re.search(r"  if \(tid == 0\) \{ (tl::tma_prefetch_descriptor\(&tmap_\d\); )+\}\n", on)
    assert line and "tma_prefetch_descriptor" not in off
    assert on.replace(line.group(0), "") == off  # nothing else changes
