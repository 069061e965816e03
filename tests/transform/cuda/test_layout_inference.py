"""layout_inference: which fragments live in registers, in which layout, and why others are demoted.

Every layout is also checked by enumeration with Python ints: the (thread, slot) pairs of the
block must hit every element of the tile exactly once (row fragments: exactly the rows the
thread holds in the accumulator, each row held by the 4 lanes of one quad).
"""
import itertools
from collections import Counter

import pytest

import tilelang.language as T
from tilelang.backend.cuda.pipeline import PASSES
from tilelang.backend.target import resolve
from tilelang.ir import stmt as S
from tilelang.ir.visitor import collect
from tilelang.layout.fragment import (
    FlatFragment,
    MmaAccFragment,
    RowFragment,
    WgmmaAccFragment,
)
from tilelang.op import tile_ops as O
from tilelang.transform.cuda.layout_inference import infer_layouts
from tilelang.transform.pass_manager import PassContext, run_passes


def plan_for(func, sm, row_fragments=False, helpers=None):
    k = helpers.tile_kernel(func, "sm_90a" if sm >= 90 else f"sm_{sm}")
    frags = {a.buffer.name: a.buffer for a in collect(k.body, lambda n: isinstance(n, S.Allocate))
             if a.buffer.scope == "fragment"}
    threads = k.threads[0] * k.threads[1] * k.threads[2]
    return infer_layouts(k, sm, row_fragments), frags, threads, k


def assert_covers_tile_once(lay, threads):
    hits = Counter()
    for tid in range(threads):
        for slot in range(lay.nlocal):
            if isinstance(lay, FlatFragment) and lay.flat(tid, slot) >= lay.numel:
                continue  # the tail of a non-exact flat layout is guarded off in the lowering
            hits[tuple(lay.coords(tid, slot))] += 1
    every = set(itertools.product(*(range(s) for s in lay.shape)))
    assert set(hits) == every, f"{lay}: elements missing {sorted(every - set(hits))[:4]} " \
                               f"or outside the tile {sorted(set(hits) - every)[:4]}"
    twice = [c for c, n in hits.items() if n != 1]
    assert not twice, f"{lay}: elements held by more than one (thread, slot): {twice[:4]}"


