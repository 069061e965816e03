"""CUDA lowering of the asynchronous expert-tier ops: async wgmma and per-thread cp.async.

Takes (from op/hopper.py): WaitWgmma, CpAsync, CpAsyncBarrierArrive, CpAsyncCommit,
CpAsyncWait, and gemms issued by T.wgmma_gemm (O.Gemm with wg_wait = -1). Gives: Raw lines of
our header's PTX wrappers::

    T.wait_wgmma(0)                  tl::warpgroup_wait<0>(); tl::fence_accumulator<32>(acc_s); ...
    WaitWgmma(0, hold=True)          tl::warpgroup_wait_held<0>(); ...  (ptxas keeps it after the work before it)
    T.ptx_cp_async(p, q, 8)          tl::cp_async<16>(tl::smem_addr(KV_shared) + ... * 2u, &KV[...]);
    T.cp_async_barrier_noinc(bar)    tl::cp_async_mbarrier_arrive(&bar[0]);
    T.ptx_commit_group()             tl::cp_async_commit();
    T.ptx_wait_group(1)              tl::cp_async_wait<1>();
    T.warpgroup_arrive()             tl::warpgroup_arrive();   (AsyncStep: wgmma / bulk-group fences and waits)
    T.tma_store_arrive()             tl::tma_store_arrive();   (cp.async.bulk.commit_group)
    T.tma_store_wait(1, read=False)  tl::tma_store_wait<1, false>();   (<1, true>: until the tiles are read)

After a wgmma wait every async accumulator of the kernel is fenced, so the compiler does not
move reads of those registers above the wait. Also here: `tile_pointer`, the address of a
wgmma operand region (a column slice of a tile kept in 64-column panels, or one stage of a
3-d tile), and its checks.
"""
from __future__ import annotations

from ...arith.simplify import const_int, simplify
from ...errors import LoweringError
from ...ir import expr as E
from ...ir.buffer import BufferRegion
from ...op import hopper as H
from ...op import tile_ops as O
from .raw import Raw

PANEL = 64  # 16-bit elements per panel row (128 bytes)


def _addr_of(buf, index) -> E.Expr:
    return E.Call("address_of", (E.BufferLoad(buf, (E.as_expr(index),), buf.dtype),), buf.dtype)


def tile_pointer(r: BufferRegion, panels: bool, what: str, span=None) -> tuple[E.Expr, int, int]:
    """(address of the operand's first element, rows, row length) for a wgmma operand region.

    The region takes whole rows of one 2-d tile (or of one stage s of a 3-d tile, X[s, :, :]);
    with `panels` (the tile is kept in 64-column panels) it may also take a column range that
    starts and ends on a panel edge. Raises LoweringError otherwise.
    """
    x = r.buffer
    if x.ndim not in (2, 3):
        raise LoweringError(f"{what}: {x.name} is {x.ndim}-d; wgmma operands are 2-d tiles or stages of 3-d ones", span)
    rows, cols = const_int(x.shape[-2]), const_int(x.shape[-1])
    (r0, rn), (c0, cn) = r.ranges[-2], r.ranges[-1]
    if const_int(r0) != 0 or const_int(rn) != rows:
        raise LoweringError(f"{what}: a wgmma operand takes whole rows of {x.name} (rows 0..{rows})", span)
    off = E.as_expr(0)
    if x.ndim == 3:
        if const_int(r.ranges[0][1]) != 1:
            raise LoweringError(f"{what}: use one stage of {x.name}, {x.name}[s, ...]", span)
        off = r.ranges[0][0] * (rows * cols)
    c0i, cni = const_int(c0), const_int(cn)
    if not (c0i == 0 and cni == cols):
        on_edge = const_int(simplify(E.binop("%", c0, PANEL))) == 0  # also a symbolic start 128 h
        if not panels or not on_edge or cni is None or cni % PANEL:
            raise LoweringError(f"{what}: columns {c0}..+{cn} of {x.name}: a wgmma operand slice must start and "
                                f"end on a 64-column panel edge of a 16-bit tile with rows longer than 128 bytes", span)
        off = off + E.binop("//", c0, PANEL) * (rows * PANEL)
    base = E.BufferLoad(x, (simplify(off),), x.dtype)
    return E.Call("address_of", (base,), x.dtype), rows, cols


