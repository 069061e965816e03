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
  match_any / match_all compare the bits of the lanes in `mask` with the thread's own;
- warp_reduce_<op> folds the warp's lanes in increasing lane order (every lane gets the same
  value); syncthreads_count / and / or count the non-zero predicates of the segment's threads;
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
WARP_REDUCES = tuple(f"tl_warp_reduce_{k}" for k in ("sum", "max", "min", "bitand", "bitor"))
MATCHES = ("tl_match_any", "tl_match_all")
BLOCK_VOTES = ("tl_syncthreads_count", "tl_syncthreads_and", "tl_syncthreads_or")
COLLECTIVES = WARP_REDUCES + MATCHES + BLOCK_VOTES  # exchanges besides the shuffles and warp votes
_FOLD = {"sum": lambda a, b: a + b, "max": lambda a, b: E.call("max", a, b), "min": lambda a, b: E.call("min", a, b),
         "bitand": lambda a, b: E.binop("&", a, b), "bitor": lambda a, b: E.binop("|", a, b)}


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
        if c.op in COLLECTIVES:
            p, q, repl[c] = _collective(c, thr, rng)
            pre, post = pre + p, post + q
            continue
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


def _bits(e):
    """e as an unsigned integer of its width (match compares bits, as __match_any_sync does)."""
    u = dt.as_dtype(f"uint{e.dtype.bits}")
    return e if e.dtype == u else E.Call("reinterpret", (e,), u)


def _collective(c: E.Call, thr, rng):
    """(pre, post, replacement) of a warp reduce, match or block vote (see the module docstring)."""
    lo, hi = rng
    val = c.args[-1]
    kind = c.op[len("tl_"):]
    if c.op in BLOCK_VOTES:
        val = E.cast(dt.int32, E.compare("!=", val, 0))
    elif c.op in MATCHES:
        val = _bits(val)
    tmp = Buffer(kind, (hi,), val.dtype, "local")
    acc = Buffer(kind + "_acc", (1,), c.dtype, "local")
    zero = (E.as_expr(0),)
    cur = E.BufferLoad(acc, zero, c.dtype)
    pre = [("s", S.Allocate(tmp)), ("s", S.BufferStore(tmp, (thr,), val))]
    v = E.Var("src", dt.int32)
    got = E.BufferLoad(tmp, (v,), val.dtype)
    if c.op in BLOCK_VOTES:  # the segment's threads: every thread of the block that runs here
        init = E.const(0, dt.int32)
        body = S.BufferStore(acc, zero, cur + got)
        loop = S.For(v, E.as_expr(lo), E.as_expr(hi - lo), "serial", body)
        res = {"tl_syncthreads_count": cur, "tl_syncthreads_and": E.cast(dt.int32, E.compare("==", cur, hi - lo)),
               "tl_syncthreads_or": E.cast(dt.int32, E.compare("!=", cur, 0))}[c.op]
        return pre, [("s", S.Allocate(acc)), ("s", S.BufferStore(acc, zero, init)), ("s", loop)], res
    base = thr - thr % WARP
    lane = E.Var("lane", dt.int32)
    src = base + lane
    in_seg = E.logical_and(E.compare(">=", src, lo), E.compare("<", src, hi))
    if c.op in WARP_REDUCES:
        first = E.select(E.compare(">", base, lo), base, E.as_expr(lo))  # the warp's first lane that runs here
        init = E.BufferLoad(tmp, (first,), val.dtype)
        take = E.logical_and(in_seg, E.compare("!=", src, first))
        new = E.cast(c.dtype, _FOLD[kind[len("warp_reduce_"):]](cur, E.BufferLoad(tmp, (src,), val.dtype)))
        res = cur
    else:
        mask = E.cast(dt.uint32, c.args[0])
        bit = E.binop("&", E.binop(">>", mask, E.cast(dt.uint32, lane)), E.const(1, dt.uint32))
        take = E.logical_and(in_seg, E.compare("!=", bit, E.const(0, dt.uint32)))
        same = E.compare("==", E.BufferLoad(tmp, (src,), val.dtype), E.BufferLoad(tmp, (thr,), val.dtype))
        if c.op == "tl_match_any":
            init = E.const(0, dt.uint32)
            new = E.select(same, E.binop("|", cur, E.binop("<<", E.const(1, dt.uint32), E.cast(dt.uint32, lane))), cur)
            res = cur
        else:  # acc: 1 while every lane agrees
            init = E.const(1, dt.uint32)
            new = E.select(same, cur, E.const(0, dt.uint32))
            res = E.select(E.compare("!=", cur, E.const(0, dt.uint32)), mask, E.const(0, dt.uint32))
    loop = S.For(lane, E.as_expr(0), E.as_expr(WARP), "serial",
                 S.IfThenElse(take, S.BufferStore(acc, zero, new)))
    post = [("s", S.Allocate(acc)), ("s", S.BufferStore(acc, zero, init)), ("s", loop)]
    return pre, post, res


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
