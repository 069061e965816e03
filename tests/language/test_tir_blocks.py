"""TVMScript blocks (language/blocks.py) on the CPU backend against float64 references: T.sblock with
T.axis, T.init on the reduction axes, T.where guarding the block."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError


def block_gemm(M, N, K, tile=16):
    @T.prim_func
    def main(a: T.handle, b: T.handle, c: T.handle):
        A = T.match_buffer(a, (M, K), "float32")
        B = T.match_buffer(b, (N, K), "float32")
        C = T.match_buffer(c, (M, N), "float32")
        with T.Kernel(T.ceildiv(N, tile), T.ceildiv(M, tile), threads=1) as (bx, by):
            for i, j, k in T.grid(tile, tile, K):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.where(by * tile + vi < M and bx * tile + vj < N)
                    T.reads(A[by * tile + vi, vk], B[bx * tile + vj, vk])
                    T.writes(C[by * tile + vi, bx * tile + vj])
                    with T.init():
                        C[by * tile + vi, bx * tile + vj] = 0.0
                    C[by * tile + vi, bx * tile + vj] = C[by * tile + vi, bx * tile + vj] + \
                        A[by * tile + vi, vk] * B[bx * tile + vj, vk]
    return main


@pytest.mark.parametrize("M,N,K", [(64, 48, 32), (40, 23, 17)])
def test_block_gemm_with_init_and_where(M, N, K):
    kern = tilelang.compile(block_gemm(M, N, K), target="cpu")
    a, b = torch.randn(M, K), torch.randn(N, K)
    c = torch.full((M, N), float("nan"))
    kern(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double().T, rtol=1e-5, atol=1e-4)


def test_axes_with_domains_start_the_reduction_where_they_say():
    """A row sum over k in [2, 10): T.init runs where the reduction axis is at 2, not 0."""
    @T.prim_func
    def main(A: T.Tensor((8, 12), "float32"), O: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                for k in T.serial(2, 10):
                    with T.sblock("rowsum"):
                        vi = T.axis.spatial(8, i)
                        vk = T.axis.reduce((2, 10), k)
                        T.sblock_attr({"note": 1})
                        scratch = T.sblock_alloc_buffer((1,), "float32", scope="local")
                        with T.init():
                            O[vi] = 0.0
                        scratch[0] = A[vi, vk] * 2.0
                        O[vi] = O[vi] + scratch[0]

    kern = tilelang.compile(main, target="cpu")
    a = torch.randn(8, 12)
    o = torch.full((8,), float("nan"))
    kern(a, o)
    torch.testing.assert_close(o.double(), 2 * a.double()[:, 2:10].sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("body,msg", [
    ("        vi = T.axis.spatial(4, i)\n        with T.init():\n            A[vi] = 0.0", "needs a reduction axis"),
    ("        vi = T.axis.reduce(4, i)\n        A[vi] = 1.0\n        with T.init():\n            A[vi] = 0.0",
     "must come before"),
    ("        vi = T.axis.remap('SX', [i, i])", "kinds is a string"),
    ("        for j in T.serial(2):\n            T.where(i < 3)", "statement of the block itself"),
])
def test_block_misuse_is_a_clear_error(tmp_path, body, msg):
    src = ("import tilelang.language as T\n\ndef f(A: T.Tensor((4,), 'float32')):\n"
           "  with T.Kernel(1, threads=1):\n    for i in T.serial(4):\n      with T.sblock('b'):\n" + body + "\n")
    path = tmp_path / "k.py"
    path.write_text(src)
    ns = {}
    exec(compile(src, str(path), "exec"), ns)
    with pytest.raises(TileLangError, match=msg):
        T.prim_func(ns["f"])


def test_axis_outside_a_kernel_and_no_realize_are_errors():
    with pytest.raises(TileLangError, match="no_realize"):
        T.sblock("x", no_realize=True)
    with pytest.raises(TileLangError, match="inside a @T.prim_func"):
        T.axis.spatial(4, 0)
