"""The IR printer: readable TileLang text, and pre-lowering IR prints text that parses back to itself."""
import importlib.util
import textwrap

import tilelang
import tilelang.language as T
from tilelang.ir import expr as E
from tilelang.ir.buffer import Buffer, BufferRegion
from tilelang.ir.printer import expr_str, region_str


def gemm(M, N, K, bM, bN, bK, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_shared = T.alloc_shared((bM, bK), dtype)
            B_shared = T.alloc_shared((bK, bN), dtype)
            C_local = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=3):
                T.copy(A[by * bM, ko * bK], A_shared)
                T.copy(B[ko * bK, bx * bN], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(bM, bN):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * bM, bx * bN])

    return main


def softmax_like(M, N, bM):
    @T.prim_func
    def rows(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"), scale: T.float32):
        with T.Kernel(T.ceildiv(M, bM), threads=(32, 4)) as bx:
            x = T.alloc_fragment((bM, N), "float32")
            mx = T.alloc_fragment((bM,), "float32")
            acc = T.alloc_var("float32", init=0)
            T.copy(X[bx * bM:bx * bM + bM, 0:N], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bM, N):
                row = bx * bM + i
                if row < M:
                    Y[row, j] = T.exp(x[i, j] - mx[i]) * scale
            acc = acc + 1

    return rows


def test_gemm_prints_as_tilelang():
    want = textwrap.dedent("""\
        @T.prim_func
        def main(A: T.Tensor((256, 128), 'float16'), B: T.Tensor((128, 192), 'float16'), C: T.Tensor((256, 192), 'float16')):
            with T.Kernel(3, 4, threads=128) as (bx, by):
                A_shared = T.alloc_shared((64, 32), 'float16')
                B_shared = T.alloc_shared((32, 64), 'float16')
                C_local = T.alloc_fragment((64, 64), 'float32')
                T.fill(C_local, 0.0)
                for ko in T.Pipelined(4, num_stages=3):
                    T.copy(A[by * 64:by * 64 + 64, ko * 32:ko * 32 + 32], A_shared)
                    T.copy(B[ko * 32:ko * 32 + 32, bx * 64:bx * 64 + 64], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                for i in T.Parallel(64):
                    for j in T.Parallel(64):
                        C_local[i, j] = T.max(C_local[i, j], 0.0)
                T.copy(C_local, C[by * 64:by * 64 + 64, bx * 64:bx * 64 + 64])""")
    assert str(gemm(256, 192, 128, 64, 64, 32)) == want


def test_reduce_let_var_and_threads_print_readably():
    text = str(softmax_like(100, 64, 16))
    assert "with T.Kernel(7, threads=(32, 4)) as bx:" in text
    assert "acc = T.alloc_var('float32', init=0.0)" in text
    assert "T.reduce_max(x, mx, 1)" in text
    assert "row = bx * 16 + i" in text  # a LetStmt prints as a plain assignment
    assert "scale: T.float32" in text


def test_expression_precedence_and_regions():
    i, j = E.Var("i"), E.Var("j")
    assert expr_str((i + j) * 2) == "(i + j) * 2"
    assert expr_str(i + j * 2) == "i + j * 2"
    assert expr_str(i - (j - 1)) == "i - (j - 1)"
    buf = Buffer("A", (64, 32), "float32", "shared.dyn")
    assert region_str(buf.region()) == "A"
    assert region_str(BufferRegion(buf, ((E.as_expr(0), 16), (j, 1)))) == "A[:16, j]"
    assert region_str(BufferRegion(buf, ((i * 16, 16), (E.as_expr(0), 32)))) == "A[i * 16:i * 16 + 16, :32]"


def _reparse(func, tmp_path):
    path = tmp_path / "printed_kernel.py"
    path.write_text("import tilelang.language as T\n\n" + str(func) + "\n")
    spec = importlib.util.spec_from_file_location("printed_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, func.name)


def test_printed_gemm_parses_back_to_the_same_ir(tmp_path):
    f = gemm(300, 260, 200, 128, 128, 32)
    assert str(_reparse(f, tmp_path)) == str(f)


def test_printed_softmax_parses_back_to_the_same_ir(tmp_path):
    f = softmax_like(100, 64, 16)
    assert str(_reparse(f, tmp_path)) == str(f)


def test_printed_kernel_compiles_and_computes_the_same(tmp_path):
    import torch

    f = gemm(96, 64, 64, 32, 32, 32, dtype="float32")
    g = _reparse(f, tmp_path)
    a, b = torch.randn(96, 64), torch.randn(64, 64)
    out = []
    for fn in (f, g):
        c = torch.full((96, 64), float("nan"))
        tilelang.compile(fn, target="cpu")(a, b, c)
        out.append(c)
    assert torch.equal(out[0], out[1])
    torch.testing.assert_close(out[0].double(), torch.relu(a.double() @ b.double()), atol=1e-4, rtol=1e-4)