def assert_rows_follow_accumulator(row: RowFragment, acc, threads, copies=1):
    """Thread t's row slots hold exactly the rows t holds in the accumulator; 4 lanes (a quad) per row,
    in each of `copies` warps (the column groups of a row split over warps)."""
    owners = {}
    for tid in range(threads):
        rows = [row.coords(tid, s)[0] for s in range(row.nlocal)]
        assert len(set(rows)) == len(rows), f"thread {tid} holds a row twice: {rows}"
        acc_rows = {acc.coords(tid, l)[0] for l in range(acc.nlocal)}
        assert set(rows) == acc_rows, f"thread {tid}: row slots {sorted(rows)} vs accumulator rows {sorted(acc_rows)}"
        for s, r in enumerate(rows):
            owners.setdefault(r, []).append(tid)
            # the lowering reads R[i] through slot_of_acc: it must name the slot holding row i
            for l in row.acc_slots(s, acc):
                assert acc.coords(tid, l)[0] == r and row.slot_of_acc(l, acc) == s
    assert sorted(owners) == list(range(row.rows))
    for r, tids in owners.items():
        assert len(tids) == 4 * copies, f"row {r} held by threads {tids}"
        assert len({t // 32 for t in tids}) == copies and len({(t % 32) // 4 for t in tids}) == 1, \
            f"row {r} is not held by one quad per warp: {tids}"


# ----------------------------------------------------------------------------- accumulators


@pytest.mark.parametrize("sm,threads,kind,grid", [
    (80, 128, MmaAccFragment, (2, 2)),
    (80, 256, MmaAccFragment, (2, 4)),
    (90, 128, WgmmaAccFragment, (1, 1)),
    (90, 256, WgmmaAccFragment, (2, 1)),
])
def test_gemm_accumulator_takes_the_tensor_core_layout(sm, threads, kind, grid, kernels, helpers):
    plan, frags, T_, k = plan_for(kernels.gemm(threads=threads), sm, helpers=helpers)
    lay = plan.layout(frags["C_l"])
    assert type(lay) is kind, f"sm {sm}, {threads} threads: C_l got {lay} ({plan.reasons})"
    assert lay.shape == (128, 128) and lay.threads == threads == T_
    got = (lay.warps_m, lay.warps_n) if kind is MmaAccFragment else (lay.wg_m, lay.wg_n)
    assert got == grid
    assert lay.nlocal * threads == 128 * 128
    gemms = collect(k.body, lambda n: isinstance(n, O.Gemm))
    assert {id(g) for g in gemms} == plan.mma_gemms
    assert ({id(g) for g in gemms} == plan.wgmma_gemms) == (sm >= 90)
    assert_covers_tile_once(lay, threads)


@T.prim_func
def _linked(A: T.Tensor((128, 32), "float16"), B: T.Tensor((32, 128), "float16"), C: T.Tensor((128, 128), "float32"),
            X: T.Tensor((64, 64), "float16"), Y: T.Tensor((32, 32), "float32"), Z: T.Tensor((10, 6), "float32")):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((128, 32), "float16")
        B_s = T.alloc_shared((32, 128), "float16")
        C_l = T.alloc_fragment((128, 128), "float32")
        D_l = T.alloc_fragment((128, 128), "float32")  # T.copy of the accumulator
        E_l = T.alloc_fragment((128, 128), "float32")  # elementwise from D_l: linked through D_l
        X_l = T.alloc_fragment((64, 64), "float16")    # elementwise only
        Y_l = T.alloc_fragment((32, 32), "float32")
        Z_l = T.alloc_fragment((10, 6), "float32")     # 60 elements over 128 threads
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.clear(C_l)
        T.gemm(A_s, B_s, C_l)
        T.copy(C_l, D_l)
        for i, j in T.Parallel(128, 128):
            E_l[i, j] = D_l[i, j] * 2.0
        T.copy(E_l, C)
        for i, j in T.Parallel(64, 64):
            X_l[i, j] = X[i, j] + X[j, i]
        T.copy(X_l, X)
        for i, j in T.Parallel(32, 32):
            Y_l[i, j] = Y[i, j] * 3.0
        T.copy(Y_l, Y)
        for i, j in T.Parallel(10, 6):
            Z_l[i, j] = Z[i, j] + 1.0
        T.copy(Z_l, Z)


@pytest.mark.parametrize("sm", [80, 90])
def test_copied_and_elementwise_fragments_share_the_accumulator_layout(sm, helpers):
    plan, frags, _, _ = plan_for(_linked, sm, helpers=helpers)
    acc = plan.layout(frags["C_l"])
    assert isinstance(acc, WgmmaAccFragment if sm >= 90 else MmaAccFragment)
    for name in ("D_l", "E_l"):
        assert plan.layout(frags[name]) == acc, f"{name}: {plan.layout(frags[name])} != {acc}"
    assert not plan.reasons


@pytest.mark.parametrize("name,shape,vec,exact", [
    ("X_l", (64, 64), 8, True),   # 16 bytes of float16 per access, 4096 = 4 * 128 * 8
    ("Y_l", (32, 32), 4, True),   # 16 bytes of float32
    ("Z_l", (10, 6), 1, False),   # 60 elements: no vector fits, threads 60..127 idle
])
def test_elementwise_only_fragment_is_flat_and_vectorized(name, shape, vec, exact, helpers):
    plan, frags, threads, _ = plan_for(_linked, 80, helpers=helpers)
    lay = plan.layout(frags[name])
    assert lay == FlatFragment(shape, 128, vec)
    assert lay.exact is exact
    assert_covers_tile_once(lay, threads)
    # coalesced: within one slot, consecutive threads hold consecutive vectors of a row-major tile
    flat = [lay.flat(t, 0) for t in range(threads) if lay.flat(t, 0) < lay.numel]
    assert flat == list(range(0, len(flat) * vec, vec))


# ----------------------------------------------------------------------------- per-row values


@pytest.mark.parametrize("sm", [80, 90])
def test_row_value_read_in_a_2d_loop_is_demoted_without_row_fragments(sm, kernels, helpers):
    plan, frags, _, _ = plan_for(kernels.row_softmax(full_row=True), sm, helpers=helpers)
    assert plan.layout(frags["m"]) is None
    assert "m[i]" in plan.reasons[frags["m"].uid]
    assert plan.layout(frags["E_l"]) == plan.layout(frags["S_l"]) is not None


@pytest.mark.parametrize("sm,kind,groups", [(80, "mma", 4), (90, "wgmma", 1)])
def test_row_value_follows_the_accumulator_rows_with_row_fragments(sm, kind, groups, kernels, helpers):
    plan, frags, threads, _ = plan_for(kernels.row_softmax(full_row=True), sm, True, helpers=helpers)
    acc = plan.layout(frags["S_l"])
    row = plan.layout(frags["m"])
    assert row == RowFragment(kind, 128, groups), (row, plan.reasons)
    assert plan.layout(frags["E_l"]) == acc
    assert_rows_follow_accumulator(row, acc, threads)


def test_row_fragment_over_a_row_split_across_warps(kernels, helpers):
    """Square policy splits 128x64 over 2x2 warps: a row spans two warps. m still takes the row
    layout (both column warps hold copies; the reduce combines them through a rows x 2 scratch)."""
    plan, frags, threads, _ = plan_for(kernels.row_softmax(), 80, True, helpers=helpers)
    acc = plan.layout(frags["S_l"])
    assert isinstance(acc, MmaAccFragment) and acc.warps_n == 2
    row = plan.layout(frags["m"])
    assert row == RowFragment("mma", 128, 2), plan.reasons
    assert_rows_follow_accumulator(row, acc, threads, copies=2)


@pytest.mark.parametrize("threads", [128, 256])
def test_wgmma_row_fragment_over_two_warpgroups(threads, kernels, helpers):
    plan, frags, T_, _ = plan_for(kernels.row_softmax(M=128, N=64, threads=threads), 90, True, helpers=helpers)
    acc, row = plan.layout(frags["S_l"]), plan.layout(frags["m"])
    assert isinstance(acc, WgmmaAccFragment) and acc.wg_m == threads // 128
    assert row == RowFragment("wgmma", 128, threads // 128)
    assert_covers_tile_once(acc, T_)
    assert_rows_follow_accumulator(row, acc, T_)


# ----------------------------------------------------------------------------- gemm operands


def test_gemm_a_operand_fragment_is_demoted_on_sm80(kernels, helpers):
    plan, frags, _, _ = plan_for(kernels.two_gemms(), 80, helpers=helpers)
    assert plan.layout(frags["P"]) is None
    assert "A/B operand" in plan.reasons[frags["P"].uid]
    assert isinstance(plan.layout(frags["S_l"]), MmaAccFragment)
    assert isinstance(plan.layout(frags["O_l"]), MmaAccFragment)
    assert not plan.rs_gemms


def test_16bit_gemm_a_operand_on_accumulator_rows_stays_in_registers_on_sm80(kernels, helpers):
    """FullRow twice: S's (4, 1) accumulator layout is the m16n8k16 A layout of P @ V over (4, 1) warps,
    so P, computed elementwise from S, stays in registers for tl::gemm_rs (fuzz seed 81)."""
    plan, frags, threads, k = plan_for(kernels.two_gemms(policies=("FullRow", "FullRow")), 80, helpers=helpers)
    p, s = plan.layout(frags["P"]), plan.layout(frags["S_l"])
    assert p == s == MmaAccFragment((128, 64), 4, 1), plan.reasons
    second = [g for g in collect(k.body, lambda n: isinstance(n, O.Gemm)) if g.A.buffer is frags["P"]]
    assert len(second) == 1 and plan.rs_gemms == {id(second[0]): p}
    assert id(second[0]) in plan.mma_gemms and not plan.reasons
    assert_covers_tile_once(p, threads)


@pytest.mark.parametrize("policies, switch, why", [
    (("FullRow", "Square"), True, "A/B operand"),  # P @ V over (2, 2) warps: each warp needs whole rows of P
    (("Square", "FullRow"), True, "not the mma.sync A layout"),  # P takes S's (2, 2) layout from the loop
    (("FullRow", "FullRow"), False, "A/B operand"),  # tl.disable_mma_register_a16
])
def test_16bit_gemm_a_operand_whose_layout_cannot_agree_is_demoted_on_sm80(policies, switch, why, kernels,
                                                                            helpers):
    k = helpers.tile_kernel(kernels.two_gemms(policies=policies), "sm_80")
    frags = {a.buffer.name: a.buffer for a in collect(k.body, lambda n: isinstance(n, S.Allocate))}
    plan = infer_layouts(k, 80, mma_rs16=switch)
    assert plan.layout(frags["P"]) is None and why in plan.reasons[frags["P"].uid], plan.reasons
    assert isinstance(plan.layout(frags["S_l"]), MmaAccFragment) and not plan.rs_gemms


def test_gemm_a_operand_in_the_wgmma_layout_stays_in_registers_on_sm90(kernels, helpers):
    plan, frags, threads, k = plan_for(kernels.two_gemms(), 90, helpers=helpers)
    p, s = plan.layout(frags["P"]), plan.layout(frags["S_l"])
    assert p == s == WgmmaAccFragment((128, 64), 1, 1), plan.reasons
    second = [g for g in collect(k.body, lambda n: isinstance(n, O.Gemm)) if g.A.buffer is frags["P"]]
    assert len(second) == 1 and plan.rs_gemms == {id(second[0]): p}
    assert id(second[0]) in plan.wgmma_gemms
    assert not plan.reasons and not plan.notes
    assert_covers_tile_once(p, threads)


def test_building_for_one_arch_does_not_change_the_prim_func_for_another(kernels, helpers):
    func = kernels.two_gemms()
    run_passes(func, PASSES, PassContext(target=resolve("cuda -arch=sm_80")))  # demotes P for sm_80
    plan, frags, _, _ = plan_for(func, 90, helpers=helpers)
    assert "P" in frags and plan.layout(frags["P"]) is not None
