"""@tilelang.jit (lazy and eager), tilelang.compile, out_idx, targets, kernel source, IR dumps. CPU target."""
import ast

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.backend.target import Target
from tilelang.errors import TileLangError

calls = []


@tilelang.jit(out_idx=[-1], target="cpu")
def scaled_add(M, N, block=16, alpha=2.0):
    calls.append((M, N, block, alpha))

    @T.prim_func
    def scaled_add_k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
                     C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            for i, j in T.Parallel(block, N):
                if bx * block + i < M:
                    C[bx * block + i, j] = A[bx * block + i, j] * alpha + B[bx * block + i, j]
    return scaled_add_k


def split_prim(M):
    """A kernel with one input and two outputs: B = 2A, C = A + 1."""
    @T.prim_func
    def split_k(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32"), C: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < M:
                    B[bx * 32 + i] = A[bx * 32 + i] * 2.0
                    C[bx * 32 + i] = A[bx * 32 + i] + 1.0
    return split_k


def test_lazy_kernel_is_compiled_once_per_argument_tuple():
    calls.clear()
    k1 = scaled_add(40, 24)
    assert scaled_add(40, 24) is k1
    assert scaled_add(40, 24, 16) is k1            # defaults filled in: the same specialization
    assert scaled_add(M=40, N=24, alpha=2.0) is k1
    k2 = scaled_add(40, 24, alpha=3.0)
    k3 = scaled_add(40, 24, block=8)
    assert len({id(k1), id(k2), id(k3)}) == 3
    assert scaled_add(40, 24, alpha=3) is not k2   # int 3 and float 3.0 are different arguments
    assert calls == [(40, 24, 16, 2.0), (40, 24, 16, 3.0), (40, 24, 8, 2.0), (40, 24, 16, 3)]
    a, b = torch.randn(40, 24), torch.randn(40, 24)
    torch.testing.assert_close(k1(a, b), a * 2 + b)
    torch.testing.assert_close(k2(a, b), a * 3 + b)
    torch.testing.assert_close(k3(a, b), a * 2 + b)


def test_get_tir_returns_the_prim_func_without_compiling():
    f = scaled_add.get_tir(8, 8)
    assert isinstance(f, T.PrimFunc) and f.name == "scaled_add_k"


@tilelang.jit(target="cpu")
def eager_axpy(X, Y, alpha: float = 1.0, block: int = 16):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), "float32")
    Y: T.Tensor((M, N), "float32")
    Z = T.empty((M, N), "float32")
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        for i, j in T.Parallel(block, N):
            if bx * block + i < M:
                Z[bx * block + i, j] = X[bx * block + i, j] * alpha + Y[bx * block + i, j]
    return Z


def test_eager_direct_call_specializes_per_shape():
    x, y = torch.randn(37, 5), torch.randn(37, 5)
    torch.testing.assert_close(eager_axpy(x, y, 0.5), x * 0.5 + y)
    x2, y2 = torch.randn(20, 3), torch.randn(20, 3)
    torch.testing.assert_close(eager_axpy(x2, y2, alpha=2.0), x2 * 2 + y2)
    k = eager_axpy.compile(x, y, 0.5)
    assert k is eager_axpy.compile(x, y, 0.5)   # cached
    assert k is not eager_axpy.compile(x2, y2, 0.5)


def test_eager_compile_with_const_keywords():
    k = eager_axpy.compile(M=37, N=5, alpha=0.5)
    assert k.out_idx == [2]
    assert [tuple(p.shape) for p in k.params] == [(37, 5)] * 3
    x, y = torch.randn(37, 5), torch.randn(37, 5)
    torch.testing.assert_close(k(x, y), x * 0.5 + y)
    with pytest.raises(TileLangError, match="T.const 'N' has no value"):
        eager_axpy.compile(M=37)


def test_out_idx_single_multiple_and_negative():
    a = torch.randn(70)
    f = split_prim(70)
    both = tilelang.compile(f, out_idx=[1, 2], target="cpu")(a)
    assert isinstance(both, list) and len(both) == 2
    torch.testing.assert_close(both[0], a * 2)
    torch.testing.assert_close(both[1], a + 1)
    both_neg = tilelang.compile(f, out_idx=[-2, -1], target="cpu")(a)
    torch.testing.assert_close(both_neg[1], a + 1)
    last = tilelang.compile(f, out_idx=-1, target="cpu")
    c = torch.full((70,), float("nan"))
    b = torch.full((70,), float("nan"))
    out = last(a, b)
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, a + 1)
    torch.testing.assert_close(b, a * 2)
    assert last(a, b) is not out  # a fresh output per call
    none = tilelang.compile(f, target="cpu")
    assert none(a, b, c) is None
    torch.testing.assert_close(c, a + 1)


