"""A block index over an int64 grid extent (T.Kernel(T.ceildiv(n, b)) with n an int64 symbolic dim) is
an int64 variable, so `bx * b + i` does not wrap past 2**31 (it did: the CPU backend wrote below the
tensor and crashed). Checked on the CPU backend at 2**31 + 3 * 4096 elements against values computed
with numpy."""
import numpy as np
import torch

import tilelang
import tilelang.language as T
from tilelang import dtypes as dt
from tilelang.ir.stmt import KernelLaunch
from tilelang.ir.visitor import collect

BLOCK = 4096


def fill_by_block():
    n = T.symbolic("n", "int64")

    @T.prim_func
    def main(x: T.Tensor[n, T.int8]):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=128) as bx:
            for i in T.Parallel(BLOCK):
                x[bx * BLOCK + i] = T.Cast(T.int8, bx % 101 + i % 3)
    return main


def test_block_index_has_the_int64_extent_dtype():
    f = fill_by_block()
    (k,) = collect(f.body, lambda s: isinstance(s, KernelLaunch))
    assert k.block_vars[0].dtype == dt.int64
    assert "4096LL" in tilelang.compile(f, target="cpu").get_kernel_source()


def test_fill_past_two_to_the_31_on_cpu():
    n = 2**31 + 3 * BLOCK
    x = torch.zeros(n, dtype=torch.int8)
    tilelang.compile(fill_by_block(), target="cpu")(x)
    # the last three blocks (past 2**31) and the first one, against numpy
    for b in [0, n // BLOCK - 4, n // BLOCK - 3, n // BLOCK - 1]:
        i = np.arange(BLOCK)
        want = torch.from_numpy(((b % 101) + i % 3).astype(np.int8))
        assert torch.equal(x[b * BLOCK:(b + 1) * BLOCK], want), b
    assert int(x[2**31 + 5]) == ((2**31 + 5) // BLOCK) % 101 + (5 % 3)
