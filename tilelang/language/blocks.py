"""TVMScript blocks (`T.sblock`, `T.axis`, `T.init`, `T.where`), read as the loop nest they sit in.

A block names the iteration it computes; without TVM's schedule primitives it is its body:

    for i, j, k in T.grid(M, N, K):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])   # each axis is its binding
            with T.init():                               # where every reduction axis is at its start
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vj, vk]

becomes `if k == 0: C[i, j] = 0` then the update, inside the loops. `T.where(p)` guards the rest of
the block with p; `T.reads` / `T.writes` / `T.sblock_attr` are accepted and unused.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import DSLSyntaxError, DSLTypeError, Span
from ..frontend import builder as B
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer, BufferRegion
from ..ir.visitor import Mutator
from ..tvm.tirx_nodes import Range
from .annotations import SAFE_VALUES


@dataclass(frozen=True)
class _WhereMark(S.Stmt):
    """Where T.where was called in a block's body (replaced by an if when the block closes)."""

    cond: E.Expr
    span: Span | None = S.default_span()


class _SBlock:
    def __init__(self, name):
        self.name = name
        self.reduce_starts: list = []  # (binding, domain start) of each reduction axis so far
        self.safe_values: dict = {}  # T.annotate_safe_value inside the block: tensor name -> value

    def tl_frame_enter(self):
        b = B.current("T.sblock")
        b.tir_frames.append(self)
        self.depth = len(b.frames) + 1  # the body's frame (the parser pushes it next)

    def tl_frame_exit(self, body):
        b = B.current("T.sblock")
        b.tir_frames.pop()
        stmts = list(body.stmts) if isinstance(body, S.SeqStmt) else [body]
        marks = [k for k, st in enumerate(stmts) if isinstance(st, _WhereMark)]
        if len(marks) > 1:
            raise DSLSyntaxError(f"T.sblock({self.name!r}) has more than one T.where")
        if marks:
            k = marks[0]
            guarded = S.seq(*stmts[k + 1:])
            stmts = stmts[:k] + [S.IfThenElse(stmts[k].cond, guarded, None)]
        body = S.seq(*stmts)
        if self.safe_values:
            body = _ScopeSafeValues(self.safe_values).visit(body)
        b.emit(body)


class _ScopeSafeValues(Mutator):
    """The block's T.annotate_safe_value on its T.copy ops (Copy.safe_values) and T.Parallel loops (the
    loop annotation SAFE_VALUES), under what an inner block already set (that one is nearer)."""

    def __init__(self, values: dict):
        self.values = values

    def merged(self, inner) -> tuple:
        return tuple({**self.values, **dict(inner)}.items())

    def visit_Copy(self, op):
        return replace(op, safe_values=self.merged(op.safe_values))

    def visit_For(self, s: S.For):
        s = self.generic(s)
        if s.kind != "parallel":
            return s
        ann = dict(s.annotations)
        ann[SAFE_VALUES] = self.merged(ann.get(SAFE_VALUES, ()))
        return replace(s, annotations=tuple(ann.items()))


def sblock(name="", no_realize=False):
    """`with T.sblock("name"):` a block of TVMScript (see the module docstring)."""
    if no_realize:
        raise DSLTypeError("T.sblock(no_realize=True) is not supported: a block here is always its body")
    return _SBlock(str(name))


def _block(what) -> _SBlock:
    frames = B.current(what).tir_frames
    if not frames or not isinstance(frames[-1], _SBlock):
        raise DSLSyntaxError(f"{what} must be directly inside `with T.sblock(...):`")
    return frames[-1]


def _start(dom):
    if isinstance(dom, Range):
        return dom.min
    if isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise DSLTypeError(f"T.axis: a domain is an extent or (start, end), got {dom!r}")
        return dom[0]
    return 0


