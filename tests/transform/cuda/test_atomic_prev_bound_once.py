"""A name bound to an atomic's previous value and used twice (`pos = T.atomic_add(cnt[0], 1,
return_prev=True); if pos < cap: out[pos] = i`) runs the atomic once per thread that reaches it: the
count is the number of kept elements and `out` is a permutation of their indices, with no slot skipped
or written twice. CPU backend, and the sm_90a CUDA (one atomic in the source) on the host emulator."""
import pytest
import torch

import tilelang
import tilelang.language as T


def compaction(n, cap, block):
    @T.prim_func
    def k(x: T.Tensor((n,), "float32"), out: T.Tensor((cap,), "int32"), counter: T.Tensor((1,), "int32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            i = bx * block + T.get_thread_binding()
            if i < n and x[i] > 0:
                pos = T.atomic_add(counter[0], 1, return_prev=True)
                if pos < cap:
                    out[pos] = i

    return k


def _check(x, out, counter, cap):
    kept = torch.nonzero(x > 0).flatten()
    assert counter.item() == kept.numel()
    m = min(cap, kept.numel())
    if cap >= kept.numel():
        assert torch.equal(out[:m].sort().values.long(), kept)
    else:  # only the first `cap` arrivals are stored: distinct kept indices
        assert out[:m].unique().numel() == m and bool((x[out[:m].long()] > 0).all())
    assert bool((out[m:] == -1).all())


@pytest.mark.parametrize("n,cap,block", [(1000, 1000, 128), (777, 200, 64)])
def test_cpu(n, cap, block):
    x = torch.randn(n)
    out, counter = torch.full((cap,), -1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    tilelang.compile(compaction(n, cap, block), target="cpu")(x, out, counter)
    _check(x, out, counter, cap)


@pytest.mark.nvrtc
@pytest.mark.parametrize("n,cap,block", [(1000, 1000, 128), (777, 200, 64)])
def test_cuda_on_host(n, cap, block, run_on_host):
    k = tilelang.compile(compaction(n, cap, block), target="cuda -arch=sm_90a")
    assert k.get_kernel_source().count("atomic_add") == 1, k.get_kernel_source()
    x = torch.randn(n)
    out, counter = torch.full((cap,), -1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    run_on_host(k, [x, out, counter])
    _check(x, out, counter, cap)
