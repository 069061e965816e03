"""The IR verifier: it catches each broken invariant, and every pass of each target keeps them."""
import importlib.util
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang import dtypes as dt
from tilelang.backend.target import resolve
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.buffer import Buffer
from tilelang.ir.verifier import IRVerifyError, check, verify
from tilelang.transform.pass_manager import PassContext

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ hand-built IR

def _func(body, params=None):
    A = Buffer("A", (16, 8), "float32")
    return S.PrimFunc("f", tuple(params or (A,)), body), A


def _kernel(body, bx):
    return S.KernelLaunch((bx,), (1,), (32, 1, 1), (), body)


def test_well_formed_ir_has_no_problems():
    A = Buffer("A", (16, 8), "float32")
    s = Buffer("s", (8,), "float32", "shared.dyn")
    bx, i, t = E.Var("bx"), E.Var("i"), E.Var("t")
    body = S.seq(S.Allocate(s), S.LetStmt(t, bx * 2),
                 S.For(i, E.as_expr(0), E.as_expr(8), "serial", S.BufferStore(s, (i,), A[t, i])))
    assert verify(S.PrimFunc("f", (A,), _kernel(body, bx))) == []


def test_store_with_wrong_rank():
    A = Buffer("A", (16, 8), "float32")
    bx = E.Var("bx")
    f, _ = _func(_kernel(S.BufferStore(A, (bx,), E.as_expr(1.0)), bx), (A,))
    assert verify(f) == ["store of 'A' uses 1 indices but the buffer has 2 dims (16, 8)"]


def test_load_with_wrong_rank():
    A = Buffer("A", (16, 8), "float32")
    bx = E.Var("bx")
    bad = E.BufferLoad(A, (bx,), A.dtype)  # built directly: A[bx] itself would refuse
    f, _ = _func(_kernel(S.BufferStore(A, (bx, bx), bad), bx), (A,))
    assert verify(f) == ["load of 'A' uses 1 indices but the buffer has 2 dims (16, 8)"]


def test_variable_used_outside_its_loop():
    A = Buffer("A", (16, 8), "float32")
    bx, i = E.Var("bx"), E.Var("i")
    loop = S.For(i, E.as_expr(0), E.as_expr(8), "serial", S.BufferStore(A, (bx, i), E.as_expr(0.0)))
    after = S.BufferStore(A, (bx, i), E.as_expr(1.0))
    f, _ = _func(_kernel(S.seq(loop, after), bx), (A,))
    assert verify(f) == ["variable 'i' is used where it is not defined"]


def test_let_variable_used_before_its_definition():
    A = Buffer("A", (16, 8), "float32")
    bx, t = E.Var("bx"), E.Var("t")
    body = S.seq(S.BufferStore(A, (t, t), E.as_expr(0.0)), S.LetStmt(t, bx + 1))
    f, _ = _func(_kernel(body, bx), (A,))
    assert verify(f) == ["variable 't' is used where it is not defined"] * 2


def test_buffer_used_outside_the_scope_of_its_allocation():
    A = Buffer("A", (16, 8), "float32")
    s = Buffer("s", (8,), "float32", "shared.dyn")
    bx = E.Var("bx")
    cond = S.IfThenElse(bx < 1, S.seq(S.Allocate(s), S.BufferStore(s, (E.as_expr(0),), E.as_expr(0.0))))
    use = S.BufferStore(A, (bx, E.as_expr(0)), s[0])
    f, _ = _func(_kernel(S.seq(cond, use), bx), (A,))
    assert verify(f) == ["buffer 's' (shared.dyn) is used (load) where it is not allocated"]


def test_float_index_and_tile_op_region_rank():
    from tilelang.ir.buffer import BufferRegion
    from tilelang.op.tile_ops import Fill

    A = Buffer("A", (16, 8), "float32")
    bx = E.Var("bx")
    x = E.Var("x", dt.float32)
    store = S.LetStmt(x, E.as_expr(1.5))
    bad_index = S.BufferStore(A, (bx, x), E.as_expr(0.0))
    bad_region = Fill(BufferRegion(A, ((E.as_expr(0), 16),)), E.as_expr(0.0))
    f, _ = _func(_kernel(S.seq(store, bad_index, bad_region), bx), (A,))
    assert verify(f) == ["store to A: index x has dtype float32; indices and bounds must be integers",
                         "region of 'A' uses 1 indices but the buffer has 2 dims (16, 8)"]


def test_symbolic_dims_and_scalar_params_are_defined():
    m, n = E.Var("m"), E.Var("n")
    A = Buffer("A", (m, 8), "float32")
    bx = E.Var("bx")
    body = S.KernelLaunch((bx,), (m,), (32, 1, 1), (), S.BufferStore(A, (bx, n), E.as_expr(0.0)))
    assert verify(S.PrimFunc("f", (A, n), body)) == []
    assert verify(S.PrimFunc("f", (A,), body)) == ["variable 'n' is used where it is not defined"]


