"""CUDA lowering of T.gemm / T.wgmma_gemm (O.Gemm).

Takes: a Gemm whose accumulator layout layout inference chose (an mma.sync or wgmma one when the
gemm is in the plan's `mma_gemms`). Gives: one call of our header's tile template,

    T.gemm(A_s, B_s, C)   ->   tl::gemm_ss<M, N, K, warps_m, warps_n, tA, tB, lda, ldb, true, true, T>(&A_s, &B_s, C_reg)
                               (sm_90a: tl::gemm_ss_sm90 / tl::gemm_rs_sm90, wgmma)

(int4 / uint4 operands arrive as byte tiles, transform/cuda/nibble_tiles.py: K, lda and ldb count
bytes and T is tl::int4x2_t / tl::uint4x2_t, mma.sync m16n8k64 on every arch),

recording on the pass which shared tiles it reads swizzled or as 64-column panels, or, with no
tensor-core path, a per-element k loop on CUDA cores (reported as a warning). A T.wgmma_gemm that
cannot use wgmma is an error naming why.
"""
from __future__ import annotations

from dataclasses import replace

from .... import dtypes as dt
from ....arith.simplify import const_int
from ....ir import expr as E
from ....ir import stmt as S
from ....ir.buffer import Buffer
from ....layout.fragment import MmaAccFragment, WgmmaAccFragment
from ....op import tile_ops as O
from ....op.regions import matrix_coords, matrix_indices
from ....op.registry import register_lowering
from ...lower_tile_ops_cpu import region_indices
from ..fold_accum_clear import clearing_call, wgmma_elems
from ..gemm_paths import kmajor_panels, kmajor_rows_ok, nibble_gemm, wgmma_ok, whole
from ..lower_async import not_wgmma, tile_pointer
from ..raw import Raw
from .base import addr_of
from .fill import lower_fill


@register_lowering("cuda", O.Gemm)
def lower_gemm(low, op: O.Gemm):
    creg = low.reg(op.C.buffer)
    lay = low.plan.layout(op.C.buffer) if creg is not None else None
    if id(op) in low.plan.mma_gemms and isinstance(lay, WgmmaAccFragment):
        out = wgmma_gemm(low, op, creg, lay)
        if out is not None:
            return out
    if op.wg_wait < 0:  # T.wgmma_gemm: wgmma or nothing
        why = wgmma_ok(op, low.T)[1] if low.sm >= 90 else f"the target is sm_{low.sm}, not sm_90a"
        if why is None and creg is None:
            why = f"its accumulator is not in registers ({low.plan.reasons.get(op.C.buffer.uid, '')})"
        raise not_wgmma(op, why or "its accumulator layout is not a wgmma one")
    if id(op) in low.plan.mma_gemms and isinstance(lay, MmaAccFragment):
        return mma_gemm(low, op, creg, lay)
    m, n, k = op.mnk
    nib = nibble_gemm(op)  # byte tiles of int4 / uint4 (nibble_tiles.py): k counts bytes, two values each
    if nib is not None:
        k = k * 2
    why = ""
    kind = nib or op.A.buffer.dtype.name
    if kind in ("int8", "int4", "uint4") and (op.transpose_A or not op.transpose_B):
        why = f"; {kind} mma.sync needs both operands K-major: transpose_A=False, transpose_B=True"
    elif kind in ("int4", "uint4") and nib is None:
        why = (f"; {kind} tiles take mma.sync only as whole bytes: shared tiles that only T.copy (an even "
               "column start and count) and T.gemm use, with an int32 accumulator")
    low.warn(f"T.gemm {op.A.buffer.name} x {op.B.buffer.name} -> {op.C.buffer.name} runs on CUDA cores "
             f"(no tensor-core path for {nib or op.A.buffer.dtype}/{op.C.buffer.dtype}, shape {m}x{n}x{k}, "
             f"C {'in registers' if creg is not None else 'in shared memory'}{why})")
    acc = op.C.buffer.dtype
    kk = E.Var("kk", dt.int32)

    def operand(r, rows, trans):  # element (row, kk) of A / B (rows: M or N)
        kx = kk // 2 if nib is not None else kk
        ld = E.BufferLoad(r.buffer, matrix_indices(r, *((kx, rows) if trans else (rows, kx))), r.buffer.dtype)
        if nib is None:
            return ld
        # the value in nibble kk % 2 of the byte (the even k in the low nibble), sign-extended for int4
        return E.cast(dt.as_dtype(nib), E.Binary(">>", E.cast(dt.int32, ld), (kk % 2) * 4, dt.int32))

    def make(cv, reg_ref):  # cv: C's tile coords; A, B, C are indexed through their matrix dims
        i, j = matrix_coords(op.C, cv)
        a = operand(op.A, i, op.transpose_A)
        b = operand(op.B, j, not op.transpose_B)
        s = E.Var("acc", acc)
        ref = reg_ref if reg_ref is not None else E.BufferLoad(op.C.buffer, region_indices(op.C, cv), acc)
        init = E.const(0, acc) if op.clear_accum else ref
        tmp = Buffer("gacc", (1,), acc, "local.var")
        body = S.seq(
            S.Allocate(tmp, (init,)),
            S.For(kk, E.as_expr(0), E.as_expr(k), "serial",
                  S.BufferStore(tmp, (E.as_expr(0),), tmp[0] + E.cast(acc, a) * E.cast(acc, b))),
            S.BufferStore(ref.buffer, ref.indices, tmp[0]))
        _ = s
        return body

    return low.elementwise(op.C, make)


