"""ops/reduce own_lines: a T.reduce of a flat register tile whose every reduced line lies in one
thread's registers (an (S, 128) tile over 128 threads reduced over dim 0: thread t holds column t)
folds in registers, with no shared scratch and no barrier (flash decoding's combine kernel: the
max of each column's split log-sum-exps). Numbers against float64 on the host (host_cuda) and the
CPU backend; a line spread over threads (dim 1) keeps the shared-scratch path."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout.fragment import FlatFragment
from tilelang.transform.cuda.ops.reduce import own_lines

S_, W = 8, 128


def col_reduce(kind, dim, clear=True):
    @T.prim_func
    def col_reduce(X: T.Tensor((S_,), "float16"), Y: T.Tensor((W,), "float16"),
                   O: T.Tensor((W if dim == 0 else S_,), "float32"), P: T.Tensor((W,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((S_, W), "float16")
            o = T.alloc_fragment((W if dim == 0 else S_,), "float32")
            p = T.alloc_fragment((W,), "float32")
            for k, j in T.Parallel(S_, W):
                x[k, j] = X[k] * Y[j]  # the combine kernel's shape: x[k, j] = lse[k], per column
            T.fill(o, 0.5)
            if kind == "max":
                T.reduce_max(x, o, dim=dim, clear=clear)
            elif kind == "sum":
                T.reduce_sum(x, o, dim=dim, clear=clear)
            else:
                T.reduce_absmax(x, o, dim=dim, clear=clear)
            T.copy(o, O)
            T.clear(p)
            for k in T.serial(S_):  # x[k, j] read over j: column j is thread j's (the combine kernel's loop)
                for j in T.Parallel(W):
                    p[j] += x[k, j]
            T.copy(p, P)

    return col_reduce


def reference(xy, kind, dim, clear):
    x = (xy[0][:, None] * xy[1][None, :]).double()  # the product rounded to half, as the kernel does
    r = x.amax(dim) if kind == "max" else x.sum(dim) if kind == "sum" else x.abs().amax(dim)
    if not clear:
        r = torch.maximum(r, torch.tensor(0.5, dtype=torch.float64)) if kind != "sum" else r + 0.5
    return r


def compile_cuda(prog, **configs):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        k = tilelang.compile(prog, target="cuda -arch=sm_90a", pass_configs={c: True for c in configs})
    return k, [str(w.message) for w in got]


@pytest.mark.parametrize("kind,clear", [("max", True), ("sum", True), ("absmax", True), ("sum", False),
                                        ("max", False)])
def test_column_reduce_folds_in_registers_and_runs_right_on_host(kind, clear):
    from tilelang.testing import host_cuda as host
    kern, msgs = compile_cuda(col_reduce(kind, 0, clear))
    src = kern.get_kernel_source()
    assert "x_red" not in src and "__syncthreads" not in src, src
    assert not any("shared-memory copy" in m for m in msgs), msgs
    if not host.available():
        pytest.skip("g++ not installed")
    x = (torch.randn(S_).half(), torch.randn(W).half())
    o, p = torch.full((W,), float("nan")), torch.full((W,), float("nan"))
    host.HostProgram({"k": kern}).run("k", [*x, o, p])
    torch.testing.assert_close(o.double(), reference(x, kind, 0, clear), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(p.double(), reference(x, "sum", 0, True), rtol=1e-5, atol=1e-5)


def test_switch_off_and_row_reduce_keep_the_shared_scratch():
    off, _ = compile_cuda(col_reduce("max", 0), **{"tl.disable_own_line_reduce": 1})
    assert "x_red" in off.get_kernel_source()
    rows, _ = compile_cuda(col_reduce("sum", 1))  # each row's 128 columns lie in 128 threads
    x = (torch.randn(S_).half(), torch.randn(W).half())
    o, p = torch.full((S_,), float("nan")), torch.full((W,), float("nan"))
    tilelang.compile(col_reduce("sum", 1), target="cpu")(*x, o, p)
    torch.testing.assert_close(o.double(), reference(x, "sum", 1, True), rtol=1e-5, atol=1e-4)
    from tilelang.testing import host_cuda as host
    if host.available():
        o.fill_(float("nan"))
        host.HostProgram({"k": rows}).run("k", [*x, o, p])
        torch.testing.assert_close(o.double(), reference(x, "sum", 1, True), rtol=1e-5, atol=1e-4)


def test_own_lines_plan():
    src = FlatFragment((8, 128), 128)
    assert own_lines(src, FlatFragment((128,), 128), 0) == [list(range(8))]
    assert own_lines(src, FlatFragment((8,), 128), 1) is None  # a row over 128 threads
    assert own_lines(FlatFragment((8, 64), 128), FlatFragment((64,), 128), 0) is None  # not exact
    two = own_lines(FlatFragment((4, 256), 128), FlatFragment((256,), 128), 0)
    assert two == [[0, 2, 4, 6], [1, 3, 5, 7]]  # thread t holds columns t and t + 128
