"""widen_fragments: a fragment indexed by a T.Parallel's own loop variables holds the loop's
extents, as the public TileLang lays it out (the peer attention_sink backward example's forward
kernel declares `sinks = T.alloc_fragment([heads])` and uses sinks[i] for i < block_M). CPU
float64 semantics, the widened declaration in the CUDA source, and no IndexRangeWarning."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.testing
from tilelang.transform.check_index_ranges import IndexRangeWarning


def sink_like(M=64, heads=1):
    @T.prim_func
    def main(A: T.Tensor((M, 32), "float32"), Sinks: T.Tensor((heads,), "float32"), O: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            a = T.alloc_fragment((M, 32), "float32")
            m = T.alloc_fragment((M,), "float32")
            sinks = T.alloc_fragment([heads], "float32")
            T.copy(A, a)
            T.reduce_max(a, m, dim=1)
            for i in T.Parallel(M):
                sinks[i] = Sinks[0]
            for i in T.Parallel(M):
                m[i] = m[i] + sinks[i] * 2.0
            T.copy(m, O)

    return main


def test_widened_fragment_computes_per_row_cpu():
    a, s = torch.randn(64, 32), torch.randn(1)
    o = torch.zeros(64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IndexRangeWarning)
        tilelang.compile(sink_like(), target="cpu")(a, s, o)
    torch.testing.assert_close(o.double(), a.double().amax(1) + 2 * s.double())


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_widened_fragment_is_declared_at_the_loop_extent(arch):
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC not installed")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        src = tilelang.compile(sink_like(), target=f"cuda -arch={arch}").get_kernel_source()
    assert not [w for w in rec if w.category is IndexRangeWarning]
    assert "float sinks[" in src or "sinks = reinterpret_cast<float*>" in src, src


def test_shared_tiles_do_not_widen():
    from tilelang.transform.widen_fragments import widen_fragments

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            s = T.alloc_shared((1,), "float32")
            for i in T.Parallel(64):
                s[i] = A[i]
            for i in T.Parallel(64):
                B[i] = s[i]

    assert widen_fragments(main) is main


@tilelang.testing.requires_cuda
def test_widened_fragment_gpu():
    a, s = torch.randn(64, 32), torch.randn(1)
    o = torch.zeros(64, device="cuda")
    tilelang.compile(sink_like(), target="cuda")(a.cuda(), s.cuda(), o)
    torch.testing.assert_close(o.cpu().double(), a.double().amax(1) + 2 * s.double())