def test_check_raises_with_the_pass_name():
    A = Buffer("A", (16, 8), "float32")
    bx = E.Var("bx")
    f, _ = _func(_kernel(S.BufferStore(A, (bx,), E.as_expr(1.0)), bx), (A,))
    with pytest.raises(IRVerifyError, match="(?s)after pass 'my_pass'.*uses 1 indices"):
        check(f, after="my_pass")


# ------------------------------------------------------------------ every pass keeps the invariants

def _kernels():
    """Frontend IR of kernels covering each tile op, symbolic dims and scalar params."""
    def gemm(M, N, K, bM, bN, bK, tA=False, tB=False):
        a_shape, b_shape = ((K, M) if tA else (M, K)), ((N, K) if tB else (K, N))

        @T.prim_func
        def gemm_k(A: T.Tensor(a_shape, "float16"), B: T.Tensor(b_shape, "float16"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
                A_s = T.alloc_shared((bK, bM) if tA else (bM, bK), "float16")
                B_s = T.alloc_shared((bN, bK) if tB else (bK, bN), "float16")
                C_l = T.alloc_fragment((bM, bN), "float32")
                T.clear(C_l)
                for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                    if tA:
                        T.copy(A[ko * bK, by * bM], A_s)
                    else:
                        T.copy(A[by * bM, ko * bK], A_s)
                    if tB:
                        T.copy(B[bx * bN, ko * bK], B_s)
                    else:
                        T.copy(B[ko * bK, bx * bN], B_s)
                    T.gemm(A_s, B_s, C_l, transpose_A=tA, transpose_B=tB)
                T.copy(C_l, C[by * bM, bx * bN])
        return gemm_k

    m = T.dynamic("m")

    @T.prim_func
    def rowwise(X: T.Tensor((m, 64), "float32"), Y: T.Tensor((m, 64), "float32"), s: T.Tensor((m,), "float32"),
                scale: T.float32):
        with T.Kernel(T.ceildiv(m, 16), threads=128) as bx:
            x = T.alloc_fragment((16, 64), "float32")
            mx = T.alloc_fragment((16,), "float32")
            tot = T.alloc_fragment((16,), "float32")
            cnt = T.alloc_var("int32", init=0)
            T.copy(X[bx * 16, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(16, 64):
                x[i, j] = T.exp(x[i, j] - mx[i]) * scale
            T.reduce_sum(x, tot, dim=1)
            T.cumsum(x, dim=1)
            for k in T.serial(4):
                cnt = cnt + k
            T.copy(x, Y[bx * 16, 0])
            for i in T.Parallel(16):
                if bx * 16 + i < m:
                    T.atomic_add(s[bx * 16 + i], tot[i] + cnt)

    return [gemm(128, 96, 64, 64, 32, 32), gemm(100, 70, 50, 32, 32, 16, tA=True), gemm(64, 64, 64, 32, 32, 32, tB=True),
            rowwise]


def _run_verified(func, passes, target):
    ctx = PassContext(target=resolve(target))
    check(func, after="frontend")
    for name, fn in passes:
        func = fn(func, ctx)
        check(func, after=name)
    return func


@pytest.mark.parametrize("index", range(4))
def test_cpu_passes_keep_the_ir_well_formed(index):
    from tilelang.backend.cpu.pipeline import PASSES

    _run_verified(_kernels()[index], PASSES, "cpu")


@pytest.mark.xfail(strict=True, raises=IRVerifyError,
                   reason="lower_cuda indexes with a `tid` Var it never declares in KernelLaunch.thread_vars "
                          "(codegen emits it implicitly)")
def test_cuda_passes_keep_the_ir_well_formed():
    from tilelang.backend.cuda.pipeline import PASSES

    _run_verified(_kernels()[0], PASSES, "cuda -arch=sm_90a")


def _load_cases():
    path = ROOT / "tests" / "examples" / "test_examples.py"
    spec = importlib.util.spec_from_file_location("tl_example_cases", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_example_is_well_formed_after_every_cpu_pass(monkeypatch):
    """Runs each example (small sizes, CPU) with the verifier after every pass of the CPU pipeline."""
    import tilelang.backend.cpu.pipeline as cpu

    seen = []

    def verified(func, passes, ctx):
        seen.append(func.name)
        check(func, after="frontend")
        for name, fn in passes:
            func = fn(func, ctx)
            check(func, after=name)
        return func

    monkeypatch.setattr(cpu, "run_passes", verified)
    monkeypatch.setenv("TILELANG_KERNEL_CACHE", "0")  # a warm kernel cache would skip the passes
    cases = _load_cases()
    done = set()
    for name, sizes in cases.CASES:
        if name in done:
            continue
        done.add(name)
        assert cases.load(name).main(target="cpu", **sizes), name
    assert len(seen) >= len(done)


def test_verifier_runs_on_a_jit_kernel():
    k = tilelang.compile(_kernels()[0], target="cpu")
    assert verify(k.artifact.lowered) == []