def mma_gemm(low, op: O.Gemm, creg: Buffer, lay: MmaAccFragment):
    a, b = op.A.buffer, op.B.buffer
    areg = low.reg(a)
    ptrs, lds = [], []
    for r in (op.A, op.B):
        x = r.buffer
        if r is op.A and areg is not None:  # tl::gemm_rs: A in its registers (layout_inference: MmaAFragment)
            ptrs.append(addr_of(areg))
            lds.append(x.shape[-1])
            continue
        if x.scope == "fragment":
            low.scope_changes.append((x, x.scope))
            x.scope = "shared.dyn"
        if whole(r, x):
            low.swizzled.add(x.uid)
            ptrs.append(addr_of(x))
            lds.append(x.shape[-1])
        else:  # a panel slice (layout_inference.panel_slice): the tile is kept in 64-column panels
            low.panels.add(x.uid)
            ptrs.append(tile_pointer(r, True, "T.gemm operand", op.span)[0])
            lds.append(const_int(r.ranges[-1][1]))
    m, n, k = op.mnk
    t = {"float16": "tl::half_t", "bfloat16": "tl::bfloat16_t", "tfloat32": "float", "int8": "int8_t",
         "int4": "tl::int4x2_t", "uint4": "tl::uint4x2_t"}[nibble_gemm(op) or a.dtype.name]
    pre = []
    if op.clear_accum:
        pre.append(lower_fill(low, O.Fill(op.C, E.const(0, op.C.buffer.dtype))))
    if areg is not None:
        call = Raw(f"tl::gemm_rs<{m}, {n}, {k}, {lay.warps_m}, {lay.warps_n}, {str(op.transpose_B).lower()}, "
                   f"{lds[1]}, true, {t}>" "({0}, {1}, {2});", (ptrs[0], ptrs[1], addr_of(creg)), reads=(areg, b))
        return S.seq(*pre, call)
    call = Raw(f"tl::gemm_ss<{m}, {n}, {k}, {lay.warps_m}, {lay.warps_n}, {str(op.transpose_A).lower()}, "
               f"{str(op.transpose_B).lower()}, {lds[0]}, {lds[1]}, true, true, {t}>"
               "({0}, {1}, {2});",
               (ptrs[0], ptrs[1], addr_of(creg)), reads=(a, b))
    return S.seq(*pre, call)


