"""`p: T.ptr` parameters: an address passed as a torch.Tensor (its data_ptr()) or an int, viewed
as a tensor with T.make_tensor before (or inside) `with T.Kernel`; in @T.prim_func and in eager
@tilelang.jit. CPU target; results checked against float64 torch on fresh random inputs."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError

M, N = 20, 12


@T.prim_func
def scaled_sum(a_ptr: T.ptr, b_ptr: T.ptr, c_ptr: T.ptr, m: T.int32, alpha: T.float32):
    A = T.make_tensor(a_ptr, (m, N), T.float32)
    Bv = T.make_tensor(b_ptr, (N,), T.float32)
    C = T.make_tensor(c_ptr, (m, N), T.float32)
    with T.Kernel(T.ceildiv(m, 4), threads=16) as bx:
        for i, j in T.Parallel(4, N):
            if bx * 4 + i < m:
                C[bx * 4 + i, j] = A[bx * 4 + i, j] * alpha + Bv[j]


@tilelang.jit(target="cpu")
def rowsum_ptr(X: T.ptr, Y: T.ptr, rows: int, cols: int, dtype: T.dtype, block: int = 4):
    Xt = T.make_tensor(X, (rows, cols), dtype)
    Yt = T.make_tensor(Y, (rows,), T.float32)
    with T.Kernel(T.ceildiv(rows, block), threads=block) as bx:
        for i in T.Parallel(block):
            if bx * block + i < rows:
                acc = T.alloc_var(T.float32, init=0.0)
                for j in T.serial(cols):
                    acc += T.cast(Xt[bx * block + i, j], T.float32)
                Yt[bx * block + i] = acc


def _ref(a, b, alpha):
    return a.double() * alpha + b.double()


def test_prim_func_pointer_params_take_tensors_and_addresses():
    assert scaled_sum.attrs["tl.pointer_params"] == ("a_ptr", "b_ptr", "c_ptr")
    k = tilelang.compile(scaled_sum, target="cpu")
    a, b = torch.randn(M, N), torch.randn(N)
    c = torch.full((M, N), float("nan"))
    k(a, b, c, M, 1.5)
    torch.testing.assert_close(c.double(), _ref(a, b, 1.5), rtol=1e-6, atol=1e-6)
    c2 = torch.full((M, N), float("nan"))
    k(a.data_ptr(), b.data_ptr(), c2.data_ptr(), M, -0.25)
    torch.testing.assert_close(c2.double(), _ref(a, b, -0.25), rtol=1e-6, atol=1e-6)


def test_pointer_argument_is_checked():
    k = tilelang.compile(scaled_sum, target="cpu")
    a, b, c = torch.randn(M, N), torch.randn(N), torch.full((M, N), float("nan"))
    with pytest.raises(TypeError, match="expected a pointer"):
        k(a, b, "c", M, 1.0)
    with pytest.raises(TypeError, match="expected a pointer"):
        k(a, b, 1.5, M, 1.0)
    with pytest.raises(ValueError, match="a pointer to a tensor on meta"):
        k(a, b, torch.empty(M, N, device="meta"), M, 1.0)
    assert c.isnan().all()


@pytest.mark.parametrize("dtype", [T.float16, torch.float32])
def test_eager_pointer_params(dtype):
    tdt = dtype.as_torch() if isinstance(dtype, T.dtype) else dtype
    rows, cols = 10, 7
    x = torch.randn(rows, cols).to(tdt)
    y = torch.full((rows,), float("nan"))
    rowsum_ptr(x, y, rows, cols, dtype)
    torch.testing.assert_close(y.double(), x.double().sum(1), rtol=1e-5, atol=1e-5)


def test_eager_pointer_params_compile_only():
    k = rowsum_ptr.compile(X=T.ptr(), Y=T.ptr(), rows=6, cols=3, dtype=T.float32)
    x = torch.randn(6, 3)
    y = torch.full((6,), float("nan"))
    k(x, y)
    torch.testing.assert_close(y.double(), x.double().sum(1), rtol=1e-6, atol=1e-6)
    assert repr(T.ptr()) == "T.ptr()"


def test_pointer_variable_in_a_body_is_an_error(tmp_path):
    src = tmp_path / "k_ptr_var.py"
    src.write_text(
        "import tilelang.language as T\n"
        "@T.prim_func\n"
        "def k(A: T.Tensor((8,), T.float32)):\n"
        "    p = T.ptr()\n"
        "    with T.Kernel(1, threads=8):\n"
        "        A[0] = 1.0\n")
    import importlib.util

    spec = importlib.util.spec_from_file_location(src.stem, src)
    with pytest.raises(DSLTypeError, match="pointer variables inside a kernel body"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_pointer_params_compile_for_sm90():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    src = tilelang.compile(scaled_sum, target="cuda -arch=sm_90a").get_kernel_source()
    assert "int64_t a_ptr, int64_t b_ptr, int64_t c_ptr" in src and "(uintptr_t)(a_ptr)" in src
