"""Kernel source -> IR: an AST interpreter with source-located errors.

Expressions are evaluated by Python itself (IR nodes overload the operators), so
closures, block sizes and `if is_causal:` on Python values resolve at parse time.
Statements are interpreted here: loops over T.Parallel/T.Pipelined/range become IR
loops, `if` on an IR condition becomes IfThenElse, stores become BufferStore.
"""
from __future__ import annotations

import ast

from .. import dtypes as dt
from ..errors import (DSLNameError, DSLSyntaxError, DSLTypeError, DSLValueError, Span, TileLangError,
                      user_facing)
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer, BufferRegion
from . import builder as B
from . import vector
from .declarations import OUT_IDX, POINTER_PARAMS, BodyDeclarations, output_indices
from .reducer_epochs import check_reducer_epochs
from .rewrite import helpers
from .source import SourceInfo


class ParsedReturn(Exception):
    def __init__(self, value):
        self.value = value


def closure_scope(fn) -> dict:
    scope = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                scope[name] = cell.cell_contents
            except ValueError:  # a cell not yet filled
                pass
    scope.update(helpers())
    scope["range"] = _range
    return scope


def _range(*args):
    from ..language.loops import serial

    return serial(*args)


class Parser:
    def __init__(self, fn, builder: B.Builder, scope: dict | None = None):
        self.fn = fn
        self.src = SourceInfo.of(fn)
        self.builder = builder
        self.scope = closure_scope(fn) if scope is None else scope

    # ------------------------------------------------------------ utilities
    def span(self, node) -> Span:
        col = getattr(node, "col_offset", 0) + self.src.indent
        end = getattr(node, "end_col_offset", None)
        end = end + self.src.indent if end is not None and getattr(node, "end_lineno", None) == node.lineno else None
        return Span(self.src.file, getattr(node, "lineno", 0), col, end)

    def error(self, cls, msg, node):
        return cls(msg, self.span(node))

    def eval(self, node):
        code = self.src.codes.get(id(node))
        if code is None:
            code = self.src.codes[id(node)] = compile(ast.Expression(body=node), self.src.file, "eval")
        try:
            return eval(code, self.scope)  # noqa: S307  (evaluating the user's own kernel source)
        except TileLangError as e:
            raise _name_the_call(e, node).with_span(self.span(node)) from None
        except (ParsedReturn,):
            raise
        except NameError as e:
            where = _find(node, lambda n: isinstance(n, ast.Name) and n.id == e.name) or node
            raise self.error(DSLNameError, f"{e}{_did_you_mean(e.name, self.scope)}; define it before the kernel "
                             "or pass it in", where) from None
        except AttributeError as e:
            obj, name = getattr(e, "obj", None), getattr(e, "name", None)
            if getattr(obj, "__name__", None) == "tilelang.language" and name:
                where = _find(node, lambda n: isinstance(n, ast.Attribute) and n.attr == name) or node
                raise self.error(DSLNameError, f"T.{name} does not exist{_did_you_mean(name, dir(obj), 'T.')}",
                                 where) from None
            raise self.error(DSLTypeError, f"{type(e).__name__}: {e}", node) from None
        except (TypeError, ValueError, IndexError, KeyError, ZeroDivisionError) as e:
            cls = DSLValueError if isinstance(e, ValueError) else DSLTypeError
            raise self.error(cls, f"{type(e).__name__}: {e}", node) from None

    def body(self, stmts):
        for st in stmts:
            self.builder.span = self.span(st)
            fn = getattr(self, "stmt_" + type(st).__name__, None)
            if fn is None:
                raise self.error(DSLSyntaxError, f"`{type(st).__name__}` statements are not supported in kernels", st)
            try:
                fn(st)
            except TileLangError as e:
                raise e.with_span(self.span(st)) from None

    def block(self, stmts) -> S.Stmt:
        self.builder.push()
        self.body(stmts)
        return self.builder.pop()

    # ------------------------------------------------------------ statements
    def stmt_Pass(self, node):
        pass

    def stmt_Expr(self, node):
        value = self.eval(node.value)
        if isinstance(value, E.Expr):
            self.builder.emit(S.Evaluate(value))

    def stmt_Assign(self, node):
        tuple_target = any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets)
        if tuple_target and isinstance(node.value, (ast.Tuple, ast.List)) and not _find(
                node.value, lambda n: isinstance(n, ast.Starred)):
            value = tuple(self.eval(e) for e in node.value.elts)
            # a name read of a T.alloc_var is its current value (`a, b = b, a` swaps the values)
            value = tuple(v.as_load() if isinstance(e, ast.Name) and isinstance(v, Buffer) and v.scope == "local.var"
                          else v for e, v in zip(node.value.elts, value))
        else:
            value = self.eval(node.value)
        if tuple_target and any(self.stores_into(t) for t in node.targets) and isinstance(value, (tuple, list)):
            # Python reads every right-hand value before the first store: `A[0], A[1] = A[1], A[0]`
            value = type(value)(self.snapshot(v) for v in value)
        for target in node.targets:
            self.assign(target, value, node)

    def stores_into(self, target) -> bool:
        """Whether assigning to `target` (possibly a tuple of targets) writes to memory, not just binds names."""
        if isinstance(target, (ast.Tuple, ast.List)):
            return any(self.stores_into(t) for t in target.elts)
        if isinstance(target, ast.Name):
            old = self.scope.get(target.id)
            return isinstance(old, Buffer) and old.scope == "local.var"
        return isinstance(target, ast.Subscript)

    def snapshot(self, value):
        """`value` read now: an expression that loads memory becomes a let variable holding its current value."""
        if isinstance(value, (tuple, list)):
            return type(value)(self.snapshot(v) for v in value)
        if not isinstance(value, E.Expr) or isinstance(value, (E.Var, E.Const)) or value.dtype.name == "handle":
            return value
        var = E.Var(self.builder.unique("rhs"), value.dtype)
        self.builder.emit(S.LetStmt(var, value))
        self.builder.lets[var] = value
        return var

    def assign(self, target, value, node):
        if isinstance(target, ast.Name):
            self.bind(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, Buffer) or not hasattr(value, "__iter__"):
                raise self.error(DSLTypeError, f"cannot unpack {type(value).__name__} into {len(target.elts)} names", node)
            values = list(value)
            if len(values) != len(target.elts):
                raise self.error(DSLTypeError, f"expected {len(target.elts)} values to unpack, got {len(values)}", node)
            for t, v in zip(target.elts, values):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            buf = self.eval(target.value)
            index = self.eval(target.slice)
            self.store(buf, index, value, node)
        else:
            raise self.error(DSLSyntaxError, f"cannot assign to `{ast.unparse(target)}` in a kernel", node)

    def bind(self, name: str, value):
        if getattr(value, "tl_meta_var", False):  # T.meta_var(v): the parse-time value itself, no let
            self.scope[name] = value.value
            return
        if vector.binds(self.scope.get(name), value):
            bound = vector.bind(self.builder, name, self.scope.get(name), value)
            if bound is not None:
                self.scope[name] = bound
            return
        if isinstance(value, E.Var) and value.name == "":  # `n = T.int32()`: a new variable named n
            value = E.Var(self.builder.unique(name), value.dtype)
        old = self.scope.get(name)
        if isinstance(value, Buffer) and getattr(value, "auto_named", False):
            value.name = self.builder.unique(name)
            value.auto_named = False
        if isinstance(old, Buffer) and old.scope == "local.var" and not isinstance(value, Buffer):
            self.store(old, (), value, None)
            return
        if isinstance(value, E.Expr) and not isinstance(value, (E.Var, E.Const)) and value.dtype.name != "handle":
            # (an address, T.address_of / T.access_ptr, stays an expression: C has no handle variables)
            var = E.Var(self.builder.unique(name), value.dtype)
            self.builder.emit(S.LetStmt(var, value))
            self.builder.lets[var] = value
            value = var
        self.scope[name] = value

    def store(self, buf, index, value, node):
        from ..language.tile import fill

        if not isinstance(buf, Buffer):
            if hasattr(buf, "__setitem__") and not isinstance(buf, E.Expr):
                buf[index] = value  # a Python container
                return
            raise DSLTypeError(f"only buffers can be stored into, got {type(buf).__name__}")
        idx = index if isinstance(index, tuple) else (index,)
        if getattr(value, "is_tl_vector", False) or any(getattr(i, "is_tl_vector", False) for i in idx):
            vector.store(self.builder, buf, idx, value)
            return
        if buf.scope == "local.var" and idx in ((), (0,)):
            idx = (0,)
        if any(isinstance(i, slice) for i in idx):
            region = BufferRegion.from_slices(buf, idx)
            if isinstance(value, BufferRegion) or isinstance(value, Buffer) and value.scope != "local.var":
                from ..language.tile import copy  # `A[0, 4:8] = B[0, 0:4]`: the region's elements, in order
                from ..op.regions import pair_regions

                # both regions are spelled out: their extents must agree (T.copy's looser pairing of other
                # extents, over the side nearer the threads, is for T.copy calls)
                pair_regions(value, region, "T.copy (a region store)")
                copy(value, region)
                return
            fill(region, value)
            return
        if len(idx) != buf.ndim:
            raise DSLTypeError(f"{buf.name} has {buf.ndim} dims but the store uses {len(idx)} indices")
        val = E.cast(buf.dtype, E.as_expr(value, buf.dtype))
        idx = tuple(E.as_expr(i) for i in idx)
        if buf.scope != "local.var":
            idx = buf.check_const_indices(idx)
        self.builder.emit(S.BufferStore(buf, idx, val))

    def stmt_AugAssign(self, node):
        op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
              ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}.get(type(node.op))
        if op is None:
            raise self.error(DSLSyntaxError, f"operator {type(node.op).__name__}= is not supported", node)
        rhs = self.eval(node.value)
        t = node.target
        if isinstance(t, ast.Subscript):
            buf, index = self.eval(t.value), self.eval(t.slice)
            if isinstance(buf, Buffer):
                cur = buf[index] if not (buf.scope == "local.var" and index == 0 and buf.ndim == 0) else buf.as_load()
                self.store(buf, index, E.binop(op, cur, rhs), node)
                return
            buf[index] = _py_binop(op, buf[index], rhs)
            return
        if isinstance(t, ast.Name):
            cur = self.scope.get(t.id)
            if cur is None:
                raise self.error(DSLNameError, f"name {t.id!r} is not defined", node)
            if isinstance(cur, Buffer) and cur.scope == "local.var":
                self.store(cur, (0,), E.binop(op, cur.as_load(), rhs), node)
            elif isinstance(cur, E.Expr) or isinstance(rhs, E.Expr):
                self.bind(t.id, E.binop(op, cur, rhs))
            else:
                self.scope[t.id] = _py_binop(op, cur, rhs)
            return
        raise self.error(DSLSyntaxError, "unsupported augmented assignment target", node)

    def stmt_AnnAssign(self, node):
        if not isinstance(node.target, ast.Name):
            raise self.error(DSLSyntaxError, "annotated assignment needs a plain name", node)
        name = node.target.id
        ann = self.eval(node.annotation)
        from ..language.types import TensorSpec

        if isinstance(ann, TensorSpec) and node.value is None:
            eager = self.builder.eager
            if eager is None:
                raise self.error(DSLSyntaxError, f"`{name}: T.Tensor(...)` inside a body declares an eager-mode "
                                 "parameter; it is only valid in an eager @tilelang.jit function", node)
            self.scope[name] = eager.declare_param(name, ann, self.span(node))
            return
        if isinstance(ann, dt.DType):
            from ..language.alloc import alloc_var

            init = None if node.value is None else self.eval(node.value)
            buf = alloc_var(ann, init=init, name=name)
            self.scope[name] = buf
            return
        if node.value is not None:
            self.assign(node.target, self.eval(node.value), node)

    def stmt_If(self, node):
        cond = self.eval(node.test)
        if isinstance(cond, Buffer) and cond.scope == "local.var" or isinstance(cond, E.ExprCompare):
            cond = cond.as_load()  # a helper's `a == b` is a run-time test here
        if not isinstance(cond, E.Expr):
            self.body(node.body if cond else node.orelse)
            return
        then = self.block(node.body)
        other = self.block(node.orelse) if node.orelse else None
        self.builder.emit(S.IfThenElse(cond, then, other, span=self.span(node)))  # the `if` line, not its body's last

    def stmt_For(self, node):
        from ..language.loops import ForSpec, PersistentSpec
        from . import binding_launch as BL

        it = self.eval(node.iter)
        if isinstance(it, BL.LaunchAxis):  # `for bx in T.thread_binding(n, thread="blockIdx.x")` outside a kernel
            return BL.parse_binding_launch(self, node, it)
        if self.builder.kernel is not None and isinstance(it, E.Expr) and BL.is_binding_call(self, node.iter):
            return self.builder.emit(BL.bind_and_parse(self, node, it))
        if isinstance(it, PersistentSpec):
            return self.persistent_for(node, it)
        if not isinstance(it, ForSpec):
            if isinstance(it, (Buffer, E.Expr)):
                raise self.error(DSLTypeError, f"cannot iterate over {it}; use T.serial/T.Parallel/range", node)
            for value in it:  # a Python iterable: unrolled at parse time
                self.assign(node.target, value, node)
                self.body(node.body)
            return
        names = _target_names(node.target)
        if len(names) != len(it.extents):
            raise self.error(DSLTypeError, f"{it.kind} loop over {len(it.extents)} dims but the target binds "
                             f"{len(names)} names", node)
        loop_vars = [E.Var(self.builder.unique(n), dt.int32) for n in names]
        for n, v in zip(names, loop_vars):
            self.scope[n] = v
        body = self.block(node.body)
        for v, start, extent in reversed(list(zip(loop_vars, it.starts, it.extents))):
            body = S.For(v, E.as_expr(start), E.as_expr(extent), it.kind, body, it.annotations,
                         span=self.span(node))
            if it.step != 1:
                body = _stepped(body, it.step)
        self.builder.emit(body)

    def persistent_for(self, node, it):
        """`for c0, ..., cn in T.Persistent(...)`: one serial loop over the waves; each iteration binds its
        tile's index, then the tile's coordinates (one let each), and runs the body where that tile lies in
        the domain. persistent_grid.py reads this shape back (annotation "persistent")."""
        names = _target_names(node.target)
        if len(names) != len(it.domain):
            raise self.error(DSLTypeError, f"T.Persistent over {len(it.domain)} dims but the target binds "
                             f"{len(names)} names", node)
        w = E.Var(self.builder.unique("w"), dt.int32)
        waves = it.layout()[3]
        self.builder.push()
        tile = E.Var(self.builder.unique("tile"), dt.int32)
        self.builder.emit(S.LetStmt(tile, E.as_expr(it.linear(w))))
        coords, guard = it.coords(tile)
        for n, c in zip(names, coords):
            v = E.Var(self.builder.unique(n), dt.int32)
            self.builder.emit(S.LetStmt(v, E.as_expr(c)))
            self.scope[n] = v
        inner = self.block(node.body)
        self.builder.emit(S.IfThenElse(guard, inner, None) if guard is not None else inner)
        body = self.builder.pop()
        info = (it.wave_size, it.index, tuple(it.domain), guard is not None)
        self.builder.emit(S.For(w, E.as_expr(0), E.as_expr(waves), "serial", body,
                                it.annotations + (("persistent", info),), span=self.span(node)))

    def stmt_While(self, node):
        cond = self.eval(node.test)
        if isinstance(cond, E.ExprCompare):
            cond = cond.as_load()
        if not isinstance(cond, E.Expr):
            raise self.error(DSLSyntaxError, "a while loop in a kernel needs a run-time condition", node)
        self.builder.emit(S.While(cond, self.block(node.body)))

    def stmt_Break(self, node):
        self.builder.emit(S.Break())

    def stmt_Continue(self, node):
        self.builder.emit(S.Continue())

    def stmt_With(self, node):
        from ..language.hopper import WarpGroups
        from ..language.kernel import KernelSpec

        if len(node.items) > 1:  # `with a, b:` is `with a:` around `with b:`
            inner = ast.copy_location(ast.With(items=node.items[1:], body=node.body), node)
            node = ast.copy_location(ast.With(items=node.items[:1], body=[inner]), node)
        if self.builder.eager is not None and self.builder.eager.symbolic:
            return  # the first eager parse only reads the declarations outside the kernels
        item = node.items[0]
        ctx = self.eval(item.context_expr)
        if isinstance(ctx, WarpGroups):
            return self.warp_groups(node, ctx)
        if hasattr(ctx, "tl_frame_exit"):  # T.If / T.Then / T.While / T.sblock ...: the frame builds a statement
            value = ctx.tl_frame_enter()
            if item.optional_vars is not None:
                self.assign(item.optional_vars, value, node)
            ctx.tl_frame_exit(self.block(node.body))
            return
        if getattr(ctx, "inline_with", False):  # T.attr(...): the body, with the scope entered
            if item.optional_vars is not None:
                self.assign(item.optional_vars, ctx.node, node)
            ctx.enter()
            try:
                self.body(node.body)
            finally:
                ctx.exit()
            return
        if not isinstance(ctx, KernelSpec):
            raise self.error(DSLSyntaxError, f"unsupported `with` context {type(ctx).__name__}; "
                             "kernels use `with T.Kernel(...) as (bx, by):`", node)
        if self.builder.kernel is not None:
            raise self.error(DSLSyntaxError, "nested T.Kernel is not allowed", node)
        bvars = tuple(E.Var(n, dt.int32) for n in ("bx", "by", "bz")[:len(ctx.grid)])
        names = _target_names(item.optional_vars) if item.optional_vars is not None else []
        if not ctx.grid_given and item.optional_vars is not None:
            # `with T.Kernel(threads=n) as x:` (one block, no grid extents): x is an empty list, as in the
            # public TileLang; the block keeps its (internal) index 0
            if not isinstance(item.optional_vars, ast.Name):
                raise self.error(DSLTypeError, "T.Kernel with no grid extents has no block index to bind", node)
            self.scope[item.optional_vars.id] = []
            names = []
        if names and len(names) != len(bvars):
            if not (len(names) == 1 and isinstance(item.optional_vars, ast.Name)):
                raise self.error(DSLTypeError, f"T.Kernel has {len(bvars)} grid dims but `as` binds {len(names)} names", node)
        # a block index has its extent's dtype (int64 for an extent over an int64 dim: bx * block_n
        # must not wrap past 2**31), as TVM's launch_thread does
        bdts = [g.dtype if isinstance(g, E.Expr) and g.dtype == dt.int64 else dt.int32 for g in ctx.grid]
        bvars = tuple(E.Var(self.builder.unique(n), bdts[i]) for i, n in enumerate(
                      names if len(names) == len(bvars) else [("bx", "by", "bz")[i] for i in range(len(bvars))]))
        if len(names) == len(bvars):
            for n, v in zip(names, bvars):
                self.scope[n] = v
        elif len(names) == 1:
            self.scope[names[0]] = bvars if len(bvars) > 1 else bvars[0]
        self.builder.kernel = B.KernelContext(bvars, ctx.grid, ctx.threads)
        body = self.block(node.body)
        if ctx.prelude is not None:  # T.Kernel(prelude=...): T.import_source(prelude) first in the body
            from ..op.thread_ops import ImportSource

            body = S.seq(ImportSource(ctx.prelude, span=self.span(node)), body)
        if getattr(self.builder.eager, "pointer_views", None):  # T.make_tensor(ptr_param, ...) before the kernel
            body = S.seq(*self.builder.eager.pointer_views, body)
        k = self.builder.kernel
        self.builder.kernel = None
        self.builder.emit(S.KernelLaunch(bvars, ctx.grid, ctx.threads, tuple(k.thread_vars), body,
                                         span=self.span(node), cluster=ctx.cluster))

    def warp_groups(self, node, ctx):
        """`with T.ws(...)`: the body runs on those warp groups' threads only."""
        from ..op.hopper import WarpGroupScope

        if node.items[0].optional_vars is not None:
            raise self.error(DSLSyntaxError, "`with T.ws(...)` binds no name (drop the `as ...`)", node)
        self.builder.emit(WarpGroupScope(ctx.lo, ctx.hi, self.block(node.body), span=self.span(node)))

    def stmt_Return(self, node):
        raise ParsedReturn(None if node.value is None else self.eval(node.value))

    def stmt_Assert(self, node):
        cond = self.eval(node.test)
        msg = self.eval(node.msg) if node.msg is not None else "assertion failed"
        if isinstance(cond, E.Expr):
            if self.builder.eager is not None and self.builder.eager.symbolic:
                return  # a check on T.const dims: made in the parse that has their values
            if self.builder.kernel is None:  # before the kernels: the host checks it at each call
                from .host_checks import host_assert

                return host_assert(cond, str(msg), self.span(node))
            from ..language.debug import device_assert

            device_assert(cond, str(msg))
        elif not cond:
            raise self.error(DSLTypeError, f"assert failed while building the kernel: {msg}", node)

    def stmt_FunctionDef(self, node):
        raise self.error(DSLSyntaxError, "nested functions are not supported inside a kernel; "
                         "define a @T.macro outside it", node)


