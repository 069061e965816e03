"""Serpentine tile rounds for persistent kernels of unequal tiles (transform/cuda/persistent.py,
`tl.disable_persistent_snake`): the examples' causal flash attention, whose k-loop runs
min(n, bx + 1) steps. The tile loops of both warp-specialized branches are evaluated per block
(every tile exactly once, the same sequence in both branches, the heaviest block's k-steps against
the mean); a causal kernel with more tiles than blocks runs on the host emulator against float64
attention on fresh random inputs, the output poisoned with NaN."""
import sys
from pathlib import Path

import pytest

import tilelang
from .conftest import run_attention_on_host

SM90 = "cuda -arch=sm_90a"


def _flashattn():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from flash_attention import flashattn
    return flashattn


def _schedule(helpers, B, H, S, D, causal, cfg, sms, snake=True, table=False):
    """{block: [(bx, by, bz), ...]} per branch (producer, consumer), and the new grid's blocks.
    table: the tile table (persistent.balanced_order) where it applies, else serpentine rounds."""
    from tilelang.ir.visitor import collect
    from tilelang.transform.cuda.warp_specialize import WSSplit, warp_specialize

    k = helpers.tile_kernel(_flashattn().get_tir(B, H, S, D, causal, *cfg), "sm_90a")
    new, info = warp_specialize(k, [].append, sms, tile_snake=snake, tile_table=table)
    assert info is not None and info.persistent
    blocks = helpers.eval_int(new.grid[0], {})
    split = next(iter(collect(new.body, lambda n: isinstance(n, WSSplit))))
    out = []
    for branch in (split.producer, split.consumer):
        per = {}
        for b, _, env in helpers.tile_units(k, branch, "tl_tile_iter", lambda n: n == "tl_cta", blocks,
                                            info.tile_order):
            per.setdefault(b, []).append(tuple(env[v] for v in k.block_vars))
        out.append(per)
    return out, blocks, info.tile_order


