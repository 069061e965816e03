"""Exchanges between a block's threads on the CPU (used by cpu_threads.py).

A warp shuffle, vote or T.tvm_thread_allreduce reads values of other threads at the same
program point. With threads run one after another, the statement is split there: first every
thread of the segment stores its operand in a per-block array indexed by thread (`pre`), then,
after a barrier, every thread computes its result from the array (`post`). The results follow
CUDA's rules:

- lanes of a warp are 32 consecutive thread ids; a `width` < 32 splits a warp into groups;
- shfl_xor reads lane `lane ^ d` (its own value when that lies in a later group), shfl_down
  `lane + d` and shfl_up `lane - d` (their own value past the group's end / start), shfl_sync
  lane `src % width` of its group; a source outside the segment's threads gives the thread's
  own value;
- any_sync / all_sync / ballot combine the lanes of the warp whose bit is set in `mask`;
- the all-reduce combines, in increasing thread order, the values of the threads that agree
  with it on every thread axis not reduced.

    v[0] = v[0] + T.shfl_xor(v[0], 16)     for thr: shfl[thr] = v[thr, 0]
                                   ->      (barrier)
                                           for thr: v[thr, 0] = v[thr, 0] + shfl[(thr & ~31) | ((thr & 31) ^ 16)]
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer

WARP = 32


def _i(x):
    return E.cast(dt.int32, E.as_expr(x))


def _src_lane(c: E.Call, thr, rng):
    """The thread whose operand shuffle `c` returns to thread `thr` (thr itself when none)."""
    _, _, lane_arg, width = c.args
    d, w = _i(lane_arg), _i(width)
    lane = thr % WARP
    base = thr - lane
    in_group = lane % w
    if c.op == "tl_shfl_xor":
        s = E.binop("^", lane, d)
        ok, src = E.compare("<", s, (lane // w + 1) * w), base + s
    elif c.op == "tl_shfl_down":
        ok, src = E.compare("<", in_group + d, w), thr + d
    elif c.op == "tl_shfl_up":
        ok, src = E.compare(">=", in_group - d, 0), thr - d
    else:
        ok, src = True, base + (lane // w) * w + (d % w + w) % w
    lo, hi = rng
    ok = E.logical_and(ok, E.logical_and(E.compare(">=", src, lo), E.compare("<", src, hi)))
    return E.select(ok, src, thr)


def exchange(calls, thr, rng):
    """(pre items, post items, {call: replacement}) for the shuffles and votes `calls`."""
    n = rng[1]
    pre, post, repl = [], [], {}
    for c in calls:
        if c.op.startswith("tl_shfl_"):
            tmp = Buffer("shfl", (n,), c.dtype, "local")
            pre += [("s", S.Allocate(tmp)), ("s", S.BufferStore(tmp, (thr,), c.args[1]))]
            repl[c] = E.BufferLoad(tmp, (_src_lane(c, thr, rng),), c.dtype)
            continue
        mask, pred = c.args
        tmp = Buffer("vote", (n,), dt.int32, "local")
        pre += [("s", S.Allocate(tmp)), ("s", S.BufferStore(tmp, (thr,), E.cast(dt.int32, E.compare("!=", pred, 0))))]
        acc = Buffer("vote_acc", (1,), c.dtype, "local")
        lane = E.Var("lane", dt.int32)
        src = thr - thr % WARP + lane
        bit = E.binop("&", E.binop(">>", E.cast(dt.uint64, mask), E.cast(dt.uint64, lane)), E.const(1, dt.uint64))
        take = E.logical_and(E.compare("!=", bit, E.const(0, dt.uint64)),
                             E.logical_and(E.compare(">=", src, rng[0]), E.compare("<", src, rng[1])))
        cur, v = E.BufferLoad(acc, (E.as_expr(0),), c.dtype), E.BufferLoad(tmp, (src,), dt.int32)
        if c.op == "tl_ballot":
            init, new = 0, E.binop("|", cur, E.binop("<<", E.cast(c.dtype, v), E.cast(c.dtype, lane)))
        elif c.op == "tl_any_sync":
            init, new = 0, E.cast(c.dtype, E.logical_or(E.compare("!=", cur, 0), E.compare("!=", v, 0)))
        else:
            init, new = 1, E.cast(c.dtype, E.logical_and(E.compare("!=", cur, 0), E.compare("!=", v, 0)))
        loop = S.For(lane, E.as_expr(0), E.as_expr(WARP), "serial",
                     S.IfThenElse(take, S.BufferStore(acc, (E.as_expr(0),), new)))
        post += [("s", S.Allocate(acc)), ("s", S.BufferStore(acc, (E.as_expr(0),), E.const(init, c.dtype))),
                 ("s", loop)]
        repl[c] = cur
    return pre, post, repl


def allreduce(s, thr, dims):
    """(pre items, post items) of a T.tvm_thread_allreduce (op/thread_ops.ThreadAllReduce)."""
    X, Y, Z = dims
    n = X * Y * Z
    res = s.result
    tmp = Buffer("allreduce", (n,), res.dtype, "local")
    acc = Buffer("allreduce_acc", (1,), res.dtype, "local")
    coords = [thr % X, (thr // X) % Y, thr // (X * Y)]
    loops = []
    for axis in sorted(s.axes, reverse=True):  # z outermost: increasing thread order
        v = E.Var("r" + "xyz"[axis], dt.int32)
        coords[axis] = v
        loops.append((v, dims[axis]))
    u = coords[0] + X * (coords[1] + Y * coords[2])
    zero = (E.as_expr(0),)
    cur = E.BufferLoad(acc, zero, res.dtype)
    body = S.BufferStore(acc, zero, E.cast(res.dtype, s.combine(cur, E.BufferLoad(tmp, (u,), res.dtype))))
    for v, ext in reversed(loops):
        body = S.For(v, E.as_expr(0), E.as_expr(ext), "serial", body)
    pre = [("s", S.Allocate(tmp)), ("s", S.BufferStore(tmp, (thr,), E.cast(res.dtype, s.value), span=s.span))]
    post = [("s", S.Allocate(acc)), ("s", S.BufferStore(acc, zero, E.cast(res.dtype, s.identity))), ("s", body),
            ("s", S.BufferStore(res.buffer, res.indices, cur, span=s.span))]
    return pre, post
