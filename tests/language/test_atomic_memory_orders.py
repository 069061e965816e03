"""T.atomic_load / T.atomic_store take only the memory orders such an access can have (a load cannot
release, a store cannot acquire): others raise a ValueError naming the order and the allowed ones."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import line_of, raises_at

HERE = __file__


def load_kernel(order):
    @T.prim_func
    def k(S: T.Tensor((4,), "int32"), O: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=4):
            t = T.get_thread_binding()
            O[t] = T.atomic_load(S[t], memory_order=order) + 1  # ERR-load

    return k


def store_kernel(order):
    @T.prim_func
    def k(S: T.Tensor((4,), "int32"), O: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=4):
            t = T.get_thread_binding()
            T.atomic_store(O[t], S[t] * 3, memory_order=order)  # ERR-store

    return k


@pytest.mark.parametrize("order", ["release", "acq_rel", "invalid"])
def test_load_rejects(order):
    with raises_at(ValueError, f"T.atomic_load does not support memory_order={order!r}: expected one of relaxed, "
                   "consume, acquire, seq_cst", HERE, line_of(HERE, "# ERR" + "-load")):
        load_kernel(order)


@pytest.mark.parametrize("order", ["consume", "acquire", "acq_rel", "invalid"])
def test_store_rejects(order):
    with raises_at(ValueError, f"T.atomic_store does not support memory_order={order!r}: expected one of relaxed, "
                   "release, seq_cst", HERE, line_of(HERE, "# ERR" + "-store")):
        store_kernel(order)


@pytest.mark.parametrize("order", ["relaxed", "consume", "acquire", "seq_cst"])
def test_load_accepts_and_reads(order):
    s = torch.randint(-1000, 1000, (4,), dtype=torch.int32)
    o = torch.full((4,), -7, dtype=torch.int32)
    tilelang.compile(load_kernel(order), target="cpu")(s, o)
    assert torch.equal(o.long(), s.long() + 1)


@pytest.mark.parametrize("order", ["relaxed", "release", "seq_cst"])
def test_store_accepts_and_writes(order):
    s = torch.randint(-1000, 1000, (4,), dtype=torch.int32)
    o = torch.full((4,), -7, dtype=torch.int32)
    tilelang.compile(store_kernel(order), target="cpu")(s, o)
    assert torch.equal(o.long(), s.long() * 3)