def _balance(per, S, bM, bN):
    """Mean over max of the blocks' k-steps (causal: min(ceil(S / bN), ceil((bx + 1) bM / bN)))."""
    loads = [sum(min(-(-S // bN), -(-(bx + 1) * bM // bN)) for bx, _, _ in tiles) for tiles in per.values()]
    return sum(loads) / len(loads) / max(loads)


@pytest.mark.parametrize("B,H,S,D,cfg,sms", [
    (16, 16, 2048, 64, (128, 128, 2, 256), 132),   # 4096 tiles: 31 rounds (odd) + 4 tiles
    (8, 16, 4096, 128, (128, 128, 2, 256), 132),   # 32 query blocks a head
    (16, 16, 2048, 64, (128, 64, 2, 256), 132),    # min(32, 2 bx + 2) k-steps
    (1, 3, 640, 64, (128, 64, 2, 256), 7),          # 15 tiles on 7 blocks: a last round of 1 (even)
    (1, 2, 640, 64, (128, 128, 1, 128), 3)])        # 10 tiles on 3 blocks: a last round of 1 (odd)
def test_causal_tiles_are_dealt_in_serpentine_rounds(B, H, S, D, cfg, sms, helpers):
    (prod, cons), blocks, _ = _schedule(helpers, B, H, S, D, True, cfg, sms)
    gx = -(-S // cfg[0])
    every = sorted((x, y, z) for x in range(gx) for y in range(H) for z in range(B))
    assert blocks == min(sms, len(every))
    assert prod == cons  # the producer fills the ring in the order the consumers drain it
    assert sorted(t for tiles in cons.values() for t in tiles) == every
    linear = [[x + gx * (y + H * z) for x, y, z in cons[b]] for b in range(blocks)]
    for b, ts in enumerate(linear):
        assert ts == [j * blocks + (blocks - 1 - b if j % 2 else b) for j in range(len(ts))]
    (old, _), _, _ = _schedule(helpers, B, H, S, D, True, cfg, sms, snake=False)
    assert old == {b: [t for t in sorted(every, key=lambda t: t[0] + gx * (t[1] + H * t[2]))][b::blocks]
                   for b in range(blocks)}
    if len(every) >= 16 * blocks:
        new_b, old_b = _balance(cons, S, cfg[0], cfg[1]), _balance(old, S, cfg[0], cfg[1])
        assert new_b > 0.95 and new_b > old_b + 0.05, (new_b, old_b)  # D64 128x128: 0.837 -> 0.970


def test_equal_tiles_keep_round_robin(helpers):
    """Non-causal tiles all run ceil(S / bN) k-steps: the order stays c, c + blocks, ..."""
    (_, cons), blocks, _ = _schedule(helpers, 2, 16, 2048, 64, False, (128, 128, 2, 256), 132)
    gx = 16
    for b, tiles in cons.items():
        assert [x + gx * (y + 16 * z) for x, y, z in tiles] == list(range(b, 2 * 16 * gx, blocks))


def _run(host, k, B, H, S, D, seed):
    run_attention_on_host(host, k, B, H, S, D, True, seed)


@pytest.mark.nvrtc
def test_serpentine_causal_attention_runs_on_host(host, monkeypatch):
    """10 tiles of 1 .. 5 k-steps on 3 blocks (rounds 0 and 2 forward, 1 and 3 reversed): every
    tile's output matches float64 causal attention."""
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: 3)
    B, H, S, D = 1, 2, 640, 64
    k = tilelang.compile(_flashattn().get_tir(B, H, S, D, True, 128, 128, 1, 128), target=SM90)
    src = k.get_kernel_source()
    assert "(((tl_tile_iter % 2) == 1) ? ((tl_cta * -1) + 2) : tl_cta)" in src
    _run(host, k, B, H, S, D, seed=41)
    off = tilelang.compile(_flashattn().get_tir(B, H, S, D, True, 128, 128, 1, 128), target=SM90,
                           pass_configs={"tl.disable_persistent_snake": True})
    assert "tl_tile_iter % 2" not in off.get_kernel_source()


def _loads(per, S, bM, bN):
    return [sum(min(-(-S // bN), -(-(bx + 1) * bM // bN)) + 1 for bx, _, _ in tiles) for tiles in per.values()]


@pytest.mark.parametrize("B,H,S,D,cfg,sms", [
    (16, 16, 2048, 64, (192, 128, 2, 384), 132),   # 2816 tiles of 2 .. 16 k-steps
    (16, 16, 2048, 64, (128, 128, 2, 256), 132),
    (8, 16, 4096, 128, (128, 128, 2, 256), 132),
    (1, 3, 640, 64, (128, 64, 2, 256), 7)])
def test_causal_tiles_from_the_table(B, H, S, D, cfg, sms, helpers):
    """persistent.balanced_order: both branches read the same tiles from the table, every tile
    exactly once, and the most loaded block (a tile costing its k-steps + 1) carries less than in
    serpentine rounds, within 2 % of the mean on the large grids."""
    (prod, cons), blocks, table = _schedule(helpers, B, H, S, D, True, cfg, sms, table=True)
    assert table, "causal attention with trip counts known at compile time takes the table"
    gx = -(-S // cfg[0])
    every = sorted((x, y, z) for x in range(gx) for y in range(H) for z in range(B))
    assert prod == cons
    assert sorted(t for tiles in cons.values() for t in tiles) == every
    (snake, _), _, none = _schedule(helpers, B, H, S, D, True, cfg, sms)
    assert not none
    new, old = _loads(cons, S, cfg[0], cfg[1]), _loads(snake, S, cfg[0], cfg[1])
    assert max(new) < max(old), (max(new), max(old))
    if len(every) >= 16 * blocks:
        assert max(new) <= 1.02 * sum(new) / len(new), (max(new), sum(new) / len(new))


def test_table_needs_static_trip_counts(helpers):
    """A symbolic sequence length leaves the trip counts unknown at compile time: serpentine rounds."""
    import dataclasses

    from tilelang.ir import expr as E
    from tilelang.ir import stmt as S
    from tilelang.transform.cuda.persistent import trip_counts

    k = helpers.tile_kernel(_flashattn().get_tir(2, 4, 1024, 64, True, 128, 128, 2, 256), "sm_90a")
    stmts = k.body.stmts
    loop = next(s for s in stmts if isinstance(s, S.For))  # the pipelined k-loop: min(8, bx + 1) steps
    lets = [s for s in stmts[:stmts.index(loop)] if isinstance(s, S.LetStmt)]
    trips, run = trip_counts(k, loop, lets)
    assert run == 8 and trips[:8] == [1, 2, 3, 4, 5, 6, 7, 8] and trips[8:16] == trips[:8] and len(trips) == 64
    sym = E.Var("n", k.block_vars[0].dtype)
    assert trip_counts(k, dataclasses.replace(loop, extent=sym), lets) is None


@pytest.mark.nvrtc
def test_table_causal_attention_runs_on_host(host, monkeypatch):
    """10 tiles of 1 .. 5 k-steps on 3 blocks dealt from the __constant__ table: every tile's
    output matches float64 causal attention."""
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: 3)
    B, H, S, D = 1, 2, 640, 64
    k = tilelang.compile(_flashattn().get_tir(B, H, S, D, True, 128, 128, 1, 128), target=SM90,
                         pass_configs={"tl.enable_persistent_tile_table": True})
    src = k.get_kernel_source()
    assert "__constant__ int tl_tile_order[" in src and "tl_tile_iter % 2" not in src
    _run(host, k, B, H, S, D, seed=43)
