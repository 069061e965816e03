"""Prefetch a kernel's TMA tensor maps at its start (sm_90a).

Why: the first TMA copy through a tensor map misses the TMA unit's descriptor cache and waits for
the 128-byte map to arrive before it moves any data. A load at the top of the kernel waits for it
behind the barrier setup; a TMA store at the end of each block (the epilogue of a warp-specialized
kernel) waits for it on the block's critical path, since the block cannot exit until the store has
read its shared tile. `prefetch.tensormap` by one thread at the kernel's first statement starts
those fetches while the barriers are initialised.

Expects: the lowered body of a CUDA kernel (Raw statements allowed) and the names of the tensor maps
the kernel receives (`const __grid_constant__ tl::TensorMap <name>` parameters).
Guarantees: the body with one statement in front, nothing else changed; no statement when there
are no tensor maps. A prefetch is a hint: no barrier or fence depends on it.

    (body)                      ->   if (tid == 0) { tl::tma_prefetch_descriptor(&tmap_0);
                                                     tl::tma_prefetch_descriptor(&tmap_1); }
                                     (body)
Switch: `tl.disable_tma_descriptor_prefetch`.
"""
from __future__ import annotations

from ...ir import stmt as S
from .raw import Raw


def prefetch_statement(names) -> Raw | None:
    """The statement that prefetches the tensor maps `names`, or None for none."""
    names = list(dict.fromkeys(names))
    if not names:
        return None
    calls = " ".join(f"tl::tma_prefetch_descriptor(&{n});" for n in names)
    return Raw(f"if (tid == 0) {{{{ {calls} }}}}")


def prefetch_tensor_maps(body: S.Stmt, names) -> S.Stmt:
    """`body` with the prefetch of the tensor maps `names` as its first statement."""
    st = prefetch_statement(names)
    return body if st is None else S.seq(st, body)
