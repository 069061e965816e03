"""`Fragment`: how a register tile is spread over threads, with replication.

A fragment maps each logical index of its tile to (thread, register slot).  With
`replicate=R`, every element is held by R threads (replica r of element x lives on
`thread(x, rep=r)`, same slot): reductions and broadcasts produce such tiles.

    F = Fragment((16, 8), forward_thread_fn=lambda i, j: (i % 8) * 4 + j // 2,
                 forward_index_fn=lambda i, j: (i // 8) * 2 + j % 2)
    F.thread(9, 3), F.index(9, 3)     # (5, 3): lane 5, slot 3
    F.inverse().map(5, 3)             # (9, 3): what lane 5 holds in slot 3

Thread and index functions take one Var per dimension (the thread function takes an
extra `rep` Var when replicate > 1) and return IR expressions; `forward_fn` returns
both at once.  Fragments built by enumeration (`from_coords`) hold tables instead.
"""
from __future__ import annotations

import itertools

from ..errors import DSLTypeError
from ..ir import expr as E
from ..ir.expr import Expr, Var
from .layout import (
    Layout,
    as_outputs,
    as_shape,
    check_vars,
    compile_exprs,
    evaluate_grid,
    index_vars,
    is_int,
    repeat_counts,
    substitute,
)


class Fragment:
    """Logical index of `shape` -> (thread, register slot), each element on `replicate` threads.

    Signature as in TileLang: `Fragment(shape, forward_thread_fn, forward_index_fn, replicate)`,
    or `forward_fn=lambda i, j[, rep]: (thread, index)`.
    """

    def __init__(self, shape, forward_thread_fn=None, forward_index_fn=None, replicate=1, *,
                 forward_fn=None, _tables=None):
        self.shape = as_shape(shape)
        self.forward_vars = index_vars(len(self.shape))
        if isinstance(replicate, bool) or not isinstance(replicate, int) or replicate < 1:
            raise DSLTypeError(f"replicate must be a positive int, got {replicate!r}")
        self.num_replicas = replicate
        self.rep_var = Var("rep") if replicate > 1 else None
        self._fns = {}
        self._grids = _tables
        if _tables is not None:
            self.forward_thread = self.forward_index = None
            return
        thread, index = self._call_user_fns(forward_fn, forward_thread_fn, forward_index_fn)
        rep = (self.rep_var,) if self.rep_var is not None else ()
        check_vars(as_outputs(thread, "a Fragment's thread function"), self.forward_vars + rep, self.shape,
                   "a Fragment's thread function")
        check_vars(as_outputs(index, "a Fragment's index function"), self.forward_vars, self.shape,
                   "a Fragment's index function")
        self.forward_thread = as_outputs(thread, "a Fragment's thread function")
        if len(self.forward_thread) != 1:
            raise DSLTypeError(f"a Fragment's thread function returns one expression, got {thread!r}")
        self.forward_thread = substitute(self.forward_thread, {})[0]
        self.forward_index = self._flat_index(as_outputs(index, "a Fragment's index function"))

    def _call_user_fns(self, forward_fn, thread_fn, index_fn):
        extra = (self.rep_var,) if self.rep_var is not None else ()
        if forward_fn is not None:
            out = forward_fn(*self.forward_vars, *extra)
        elif thread_fn is None:
            raise DSLTypeError("Fragment needs forward_fn, or forward_thread_fn and forward_index_fn")
        elif index_fn is not None:
            return thread_fn(*self.forward_vars, *extra), index_fn(*self.forward_vars)
        else:  # `Fragment(shape, fn)` (fn returns (thread, index)), or a thread function alone
            out = thread_fn(*self.forward_vars, *extra)
            if not isinstance(out, (tuple, list)) or len(out) == 1:
                thread = out[0] if isinstance(out, (tuple, list)) else out
                return thread, self._infer_index(thread)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise DSLTypeError(f"a Fragment's forward_fn returns (thread, index), got {out!r}; "
                               "pass forward_index_fn=... when the function gives only the thread")
        return out

    def _infer_index(self, thread):
        """The register index of a fragment given by its thread function alone (as the public
        TileLang infers it): the index bits the thread does not depend on, row-major (first dim's
        highest bit most significant). Needs power-of-two constant extents. As there, nothing
        checks here that each (thread, slot) pair holds one element."""
        import numpy as np

        if not all(isinstance(s, int) and s > 0 and s & (s - 1) == 0 for s in self.shape):
            raise DSLTypeError(f"Fragment{list(self.shape)}: inferring the register index from the thread function "
                               "alone needs power-of-two constant extents; pass forward_index_fn=...")
        rep = (self.rep_var,) if self.rep_var is not None else ()
        t = E.as_expr(thread)
        thr = evaluate_grid(self.forward_vars + rep, (t,), self.shape + (self.num_replicas,) * len(rep))[..., 0]
        digits = []  # (dim, bit), most significant first
        for d, ext in enumerate(self.shape):
            for b in reversed(range(ext.bit_length() - 1)):
                flipped = np.take(thr, np.arange(ext) ^ (1 << b), axis=d)
                if (flipped == thr).all():
                    digits.append((d, b))
        runs = []  # [dim, lowest bit, bit count]: consecutive bits of one dim read at once
        for d, b in digits:
            if runs and runs[-1][0] == d and runs[-1][1] == b + 1:
                runs[-1][1], runs[-1][2] = b, runs[-1][2] + 1
            else:
                runs.append([d, b, 1])
        index, width = E.as_expr(0), 0
        for d, lo, n in reversed(runs):
            v = self.forward_vars[d]
            part = v if lo == 0 and 1 << n == self.shape[d] else (v // (1 << lo)) % (1 << n)
            index = index + part * (1 << width)
            width += n
        from ..arith.simplify import simplify

        index = simplify(index)
        return index

    def _flat_index(self, outs: tuple) -> Expr:
        """A multi-dimensional register index is flattened row-major into one slot number."""
        if len(outs) == 1:
            return substitute(outs, {})[0]
        ext = [int(x) + 1 for x in evaluate_grid(self.forward_vars, outs, self.shape)
               .reshape(-1, len(outs)).max(axis=0)]
        flat = E.as_expr(0)
        for o, n in zip(outs, ext):
            flat = flat * n + o
        return substitute((flat,), {})[0]

    # ---- constructors
    @classmethod
    def from_fn(cls, shape, forward_fn=None, forward_thread_fn=None, replicate=1, forward_index_fn=None):
        """What `T.Fragment` calls; arguments as in TileLang's `T.Fragment`."""
        return cls(shape, forward_thread_fn, forward_index_fn, replicate, forward_fn=forward_fn)

    @classmethod
    def from_tables(cls, thread_table, index_table) -> Fragment:
        """Enumerated fragment: thread_table[rep][idx] and index_table[idx] (int arrays)."""
        import numpy as np

        t = np.asarray(thread_table, dtype=np.int64)
        x = np.asarray(index_table, dtype=np.int64)
        if t.shape[1:] != x.shape:
            raise DSLTypeError(f"thread table {t.shape} must be (replicas,) + index table shape {x.shape}")
        return cls(tuple(int(s) for s in x.shape), replicate=int(t.shape[0]), _tables=(t, x))

    @classmethod
    def from_coords(cls, frag) -> Fragment:
        """Any object with `shape`, `threads`, `nlocal` and `coords(tid, slot)` (the lowering's
        FlatFragment / MmaAccFragment / WgmmaAccFragment), by enumeration."""
        import numpy as np

        shape = tuple(int(s) for s in frag.shape)
        thr = np.full(shape, -1, np.int64)
        idx = np.full(shape, -1, np.int64)
        for tid, slot in itertools.product(range(frag.threads), range(frag.nlocal)):
            c = tuple(int(v) for v in frag.coords(tid, slot))
            if not all(0 <= v < s for v, s in zip(c, shape)):
                continue  # padding slot of an inexact fragment
            if thr[c] >= 0:
                raise DSLTypeError(f"{frag} places element {c} on two (thread, slot) pairs")
            thr[c], idx[c] = tid, slot
        if (thr < 0).any():
            raise DSLTypeError(f"{frag} leaves element {tuple(np.argwhere(thr < 0)[0])} on no thread")
        return cls.from_tables(thr[None], idx)

    @classmethod
    def from_flat(cls, f) -> Fragment:
        """The FlatFragment layout in closed form: flat element e goes to thread
        (e // vec) % threads, slot (e // (threads * vec)) * vec + e % vec."""
        shape, threads, vec = tuple(f.shape), f.threads, f.vec

        def flat(*idx):
            e = E.as_expr(0)
            for i, s in zip(idx, shape):
                e = e * s + i
            return e
        return cls(shape, lambda *idx: (flat(*idx) // vec) % threads,
                   lambda *idx: (flat(*idx) // (threads * vec)) * vec + flat(*idx) % vec)

    @classmethod
    def from_mma_acc(cls, f) -> Fragment:
        """The MmaAccFragment layout in closed form (m16n8 atoms tiled over a warp grid)."""
        wm_tile, wn_tile, warps_m, ni = f.wm_tile, f.wn_tile, f.warps_m, f.ni

        def thread(i, j):
            warp = (j // wn_tile) * warps_m + i // wm_tile
            return warp * 32 + (i % 8) * 4 + (j % 8) // 2

        def index(i, j):
            atom = ((i % wm_tile) // 16) * ni + (j % wn_tile) // 8
            return atom * 4 + ((i % 16) // 8) * 2 + j % 2
        return cls(tuple(f.shape), thread, index)

    @classmethod
    def from_wgmma_acc(cls, f) -> Fragment:
        """The Hopper wgmma accumulator layout in closed form (m64 atoms over warpgroups)."""
        m_wg, n_wg, wg_m = f.m_wg, f.n_wg, f.wg_m

        def thread(i, j):
            group = (j // n_wg) * wg_m + i // m_wg
            return group * 128 + ((i % 64) // 16) * 32 + (i % 8) * 4 + (j % 8) // 2

        def index(i, j):
            atom = ((i % m_wg) // 64) * (n_wg // 8) + (j % n_wg) // 8
            return atom * 4 + ((i % 16) // 8) * 2 + j % 2
        return cls(tuple(f.shape), thread, index)

    # ---- evaluation
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_table(self) -> bool:
        return self.forward_thread is None

    def _tables(self):
        """(thread array (R,) + shape, slot array shape), cached."""
        import numpy as np

        if self._grids is None:
            rep = self.rep_var if self.rep_var is not None else Var("rep")
            thr = evaluate_grid((rep,) + self.forward_vars, (self.forward_thread,),
                                (self.num_replicas,) + self.shape)[..., 0]
            idx = evaluate_grid(self.forward_vars, (self.forward_index,), self.shape)[..., 0]
            self._grids = (np.ascontiguousarray(thr), np.ascontiguousarray(idx))
        return self._grids

    def thread_table(self):
        return self._tables()[0]

    def index_table(self):
        return self._tables()[1]

    def _check_idx(self, idx: tuple) -> tuple:
        if len(idx) == 1 and isinstance(idx[0], (list, tuple)):
            idx = tuple(idx[0])
        if len(idx) != self.ndim:
            raise DSLTypeError(f"fragment of shape {self.shape} takes {self.ndim} indices, got {len(idx)}")
        return idx

    def _ints(self, idx) -> bool:
        if not all(isinstance(s, int) for s in self.shape) and not self.is_table:
            return False  # symbolic extents: only substitution can evaluate
        if not all(is_int(x) for x in idx):
            if self.is_table:
                raise DSLTypeError("this fragment was built by enumeration and maps constant indices only")
            return False
        for i, s in zip(idx, self.shape):
            if isinstance(s, int) and not 0 <= int(i) < s:
                raise DSLTypeError(f"index {tuple(idx)} is outside fragment shape {self.shape}")
        return True

    def _scalar(self, key, args, out):
        if key not in self._fns:
            self._fns[key] = compile_exprs(args, (out,))
        return self._fns[key]

    def thread(self, *idx, rep=0):
        """The thread holding replica `rep` of element `idx` (int for ints, else an expression)."""
        idx = self._check_idx(idx)
        if self._ints(idx) and is_int(rep):
            if self.is_table:
                return int(self.thread_table()[(int(rep),) + tuple(int(i) for i in idx)])
            rv = self.rep_var if self.rep_var is not None else Var("rep")
            return int(self._scalar("t", (rv,) + self.forward_vars, self.forward_thread)(int(rep), *idx)[0])
        mapping = dict(zip(self.forward_vars, idx))
        if self.rep_var is not None:
            mapping[self.rep_var] = rep
        return substitute((self.forward_thread,), mapping)[0]

    def index(self, *idx):
        """The register slot of element `idx` (the same on every replica)."""
        idx = self._check_idx(idx)
        if self._ints(idx):
            if self.is_table:
                return int(self.index_table()[tuple(int(i) for i in idx)])
            return int(self._scalar("i", self.forward_vars, self.forward_index)(*idx)[0])
        return substitute((self.forward_index,), dict(zip(self.forward_vars, idx)))[0]

    def map(self, *idx, rep=0) -> tuple:
        """(thread, slot) of replica `rep` of element `idx`."""
        return self.thread(*idx, rep=rep), self.index(*idx)

    __call__ = map

    def owners(self, *idx) -> list:
        """Every (thread, slot) holding element `idx`, one per replica (ints only)."""
        return [(self.thread(*idx, rep=r), self.index(*idx)) for r in range(self.num_replicas)]

    def threads(self) -> int:
        """Number of threads the fragment spans (1 + the largest thread id, all replicas)."""
        return int(self.thread_table().max()) + 1

    def locals_per_thread(self) -> int:
        """Register slots each thread allocates (1 + the largest slot)."""
        return int(self.index_table().max()) + 1

    def get_thread_size(self) -> int:
        return self.threads()

    # ---- inverse and checks
    def inverse(self) -> Layout:
        """(thread, slot) -> logical index, as a table-backed Layout of shape
        (threads(), locals_per_thread()); unused slots map to None."""
        import numpy as np

        thr, idx = self._tables()
        inv = np.full((self.threads(), self.locals_per_thread(), self.ndim), -1, np.int64)
        for r in range(self.num_replicas):
            for pos in itertools.product(*(range(s) for s in self.shape)):
                key = (thr[(r,) + pos], idx[pos])
                if (inv[key] >= 0).any() and tuple(inv[key]) != pos:
                    raise DSLTypeError(f"not a valid fragment: thread {key[0]} slot {key[1]} holds both "
                                       f"{tuple(int(v) for v in inv[key])} and {pos}")
                inv[key] = pos
        return Layout.from_table(inv)

    def is_bijective(self) -> bool:
        """Each (thread, slot) in threads() x locals_per_thread() holds exactly one element replica."""
        import numpy as np

        thr, idx = self._tables()
        t = thr.reshape(self.num_replicas, -1)
        keys = set(zip(t.ravel().tolist(), np.broadcast_to(idx.reshape(1, -1), t.shape).ravel().tolist()))
        return len(keys) == t.size == self.threads() * self.locals_per_thread()

    # ---- algebra
    def _derive(self, shape, replicate, thread_fn, index_fn) -> Fragment:
        """A new fragment from fns of (idx tuple, rep): symbolic when self is, else enumerated."""
        if not self.is_table:
            def tfn(*args):
                return thread_fn(args[:len(shape)], args[len(shape)] if replicate > 1 else 0)
            return Fragment(shape, tfn, lambda *idx: index_fn(idx), replicate)
        import numpy as np

        thr = np.empty((replicate,) + shape, np.int64)
        idx = np.empty(shape, np.int64)
        for pos in itertools.product(*(range(s) for s in shape)):
            idx[pos] = index_fn(pos)
            for r in range(replicate):
                thr[(r,) + pos] = thread_fn(pos, r)
        return Fragment.from_tables(thr, idx)

    def repeat(self, repeats, repeat_on_thread: bool = False, lower_dim_first: bool = True) -> Fragment:
        """Tile the fragment `repeats[d]` times along each dimension d.

        Block b (flattened row-major when lower_dim_first, else column-major) gets new
        threads (thread + b * threads()) when repeat_on_thread, else new slots
        (slot + b * locals_per_thread()) on the same threads.
        """
        reps = repeat_counts(repeats, self.ndim)
        shape = tuple(s * r for s, r in zip(self.shape, reps))
        order = range(self.ndim - 1, -1, -1) if lower_dim_first else range(self.ndim)
        nthr, nloc = self.threads(), self.locals_per_thread()

        def block(idx):
            b, stride = 0, 1
            for d in order:
                if reps[d] > 1:
                    b = (idx[d] // self.shape[d]) * stride + b
                stride *= reps[d]
            return b

        def inner(idx):
            return tuple(i % s for i, s in zip(idx, self.shape))

        def thread_fn(idx, rep):
            return self.thread(*inner(idx), rep=rep) + (block(idx) * nthr if repeat_on_thread else 0)

        def index_fn(idx):
            return self.index(*inner(idx)) + (0 if repeat_on_thread else block(idx) * nloc)
        return self._derive(shape, self.num_replicas, thread_fn, index_fn)

    def replicate(self, n: int) -> Fragment:
        """Each element additionally held by `n` thread groups: replica r' = r + R*k sits on
        thread(x, r) + k * threads()."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise DSLTypeError(f"replicate takes a positive int, got {n!r}")
        R, nthr = self.num_replicas, self.threads()

        def thread_fn(idx, rep):
            return self.thread(*idx, rep=rep % R) + (rep // R) * nthr
        return self._derive(self.shape, R * n, thread_fn, lambda idx: self.index(*idx))

    # ---- equality, printing
    def __eq__(self, other):
        if not isinstance(other, Fragment):
            return NotImplemented
        if self.shape != other.shape or self.num_replicas != other.num_replicas:
            return False
        import numpy as np

        a, b = self._tables(), other._tables()
        return bool(np.array_equal(a[1], b[1]) and np.array_equal(np.sort(a[0], axis=0), np.sort(b[0], axis=0)))

    def __hash__(self):
        return hash(("Fragment", self.shape, self.num_replicas))

    def is_equal(self, other) -> bool:
        return self == other

    def __repr__(self):
        if self.is_table:
            return f"Fragment(shape={self.shape}, replicate={self.num_replicas}, table)"
        rep = (self.rep_var,) if self.rep_var is not None else ()
        args = ", ".join(v.name for v in self.forward_vars + rep)
        return (f"Fragment({self.shape}: ({args}) -> thread {self.forward_thread}, "
                f"slot {self.forward_index}" + (f", replicate={self.num_replicas})" if rep else ")"))

    def picture(self, rows=None, cols=None) -> str:
        """Text ownership grid of a 2-d fragment: each cell `thread:slot` (replica 0)."""
        if self.ndim != 2:
            raise DSLTypeError("Fragment.picture draws 2-d fragments")
        rows = range(self.shape[0]) if rows is None else rows
        cols = range(self.shape[1]) if cols is None else cols
        thr, idx = self._tables()
        cells = [[f"{thr[0, r, c]}:{idx[r, c]}" for c in cols] for r in rows]
        w = max(len(x) for row in cells for x in row + [f"c{c}" for c in cols])
        lines = ["      " + " ".join(f"c{c}".rjust(w) for c in cols)]
        for r, row in zip(rows, cells):
            lines.append(f"r{r}:".ljust(6) + " ".join(x.rjust(w) for x in row))
        return "\n".join(line.rstrip() for line in lines)

