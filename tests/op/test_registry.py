"""op/registry.py: a tile-op family registers a lowering per backend and the passes dispatch on it.

A toy family (AddConst: dst = src + value over a tile) is defined here, not in the package: its
CPU rule runs against a float64 numpy reference, its CUDA rule is compiled with NVRTC, and without
its rules neither backend can lower it."""
import re
from dataclasses import dataclass

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.backend.cuda import nvrtc
from tilelang.errors import LoweringError, Span
from tilelang.frontend import builder as B
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.buffer import BufferRegion
from tilelang.ir.stmt import TileOp
from tilelang.op import registry
from tilelang.op.regions import to_region
from tilelang.transform.lower_tile_ops_cpu import in_bounds, region_indices, serial_loops


@dataclass(frozen=True)
class AddConst(TileOp):
    """dst[region] = src[region] + value (cast to dst's dtype)."""

    src: BufferRegion
    dst: BufferRegion
    value: E.Expr
    span: Span | None = None


@dataclass(frozen=True)
class AddConstTwice(AddConst):
    """A subclass with no rule of its own: it inherits AddConst's."""


def add_const(src, dst, value, op=AddConst):
    s, d = to_region(src, None, "add_const"), to_region(dst, None, "add_const")
    B.current().emit(op(s, d, E.as_expr(value, d.buffer.dtype)))


def _element(op, cv, reg_ref=None):
    si, di = region_indices(op.src, cv), region_indices(op.dst, cv)
    dt = op.dst.buffer.dtype
    v = E.cast(dt, E.BufferLoad(op.src.buffer, si, op.src.buffer.dtype)) + E.cast(dt, op.value)
    if reg_ref is not None:
        return S.BufferStore(reg_ref.buffer, reg_ref.indices, v)
    return S.BufferStore(op.dst.buffer, di, v)


def lower_cpu(low, op):
    return serial_loops([e for e in op.dst.extents], lambda vs: _element(op, vs))


def lower_cuda(low, op):
    assert in_bounds(op.dst, region_indices(op.dst, [E.as_expr(0)] * 2), low.ranges) is True
    return low.elementwise(op.dst, lambda cv, reg_ref: _element(op, cv, reg_ref))


@pytest.fixture
def toy_rules():
    registry.register_lowering("cpu", AddConst)(lower_cpu)
    registry.register_lowering("cuda", AddConst)(lower_cuda)
    yield
    registry.unregister_lowering("cpu", AddConst)
    registry.unregister_lowering("cuda", AddConst)


def kernel(M=64, N=32, value=0.375, op=AddConst):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, N), "float32")
            C_s = T.alloc_shared((M, N), "float32")
            T.copy(A, A_s)
            add_const(A_s, C_s, value, op)
            T.copy(C_s, C)
    return main


def test_lookup_follows_the_mro_and_refuses_a_second_rule(toy_rules):
    op = AddConstTwice(None, None, E.as_expr(1.0))
    assert registry.lowering_rule("cpu", op) is lower_cpu
    assert registry.lowering_rule("cuda", op) is lower_cuda
    assert registry.registered("cuda")[AddConst] is lower_cuda and AddConstTwice not in registry.registered("cuda")
    with pytest.raises(ValueError, match="AddConst already has a cpu lowering"):
        registry.register_lowering("cpu", AddConst)(lambda low, op: None)
    with pytest.raises(ValueError, match="unknown backend 'metal'"):
        registry.register_lowering("metal", AddConst)
    with pytest.raises(TypeError, match="op classes"):
        registry.register_lowering("cpu", "AddConst")


@pytest.mark.parametrize("op", [AddConst, AddConstTwice])
def test_cpu_pass_dispatches_to_the_registered_rule(toy_rules, op):
    a = torch.randn(64, 32, dtype=torch.float32)
    c = torch.empty_like(a)
    tilelang.compile(kernel(value=0.375, op=op), target="cpu")(a, c)
    ref = a.double().numpy() + 0.375
    np.testing.assert_allclose(c.double().numpy(), ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize("target", ["cpu", "cuda -arch=sm_80"])
def test_without_a_rule_the_op_is_not_lowered(target):
    assert registry.lowering_rule(target.split()[0], AddConst(None, None, E.as_expr(1.0))) is None
    with pytest.raises(LoweringError, match="cannot emit AddConst"):
        tilelang.compile(kernel(), target=target)


@pytest.mark.skipif(not nvrtc.nvrtc_available(), reason="NVRTC not found")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_pass_dispatches_to_the_registered_rule(toy_rules, arch):
    src = tilelang.compile(kernel(value=0.375), target=f"cuda -arch={arch}").get_kernel_source()
    # the rule's element, through the pass's elementwise helper: 64 x 32 floats over 128 threads,
    # 4-element vectors, so 4 vectors per thread
    assert re.search(r"\+ 0\.375f\)", src), src
    assert "for (int g = 0; g < 4; ++g)" in src and "tid * 4" in src
