"""Which tfloat32 buffers hold only exact tf32 values, so a load of them needs no rounding.

Why: a tfloat32 element is stored as float32 bits and the codegen rounds on every load
(`tl_tf32_to_f32`, 4 instructions: a compare, an add and two masks), because raw copies
(cp.async, TMA) or the caller's float32 tensor may put any float bits there. A buffer that only
the codegen's own stores write (each rounds to tf32, or stores a cast of a type tf32 holds
exactly: bf16, fp16, fp8) holds tf32 values already. mhc_pre's gemm_sqrsum reads its bf16 -> tf32
A tile element by element for a sum of squares: 64 such roundings a thread per k-step.

Expects: the lowered kernel body (Raw statements) and the kernel's parameters.
Guarantees: `exact_tf32_buffers` gives the uids of tfloat32 buffers allocated in the kernel
(not parameters, not views of other storage) whose every write is a BufferStore, or a vector
move (`tl::store_vec`, `tl::load_vec`, `tl::copy_vec*`) whose source is itself such a buffer,
and that no other inline code or intrinsic call can write: a shared tile or a register tile
(tl::gemm_rs's A) named by other inline code only as a declared read (a gemm operand). Loads of these buffers
read the bits as they are (CExpr.tf32_exact). Off switch: pass_config `tl.disable_tf32_exact_loads`.

    x_frag (tf32, shared): written by store_vec from x_frag_v0 (tf32 registers, filled by
    `(float)bf16` stores), read by the gemm and by `x_frag[..] * x_frag[..]`  ->  exact
    fn_smem (tf32, shared): written by cp.async from the float32 parameter fn  ->  not exact
"""
from __future__ import annotations

import re

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import collect
from ...op.thread_ops import DeclBuffer
from .raw import Raw

# vector moves: (destination argument, source argument) positions in the Raw's format
_MOVES = (
    (re.compile(r"tl::store_vec<\d+>\(\{(\d+)\}, \{(\d+)\}\);"), 0, 1),
    (re.compile(r"tl::load_vec<\d+>\(\{(\d+)\}, \{(\d+)\}, \{\d+\}\);"), 0, 1),
    (re.compile(r"tl::copy_vec(?:16|8|4)\(\{(\d+)\}, \{(\d+)\}, \{\d+\}\);"), 0, 1),
)


def _named(e) -> list:
    """Buffers whose address or elements an expression names."""
    return [n.buffer for n in collect(e, lambda n: isinstance(n, E.BufferLoad))]


def _addr_buffer(a):
    if isinstance(a, E.Call) and a.op == "address_of" and isinstance(a.args[0], E.BufferLoad):
        return a.args[0].buffer
    return None


def _moves(raw: Raw):
    """[(dst buffer, src buffer)] when the Raw is only vector moves between element addresses, else None."""
    rest = raw.fmt.strip()
    out = []
    while rest:
        for pat, di, si in _MOVES:
            m = pat.match(rest)
            if m:
                d, s = (_addr_buffer(raw.args[int(m.group(1 + di))]), _addr_buffer(raw.args[int(m.group(1 + si))]))
                if d is None or s is None:
                    return None
                out.append((d, s))
                rest = rest[m.end():].lstrip()
                break
        else:
            return None
    return out


def exact_tf32_buffers(body, params) -> set:
    """uids of the tfloat32 buffers whose loads need no rounding (see the module docstring)."""
    allocs = [a.buffer for a in collect(body, lambda n: isinstance(n, S.Allocate))]
    param_ids = {p.uid for p in params if isinstance(p, Buffer)}
    cand = {b.uid for b in allocs if b.dtype.name == "tfloat32" and b.dtype.lanes == 1 and b.uid not in param_ids
            and getattr(b, "view_of", None) is None and getattr(b, "view_base", None) is None}
    if not cand:
        return set()
    bad: set = set()
    for d in collect(body, lambda n: isinstance(n, DeclBuffer)):  # views share storage: both sides out
        bad.add(d.buffer.uid)
        if isinstance(d.data, Buffer):
            bad.add(d.data.uid)
    edges = []  # (dst uid, src uid): dst stays exact only if src is
    raws = collect(body, lambda n: isinstance(n, Raw))
    for r in raws:
        mv = _moves(r)
        if mv is not None:
            edges += [(d.uid, s.uid) for d, s in mv]
            continue
        reads = {b.uid for b in r.reads}
        for b in list(r.writes) + [x for a in r.args for x in _named(a)]:
            shared_read = b.scope in ("shared", "shared.dyn", "local") and b.uid in reads and \
                b.uid not in {w.uid for w in r.writes}
            if not shared_read:
                bad.add(b.uid)
    raw_args = {id(a) for r in raws for a in r.args}
    for c in collect(body, lambda n: isinstance(n, E.Call) and n.op == "address_of"):
        if id(c) not in raw_args:  # an intrinsic (atomics, ptx calls) may write through it
            for b in _named(c):
                bad.add(b.uid)
    exact = cand - bad
    changed = True
    while changed:
        changed = False
        for d, s in edges:
            if d in exact and s not in exact:
                exact.discard(d)
                changed = True
    return exact