class AsyncLowering:
    """Mixin for lower_tile_ops._Lower: the visit_* rules of the async ops (module docstring)."""

    async_accs: tuple = ()  # fragments that T.wgmma_gemm accumulates into

    def visit_WaitWgmma(self, op: H.WaitWgmma):
        first = []  # work issued before the wait is computed before it (the compiler may not sink it past)
        for b in op.fence_first:
            reg = self.reg(b)
            if reg is not None and b.dtype.bytes in (2, 4) and reg.shape[0] % (4 // b.dtype.bytes) == 0:
                first.append(f"tl::fence_accumulator<{reg.shape[0]}>({reg.name}); ")
        fences = []
        for c in self.async_accs:
            reg = self.reg(c)
            if reg is not None:
                fences.append(f" tl::fence_accumulator<{reg.shape[0]}>({reg.name});")
        wait = "warpgroup_wait_held" if op.hold else "warpgroup_wait"
        return Raw("".join(first) + f"tl::{wait}<{op.count}>();" + "".join(fences), span=op.span)

    shared_offset_cp_async = True  # pass config tl.disable_cp_async_shared_offset turns it off

    def visit_CpAsync(self, op: H.CpAsync):
        load = op.dst.args[0]
        dst = load.buffer
        nbytes = const_int(op.num_elems) * dst.dtype.bytes
        target, args = "{0}", [op.dst]
        if self.shared_offset_cp_async and dst.scope.startswith("shared"):
            # the tile's 32-bit shared address plus a byte offset: ptxas folds each copy's constant
            # offset into the instruction instead of holding one address register per copy
            target, args = "{0}", [E.Call("shared_byte_address", (load,), dst.dtype)]
        n = len(args)
        if op.predicate is None:
            return Raw(f"tl::cp_async<{nbytes}>({target}, {{{n}}});", (*args, op.src), span=op.span)
        return Raw(f"tl::cp_async_zfill<{nbytes}>({target}, {{{n}}}, {{{n + 1}}});", (*args, op.src, op.predicate),
                   span=op.span)

    def visit_CpAsyncBarrierArrive(self, op: H.CpAsyncBarrierArrive):
        fn = "cp_async_mbarrier_arrive_inc" if op.inc else "cp_async_mbarrier_arrive"
        return Raw(f"tl::{fn}({{0}});", (_addr_of(op.barrier, op.index),), span=op.span)

    def visit_AsyncStep(self, op: H.AsyncStep):
        ptx = H.ASYNC_STEPS[op.kind][0].replace(" N", f" {op.count}")
        if self.sm < 90:
            raise LoweringError(f"{ptx} needs sm_90a (Hopper); the target is sm_{self.sm}", op.span)
        call = {"fence_barrier_init": "tl::fence_barrier_init();",
                "wgmma_fence": "tl::warpgroup_arrive();",
                "wgmma_commit": "tl::warpgroup_commit_batch();",
                "bulk_commit": "tl::tma_store_arrive();",
                "bulk_wait_read": f"tl::tma_store_wait<{op.count}, true>();",
                "bulk_wait": f"tl::tma_store_wait<{op.count}, false>();"}[op.kind]
        return Raw(call, span=op.span)

    def visit_CpAsyncCommit(self, op: H.CpAsyncCommit):
        return Raw("tl::cp_async_commit();", span=op.span)

    def visit_CpAsyncWait(self, op: H.CpAsyncWait):
        return Raw(f"tl::cp_async_wait<{op.count}>();", span=op.span)


def async_accumulators(body) -> tuple:
    """The register tiles of the kernel's gemms that return with their batch in flight (T.wgmma_gemm,
    or wg_wait > 0: a pipelined loop's gemm, waited for after the loop by a WaitWgmma):
    accumulators, and A operands in registers (RS form), which must stay allocated -- not reused
    for other values -- until the wait (else ptxas waits for the batch before the reuse)."""
    from ...ir.visitor import collect

    seen = {}
    for g in collect(body, lambda n: isinstance(n, O.Gemm) and n.wg_wait != 0):
        seen.setdefault(g.C.buffer.uid, g.C.buffer)
        if g.A.buffer.scope in ("fragment", "local"):
            seen.setdefault(g.A.buffer.uid, g.A.buffer)
    return tuple(seen.values())


def not_wgmma(op: O.Gemm, why: str):
    return LoweringError(f"T.wgmma_gemm {op.A.buffer.name} x {op.B.buffer.name} -> {op.C.buffer.name} cannot use "
                         f"wgmma: {why}", op.span)
