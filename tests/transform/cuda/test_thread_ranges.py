"""thread_ranges: divisions of the thread index that a warp group's branch (or an `if` on the
thread index) decides become constants; the rest keeps its text. Hand-built IR; the kernel-level
check (and a host run against float64) is in test_ws_gather_epilogue.py."""
from tilelang import dtypes as dt
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.buffer import Buffer
from tilelang.ir.visitor import collect
from tilelang.op.hopper import WarpGroupScope
from tilelang.transform.cuda.thread_ranges import fold_thread_ranges
from tilelang.testing.int_eval import int_value

tid = E.Var("tid", dt.int32)
X = Buffer("X", (4096,), "float32", "global")


def put(index):
    return S.BufferStore(X, (index,), E.as_expr(1.0, dt.float32))


def divisions(st):
    return len(collect(st, lambda n: isinstance(n, E.Binary) and n.op in ("//", "%", ">>", "&")))


def index_of(st):
    return collect(st, lambda n: isinstance(n, S.BufferStore))[0].indices[0]


def test_a_warp_groups_branch_folds_the_block_level_quotient():
    j = (tid // 128) * 256 + (tid % 32) // 4
    first = fold_thread_ranges(WarpGroupScope(0, 1, put(j)), tid, 384)
    second = fold_thread_ranges(WarpGroupScope(1, 2, put(j)), tid, 384)
    assert divisions(index_of(first)) == 2 and divisions(index_of(second)) == 2  # tid // 128 went
    assert "tid // 128" not in str(index_of(first))
    block = fold_thread_ranges(put(j), tid, 384)  # the whole block: tid // 128 is 0, 1 or 2
    assert divisions(index_of(block)) == 3


def test_remainders_by_the_range_keep_their_operand_minus_the_quotient():
    st = fold_thread_ranges(WarpGroupScope(1, 2, put(tid % 128 + (tid & 255))), tid, 384)
    # tid in [128, 255]: tid % 128 == tid - 128, tid & 255 == tid
    got = index_of(st)
    assert divisions(got) == 0
    for t in (128, 200, 255):
        assert eval(str(got).replace("tid", str(t))) == t % 128 + (t & 255)


def test_a_fresh_index_has_the_thread_indexs_range_and_ifs_narrow_it():
    f = E.Var("tl_tid_f1", dt.int32)
    body = S.seq(S.LetStmt(f, E.Call("tl_fresh_index", (tid,), dt.int32)), put((f // 128) * 64 + f % 8))
    st = fold_thread_ranges(WarpGroupScope(2, 3, body), tid, 384)
    assert divisions(index_of(st)) == 1  # f // 128 == 2 in the third warp group
    cond = E.Binary("<", tid, E.as_expr(64), dt.bool_)
    st = fold_thread_ranges(S.IfThenElse(cond, put(tid // 64), None), tid, 384)
    assert divisions(index_of(st)) == 0


def test_power_of_two_divisions_of_a_nonnegative_compound_become_shifts_and_masks():
    # the producer warp group's `(tid - 256) // 8` and `% 8`: [0, 127] there, so `>> 3` and `& 7`
    j = ((tid - 256) // 8) * 64 + (tid - 256) % 8 * 8
    st = fold_thread_ranges(WarpGroupScope(2, 3, put(j)), tid, 384)
    got = index_of(st)
    ops = {n.op for n in collect(got, lambda n: isinstance(n, E.Binary))}
    assert "//" not in ops and "%" not in ops and {">>", "&"} <= ops, got
    assert all(int_value(got, {"tid": t}) == int_value(j, {"tid": t}) for t in range(256, 384))
    # over the whole block tid - 256 may be negative: left as written
    assert divisions(index_of(fold_thread_ranges(put(j), tid, 384))) == 2
    assert "//" in str(index_of(fold_thread_ranges(put(j), tid, 384)))
    # a plain variable's division is the code generator's (it prints nonnegative ones itself)
    assert "//" in str(index_of(fold_thread_ranges(WarpGroupScope(2, 3, put(tid // 8)), tid, 384)))


def test_the_x_thread_binding_of_a_one_dimensional_block_is_the_thread_index():
    tx = E.Var("tx", dt.int32)
    body = WarpGroupScope(2, 3, put((tx - 256) // 8))
    k = S.KernelLaunch((E.Var("bx", dt.int32),), (4,), (384, 1, 1), (tx,), body)
    got = index_of(fold_thread_ranges(k, tid, 384))
    assert "tx" not in str(got) and ">>" in str(got), got  # tid, whose branch range proves tid - 256 >= 0
    k2 = S.KernelLaunch((E.Var("bx", dt.int32),), (4,), (128, 3, 1), (tx,), body)  # 2-d block: tx is tid % 128
    assert "tx" in str(index_of(fold_thread_ranges(k2, tid, 384)))
