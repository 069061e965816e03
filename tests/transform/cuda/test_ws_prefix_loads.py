"""warp_specialize (ws_loads.prefix_loads): a global -> shared T.copy before the pipelined loop
whose tile only the loop's wgmma gemms read (attention's Q) is loaded by the producer thread
first, on a barrier of its own, instead of by the consumers' cp.async behind the queued K / V
boxes; a kernel with no more tiles than SMs drops the persistent tile loop (one tile per block).

Checks: FlashAttention with D = 64 (one swizzled box) and D = 128 (two 64-column panels) issues
Q's TMA boxes before the ring on `tl_pre`, loads no Q by cp.async, has no tile loop, and matches
float64 on the host emulator (outputs poisoned); a grid of more tiles than SMs keeps the tile loop
and the consumers' Q copy, and so does a Q tile that something besides the gemms reads (in the
loop or after it), which still matches float64."""
import re

import pytest
import torch

import tilelang
from tilelang.testing import kernels as tk

SM90 = "cuda -arch=sm_90a"


def _attention_ref(q, k, v):
    q, k, v = (x.double().transpose(1, 2) for x in (q, k, v))  # (B, H, S, D)
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return (torch.softmax(s, -1) @ v).transpose(1, 2)


@pytest.mark.nvrtc
@pytest.mark.parametrize("D,bM,bN,seed", [(64, 64, 64, 3), (128, 128, 128, 4)])
def test_attention_q_loaded_first_by_the_producer_matches_float64_on_host(run_on_host, D, bM, bN, seed):
    B, S, H = 1, 256, 2
    k = tilelang.compile(tk.attention(B, H, S, D, bM, bN, stages=1), target=SM90)
    src = k.get_kernel_source()
    producer = src[src.index("if (tid >= "):src.index("} else {")]
    q_loads = re.findall(r"tl::tma_load\(&tmap_\d+, &tl_pre\[0\], Qs \+ \d+,", producer)
    assert len(q_loads) == D // 64
    assert producer.index("tl_pre[0], Qs") < producer.index("&tl_full[")  # Q before the ring
    assert "tl::mbarrier_wait(&tl_pre[0], 0);" in src
    assert not re.search(r"cp_async\w*<16>\((?:&Qs\[|\(tl::smem_addr\(Qs\))", src)
    assert "tl_tile_iter" not in src
    g = torch.Generator().manual_seed(seed)
    q, kk, v = (torch.randn(B, S, H, D, generator=g).half() for _ in range(3))
    o = torch.full((B, S, H, D), float("nan")).half()
    run_on_host(k, [q, kk, v, o])
    assert (o.double() - _attention_ref(q, kk, v)).abs().max().item() < 2e-2


@pytest.mark.nvrtc
def test_more_tiles_than_sms_keeps_the_tile_loop_and_the_consumers_q_copy():
    # (with the producer's per-tile Q prefetch off; ws_tile_prefix's own tests cover it on)
    src = tilelang.compile(tk.attention(4, 32, 1024, 64, 64, 64, stages=1), target=SM90,
                           pass_configs={"tl.disable_persistent_prefix_tma": True}).get_kernel_source()
    assert "tl_tile_iter" in src and "tl_pre" not in src
    assert re.search(r"cp_async\w*<16>\((?:&Qs\[|\(tl::smem_addr\(Qs\))", src)


def _q_also_read(where, M=128, D=64, K=256, bk=64):
    """Out = Q @ (sum of Kt's k-blocks), plus Q_s read elementwise `where` ("loop" or "epilogue")."""
    import tilelang.language as T

    @T.prim_func
    def qr(Q: T.Tensor((M, D), "float16"), Kt: T.Tensor((K, D), "float16"), Out: T.Tensor((M, D), "float16")):
        with T.Kernel(M // 64, threads=128) as bx:
            Q_s = T.alloc_shared((64, D), "float16")
            K_s = T.alloc_shared((bk, D), "float16")
            acc = T.alloc_fragment((64, D), "float32")
            T.copy(Q[bx * 64, 0], Q_s)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(Kt[k * bk, 0], K_s)
                T.gemm(Q_s, K_s, acc)
                if where == "loop":
                    for i, j in T.Parallel(64, D):
                        acc[i, j] += Q_s[i, j]
            if where == "epilogue":
                for i, j in T.Parallel(64, D):
                    acc[i, j] += Q_s[i, j]
            T.copy(acc, Out[bx * 64, 0])

    return qr


@pytest.mark.nvrtc
@pytest.mark.parametrize("where", ["loop", "epilogue"])
def test_a_q_tile_read_by_more_than_the_gemms_keeps_the_consumers_copy(run_on_host, where):
    import warnings

    M, D, K = 128, 64, 256
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(_q_also_read(where, M, D, K), target=SM90)
    src = k.get_kernel_source()
    assert "if (tid >= 128) {" in src, "the kernel is not warp-specialized"
    assert "tl_pre" not in src and re.search(r"cp_async\w*<16>\((?:&Q_s\[|\(tl::smem_addr\(Q_s\))", src)
    g = torch.Generator().manual_seed(5)
    q, kt = torch.randn(M, D, generator=g).half(), torch.randn(K, D, generator=g).half()
    out = torch.full((M, D), float("nan")).half()
    run_on_host(k, [q, kt, out])
    q64, ks = q.double(), kt.double().reshape(K // 64, 64, D)
    ref = torch.zeros(M, D, dtype=torch.float64)
    for b in range(K // 64):
        ref = ref + q64 @ ks[b] + (q64 if where == "loop" else 0)
    ref = ref + (q64 if where == "epilogue" else 0)
    assert (out.double() - ref).abs().max().item() < 2e-1
