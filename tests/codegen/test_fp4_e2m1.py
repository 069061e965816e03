"""float4_e2m1fn on both backends: packed two per byte (even element in the low nibble) as
torch.float4_e2m1fn_x2 tensors whose last dim is half the logical one; stores round to nearest,
ties to even, saturate at +-6, NaN -> +6 (CUDA's __nv_cvt_float_to_fp4), loads are exact.

The reference is an independent float64 numpy model of e2m1 rounding (nearest of the 8
magnitudes, ties to the even code)."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import requires_cuda

pytestmark = pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="torch without float4_e2m1fn_x2")

MAGS = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def ref_codes(x: np.ndarray) -> np.ndarray:
    """e2m1 codes of float64 values: nearest magnitude, ties to the even code, |x| > 6 -> 6, NaN -> +6."""
    x = np.asarray(x, dtype=np.float64)
    m = np.abs(np.nan_to_num(x, nan=6.0, posinf=6.0, neginf=-6.0))
    d = np.abs(m[..., None] - MAGS)
    best = d.min(-1, keepdims=True)
    cand = np.isclose(d, best, rtol=0, atol=0)
    # among equally near codes, the even one
    code = np.where(cand.sum(-1) > 1, np.argmax(cand & (np.arange(8) % 2 == 0), -1), np.argmin(d, -1))
    neg = np.signbit(x) & ~np.isnan(x)
    return (code + 8 * neg).astype(np.uint8)


def ref_values(codes: np.ndarray) -> np.ndarray:
    v = MAGS[codes & 7]
    return np.where(codes & 8, -v, v)


def pack(codes: np.ndarray) -> torch.Tensor:
    c = codes.reshape(*codes.shape[:-1], -1, 2)
    return torch.from_numpy((c[..., 0] | (c[..., 1] << 4)).astype(np.uint8)).view(torch.float4_e2m1fn_x2)


def unpack(t: torch.Tensor) -> np.ndarray:
    u = t.view(torch.uint8).numpy()
    return np.stack([u & 15, u >> 4], -1).reshape(*u.shape[:-1], -1)


def quant_kernel(M, N, threads=64):
    @T.prim_func
    def k(X: T.Tensor((M, N), T.float32), Q: T.Tensor((M, N), T.float4_e2m1fn)):
        with T.Kernel(1, threads=threads) as _:
            for i, j in T.Parallel(M, N):
                Q[i, j] = X[i, j]

    return k


def dequant_kernel(M, N, threads=64):
    @T.prim_func
    def k(Q: T.Tensor((M, N), T.float4_e2m1fn), Y: T.Tensor((M, N), T.float64)):
        with T.Kernel(1, threads=threads) as _:
            for i, j in T.Parallel(M, N):
                Y[i, j] = Q[i, j]

    return k


def staged_kernel(M, N, blk=8):
    """bf16 -> fp4 tile in shared memory -> global, through a fragment: the act_quant pattern."""
    @T.prim_func
    def k(X: T.Tensor((M, N), T.bfloat16), Q: T.Tensor((M, N), T.float4_e2m1fn)):
        with T.Kernel(T.ceildiv(M, blk), threads=128) as bx:
            xs = T.alloc_shared((blk, N), T.bfloat16)
            yf = T.alloc_fragment((blk, N), T.float4_e2m1fn)
            ys = T.alloc_shared((blk, N), T.float4_e2m1fn)
            T.copy(X[bx * blk, 0], xs)
            for i, j in T.Parallel(blk, N):
                yf[i, j] = xs[i, j] * 2.0
            T.copy(yf, ys)
            T.copy(ys, Q[bx * blk, 0])

    return k


SPECIAL = np.array([0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.2500001, 0.7499999, 4.9999, 5.0001, 6, 6.5,
                    100, np.inf, -np.inf, np.nan, -np.nan, -0.0, -0.1, 1e-30, -0.25, -0.75, -5.0, -7.0,
                    0.5, 1, 1.5, 2, 3, 4], dtype=np.float32)


def test_store_rounds_like_cuda_cvt():
    M, N = 8, 64
    rng = np.random.default_rng()
    x = (rng.standard_normal((M, N)) * 3).astype(np.float32)
    x.flat[:SPECIAL.size] = SPECIAL
    # exact midpoints with both signs, to hit every tie
    x[4, :14] = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0] * 2) * np.repeat([1, -1], 7)
    q = torch.full((M, N // 2), 0x77, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)  # poisoned
    kernel = tilelang.compile(quant_kernel(M, N), target="cpu")
    kernel(torch.from_numpy(x), q)
    got, want = unpack(q), ref_codes(x)
    bad = np.argwhere(got != want)
    assert bad.size == 0, [(float(x[tuple(b)]), int(got[tuple(b)]), int(want[tuple(b)])) for b in bad[:8]]


def test_all_16_codes_load_exactly():
    M, N = 4, 32
    codes = np.random.default_rng().integers(0, 16, (M, N)).astype(np.uint8)
    codes[0, :16] = np.arange(16)
    y = torch.full((M, N), float("nan"), dtype=torch.float64)
    tilelang.compile(dequant_kernel(M, N), target="cpu")(pack(codes), y)
    want = ref_values(codes)
    np.testing.assert_array_equal(y.numpy(), want)
    assert np.signbit(y.numpy()[0, 8]) and not np.signbit(y.numpy()[0, 0])  # code 8 is -0


def test_round_trip_through_shared_and_fragment_tiles():
    M, N = 32, 64
    x = torch.randn(M, N).mul(2).to(torch.bfloat16)
    kernel = tilelang.compile(staged_kernel(M, N), target="cpu")
    q = torch.full((M, N // 2), 0xFF, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    kernel(x, q)
    want = ref_codes(x.double().numpy() * 2.0)
    np.testing.assert_array_equal(unpack(q), want)


def test_output_allocation_and_argument_checks():
    M, N = 4, 32

    @T.prim_func
    def k(X: T.Tensor((M, N), T.float32), Q: T.Tensor((M, N), T.float4_e2m1fn)):
        with T.Kernel(1, threads=32) as _:
            for i, j in T.Parallel(M, N):
                Q[i, j] = X[i, j]

    kernel = tilelang.compile(k, out_idx=[1], target="cpu")
    x = torch.randn(M, N) * 4
    q = kernel(x)
    assert q.dtype == torch.float4_e2m1fn_x2 and tuple(q.shape) == (M, N // 2)
    np.testing.assert_array_equal(unpack(q), ref_codes(x.double().numpy()))

    dq = tilelang.compile(dequant_kernel(M, N), out_idx=[1], target="cpu")
    np.testing.assert_array_equal(dq(q).numpy(), ref_values(unpack(q)))
    np.testing.assert_array_equal(dq(q.view(torch.uint8)).numpy(), ref_values(unpack(q)))  # raw bytes too
    with pytest.raises(ValueError, match=r"logical shape \(4, 64\) \(torch shape \(4, 32\)\) \(dim 1 is 64, expected 32\)"):
        dq(torch.zeros(M, N, dtype=torch.uint8))  # the logical shape is not the byte shape
    with pytest.raises(TypeError, match="2x smaller"):
        dq(torch.zeros(M, N // 2, dtype=torch.float16))


def test_cuda_source_compiles_for_sm90_and_sm80():
    for arch in ("sm_90a", "sm_80"):
        k = tilelang.compile(staged_kernel(32, 64), target=f"cuda -arch={arch}")
        src = k.get_kernel_source()
        # shared and global stores of a nibble are atomic (two threads share a byte); the
        # register fragment's are plain
        assert "tl_nibble_set_atomic(ys" in src and "tl_nibble_set_atomic(Q" in src, src
        assert "tl_nibble_set(yf" in src
        assert "tl_f32_to_fp4e2m1" in src and "cvt.rn.satfinite.e2m1" not in src


@requires_cuda
def test_gpu_matches_reference():
    M, N = 64, 128
    x = torch.randn(M, N).mul(2).to(torch.bfloat16)
    x.view(-1)[:SPECIAL.size] = torch.from_numpy(SPECIAL).to(torch.bfloat16) / 2
    xq = x.cuda()
    q = torch.full((M, N // 2), 0xFF, dtype=torch.uint8, device="cuda").view(torch.float4_e2m1fn_x2)
    tilelang.compile(staged_kernel(M, N), target="cuda")(xq, q)
    np.testing.assert_array_equal(unpack(q.cpu()), ref_codes(x.double().numpy() * 2.0))
    y = torch.full((M, N), float("nan"), dtype=torch.float64, device="cuda")
    tilelang.compile(dequant_kernel(M, N, threads=128), target="cuda")(q, y)
    np.testing.assert_array_equal(y.cpu().numpy(), ref_values(unpack(q.cpu())))
