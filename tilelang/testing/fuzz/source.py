"""Program description -> TileLang Python source (`import tilelang.language as T`).

The text is a runnable file: the kernel `main`, the description as `DESC` (JSON), and a
`__main__` block that replays it through the fuzzer's oracle::

    python /tmp/fuzz_seed_12.py        # prints PASS or the mismatch
"""
from __future__ import annotations

from .spec import (Atomic, Copy, CumSum, Ew, Fill, Flip, Gemm, GlobalLayout, If, Pipelined, Program, Reduce, Ref, Scan,
                   SetVar, Swizzle, to_json)

__all__ = ["to_source", "expr_src"]

_BIN = {"+": "+", "-": "-", "*": "*"}


def _idx(buf_is_var: bool, idx) -> str:
    return ", ".join(i.emit() for i in idx)


def expr_src(e, prog: Program) -> str:
    """Source text of one expression tree (see spec's module docstring)."""
    op = e[0]
    if op == "ld":
        return f"{e[1]}[{_idx(False, e[2])}]"
    if op == "c":
        return repr(float(e[1])) if isinstance(e[1], float) else str(e[1])
    if op == "ix":
        return e[1].emit()
    if op == "var":
        return f"{e[1]}[0]"
    if op == "bin":
        a, b = expr_src(e[2], prog), expr_src(e[3], prog)
        if e[1] in ("max", "min"):
            return f"T.{e[1]}({a}, {b})"
        return f"({a} {_BIN[e[1]]} {b})"
    if op == "un":
        a = expr_src(e[2], prog)
        return {"neg": f"(-{a})", "abs": f"T.abs({a})", "sq": f"({a} * {a})",
                "expn": f"T.exp(-T.abs({a}))", "exp2n": f"T.exp2(-T.abs({a}))",
                "sqrt1": f"T.sqrt(T.abs({a}) + 1.0)",
                "sigmoid": f"T.sigmoid({a})"}[e[1]]
    if op == "cast":
        return f'T.Cast("{e[1]}", {expr_src(e[2], prog)})'
    if op == "ite":
        return f"T.if_then_else({expr_src(e[1], prog)}, {expr_src(e[2], prog)}, {expr_src(e[3], prog)})"
    if op == "cmp":
        return f"({expr_src(e[2], prog)} {e[1]} {expr_src(e[3], prog)})"
    raise ValueError(f"unknown expression node {e!r}")


def _ref(r: Ref) -> str:
    if r.form == "whole":
        return r.buf
    if r.form == "corner":
        return f"{r.buf}[{', '.join(s.emit() for s in r.starts)}]"
    parts = []
    for d, (s, e) in enumerate(zip(r.starts, r.extents)):
        if r.full and r.full[d]:
            parts.append(":")
        else:
            parts.append(f"{s.emit()}:{s.shift(e).emit()}")
    return f"{r.buf}[{', '.join(parts)}]"


def _stmt(s, prog: Program, ind: str, out: list) -> None:
    if isinstance(s, Copy):
        out.append(f"{ind}T.copy({_ref(s.src)}, {_ref(s.dst)})")
    elif isinstance(s, Fill):
        v = int(s.value) if prog.buffer(s.buf).dtype.startswith("int") else float(s.value)
        out.append(f"{ind}T.clear({s.buf})" if s.value == 0 else f"{ind}T.fill({s.buf}, {v!r})")
    elif isinstance(s, Ew):
        vs = ", ".join(s.vars[:len(s.extents)])
        ext = ", ".join(str(e) for e in s.extents)
        loop = {"parallel": "T.Parallel", "vectorized": "T.vectorized"}.get(s.loop, "T.serial")
        out.append(f"{ind}for {vs} in {loop}({ext}):")
        out.append(f"{ind}    {s.dst}[{_idx(False, s.idx)}] = {expr_src(s.expr, prog)}")
    elif isinstance(s, Reduce):
        clear = "" if s.kind == "abssum" else f", clear={s.clear}"
        out.append(f"{ind}T.reduce_{s.kind}({s.src}, {s.dst}, dim={s.dim}{clear})")
    elif isinstance(s, CumSum):
        if s.src == s.dst:
            out.append(f"{ind}T.cumsum(src={s.src}, dim={s.dim}, reverse={s.reverse})")
        else:
            out.append(f"{ind}T.cumsum({s.src}, {s.dst}, dim={s.dim}, reverse={s.reverse})")
    elif isinstance(s, Gemm):
        out.append(f"{ind}T.gemm({s.a}, {s.b}, {s.c}, transpose_A={s.ta}, transpose_B={s.tb}, "
                   f"policy=T.GemmWarpPolicy.{s.policy}, clear_accum={s.clear_accum})")
    elif isinstance(s, Atomic):
        out.append(f"{ind}T.atomic_add({_ref(s.dst)}, {s.src})")
    elif isinstance(s, Pipelined):
        out.append(f"{ind}for {s.var} in T.Pipelined({_trip(s.extent)}, num_stages={s.stages}):")
        _body(s.body, prog, ind + "    ", out)
    elif isinstance(s, SetVar):
        out.append(f"{ind}{s.var}[0] = {expr_src(s.expr, prog)}")
    elif isinstance(s, If):
        out.append(f"{ind}if {expr_src(s.cond, prog)}:")
        _body(s.body, prog, ind + "    ", out)
    elif isinstance(s, Swizzle):
        out.append(f"{ind}T.annotate_layout({{{s.buf}: tilelang.layout.make_swizzled_layout({s.buf})}})")
    elif isinstance(s, GlobalLayout):
        fn = "[j, i]" if s.kind == "transposed" else f"[j // {s.c}, i, j % {s.c}]"
        out.append(f"{ind}T.annotate_layout({{{s.buf}: T.Layout({s.buf}.shape, lambda i, j: {fn})}})")
    elif isinstance(s, Scan):
        _scan(s, ind, out)
    elif isinstance(s, Flip):
        t = "tx" if s.lo == 0 else f"(tx - {s.lo})"
        cond = f"tx < {s.n}" if s.lo == 0 else f"tx >= {s.lo} and tx < {s.lo + s.n}"
        if s.let:
            out.append(f"{ind}in_{s.buf} = {cond}")
            cond = f"in_{s.buf}"
        out += [f"{ind}if {cond}:", f"{ind}    {s.buf}[{t}] = {s.x}[{t}]",
                f"{ind}    {s.y}[by, bx * {s.n} + {t}] = {s.buf}[{s.n - 1} - {t}]"]
    else:
        raise ValueError(f"unknown statement {s!r}")


