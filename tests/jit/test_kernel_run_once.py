"""JITKernel.run_once (one call on inputs the default profiler makes) and JITKernel.show_source
(printing the generated source). CPU target; results checked against float64 torch."""
import logging

import torch

import tilelang
import tilelang.language as T


def scaled_rowsum(M, N, block_M=8):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), W: T.Tensor((N,), T.float32), S: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=32) as bx:
            acc = T.alloc_fragment((block_M,), T.float32)
            T.clear(acc)
            for i in T.Parallel(block_M):
                for k in T.serial(N):
                    if bx * block_M + i < M:
                        acc[i] += A[bx * block_M + i, k] * W[k]
            for i in T.Parallel(block_M):
                if bx * block_M + i < M:
                    S[bx * block_M + i] = acc[i]
    return main


def reference(a, w):
    return (a.double() * w.double()[None, :]).sum(dim=1)


def test_run_once_returns_the_result_on_fresh_inputs():
    k = tilelang.compile(scaled_rowsum(20, 12), out_idx=[-1], target="cpu")
    seen = []

    def call(*ins):
        seen.append([t.clone() for t in ins])
        return k(*ins)

    out = k.run_once(call)
    (a, w), = seen
    assert a.shape == (20, 12) and w.shape == (12,)
    torch.testing.assert_close(out.double(), reference(a, w), rtol=1e-5, atol=1e-5)
    out2 = k.run_once()  # the kernel itself, on inputs of its own
    assert out2.shape == (20,) and out2.dtype == torch.float32 and torch.isfinite(out2).all()


def test_run_once_without_out_idx_passes_every_parameter():
    k = tilelang.compile(scaled_rowsum(9, 5, block_M=4), target="cpu")
    seen = []

    def call(*ins):
        seen.append(ins)
        k(*ins)

    assert k.run_once(call) is None
    (a, w, s), = seen
    torch.testing.assert_close(s.double(), reference(a, w), rtol=1e-5, atol=1e-5)


def test_show_source_prints_kernel_host_and_both(capsys, caplog):
    k = tilelang.compile(scaled_rowsum(16, 8), out_idx=[-1], target="cpu")
    k.show_source()
    assert capsys.readouterr().out == k.get_kernel_source() + "\n"
    k.show_source("host")
    assert capsys.readouterr().out == k.get_host_source() + "\n"
    k.show_source("both")
    both = capsys.readouterr().out
    assert both.index("===== Kernel Source =====") < both.index(k.get_kernel_source()) \
        < both.index("===== Host Source =====")
    with caplog.at_level(logging.ERROR, logger="tilelang"):
        assert k.show_source("ptx") is None
    assert capsys.readouterr().out == ""
    assert "which must be" in caplog.text
    a, w = torch.randn(16, 8), torch.randn(8)
    torch.testing.assert_close(k(a, w).double(), reference(a, w), rtol=1e-5, atol=1e-5)
