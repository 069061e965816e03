"""check_index_ranges: a loop that takes a tile index out of the tile's shape is reported with
the buffer, the index's range and the line (found by compute-sanitizer memcheck on the peer
suite's attention_sink forward kernel, whose 1-element `sinks` fragment is written as sinks[i]
for i < 64); guarded and in-range accesses are not."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.transform.check_index_ranges import IndexRangeWarning, check_index_ranges


def kernel(kind):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            s = T.alloc_shared((1,), "float32")
            t = T.alloc_shared((64,), "float32")
            if kind == "past":
                for i in T.Parallel(64):
                    s[i] = A[0]
                for i in T.Parallel(64):
                    B[i] = s[i]
            elif kind == "guarded":
                for i in T.Parallel(64):
                    if i < 1:
                        s[i] = A[0]
                for i in T.Parallel(64):
                    B[i] = s[0] + A[i]
            else:
                for i in T.Parallel(64):
                    t[63 - i] = A[i]
                for i in T.Parallel(64):
                    B[i] = t[i]
    return main


def test_out_of_range_loop_index_is_reported_with_its_range_and_line():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        msgs = check_index_ranges(kernel("past"))
    assert len(msgs) == 2, msgs  # the store and the load, each with its line
    assert all("runs over 0 .. 63 but dim 0 of s has 1 element" in m for m in msgs), msgs
    assert msgs[0].split(":")[0] != msgs[1].split(":")[0] and msgs[0].startswith("line ")
    assert len([w for w in rec if w.category is IndexRangeWarning]) == 2


@pytest.mark.parametrize("kind", ["guarded", "reversed"])
def test_guarded_and_in_range_indices_are_not_reported(kind):
    assert check_index_ranges(kernel(kind)) == []


@pytest.mark.parametrize("target", ["cpu", "cuda -arch=sm_80"])
def test_compiling_warns(target):
    if target.startswith("cuda"):
        nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
        if not nvrtc.nvrtc_available():
            pytest.skip("NVRTC not installed")
    with pytest.warns(IndexRangeWarning, match="s has 1 element"):
        tilelang.compile(kernel("past"), target=target)


def test_in_range_kernels_still_run():
    a = torch.randn(64)
    for kind, want in [("guarded", a[0] + a), ("reversed", a.flip(0))]:
        b = torch.zeros(64)
        tilelang.compile(kernel(kind), target="cpu")(a, b)
        torch.testing.assert_close(b, want)
