"""tilelang/testing/host_cuda's warp collectives: T.shfl_* against the CUDA semantics (width
segments, own value past the segment), row reductions that the codegen lowers to shuffles, the
16- and 8-bit float conversions against torch, and a shuffle in divergent code failing loudly."""
import pytest
import torch

import tilelang
import tilelang.language as T

SM80 = "cuda -arch=sm_80"


def shuffles():
    @T.prim_func
    def f(A: T.Tensor((96,), "float32"), B: T.Tensor((4, 96), "float32")):
        with T.Kernel(1, threads=96) as _:
            tx = T.get_thread_binding()
            v = A[tx]
            B[0, tx] = T.shfl_xor(v, 5)
            B[1, tx] = T.shfl_down(v, 3, width=8)
            B[2, tx] = T.shfl_up(v, 2, width=16)
            B[3, tx] = T.shfl_sync(v, (tx * 7 + 3) % 32)

    return f


def rowstats():
    """Row max / row sum of an mma accumulator (S = Q K^T): the 4 lanes of a quad share a row."""
    @T.prim_func
    def f(Q: T.Tensor((64, 32), "float16"), Kt: T.Tensor((64, 32), "float16"), Mx: T.Tensor((64,), "float32"),
          S: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _:
            q_s = T.alloc_shared((64, 32), "float16")
            k_s = T.alloc_shared((64, 32), "float16")
            a = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            s = T.alloc_fragment((64,), "float32")
            T.copy(Q, q_s)
            T.copy(Kt, k_s)
            T.clear(a)
            T.gemm(q_s, k_s, a, transpose_B=True)
            T.reduce_max(a, m, dim=1)
            for i, j in T.Parallel(64, 64):
                a[i, j] = T.exp2(a[i, j] - m[i])
            T.reduce_sum(a, s, dim=1)
            T.copy(m, Mx)
            T.copy(s, S)

    return f


def divergent():
    @T.prim_func
    def f(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _:
            tx = T.get_thread_binding()
            if tx < 16:
                B[tx] = T.shfl_xor(A[tx], 1)

    return f


def casts():
    @T.prim_func
    def f(A: T.Tensor((4096,), "float32"), H: T.Tensor((4096,), "float16"), BF: T.Tensor((4096,), "bfloat16"),
          F8: T.Tensor((4096,), "float8_e4m3fn"), E5: T.Tensor((4096,), "float8_e5m2")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(4096):
                H[i] = A[i]
                BF[i] = A[i]
                F8[i] = A[i]
                E5[i] = A[i]

    return f


@pytest.fixture(scope="module")
def prog(host):
    return host.HostProgram({n: tilelang.compile(fn(), target=SM80)
                             for n, fn in [("shfl", shuffles), ("rows", rowstats), ("div", divergent), ("casts", casts)]})


def _shfl_ref(v, mode, b, width):
    out = v.clone()
    for t in range(v.numel()):
        lane, base = t % 32, t - t % 32
        seg = lane & ~(width - 1)
        if mode == "xor":
            j = lane ^ b
            j = j if j < seg + width else lane
        elif mode == "down":
            j = lane + b if lane + b < seg + width else lane
        elif mode == "up":
            j = lane - b if lane - b >= seg else lane
        else:
            j = seg | (b[t] & (width - 1))
        out[t] = v[base + j]
    return out


def test_shuffles_follow_cuda_semantics(prog):
    a = torch.randn(96)
    b = torch.zeros(4, 96)
    prog.run("shfl", [a, b])
    src = [(t * 7 + 3) % 32 for t in range(96)]
    assert torch.equal(b[0], _shfl_ref(a, "xor", 5, 32))
    assert torch.equal(b[1], _shfl_ref(a, "down", 3, 8))
    assert torch.equal(b[2], _shfl_ref(a, "up", 2, 16))
    assert torch.equal(b[3], _shfl_ref(a, "idx", src, 32))


def test_row_reductions_through_shuffles_match_float64(prog):
    src = prog.kernels["rows"].get_kernel_source()
    assert "shfl" in src or "tl_quad_" in src or "allreduce" in src
    q, k = torch.randn(64, 32).half(), torch.randn(64, 32).half()
    mx, s = torch.zeros(64), torch.zeros(64)
    prog.run("rows", [q, k, mx, s])
    sc = q.double() @ k.double().T
    ref_m = sc.max(dim=1).values
    assert torch.allclose(mx.double(), ref_m, atol=1e-4)
    ref_s = torch.exp2(sc - ref_m[:, None]).sum(dim=1)
    assert torch.allclose(s.double(), ref_s, rtol=1e-4)


def test_shuffle_in_divergent_code_fails_loudly(prog):
    prog.barrier_timeout = 1.0
    try:
        with pytest.raises(AssertionError, match="__shfl_xor_sync"):
            prog.run("div", [torch.randn(32), torch.zeros(32)])
    finally:
        prog.barrier_timeout = 20.0


def test_half_bfloat16_fp8_conversions_match_torch(prog):
    g = torch.Generator().manual_seed(0)
    a = torch.cat([torch.randn(3000, generator=g) * 10 ** torch.randint(-6, 5, (3000,), generator=g),
                   torch.tensor([0.0, -0.0, 65504.0, 65520.0, 1e-8, 6e-8, 448.0, 464.0, 57344.0, float("inf"),
                                 -float("inf"), float("nan")]),
                   torch.randn(1084, generator=g)])
    outs = [torch.zeros(4096, dtype=d) for d in (torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2)]
    prog.run("casts", [a, *outs])
    h, bf, f8, e5 = outs
    assert torch.equal(h.float(), a.half().float()) or torch.allclose(h.float(), a.half().float(), equal_nan=True)
    assert torch.equal(h.view(torch.int16)[a == a], a.half().view(torch.int16)[a == a])
    assert torch.equal(bf.view(torch.int16)[a == a], a.bfloat16().view(torch.int16)[a == a])
    # fp8: CUDA's constructors saturate to the largest finite value (torch's cast does not)
    sat = a.clamp(-448, 448)
    fin = a == a
    assert torch.equal(f8.view(torch.int8)[fin], sat.to(torch.float8_e4m3fn).view(torch.int8)[fin])
    sat5 = a.clamp(-57344, 57344)
    assert torch.equal(e5.view(torch.int8)[fin], sat5.to(torch.float8_e5m2).view(torch.int8)[fin])
    assert torch.isnan(h[~fin].float()).all() and torch.isnan(f8[~fin].float()).all()
