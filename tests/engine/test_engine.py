"""tilelang.engine: lower() and the C post-processing callback on the CPU backend."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.engine import callback
from tilelang.errors import TileLangError


def make():
    @T.prim_func
    def axpy(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = A[i] * 3.0 + 1.0

    return axpy


@pytest.fixture(autouse=True)
def no_callbacks():
    callback.unregister_postproc("c")
    yield
    callback.unregister_postproc("c")


def test_lower_returns_source_ir_params_and_a_runnable_kernel():
    f = make()
    art = tilelang.lower(f, target="cpu")
    assert art.params == list(f.params) and art.host_mod is None
    assert "axpy" in art.kernel_source and "axpy" in str(art.device_mod)
    a = torch.randn(64)
    b = torch.full((64,), float("nan"))
    art.rt_mod(a, b)
    torch.testing.assert_close(b.double(), a.double() * 3 + 1)
    assert tilelang.lower(f, target="cpu", runtime_only=True).params is None
    assert tilelang.lower({"main": f}, target="cpu").kernel_source == art.kernel_source
    with pytest.raises(TileLangError, match="exactly one"):
        tilelang.lower({}, target="cpu")


def test_c_postproc_edits_what_is_compiled():
    seen = []

    @callback.register_c_postproc_callback()
    def edit(code, target):
        seen.append(target.kind)
        return code.replace("3.0", "5.0").replace("3.000000e+00f", "5.000000e+00f") + "\n/* edited */\n"

    k = tilelang.compile(make(), target="cpu")
    assert seen == ["cpu"] and k.get_kernel_source().endswith("/* edited */\n")
    a = torch.randn(64)
    b = torch.full((64,), float("nan"))
    k(a, b)
    torch.testing.assert_close(b.double(), a.double() * 5 + 1)  # the edited constant was compiled


def test_engine_exports():
    assert tilelang.engine.register_cuda_postproc is callback.register_cuda_postproc
    assert tilelang.register_c_postproc is callback.register_c_postproc
    with pytest.raises(AttributeError):
        tilelang.engine.no_such_thing  # noqa: B018