def _name_the_call(e: TileLangError, node) -> TileLangError:
    """Prefix `T.name: ` to an unlocated error from a T.* call whose message does not name it."""
    f = node.func if isinstance(node, ast.Call) else None
    if e.span is not None or not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)):
        return e
    name = f"{f.value.id}.{f.attr}"
    if e.message.startswith(name) or e.message.startswith("T." + f.attr):
        return e
    err = type(e).__new__(type(e))
    TileLangError.__init__(err, f"{name}: {e.message}", None)
    return err


def _find(node, pred):
    """The first sub-node of `node` satisfying `pred` (to point the caret at the exact name)."""
    return next((n for n in ast.walk(node) if pred(n)), None)


def _did_you_mean(name: str, candidates, prefix: str = "") -> str:
    import difflib

    names = [c for c in candidates if isinstance(c, str) and not c.startswith("_")]
    close = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""


def _py_binop(op, a, b):
    import operator

    return {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
            "//": operator.floordiv, "%": operator.mod, "&": operator.and_, "|": operator.or_,
            "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift}[op](a, b)


def _target_names(t) -> list[str]:
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in t.elts):
        return [e.id for e in t.elts]
    raise DSLSyntaxError(f"loop/with targets must be names, got `{ast.unparse(t)}`")


def _stepped(loop: S.For, step) -> S.For:
    """for v in range(a, b, s): iterate k in [0, ceil((b-a)/s)) with v = a + k*s."""
    from ..ir.visitor import substitute

    k = E.Var(loop.var.name + "_k", dt.int32)
    extent = (loop.extent + (step - 1 if step > 0 else step + 1)) // step
    body = substitute(loop.body, {loop.var: loop.start + k * step})
    return S.For(k, E.as_expr(0), E.as_expr(extent), loop.kind, body, loop.annotations, span=loop.span)