def wgmma_gemm(low, op: O.Gemm, creg: Buffer, lay: WgmmaAccFragment):
    a, b = op.A.buffer, op.B.buffer
    areg = low.reg(a)
    if areg is not None:
        return wgmma_rs_gemm(low, op, areg, creg, lay)
    if a.scope == "fragment":  # demoted A: now shared memory
        low.scope_changes.append((a, a.scope))
        a.scope = "shared.dyn"
    if not op.transpose_A and not kmajor_rows_ok(a):
        low.warn(f"T.gemm {a.name} x {b.name} runs on CUDA cores: A in shared memory has rows of "
                 f"{a.shape[-1]} elements, not a wgmma tile")
        return None
    a_panels = kmajor_panels(a) or op.transpose_A  # an M-major A is kept in 64-column panels of M
    (low.panels if a_panels else low.swizzled).add(a.uid)
    (low.swizzled if op.transpose_B and not kmajor_panels(b) else low.panels).add(b.uid)
    pa, _, _ = tile_pointer(op.A, a_panels, "T.gemm A", op.span)
    pb, _, _ = tile_pointer(op.B, b.uid in low.panels, "T.gemm B", op.span)
    m, n, k = op.mnk
    t = {"float16": "tl::half_t", "bfloat16": "tl::bfloat16_t", "float8_e4m3fn": "tl::float8_e4m3_t",
         "float8_e5m2": "tl::float8_e5m2_t", "int8": "int8_t"}[a.dtype.name]
    acc = {"int32": ", int32_t", "float16": ", tl::half_t"}.get(creg.dtype.name, "")  # default: float
    if op.transpose_A:  # the TA parameter follows TC
        acc = (acc or ", float") + ", true"
    call = Raw(f"tl::gemm_ss_sm90<{m}, {n}, {k}, {lay.wg_m}, {lay.wg_n}, {str(op.transpose_B).lower()}, "
               f"{a.shape[-1]}, {b.shape[-1]}, {t}, {int(op.wg_wait)}{acc}>" "({0}, {1}, {2});",
               (pa, pb, addr_of(creg)), reads=(a, b))
    low.uses_wgmma = True
    return _cleared(low, op, creg, call)


def wgmma_rs_gemm(low, op: O.Gemm, areg: Buffer, creg: Buffer, lay: WgmmaAccFragment):
    b = op.B.buffer
    (low.swizzled if op.transpose_B and not kmajor_panels(b) else low.panels).add(b.uid)
    pb, _, _ = tile_pointer(op.B, b.uid in low.panels, "T.gemm B", op.span)
    m, n, k = op.mnk
    t = {"float16": "tl::half_t", "bfloat16": "tl::bfloat16_t"}[b.dtype.name]
    call = Raw(f"tl::gemm_rs_sm90<{m}, {n}, {k}, {lay.wg_m}, {str(op.transpose_B).lower()}, {b.shape[-1]}, "
               f"{t}, {int(op.wg_wait)}{', true' if low.rs_k_outer else ''}>" "({0}, {1}, {2});",
               (addr_of(areg), pb, addr_of(creg)), reads=(b,))
    low.uses_wgmma = True
    return _cleared(low, op, creg, call)


def _cleared(low, op: O.Gemm, creg: Buffer, call: Raw):
    """clear_accum on wgmma: the gemm overwrites C (scale-d = 0 on its first k-step) when it writes
    all of C's registers, else a zero fill before it."""
    if not op.clear_accum:
        return call
    if const_int(creg.shape[0]) == wgmma_elems(call.fmt):
        return replace(call, fmt=clearing_call(call.fmt))
    return S.seq(lower_fill(low, O.Fill(op.C, E.const(0, op.C.buffer.dtype))), call)