class axis:  # noqa: N801 - TVM's name
    """A block's axes: each is its binding (the loop expression it follows)."""

    @staticmethod
    def spatial(dom, binding, dtype="int32"):
        """A spatial (data-parallel) axis over `dom` (an extent, (start, end) or T.Range)."""
        _block("T.axis.spatial")
        return binding

    @staticmethod
    def reduce(dom, binding, dtype="int32"):
        """A reduction axis: T.init() runs where every reduction axis equals its domain's start."""
        _block("T.axis.reduce").reduce_starts.append((binding, _start(dom)))
        return binding

    @staticmethod
    def scan(dom, binding, dtype="int32"):
        """A scan axis (ordered): its binding."""
        _block("T.axis.scan")
        return binding

    @staticmethod
    def opaque(dom, binding, dtype="int32"):
        """An opaque axis: its binding."""
        _block("T.axis.opaque")
        return binding

    @staticmethod
    def remap(kinds, bindings, dtype="int32"):
        """`vi, vj, vk = T.axis.remap("SSR", [i, j, k])`: S spatial, R reduction axes bound to loop
        variables (their domains start at 0)."""
        blk = _block("T.axis.remap")
        if not isinstance(kinds, str) or len(kinds) != len(bindings) or set(kinds) - {"S", "R"}:
            raise DSLTypeError(f"T.axis.remap: kinds is a string of 'S' / 'R', one per binding; got {kinds!r} "
                               f"for {len(bindings)} bindings")
        for kind, v in zip(kinds, bindings):
            if kind == "R":
                blk.reduce_starts.append((v, 0))
        out = list(bindings)
        return out[0] if len(out) == 1 else out


class _Init:
    def tl_frame_enter(self):
        self.block = _block("T.init()")

    def tl_frame_exit(self, body):
        b = B.current("T.init")
        if not self.block.reduce_starts:
            raise DSLSyntaxError("T.init() needs a reduction axis (T.axis.reduce, or 'R' in T.axis.remap) "
                                 "declared before it")
        if any(not isinstance(st, (S.LetStmt, S.Allocate, _WhereMark)) for st in b.frames[-1]):
            raise DSLSyntaxError("`with T.init():` must come before the block's other statements (after its "
                                 "axes)")
        cond = None
        for v, start in self.block.reduce_starts:
            c = E.binop("==", v, start)
            cond = c if cond is None else E.logical_and(cond, c)
        b.emit(S.IfThenElse(cond, body, None))


def init():
    """`with T.init():` the block's initialization, run where every reduction axis is at its start."""
    return _Init()


def where(predicate):
    """Guard the rest of the enclosing block with `predicate` (its iterations outside the domain)."""
    blk = _block("T.where")
    b = B.current("T.where")
    if len(b.frames) != blk.depth:
        raise DSLSyntaxError("T.where must be a statement of the block itself, not nested in a loop or if")
    if isinstance(predicate, E.ExprCompare):
        predicate = predicate.as_load()
    b.emit(_WhereMark(E.as_expr(predicate)))


def _regions(what, slices):
    for s in slices:
        items = s if isinstance(s, (list, tuple)) else [s]
        for x in items:
            if not isinstance(x, (Buffer, BufferRegion, E.BufferLoad)):
                raise DSLTypeError(f"{what}: expected buffer regions such as A[i, 0:K], got {x!r}")


def reads(*buffer_slices):
    """The regions the block reads (accepted; the compiler finds them itself)."""
    _block("T.reads")
    _regions("T.reads", buffer_slices)


def writes(*buffer_slices):
    """The regions the block writes (accepted; the compiler finds them itself)."""
    _block("T.writes")
    _regions("T.writes", buffer_slices)


def sblock_attr(attrs):
    """Annotations of the block (accepted; they change nothing here)."""
    _block("T.sblock_attr")
    if not isinstance(attrs, dict):
        raise DSLTypeError(f"T.sblock_attr: expected a dict, got {type(attrs).__name__}")


def sblock_alloc_buffer(shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global", align=-1,
                        offset_factor=0, buffer_type="default", axis_separators=None):
    """A buffer the block allocates (T.alloc_buffer in the block's scope)."""
    from .views import alloc_buffer

    _block("T.sblock_alloc_buffer")
    if data is not None or strides is not None or axis_separators:
        raise DSLTypeError("T.sblock_alloc_buffer: data=, strides= and axis_separators= are not supported")
    return alloc_buffer(shape, dtype, scope)