def _evaluated_annotations(fn) -> dict:
    """Annotations Python already evaluated at `def` time.

    Why: they may use names the body never mentions (a factory's `dtype` argument), which are
    then not in the function's closure, so re-evaluating the annotation's AST would fail.
    """
    anns = getattr(fn, "__annotations__", None) or {}
    return {k: v for k, v in anns.items() if type(v) is not str}  # a DType is a str subclass


@user_facing()
def parse_prim_func(fn, outer: dict | None = None) -> S.PrimFunc:
    """`@T.prim_func`: parameters come from annotations; the body must hold one T.Kernel.

    `outer`: the defining scope's names, used where the function's own closure lacks them
    (string annotations under `from __future__ import annotations`).
    """
    from ..language.types import TensorSpec

    src = SourceInfo.of(fn)
    builder = B.Builder()
    scope = closure_scope(fn)
    if outer:
        for k, v in outer.items():
            scope.setdefault(k, v)
    parser = Parser(fn, builder, scope)
    params = []
    args = src.node.args
    evaluated = _evaluated_annotations(fn)
    if args.vararg or args.kwarg or args.kwonlyargs:
        raise parser.error(DSLSyntaxError, "prim_func parameters must be plain positional names", src.node)
    # unannotated parameters are declared by the body (`A: T.Tensor(...)`), outputs by T.empty
    decls = builder.eager = BodyDeclarations({}, [a.arg for a in args.args if a.annotation is None], jit=False)
    with B.activate(builder):
        for a in args.args:
            if a.annotation is None:
                params.append(a.arg)
                continue
            ann = evaluated[a.arg] if a.arg in evaluated else parser.eval(a.annotation)
            if isinstance(ann, TensorSpec):
                p = Buffer(a.arg, ann.shape, ann.dtype, "global", strides=ann.strides)
            elif getattr(ann, "tl_pointer_marker", False):  # `p: T.ptr`: an address, viewed with T.make_tensor
                p = E.Var(a.arg, dt.int64)
                builder.func_attrs[POINTER_PARAMS] = builder.func_attrs.get(POINTER_PARAMS, ()) + (a.arg,)
            elif getattr(ann, "tl_handle_type", False) or ann == "handle":  # TVM style: T.match_buffer binds it
                p = E.Var(a.arg, dt.as_dtype("handle"))
                builder.handle_params[p] = None
            elif isinstance(ann, dt.DType) or isinstance(ann, str):
                p = E.Var(a.arg, dt.as_dtype(ann))
            else:
                raise parser.error(DSLTypeError, f"parameter {a.arg!r}: expected T.Tensor(shape, dtype) or a scalar "
                                   f"dtype, got {ann!r}", a)
            parser.scope[a.arg] = p
            params.append(p)
        returned = None
        try:
            body = parser.block(src.node.body)
        except ParsedReturn as r:
            returned = r.value
            body = builder.pop() if len(builder.frames) > 1 else S.seq()
    check_reducer_epochs(body)
    params = [_body_declared(decls, p, parser, src.node) for p in params]
    params = [_matched(builder, p, parser, src.node) for p in params] + decls.outputs
    attrs = dict(builder.func_attrs)
    out_idx = output_indices(decls, returned, parser.span(src.node))
    if out_idx:
        attrs[OUT_IDX] = tuple(out_idx)
    return S.PrimFunc(builder.func_name or fn.__name__, tuple(params), body, attrs, span=parser.span(src.node))


def _body_declared(decls, p, parser, node):
    """An unannotated parameter (its name): the buffer the body declared for it."""
    if not isinstance(p, str):
        return p
    if p not in decls.params:
        a = next(a for a in node.args.args if a.arg == p)
        raise parser.error(DSLTypeError, f"parameter {p!r} needs an annotation such as `{p}: T.Tensor((M, N), "
                           f"'float16')` or `{p}: T.int32`, in the signature or as a statement of the body", a)
    return decls.params[p]


def _matched(builder, p, parser, node):
    """A `T.handle` parameter: the buffer T.match_buffer made of it (it must have made one)."""
    if p not in builder.handle_params:
        return p
    buf = builder.handle_params[p]
    if buf is None:
        raise parser.error(DSLTypeError, f"parameter {p.name!r} is a T.handle that no T.match_buffer binds; "
                           f"write `{p.name.upper()} = T.match_buffer({p.name}, shape, dtype)` at the top of the "
                           f"body, or annotate it `{p.name}: T.Tensor(shape, dtype)`", node)
    return buf
