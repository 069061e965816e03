"""Named barrier ids shared by the user's program and the compiler (CUDA: `bar.sync id, count`).

Takes: one kernel before lowering. The user names hardware barriers 0-15 directly
(`T.sync_threads(id, count)`, `T.named_barrier_arrive(id, count)`); the compiler picks ids too:

    what                                          default ids         asked by
    the consumer warpgroups' block barrier        1                   codegen/cuda.s_Raw (warp_specialize)
    ping-pong turns of W consumer warpgroups      2 .. W + 1          ws_pingpong.pingpong_plan
    per-warpgroup TMA-store epilogue              W + 2 .. 2W + 1     warp_specialize -> ws_epilogue.wg_chunk
    a T.ws / thread-index branch's own barrier    1 + warpgroup (or   codegen/cuda.s_WarpGroupScope
                                                  1 + warp) index
(0 is __syncthreads'.) Two users of one id in a kernel meet at the wrong barrier: a hang or a race.

Gives: `BarrierIds`, which those places consult. With no user id it returns the defaults (the
generated code is unchanged). With constant user ids, each of the compiler's requests keeps its
default where that is free and otherwise moves to the lowest free ids (a contiguous range where
a header template takes `Base, W`); branch ids map to the n-th id the user does not use. A
request that cannot be met -- a user id that is not a compile-time constant, or too few free ids
-- raises a LoweringError at the user's line naming the id and what the compiler needed.
`tl.disable_barrier_id_remap`: the defaults always, a collision is the same error.

    user: T.sync_threads(1, 128) in a T.ws(0) branch     -> user ids {1}
    before: branch 0's compiler barrier  barrier_sync<1, 128>   (collides)
    after:  branch 0's compiler barrier  barrier_sync<2, 128>, branch 1's <3, 128>
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...arith.simplify import const_int
from ...errors import LoweringError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import collect

IDS = range(1, 16)  # 0 is __syncthreads' barrier
_USER_OPS = {"tl_sync_threads": "T.sync_threads", "tl_named_barrier_arrive": "T.named_barrier_arrive"}


@dataclass(frozen=True)
class UserBarriers:
    """The named barrier ids a kernel's program uses itself."""

    ids: dict = field(default_factory=dict)  # constant id -> (Span, the call's name) of its first use
    dynamic: tuple = ()  # (Span, the call's name, the id expression) of ids not known at compile time


def user_barriers(kernel) -> UserBarriers:
    """The ids of `kernel`'s T.sync_threads(id, count) / T.named_barrier_arrive(id, count) calls."""
    ids, dynamic = {}, []
    for st in collect(kernel, lambda n: isinstance(n, S.Evaluate)):
        call = st.value
        if not (isinstance(call, E.Call) and call.op in _USER_OPS and call.args):
            continue
        what, i = _USER_OPS[call.op], const_int(call.args[0])
        if i is None:
            dynamic.append((st.span, what, call.args[0]))
        elif i != 0:
            ids.setdefault(i, (st.span, what))
    return UserBarriers(ids, tuple(dynamic))


class BarrierIds:
    """The compiler's named barrier ids for one kernel, clear of `user`'s (module docstring).
    Every answer is a pure function of the user's ids and the request, so the passes and codegen
    asking separately agree."""

    def __init__(self, user: UserBarriers | None = None, remap: bool = True):
        self.user = user or UserBarriers()
        self.remap = remap

    def consumers(self) -> int:
        """The consumer warpgroups' block barrier of a warp-specialized kernel (default 1)."""
        return self._fit(1, 1, set(), "the consumer warpgroups' block barrier (warp specialization)")

    def turns(self, W: int) -> int:
        """First of W consecutive ids for ws_pingpong's turns (default 2)."""
        return self._fit(2, W, {self.consumers()}, f"the turns of {W} ping-pong consumer warpgroups "
                         "(tl.enable_ws_pingpong)")

    def wg_epilogue(self, W: int) -> int:
        """First of W consecutive ids for the per-warpgroup epilogue's barriers (default W + 2)."""
        taken = {self.consumers()}
        try:
            taken |= set(range(self.turns(W), self.turns(W) + W))
        except LoweringError:
            pass  # no room for turns: then they are not used either
        return self._fit(2 + W, W, taken, f"the TMA-store epilogue of {W} consumer warpgroups "
                         "(tl.disable_ws_wg_epilogue turns it off)")

    def branch(self, default: int, what: str) -> int:
        """The id of a T.ws / thread-index branch whose default is `default` (1 + its index): the
        default-th id the user does not use (the default itself when no user id is at or below it)."""
        self._no_dynamic(default, what)
        free = [i for i in IDS if i not in self.user.ids] if self.remap else \
            [i if i not in self.user.ids else None for i in IDS]
        if default > len(free) or free[default - 1] is None:
            self._collide(default, 1, what)
        return free[default - 1]

    def _fit(self, default: int, n: int, taken: set, what: str) -> int:
        self._no_dynamic(default, what, n)
        used = taken | set(self.user.ids)
        for base in [default] + ([b for b in IDS if b != default] if self.remap else []):
            if base + n <= 16 and not used & set(range(base, base + n)):
                return base
        self._collide(default, n, what)

    def _no_dynamic(self, default: int, what: str, n: int = 1):
        if self.user.dynamic:
            span, call, e = self.user.dynamic[0]
            raise LoweringError(f"{call}: barrier id `{e}` is not a compile-time constant, and the compiler needs "
                                f"named barrier {_ids(default, n)} of this kernel for {what}; they might be the same "
                                "barrier (a hang or a race): give the id as a constant", span)

    def _collide(self, default: int, n: int, what: str):
        want = set(range(default, default + n))
        clash = sorted(want & set(self.user.ids)) or sorted(self.user.ids)
        if not clash:  # (no user id: the defaults run past 15)
            raise LoweringError(f"the compiler needs named barriers {_ids(default, n)} for {what}; "
                                "the GPU has 16 (0-15)")
        span, call = self.user.ids[clash[0]]
        mine = ", ".join(str(i) for i in sorted(self.user.ids))
        how = "tl.disable_barrier_id_remap is set" if not self.remap else \
            f"with the program's own ids {{{mine}}} no {n} free consecutive id{'s' * (n > 1)} are left"
        raise LoweringError(f"{call}: named barrier {clash[0]} is also needed by the compiler, for {what} "
                            f"(default ids {_ids(default, n)}); {how}: give the program's barriers other or fewer "
                            "ids (1-15)", span)


def _ids(base: int, n: int) -> str:
    return str(base) if n == 1 else f"{base}..{base + n - 1}"


def barrier_ids(kernel, remap: bool = True) -> BarrierIds:
    """The allocator for `kernel` (a KernelLaunch or its body)."""
    return BarrierIds(user_barriers(kernel), remap)
