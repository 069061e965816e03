"""warp_specialize (sm_90a): a TMA producer warpgroup and mbarrier-synchronised consumers.

The emitted CUDA is checked for its structure (branch, TMA calls, barrier counts, register
split, launch bounds, tensor-map parameters), and the full/empty protocol it prints is run
by a small mbarrier model under an eager-producer and an eager-consumer schedule: no
deadlock, each iteration reads the tile loaded for it, no stage refilled before release.
"""
import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.backend.cuda.pipeline import PerformanceWarning


def tma_loads(src, helpers):
    return helpers.call_args(src, "tl::tma_load")


@pytest.mark.parametrize("case,threads,stages,ndim,tiles", [
    # A_s 128x32 (64-byte rows: one box), B_s 32x128 (256-byte rows: two 64-column panels)
    ("gemm-sm90-ws", 128, 3, 2, [("tmap_0", 1, 128 * 32), ("tmap_1", 2, 32 * 128)]),
    ("gemm-sm90-ws-256", 256, 3, 2, [("tmap_0", 1, 128 * 64), ("tmap_1", 4, 64 * 256)]),
    ("bgemm-sm90-ws", 128, 2, 3, [("tmap_0", 1, 128 * 64), ("tmap_1", 2, 64 * 128)]),
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
    assert "tl::setmaxnreg_dec<40>();" in producer and f"if ((tid == {threads}))" in producer
    assert re.search(r"tl::setmaxnreg_inc<(\d+)>\(\);", consumer)
    assert int(re.search(r"setmaxnreg_inc<(\d+)>", consumer).group(1)) * threads + 40 * 128 <= 65536
    assert "tma_load" not in consumer and "gemm_ss_sm90<" in consumer and "gemm_ss_sm90<" not in producer
    # barriers: full[s] waits for the producer's one arrival (+ bytes), empty[s] for every consumer warp
    inits = re.findall(r"tl::mbarrier_init\(&tl_(full|empty)\[(\d+)\], (\d+)\);", src)
    assert sorted(inits) == sorted([("full", str(s), "1") for s in range(stages)]
                                   + [("empty", str(s), str(threads // 32)) for s in range(stages)])
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
    params = re.findall(r"const __grid_constant__ tl::TensorMap (tmap_\d+)", src)
    assert params == [name for name, _, _ in tiles]
    assert [k for k, _ in cs.arg_kinds].count("tensormap") == len(tiles)
    assert cs.signature.count("tensormap") == len(tiles)


# ----------------------------------------------------------------------------- the mbarrier protocol


class Protocol:
    """The full/empty waits and releases as printed, evaluated with Python ints (all operands >= 0)."""

    def __init__(self, src):
        # C int expressions, all operands >= 0; the releasing lane (tid % 32 == 0) is modelled as tid 0
        c = lambda e: eval("lambda tl_it, tid=0: " + e.replace("/", "//").replace("&&", "and"))
        m = re.search(r"if \(tl_it >= (\d+)\) tl::mbarrier_wait\(&tl_empty\[tl_stage\], (.+)\);", src)
        self.stages, self.empty_parity = int(m.group(1)), c(m.group(2))
        self.full_parity = c(re.search(r"tl::mbarrier_wait\(&tl_full\[tl_stage\], (.+)\);", src).group(1))
        rel = re.search(r"(?:if \((.+)\) )?tl::mbarrier_arrive\(&tl_empty\[(.+?)\]\);", src)
        self.release_if = c(rel.group(1) or "True")
        self.release_stage = c(rel.group(2).replace("tl_stage", f"(tl_it % {self.stages})"))
        self.overlapped = "tl::warpgroup_wait<0>();" in src  # the last stage is never released


def simulate(p: Protocol, n: int, eager_producer: bool):
    S = p.stages
    full, empty = [0] * S, [0] * S  # completed phases per barrier
    holds, released = [None] * S, set()
    it_p = it_c = 0
    while it_c < n:
        # wait(parity) passes once the phase of that parity has completed: current parity != parity
        can_p = it_p < n and (it_p < S or (empty[it_p % S] & 1) != p.empty_parity(it_p))
        can_c = (full[it_c % S] & 1) != p.full_parity(it_c)
        if not (can_p or can_c):
            raise AssertionError(f"deadlock: producer at {it_p}, consumer at {it_c}")
        if can_p and (eager_producer or not can_c):
            s = it_p % S
            assert holds[s] is None or holds[s] in released, f"stage {s} refilled while iteration {holds[s]} reads it"
            holds[s], full[s] = it_p, full[s] + 1
            it_p += 1
        else:
            s = it_c % S
            assert holds[s] == it_c, f"iteration {it_c} reads stage {s} holding iteration {holds[s]}"
            if p.release_if(it_c):
                r = p.release_stage(it_c)
                released.add(holds[r])
                empty[r] += 1
            it_c += 1


@pytest.mark.parametrize("case", ["gemm-sm90-ws", "bgemm-sm90-ws", "gemm-sm90-ws-256"])
@pytest.mark.parametrize("eager_producer", [True, False])
def test_full_empty_protocol_runs_every_iteration_on_its_tile(case, eager_producer, build):
    p = Protocol(build(case).source)
    for n in (1, 2, p.stages, 2 * p.stages + 1, 4 * p.stages):
        simulate(p, n, eager_producer)


def test_protocol_model_catches_an_off_by_one_phase(build):
    p = Protocol(build("gemm-sm90-ws").source)
    p.empty_parity = lambda it: (it // p.stages) & 1  # takes the still-running phase for released
    with pytest.raises(AssertionError, match="refilled while"):
        simulate(p, 8, True)
    p = Protocol(build("gemm-sm90-ws").source)
    p.full_parity = lambda it: ((it // p.stages) + 1) & 1  # reads before the load lands
    with pytest.raises(AssertionError, match="reads stage"):
        simulate(p, 8, False)


# ----------------------------------------------------------------------------- fallbacks


def test_row_not_a_multiple_of_16_bytes_falls_back_with_a_warning(kernels):
    with pytest.warns(PerformanceWarning) as rec:
        k = tilelang.compile(kernels.gemm(K=100), out_idx=[-1], target="cuda -arch=sm_90a")
    msgs = [str(w.message) for w in rec]
    assert any("no warp specialization (TMA pipeline): T.copy A -> A_s: A's rows (100 elements) are not a "
               "multiple of 16 bytes" in m for m in msgs), msgs
    src = k.artifact.source
    assert "tma_load" not in src and "setmaxnreg" not in src and "mbarrier" not in src
    assert "__launch_bounds__(128)" in src and "TensorMap" not in src


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
    assert "__launch_bounds__(128)" in src
    assert "tl::cp_async_wait<1>();" in src and "A_s_stages" in src  # cp.async pipeline instead
    assert "tl::gemm_ss_sm90<128, 128, 32, 1, 1, false," in src      # still on wgmma


# ----------------------------------------------------------------------------- persistent tile loop


def _eval(e, env):
    from tilelang.ir import expr as E

    e = E.as_expr(e)
    if isinstance(e, E.Const):
        return int(e.value)
    if isinstance(e, E.Var):
        return _eval(env[e], env) if not isinstance(env[e], int) else env[e]
    if isinstance(e, E.Binary):
        a, b = _eval(e.a, env), _eval(e.b, env)
        return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else None, "%": a % b if b else None,
                "min": min(a, b), "max": max(a, b)}[e.op]
    raise AssertionError(f"cannot evaluate {e!r}")


def _swizzled_gemm(M, N, panel):
    @T.prim_func
    def sgemm(A: T.Tensor((M, 64), "float16"), B: T.Tensor((64, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            if panel:
                T.use_swizzle(panel_size=panel, enable=True)
            T.clear(C_l)
            for ko in T.Pipelined(1, num_stages=2):
                T.copy(A[by * 128, ko * 64], A_s)
                T.copy(B[ko * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])

    return sgemm


@pytest.mark.parametrize("M,N,panel,sms", [(1408, 640, 4, 7), (1408, 640, None, 7), (256, 256, 10, 132),
                                           (1280, 1280, 10, 3)])
def test_persistent_blocks_cover_every_tile_once(M, N, panel, sms, helpers):
    """Every (bx, by) of the original grid is computed by exactly one block, in both branches."""
    from tilelang.ir import stmt as S
    from tilelang.ir.visitor import collect
    from tilelang.transform.cuda.warp_specialize import WSSplit, warp_specialize

    k = helpers.tile_kernel(_swizzled_gemm(M, N, panel), "sm_90a")
    gx, gy = -(-N // 128), -(-M // 128)
    new, info = warp_specialize(k, [].append, sms)
    assert info is not None
    blocks = _eval(new.grid[0], {})
    assert blocks == min(gx * gy, sms) and all(_eval(g, {}) == 1 for g in new.grid[1:])
    split = next(iter(collect(new.body, lambda n: isinstance(n, WSSplit))))
    for branch in (split.producer, split.consumer):
        lets = collect(branch, lambda n: isinstance(n, S.LetStmt))
        cta = next(s for s in lets if s.var.name == "tl_cta")
        loop = next(s for s in collect(branch, lambda n: isinstance(n, S.For)) if s.var.name == "tl_tile_iter")
        inner = [s for s in loop.body.stmts if isinstance(s, S.LetStmt)]
        seen = []
        for b in range(blocks):
            env = {k.block_vars[0]: b, cta.var: b}
            for it in range(_eval(loop.extent, env)):
                env[loop.var] = it
                for s in inner:
                    env[s.var] = _eval(s.value, env)
                seen.append((env[k.block_vars[0]], env[k.block_vars[1]]))
        assert sorted(seen) == [(x, y) for x in range(gx) for y in range(gy)]


def test_persistent_counters_run_on_across_tiles(build):
    """Stage and phase counters continue from tile to tile: each branch adds the k-loop's extent."""
    src = build("gemm-sm90-ws").source
    producer, _, consumer = src.partition("} else {")
    assert "tl_it = (tl_pbase[0] + ko);" in producer and "tl_pbase[0] = (tl_pbase[0] + 8);" in producer
    assert "tl_it = (tl_cbase[0] + ko);" in consumer and "tl_cbase[0] = (tl_cbase[0] + 8);" in consumer
    # the epilogue follows the counter update, inside the tile loop
    assert consumer.index("tl_cbase[0] = (tl_cbase[0] + 8);") < consumer.index("tl_store2(")


def test_disable_persistent_keeps_one_block_per_tile(build):
    b = build("gemm", "sm_90a", {"tl.disable_persistent": True})
    assert "tl_tile_iter" not in b.source and "tl_pbase" not in b.source
    assert [int(str(g)) for g in b.kernel.artifact.csource.grid] == [2, 2]
