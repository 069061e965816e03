"""divergence + thread_sync: no __syncthreads() inside a branch only some threads take (they
would wait for threads that never arrive); the barrier goes before the branch instead, and
branches on uniform values (a local var every thread sets alike) keep theirs."""
from tilelang import dtypes as dt
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.buffer import Buffer
from tilelang.ir.visitor import collect
from tilelang.transform.cuda.divergence import divergence
from tilelang.transform.cuda.lower_tile_ops import Raw
from tilelang.transform.cuda.thread_sync import insert_syncs

tid = E.Var("tid", dt.int32)
A = Buffer("A_s", (128,), "float32", "shared.dyn")


def store(buf, idx, value):
    return S.BufferStore(buf, (E.as_expr(idx),), E.as_expr(value, buf.dtype))


def load(buf, idx):
    return E.BufferLoad(buf, (E.as_expr(idx),), buf.dtype)


def barriers_in(st):
    return [n for n in collect(st, lambda x: isinstance(x, Raw)) if "__syncthreads" in n.fmt]


def test_taint_flows_through_lets_and_private_stores():
    tx, u = E.Var("tx", dt.int32), E.Var("u", dt.int32)
    acc, n = Buffer("acc", (1,), "float32", "local"), Buffer("n", (1,), "int32", "local.var")
    body = S.seq(S.LetStmt(tx, tid % 32), store(acc, 0, load(A, tx)), store(n, 0, 4), S.LetStmt(u, load(n, 0) + 1),
                 S.IfThenElse(E.binop("<", tx, 8), store(n, 0, 5)))  # n stored by some threads only
    d = divergence(body, (tid,))
    assert tx in d.vars and acc.uid in d.bufs and n.uid in d.bufs and u in d.vars
    d2 = divergence(S.seq(store(n, 0, 4), S.LetStmt(u, load(n, 0) + 1)), (tid,))
    assert n.uid not in d2.bufs and u not in d2.vars


def test_barrier_goes_before_a_thread_dependent_branch_not_inside():
    w0, w1, r = store(A, tid, 1.0), store(A, 0, 2.0), store(A, 1, load(A, 0))
    branch = S.IfThenElse(E.binop("==", tid, 0), S.seq(w1, r))  # only thread 0: w1 then r
    out = insert_syncs(S.seq(w0, branch), (tid,))
    assert not barriers_in(out.stmts[-1]), out
    assert isinstance(out.stmts[1], Raw) and barriers_in(out.stmts[1])  # w0 | if
    # without the thread variables the same branch is block-uniform and gets its barrier inside
    assert barriers_in(insert_syncs(S.seq(w0, branch)).stmts[-1])


def test_loop_with_a_per_thread_trip_count_gets_no_barrier_inside():
    n = Buffer("cnt", (1,), "int32", "local")
    ko = E.Var("ko", dt.int32)
    body = S.seq(store(n, 0, tid % 3),
                 S.For(ko, E.as_expr(0), load(n, 0), "serial", S.seq(store(A, 0, 1.0), store(A, 1, load(A, 0)))))
    out = insert_syncs(body, (tid,))
    loop = [s for s in out.stmts if isinstance(s, S.For)][0]
    assert not barriers_in(loop)


def test_uniform_local_condition_keeps_the_barrier_inside():
    flag = Buffer("flag", (1,), "int32", "local.var")
    branch = S.IfThenElse(E.binop("==", load(flag, 0), 1), S.seq(store(A, tid, 1.0), store(A, 1, load(A, 0))))
    out = insert_syncs(S.seq(store(flag, 0, 1), branch), (tid,))
    assert len(barriers_in(out.stmts[-1])) == 1