def test_bad_out_idx():
    f = split_prim(8)
    with pytest.raises(TileLangError, match="out_idx: 3 is not a parameter index of a kernel with 3 parameters"):
        tilelang.compile(f, out_idx=[3], target="cpu")

    @T.prim_func
    def with_scalar(A: T.Tensor((8,), "float32"), n: T.int32):
        with T.Kernel(1, threads=8) as bx:
            A[0] = n

    with pytest.raises(TileLangError, match="out_idx: parameter 1 \\(n\\) is a scalar"):
        tilelang.compile(with_scalar, out_idx=[1], target="cpu")
    with pytest.raises(TileLangError, match="expected a @T.prim_func, got int"):
        tilelang.compile(3, target="cpu")


def test_compile_targets_and_default_target_env(monkeypatch):
    f = split_prim(8)
    assert tilelang.compile(f, target="cpu").target == Target("cpu")
    assert tilelang.compile(f, target="c").target == Target("cpu")
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "cpu")
    assert tilelang.compile(f).target == Target("cpu")
    assert tilelang.compile(f, target="auto").target == Target("cpu")
    with pytest.raises(TileLangError, match="unknown target 'tpu'"):
        tilelang.compile(f, target="tpu")


def test_default_target_env_selects_cuda_compile_only(monkeypatch):
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC wheel not installed")
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "cuda -arch=sm_80")
    k = scaled_add.__wrapped__ if hasattr(scaled_add, "__wrapped__") else None
    kernel = tilelang.compile(split_prim(64))
    assert kernel.target == Target("cuda", "sm_80")
    assert "__global__" in kernel.get_kernel_source()
    del k


def test_auto_target_without_a_gpu_is_cpu(monkeypatch):
    if tilelang.testing.cuda_available():
        pytest.skip("a GPU is present: auto picks cuda")
    monkeypatch.delenv("TILELANG_DEFAULT_TARGET", raising=False)
    assert tilelang.compile(split_prim(8)).target == Target("cpu")


def test_kernel_source_is_c():
    k = scaled_add(40, 24)
    src = k.get_kernel_source()
    assert src.startswith("#include")
    assert "scaled_add_k(" in src and "#pragma omp" in src
    ast_free = "@T.prim_func" not in src
    assert ast_free


def test_dump_ir_writes_one_file_per_pass(monkeypatch, tmp_path):
    from tilelang.backend.cpu.pipeline import PASSES

    monkeypatch.setenv("TL_DUMP_IR", str(tmp_path))
    tilelang.compile(split_prim(40), target="cpu")
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["split_k.00_input.py"] + [f"split_k.{i:02d}_{n}.py" for i, (n, _) in enumerate(PASSES, 1)]
    for p in tmp_path.iterdir():
        text = p.read_text()
        ast.parse(text)  # readable TileLang-like Python
        assert text.startswith("@T.prim_func\ndef split_k(")
    assert "T.Parallel" in (tmp_path / "split_k.00_input.py").read_text()


def test_no_dump_without_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("TL_DUMP_IR", raising=False)
    monkeypatch.chdir(tmp_path)
    tilelang.compile(split_prim(24), target="cpu")
    assert list(tmp_path.iterdir()) == []


def test_jit_decorator_forms():
    @tilelang.jit
    def plain(M):
        return split_prim(M)

    @tilelang.jit(out_idx=[1, 2], target="cpu")
    def configured(M):
        return split_prim(M)

    a = torch.randn(10)
    b, c = configured(10)(a)
    torch.testing.assert_close(b, a * 2)
    assert plain.__name__ == "plain" and plain(10).out_idx == []


def test_lazy_or_eager_is_read_from_the_body():
    from tilelang.jit.eager import is_eager

    def helper_factory(M):
        scratch = torch.empty(M)  # torch.empty is not T.empty
        del scratch
        return split_prim(M)

    def nested_factory(M):
        @T.prim_func
        def k(A: T.Tensor((M,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                A[0] = 1.0
        return k

    assert not is_eager(helper_factory)
    assert not is_eager(nested_factory)
    assert is_eager(eager_axpy.fn)
