"""@T.prim_func bodies that declare their own signature: unannotated parameters declared by
`A: T.Tensor(...)` statements, outputs made with T.empty and returned (PrimFunc attr
`tilelang_out_idx`), and the function-level attrs (`func.attrs` is a mapping).
CPU target; results checked against float64 torch on fresh random inputs."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLSyntaxError, DSLTypeError

R, C = 24, 20


@T.prim_func
def scale_shift(A, s: T.float32):
    A: T.Tensor[[R, C], T.float32]
    B = T.empty([R, C], T.float32)
    with T.Kernel(R, threads=32) as bx:
        for j in T.Parallel(C):
            B[bx, j] = A[bx, j] * s + 1.0
    return B


@T.prim_func
def two_outputs(X, Y):
    T.annotate_pass_configs({"tl.disable_warp_specialized": True})
    T.annotate_compile_flags("-O1")
    X: T.Tensor[[R, C], T.float32]
    Y: T.Tensor[[C], T.float32]
    S = T.empty([R, C], T.float32)   # param 2
    P = T.empty([R], T.float32)      # param 3
    with T.Kernel(R, threads=32) as bx:
        for j in T.Parallel(C):
            S[bx, j] = X[bx, j] + Y[j]
        acc = T.alloc_local((1,), T.float32)
        acc[0] = 0.0
        for j in T.serial(C):
            acc[0] += X[bx, j] * Y[j]
        P[bx] = acc[0]
    return P, S                      # return order, not T.empty order


@T.prim_func
def no_outputs(A, B):
    A: T.Tensor[[R, C], T.float32]
    B: T.Tensor[[R, C], T.float32]
    with T.Kernel(R, threads=32) as bx:
        for j in T.Parallel(C):
            B[bx, j] = A[bx, j] - 2.0


@T.prim_func
def fp4_pack(A, n: T.int32):
    A: T.Tensor[[4, n * 2], T.float32]
    Q = T.empty((4, n * 2), T.float4_e2m1fn)
    with T.Kernel(4, threads=1) as bx:
        for j in T.serial(n * 2):
            Q[bx, j] = T.cast(A[bx, j], T.float4_e2m1fn)
    return Q


@T.prim_func
def fp4_unpack(Q, n: T.int32):
    Q: T.Tensor[[4, n * 2], T.float4_e2m1fn]
    F = T.empty((4, n * 2), T.float32)
    with T.Kernel(4, threads=1) as bx:
        for j in T.serial(n * 2):
            F[bx, j] = T.cast(Q[bx, j], T.float32)
    return F


def test_body_declared_params_and_returned_output():
    assert list(scale_shift.attrs["tilelang_out_idx"]) == [-1]
    assert [p.name for p in scale_shift.params] == ["A", "s", "B"]
    k = tilelang.compile(scale_shift, target="cpu")
    a = torch.randn(R, C)
    b = k(a, 0.75)
    torch.testing.assert_close(b.double(), a.double() * 0.75 + 1.0, rtol=1e-6, atol=1e-6)


def test_outputs_come_back_in_return_order_with_function_attrs():
    attrs = two_outputs.attrs
    assert list(attrs["tilelang_out_idx"]) == [-1, -2]
    assert dict(attrs["tilelang_pass_configs"]) == {"tl.disable_warp_specialized": True}
    assert list(attrs["tilelang_compile_flags"]) == ["-O1"]
    k = tilelang.compile(two_outputs, target="cpu")
    x, y = torch.randn(R, C), torch.randn(C)
    p, s = k(x, y)
    torch.testing.assert_close(s.double(), x.double() + y.double(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(p.double(), x.double() @ y.double(), rtol=1e-5, atol=1e-5)


def test_body_declarations_with_explicit_out_idx():
    assert "tilelang_out_idx" not in no_outputs.attrs
    k = tilelang.compile(no_outputs, out_idx=[-1], target="cpu")
    a = torch.randn(R, C)
    torch.testing.assert_close(k(a).double(), a.double() - 2.0)


def test_out_idx_conflicts_with_returned_outputs():
    with pytest.raises(ValueError, match="Out index conflict"):
        tilelang.compile(scale_shift, out_idx=[-1], target="cpu")


def test_packed_fp4_output_has_torch_storage_shape():
    n = 5
    pack = tilelang.compile(fp4_pack, target="cpu")
    unpack = tilelang.compile(fp4_unpack, target="cpu")
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.5, -1.0, -2.0, -6.0])
    a = grid[torch.randint(len(grid), (4, 2 * n))]
    q = pack(a, n)
    assert q.dtype == tilelang.language.float4_e2m1fn.as_torch() and tuple(q.shape) == (4, n)
    back = unpack(q, n)
    assert tuple(back.shape) == (4, 2 * n)
    torch.testing.assert_close(back.double(), a.double())


def test_attrs_mapping_and_buffer_map():
    assert scale_shift.attrs.get("missing") is None and len(scale_shift.attrs) >= 1
    bm = scale_shift.buffer_map
    assert {p.name for p in bm} == {"A", "B"} and all(bm[p] is p for p in bm)


def test_unreturned_empty_is_an_error(tmp_path):
    src = tmp_path / "k_unreturned.py"
    src.write_text(
        "import tilelang.language as T\n"
        "@T.prim_func\n"
        "def k(A):\n"
        "    A: T.Tensor[[8], T.float32]\n"
        "    B = T.empty([8], T.float32)\n"
        "    with T.Kernel(1, threads=8):\n"
        "        for i in T.Parallel(8):\n"
        "            B[i] = A[i]\n")
    with pytest.raises(DSLSyntaxError, match="not returned"):
        _load(src)


def test_undeclared_parameter_points_at_it(tmp_path):
    src = tmp_path / "k_undeclared.py"
    src.write_text(
        "import tilelang.language as T\n"
        "@T.prim_func\n"
        "def k(A, B):\n"
        "    A: T.Tensor[[8], T.float32]\n"
        "    with T.Kernel(1, threads=8):\n"
        "        for i in T.Parallel(8):\n"
        "            A[i] = 1.0\n")
    with pytest.raises(DSLTypeError, match="parameter 'B' needs an annotation") as e:
        _load(src)
    assert e.value.span is not None and e.value.span.line == 3


def test_const_is_eager_only(tmp_path):
    src = tmp_path / "k_const.py"
    src.write_text(
        "import tilelang.language as T\n"
        "@T.prim_func\n"
        "def k(A):\n"
        "    n = T.const('n')\n"
        "    A: T.Tensor[[n], T.float32]\n"
        "    with T.Kernel(1, threads=8):\n"
        "        A[0] = 1.0\n")
    with pytest.raises(DSLSyntaxError, match="eager-mode"):
        _load(src)


def _load(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