def _scan(s: Scan, ind: str, out: list) -> None:
    t = "tx" if s.lo == 0 else f"(tx - {s.lo})"
    cond = f"tx < {s.n}" if s.lo == 0 else f"tx >= {s.lo} and tx < {s.lo + s.n}"
    sync = [f"T.sync_threads({s.bar}, {s.n})" if s.bar > 0 else "T.sync_threads()"] if s.bar >= 0 else []
    rounds = s.n.bit_length() - 1
    i2, i3 = ind + "    ", ind + "        "
    out += [f"{ind}if {cond}:", f"{i2}for r in T.serial({rounds}):"] + [i3 + x for x in sync] + [
            f"{i3}if {t} >= (1 << r):", f"{i3}    {s.var}[0] = {s.buf}[{t}] + {s.buf}[{t} - (1 << r)]"] + [
            i3 + x for x in sync] + [f"{i3}if {t} >= (1 << r):", f"{i3}    {s.buf}[{t}] = {s.var}[0]"]


def _trip(ext) -> str:
    dim, block = ext
    return str(dim) if block == 1 else f"T.ceildiv({dim}, {block})"


def _body(body, prog, ind, out):
    if not body:
        out.append(f"{ind}pass")
    for s in body:
        _stmt(s, prog, ind, out)


def _shape(shape) -> str:
    inner = ", ".join(str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def _kernel(k, prog: Program, out: list) -> None:
    grid = ", ".join(_trip(g) for g in k.grid)
    names = ("bx", "by", "bz")[:len(k.grid)]
    bound = names[0] if len(names) == 1 else f"({', '.join(names)})"
    out.append(f"    with T.Kernel({grid}, threads={k.threads}) as {bound}:")
    ind = " " * 8
    if k.uses_tx:
        out.append(f"{ind}tx = T.get_thread_binding()")
    for a in k.allocs:
        if a.view_of is not None:
            out.append(f'{ind}{a.name} = T.reshape({a.view_of}, {_shape(a.shape)})')
        elif a.scope == "var":
            init = "" if a.init is None else f", init={a.init!r}"
            out.append(f'{ind}{a.name} = T.alloc_var("{a.dtype}"{init})')
        else:
            fn = {"shared": "alloc_shared", "fragment": "alloc_fragment", "local": "alloc_local"}[a.scope]
            out.append(f'{ind}{a.name} = T.{fn}({_shape(a.shape)}, "{a.dtype}")')
    _body(k.body, prog, ind, out)


def to_source(prog: Program, full_opt: bool = False, host_cuda: bool = False) -> str:
    """The whole runnable file for `prog`; full_opt: the run that found it compiled at NVRTC's
    full optimisation (a failure may need it), so its replay does too; host_cuda: it failed on
    the host execution of its CUDA source (--host-cuda), which the replay then runs."""
    out = [f"# TileLang fuzz program: seed={prog.seed} family={prog.family}",
           "import tilelang", "import tilelang.language as T", ""]
    for name, v in prog.consts.items():
        out.append(f"{name} = {v}")
    for name in prog.dims:
        out.append(f'{name} = T.dynamic("{name}")')
    if prog.pass_configs:
        out.append(f"PASS_CONFIGS = {prog.pass_configs!r}  # tilelang.compile(main, pass_configs=PASS_CONFIGS)")
    out += ["", "", "@T.prim_func"]
    params = ", ".join(f'{t.name}: T.Tensor({_shape(t.shape)}, "{t.dtype}")' for t in prog.tensors)
    out.append(f"def main({params}):")
    for w in prog.workspaces:
        out.append(f'    {w.name} = T.alloc_global({_shape(w.shape)}, "{w.dtype}")')
    for k in prog.launches():
        _kernel(k, prog, out)
    out += ["", "", f"DESC = {to_json(prog)!r}", ""]
    if full_opt:
        out += ["FULL_OPT = True  # compile at NVRTC's full optimisation, as the failing run did", ""]
    if host_cuda:
        out += ["HOST_CUDA = True  # also run the CUDA source on the host (--host-cuda), as the failing run did", ""]
    out += [
            'if __name__ == "__main__":',
            "    from tilelang.testing.fuzz import replay_file",
            "    replay_file(__file__)", ""]
    return "\n".join(out)

