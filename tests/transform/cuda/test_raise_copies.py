"""raise_copies: element-copy loops global -> shared inside T.Pipelined become T.copy, so the cp.async
pipeline stages them (gemm_intrinsics loads its tiles this way); other loops stay loops. The generated
CUDA runs on the host (tilelang/testing/host_cuda) against float64."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def rowsum(offset_cols=0, transposed=False):
    @T.prim_func
    def k(A: T.Tensor((128, 512 + offset_cols), "float32"), O: T.Tensor((128, 32), "float32")):
        with T.Kernel(2, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float32")
            acc = T.alloc_fragment((64, 32), "float32")
            T.clear(acc)
            for ko in T.Pipelined(16, num_stages=3):
                for i, j in T.Parallel(64, 32):
                    if transposed:
                        A_s[i, j] = A[bx * 64 + j, ko * 32 + i + offset_cols]
                    else:
                        A_s[i, j] = A[bx * 64 + i, ko * 32 + j + offset_cols]
                for i, j in T.Parallel(64, 32):
                    acc[i, j] += A_s[i, j] * (ko + 1)
            T.copy(acc, O[bx * 64, 0])

    return k


def _src(fn):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(fn, target="cuda -arch=sm_80")
    return kern, kern.get_kernel_source(), [str(w.message) for w in got]


def _ref(a, offset_cols):
    w = torch.arange(1, 17, dtype=torch.float64).repeat_interleave(32)
    cols = a.double()[:, offset_cols:offset_cols + 512] * w
    return cols.reshape(128, 16, 32).sum(1)


@pytest.mark.parametrize("offset_cols", [0, 4])
def test_element_copy_loop_is_staged_and_runs_right_on_host(offset_cols):
    kern, src, msgs = _src(rowsum(offset_cols))
    assert "cp_async_zfill" in src and "cp_async_wait<1>" in src, src
    assert not any("runs unpipelined" in m for m in msgs), msgs
    from tilelang.testing import host_cuda as host
    if not host.available():
        pytest.skip("g++ not installed")
    a = torch.randn(128, 512 + offset_cols)
    o = torch.full((128, 32), float("nan"))
    host.HostProgram({"k": kern}).run("k", [a, o])
    torch.testing.assert_close(o.double(), _ref(a, offset_cols), rtol=1e-5, atol=1e-4)


def test_transposed_element_loop_stays_a_loop():
    _, src, msgs = _src(rowsum(transposed=True))
    assert "cp_async" not in src
    assert any("runs unpipelined" in m for m in msgs), msgs


def test_cpu_result_unchanged():
    kern = tilelang.compile(rowsum(4), target="cpu")
    a = torch.randn(128, 516)
    o = torch.full((128, 32), float("nan"))
    kern(a, o)
    torch.testing.assert_close(o.double(), _ref(a, 4), rtol=1e-5, atol=1e-4)
