"""TVMScript-style statements (language/tir/) on the CPU backend against float64 references: T.handle
parameters bound by T.match_buffer, T.If/Then/Else, T.While, T.Assert, T.bind/let/var, T.meta_var,
buffers declared in the body, function attributes, calls."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError


def tvm_style_gemm(M, N, K, bM=32, bN=32, bK=16, dtype="float32", accum="float32"):
    """An older TileLang program: parameters are T.handle, the buffers come from T.match_buffer."""
    @T.prim_func
    def main(a: T.handle, b: T.handle, c: T.handle):
        A = T.match_buffer(a, (M, K), dtype)
        B = T.match_buffer(b, [N, K], dtype=dtype)
        C = T.match_buffer(c, (M, N), dtype)
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), dtype)
            B_s = T.alloc_shared((bN, bK), dtype)
            C_l = T.alloc_fragment((bM, bN), accum)
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, ko * bK], A_s)
                T.copy(B[bx * bN, ko * bK], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bM, bx * bN])
    return main


def test_match_buffer_gemm_end_to_end():
    M, N, K = 96, 64, 48
    func = tvm_style_gemm(M, N, K)
    assert [p.name for p in func.params] == ["A", "B", "C"]
    kern = tilelang.compile(func, target="cpu")
    a, b = torch.randn(M, K), torch.randn(N, K)
    c = torch.full((M, N), float("nan"))
    kern(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double().T, rtol=1e-4, atol=1e-4)


def elementwise():
    @T.prim_func
    def main(a: T.handle, b: T.handle):
        T.func_attr({"global_symbol": "tvm_style_ew", "tir.noalias": True})
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            S = T.decl_buffer((32,), "float32", scope="shared")
            for t in T.Parallel(32):
                i = T.bind(bx * 32 + t)
                with T.If(i < n):
                    with T.Then():
                        S[t] = A[i]
                    with T.Else():
                        S[t] = 0.0
            T.tvm_storage_sync("shared")
            for t in T.Parallel(32):
                j = T.meta_var(bx * 32 + t)
                with T.If(j < n):
                    with T.Then():
                        acc = T.alloc_var("float32")
                        acc = 0.0
                        cnt = T.alloc_var("int32")
                        cnt = 0
                        with T.While(cnt < 3):
                            acc = acc + T.max(S[t], 0.0)
                            cnt = cnt + 1
                        B[j] = T.Select(S[t] > 0, acc, T.exp(S[t]))
    return main


@pytest.mark.parametrize("n", [100, 37, 64])
def test_dynamic_match_buffer_with_if_while_and_sync(n):
    func = elementwise()
    assert func.name == "tvm_style_ew" and func.attrs["tir.noalias"] is True
    kern = tilelang.compile(func, target="cpu")
    a = torch.randn(n)
    b = torch.full((n,), float("nan"))
    kern(a, b)
    ad = a.double()
    torch.testing.assert_close(b.double(), torch.where(ad > 0, 3 * ad, ad.exp()), rtol=1e-5, atol=1e-6)
    assert "tvm_style_ew" in kern.get_kernel_source()


def test_assert_frame_passes_and_fails_at_run_time():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(16):
                with T.Assert(A[i] < 100.0, ["A must be ", "below 100"]):
                    B[i] = A[i] * 2.0

    kern = tilelang.compile(main, target="cpu")
    a = torch.randn(16)
    b = torch.full((16,), float("nan"))
    kern(a, b)
    torch.testing.assert_close(b.double(), a.double() * 2, rtol=0, atol=0)
    a[5] = 1000.0
    with pytest.raises(RuntimeError, match="A must be below 100"):
        kern(a, b)


def test_let_bind_var_and_scalar_dtypes_as_functions():
    @T.prim_func
    def main(X: T.Tensor((32,), "float32"), O: T.Tensor((4, 32), "float32")):
        T.func_name("lets")
        T.func_ret(T.void())
        with T.Kernel(1, threads=1):
            for i in T.serial(32):
                v = T.var("float32")
                sq = T.let(v, X[i] * X[i])                      # a let statement; returns v
                O[0, i] = sq + T.let(T.var("float32"), 1.0, 2.0)  # with a body: that expression
                w = T.bind(X[i] + 1.0, "float64")
                O[1, i] = T.Cast("float32", w * w)
                u = T.var("float32")
                O[2, i] = T.Let(u * 3.0 - u, where={u: X[i]})
                O[3, i] = T.Select(T.boolean(X[i] > 0.0), T.float32(1), T.float32(-1))

    assert main.name == "lets"
    kern = tilelang.compile(main, target="cpu")
    x = torch.randn(32)
    out = torch.full((4, 32), float("nan"))
    kern(x, out)
    xd = x.double()
    torch.testing.assert_close(out[0].double(), xd * xd + 2, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out[1].double(), (xd + 1) ** 2, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out[2].double(), 2 * xd, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out[3].double(), torch.where(xd > 0, 1.0, -1.0).double(), rtol=0, atol=0)
    assert T.dtype(T.handle) == "handle" and T.dtype(T.boolean) == "bool"


class _Accumulator:
    def __init__(self, buf):
        self.buf = buf

    @T.inline
    def add(self, i, v):
        self.buf[i] = self.buf[i] + v


def test_buffers_calls_and_inline_methods():
    @T.prim_func
    def main(A: T.Tensor((24,), "int32"), O: T.Tensor((24,), "int32"), L: T.Tensor((1,), "int32")):
        T.import_source("static void tl_bump(int* p, int by) { *p += by; }\n"
                        "static int tl_len(const char* s) { int n = 0; while (s[n]) ++n; return n; }")
        with T.Kernel(1, threads=1):
            tmp = T.allocate((24,), "int32", "local")
            for i in T.serial(24):
                T.buffer_store(tmp, A[i] * 2, [i])
                p = T.address_of(tmp[i])
                T.call_extern("handle", "tl_bump", p, 5)
                acc = _Accumulator(tmp)
                acc.add(i, T.likely(i) + 100)
                O[i] = tmp[i]
            L[0] = T.call_pure_extern("int32", "tl_len", T.StringImm("hello"))

    kern = tilelang.compile(main, target="cpu")
    a = torch.randint(-1000, 1000, (24,), dtype=torch.int32)
    o = torch.full((24,), -7, dtype=torch.int32)
    ln = torch.zeros(1, dtype=torch.int32)
    kern(a, o, ln)
    assert o.tolist() == [2 * x + 5 + i + 100 for i, x in enumerate(a.tolist())]
    assert ln.tolist() == [5]


@pytest.mark.parametrize("snippet,msg", [
    ("def f(a: T.handle, b: T.handle):\n    A = T.match_buffer(a, (4,), 'float32')",
     "'b' is a T.handle that no T.match_buffer binds"),
    ("def f(a: T.handle):\n    A = T.match_buffer(a, (4,), 'float32')\n    A2 = T.match_buffer(a, (4,), 'float32')",
     "already bound"),
    ("def f(a: T.handle):\n    A = T.match_buffer(a, (4,), 'float32', elem_offset=3)", "elem_offset"),
    ("def f(A: T.Tensor((4,), 'float32')):\n    with T.Kernel(1, threads=1):\n        with T.Then():\n"
     "            A[0] = 1.0",
     r"T.Then\(\) must be directly inside"),
    ("def f(A: T.Tensor((4,), 'float32')):\n    with T.Kernel(1, threads=1) as bx:\n        with T.If(bx == 0):\n"
     "            A[0] = 1.0", "only `with T.Then"),
    ("def f(A: T.Tensor((4,), 'float32')):\n    with T.Kernel(1, threads=1) as bx:\n        with T.If(bx == 0):\n"
     "            with T.Else():\n                A[0] = 1.0", "after `with T.Then"),
    ("def f(A: T.Tensor((4,), 'float32')):\n    with T.Kernel(1, threads=1):\n        T.ret(1)",
     "cannot return a value"),
    ("def f(A: T.Tensor((4,), 'float32')):\n    T.func_ret(T.int32)", "returns nothing"),
    ("def f(A: T.Tensor((4,), 'float32')):\n    with T.Kernel(1, threads=1):\n        T.tvm_storage_sync('local')",
     "not supported"),
    ("def f(A: T.Tensor((4,), 'float32')):\n    with T.Kernel(1, threads=1):\n"
     "        A[0] = T.call_intrin('float32', 'tirx.frobnicate', 1.0)", "'tirx.frobnicate' is not supported"),
])
def test_unsupported_forms_are_clear_errors(tmp_path, snippet, msg):
    path = tmp_path / "k.py"
    path.write_text("import tilelang.language as T\n\n" + snippet + "\n")
    ns = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    with pytest.raises(TileLangError, match=msg):
        T.prim_func(ns["f"])
