"""Two fixes the fp8 lighting indexer needed: global stores in an innermost serial loop are
guarded (the public TileLang's legalize pass does so), and a warp-specialized loop whose bounds
and tile coordinates read T.alloc_var values computed before it gets those statements in the
producer too; its gemm's accumulator, read inside the loop, is waited for every iteration."""
import warnings

import torch

import tilelang
import tilelang.language as T


def test_serial_leaf_store_is_guarded_cpu():
    N, BK, TH = 100, 256, 64

    @T.prim_func
    def k(X: T.Tensor((3, N), "float32")):
        with T.Kernel(3, threads=TH) as bx:
            tx = T.thread_binding(0, TH, thread="threadIdx.x")
            for k_i in T.serial(BK // TH):
                idx = k_i * TH + tx
                X[bx, idx] = X[bx, idx] * 2 + 1

    x = torch.randn(3, N)
    pad = torch.randn(3 * N + 512)  # the tensor lives at the front of a larger allocation
    buf = pad.clone()
    buf[: 3 * N] = x.flatten()
    tilelang.compile(k, target="cpu")(buf[: 3 * N].view(3, N))
    torch.testing.assert_close(buf[: 3 * N].view(3, N), x * 2 + 1)
    assert torch.equal(buf[3 * N:], pad[3 * N:])  # nothing written past the last row


def indexer_like(block_N=128, D=64, threads=256):
    """Loop bounds from alloc_vars computed by serial loops over global, a reshaped accumulator."""
    Q = 64
    n = T.dynamic("n")

    @T.prim_func
    def k(K: T.Tensor((n, D), "float8_e4m3fn"), Qm: T.Tensor((Q, D), "float8_e4m3fn"),
          Lo: T.Tensor((4,), "int32"), Hi: T.Tensor((4,), "int32"), O: T.Tensor((n, Q // 16), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            k_s = T.alloc_shared((block_N, D), "float8_e4m3fn")
            q_s = T.alloc_shared((Q, D), "float8_e4m3fn")
            s = T.alloc_fragment((block_N, Q), "float32")
            sr = T.reshape(s, (block_N, Q // 16, 16))
            o = T.alloc_fragment((block_N, Q // 16), "float32")
            lo = T.alloc_var("int32")
            hi = T.alloc_var("int32")
            lo = 2147483647
            hi = 0
            for i in T.serial(4):
                lo = T.min(lo, Lo[i])
            for i in T.serial(4):
                hi = T.max(hi, Hi[i])
            T.copy(Qm, q_s)
            for t in T.Pipelined(T.ceildiv(hi - lo, block_N), num_stages=2):
                T.copy(K[lo + t * block_N, 0], k_s)
                T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True)
                T.reduce_sum(sr, o, dim=-1)
                for i, g in T.Parallel(block_N, Q // 16):
                    O[lo + t * block_N + i, g] = o[i, g]
    return k


def test_ws_producer_runs_prefix_and_waits_for_read_accumulator_sm90():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = tilelang.compile(indexer_like(), target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl::tma_load" in src  # warp specialized
    prod, cons = src.split("} else {", 1)
    assert "Lo[" in prod and "Hi[" in prod  # the producer computes the bounds itself
    assert "gemm_ss_sm90<" in cons and "float8_e4m3_t, 0>" in cons  # C final before the reduce reads it


def test_indexer_like_cpu():
    n = 300
    Kt = torch.randn(n, 64).to(torch.float8_e4m3fn)
    Qm = torch.randn(64, 64).to(torch.float8_e4m3fn)
    Lo = torch.tensor([40, 17, 90, 33], dtype=torch.int32)
    Hi = torch.tensor([200, 260, 100, 120], dtype=torch.int32)
    O = torch.zeros(n, 4)
    tilelang.compile(indexer_like(), target="cpu")(Kt, Qm, Lo, Hi, O)
    ref = (Kt.double() @ Qm.double().T).view(n, 4, 16).sum(-1)
    lo, hi = 17, 260
    end = min(n, lo + -(-(hi - lo) // 128) * 128)
    torch.testing.assert_close(O[lo:end].double(), ref[lo:end], rtol=1e-5, atol=1e-3)
    assert (O[:lo] == 0).all() and (O[end:] == 0).all()
