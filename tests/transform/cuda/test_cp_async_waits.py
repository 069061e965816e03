"""One cp.async wait for back-to-back copies outside a pipeline (cp_async_waits.py): a serial
chunk loop (linear attention's shape) copying K and V tiles with T.copy and Q through a scaled
element copy issues both cp.async copies first, waits once before the barrier that guards
the first reader; run on the host emulator against float64."""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def chunks(S, D=64, C=64):
    """O[c] = (0.5 * Q[c]) @ K[c]^T @ V[c] per chunk c of C rows, chunks in a serial loop."""

    @T.prim_func
    def main(Q: T.Tensor((S, D), "float16"), K: T.Tensor((S, D), "float16"), V: T.Tensor((S, D), "float16"),
             O: T.Tensor((S, D), "float32")):
        with T.Kernel(1, threads=128) as bx:
            q = T.alloc_shared((C, D), "float16")
            k = T.alloc_shared((C, D), "float16")
            v = T.alloc_shared((C, D), "float16")
            s = T.alloc_fragment((C, C), "float32")
            s_h = T.alloc_shared((C, C), "float16")
            o = T.alloc_fragment((C, D), "float32")
            for c in T.serial(S // C):
                for i, j in T.Parallel(C, D):
                    q[i, j] = Q[c * C + i, j] * T.float16(0.5)
                T.copy(K[c * C, 0], k)
                T.copy(V[c * C, 0], v)
                T.clear(s)
                T.gemm(q, k, s, transpose_B=True)
                T.copy(s, s_h)
                T.clear(o)
                T.gemm(s_h, v, o)
                T.copy(o, O[c * C, 0])

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_one_wait_for_both_copies(arch, run_on_host):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(chunks(192), target=f"cuda -arch={arch}")
    src = kern.get_kernel_source()
    loop = src.split("for (int c = 0;")[1]
    assert loop.count("tl::cp_async_wait<0>();") == 1 and loop.count("tl::cp_async_commit();") == 2, loop
    # both copies go out before the element copy's loads, and the wait comes after them
    first_cp, q_load = loop.index("cp_async_zfill"), loop.index("&Q[")
    wait = loop.index("tl::cp_async_wait<0>();")
    assert first_cp < q_load < wait < loop.index("__syncthreads")
    S, D = 192, 64
    Q, K, V = (torch.randn(S, D, dtype=torch.float16) for _ in range(3))
    O = torch.full((S, D), float("nan"))
    run_on_host(kern, [Q, K, V, O])
    ref = torch.cat([((0.5 * Q[c:c + 64].double()) @ K[c:c + 64].double().T).half().double() @ V[c:c + 64].double()
                     for c in range(0, S, 64)])
    torch.testing.assert_close(O.double(), ref, rtol=2e-2, atol=2e-2)
