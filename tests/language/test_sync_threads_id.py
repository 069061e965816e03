"""`T.sync_threads(barrier_id)` without an arrive count: the whole block meets at that named barrier, as in the public
TileLang (it raised 'give both, or neither'). Checked on the CPU backend and in the sm_90a source."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError


def program(bid):
    @T.prim_func
    def f(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            S = T.alloc_shared((256,), "float32")
            S[tx] = A[tx] * 2.0
            T.sync_threads(bid)
            B[tx] = S[255 - tx]

    return f


def test_named_block_barrier_on_the_cpu():
    a, b = torch.randn(256), torch.zeros(256)
    tilelang.compile(program(3), target="cpu")(a, b)
    torch.testing.assert_close(b.double(), a.double().flip(0) * 2, rtol=1e-6, atol=1e-6)


@pytest.mark.nvrtc
def test_named_block_barrier_in_the_cuda_source():
    src = tilelang.compile(program(3), target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl::named_barrier_sync(3, 256)" in src


def test_an_arrive_count_without_an_id_is_an_error():
    with pytest.raises(DSLTypeError, match="name the barrier too"):
        @T.prim_func
        def f(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                T.sync_threads(arrive_count=32)
