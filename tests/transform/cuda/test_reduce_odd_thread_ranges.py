"""Reductions over thread ranges the public TileLang's warp-shuffle allreduce refuses (a replicate of 48,
a range starting at thread 16, two groups 128 threads apart, a reduced width of 48 or 96 threads, a
dim-0 reduce over 48 rows x 2): our lowering computes them (a register layout of its own, or a
shared-memory reduce), so they are accepted; the CPU backend and the sm_80 CUDA (host emulator)
match float64."""
import pytest
import torch

import tilelang
import tilelang.language as T

pytestmark = pytest.mark.filterwarnings("ignore::tilelang.backend.cuda.pipeline.PerformanceWarning")


def annotated(rows, width, threads, base, stride, rep):
    """x_frag laid out thread base + i * stride + j // 8; the sum replicated over `rep` threads."""

    @T.prim_func
    def k(x: T.Tensor((rows, width), "float32"), out: T.Tensor((rows,), "float32")):
        with T.Kernel(1, threads=threads):
            xf = T.alloc_fragment((rows, width), "float32")
            s = T.alloc_fragment((rows,), "float32")
            T.annotate_layout({xf: T.Fragment(xf.shape, forward_fn=lambda i, j: (base + i * stride + j // 8, j % 8)),
                               s: T.Fragment(s.shape, forward_fn=lambda i, r: (base + i * stride + r, 0),
                                             replicate=rep)})
            for i, j in T.Parallel(rows, width):
                xf[i, j] = x[i, j]
            T.reduce_sum(xf, s, dim=1)
            for i in T.Parallel(rows):
                out[i] = s[i]

    return k, (rows, width), lambda a: a.sum(1)


def reduce_k(op, shape, dim, threads):
    @T.prim_func
    def k(A: T.Tensor(shape, "float32"), B: T.Tensor((shape[1 - dim],), "float32")):
        with T.Kernel(1, threads=threads):
            src = T.alloc_fragment(shape, "float32")
            dst = T.alloc_fragment((shape[1 - dim],), "float32")
            T.copy(A, src)
            getattr(T, "reduce_" + op)(src, dst, dim=dim)
            T.copy(dst, B)

    ref = (lambda a: a.sum(dim)) if op == "sum" else (lambda a: a.amax(dim))
    return k, shape, ref


CASES = {
    "replicate48": lambda: annotated(1, 384, 128, 0, 0, 48),
    "base16": lambda: annotated(1, 512, 128, 16, 0, 64),
    "two_groups_stride128": lambda: annotated(2, 512, 256, 0, 128, 64),
    "width48_sum": lambda: reduce_k("sum", (4, 48), 1, 48),
    "width96_max": lambda: reduce_k("max", (4, 96), 1, 96),
    "dim0_48x2_sum": lambda: reduce_k("sum", (48, 2), 0, 96),
    "dim0_48x2_max": lambda: reduce_k("max", (48, 2), 0, 96),
}


def _inputs(shape, out_n):
    return torch.randn(shape), torch.full((out_n,), float("nan"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_matches_float64(case):
    k, shape, ref = CASES[case]()
    a, b = _inputs(shape, k.params[1].shape[0])
    tilelang.compile(k, target="cpu")(a, b)
    torch.testing.assert_close(b.double(), ref(a.double()), rtol=1e-5, atol=1e-5)


@pytest.mark.nvrtc
@pytest.mark.parametrize("case", sorted(CASES))
def test_cuda_on_host_matches_float64(case, run_on_host):
    k, shape, ref = CASES[case]()
    a, b = _inputs(shape, k.params[1].shape[0])
    run_on_host(tilelang.compile(k, target="cuda -arch=sm_80"), [a, b])
    torch.testing.assert_close(b.double(), ref(a.double()), rtol=1e-5, atol=1e-5)
