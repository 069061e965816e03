"""Parse-time vector values (frontend/vector.py): vector dtype constructors, T.Broadcast / T.Ramp /
T.Shuffle, T.extract_lane, T.reinterpret of vectors, the 64/128-bit T.ldg / T.stg / T.lds / T.sts
forms, slice and Ramp stores, T.alloc_var of a vector dtype and T.atomic_addx2 / x4 with
return_prev, on the CPU backend and the host emulator of NVRTC-compiled sm_80 / sm_90a code,
against float64 / exact numpy references."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError
from tilelang.testing import host_cuda_or_skip

N = 64


def lanes_kernel():
    @T.prim_func
    def k(X: T.Tensor((4 * N,), "float32"), H: T.Tensor((4 * N,), "float16"), I8: T.Tensor((4 * N,), "int8"),
          Y: T.Tensor((4 * N,), "float32"), Hs: T.Tensor((4 * N,), "float16"), Yh: T.Tensor((2 * N,), "float16"),
          R: T.Tensor((N, 10), "float32"), B8: T.Tensor((N, 8), "int32")):
        with T.Kernel(1, threads=N):
            t = T.get_thread_binding()
            S = T.alloc_shared((4 * N,), "float16")
            # 128-bit predicated global load as float32x4, lane-wise arithmetic, 128-bit store
            v = T.reinterpret(T.ldg128(X[4 * t:4 * t + 4], pred=t % 3 != 1), T.float32x4)
            T.stg128(Y[4 * t:4 * t + 4], v * 2.0 - T.Broadcast(X[0], 4))
            # float16 quads through shared memory (64-bit sts / lds), lanes reversed by a Shuffle
            T.sts64(S[4 * (N - 1 - t):4 * (N - 1 - t) + 4], T.ldg64(H[4 * t:4 * t + 4]))
            T.sync_threads()
            q = T.reinterpret(T.lds64(S[4 * t:4 * t + 4]), T.float16x4)
            Hs[4 * t:4 * t + 4] = T.Shuffle([q], [3, 2, 1, 0])
            # a Ramp load (stride 2), a vector cast, a Ramp store
            f2 = X[T.Ramp(4 * t, 2, 2)]
            Yh[T.Ramp(2 * t, 1, 2)] = T.cast(f2 * 0.5, "float16x2")
            # a mutable vector variable updated in a loop: (sum, sum of squares) of the quad
            acc = T.alloc_var(T.float32x2)
            for j in T.serial(4):
                x = X[4 * t + j]
                acc = acc + T.float32x2(x, x * x)
            R[t, 0:2] = acc
            R[t, 2] = T.extract_lane(T.bfloat16x2(X[4 * t], X[4 * t + 1]), 1)
            w = T.float32x2(X[4 * t], X[4 * t + 1])
            R[t, 3:5] = T.Shuffle([w, T.Broadcast(X[4 * t + 2], 2)], [2, 0])
            loc = T.alloc_local((2,), "float32")
            loc[0:2] = w
            loc[0:2] = T.float32x2(loc[1], loc[0])  # every lane is read before the first store
            R[t, 5] = loc[0]
            R[t, 6] = loc[1]
            R[t, 7] = T.extract_lane(T.reinterpret(T.ldg32(H[2 * t:2 * t + 2]), T.float16x2), 1)
            R[t, T.Ramp(8, 1, 2)] = X[4 * t + 2:4 * t + 4]  # a region's elements as the lanes
            # int8 lanes: a Ramp load regrouped into an int32 and back; an int8x4 built from lanes
            B8[t, 0:4] = T.reinterpret(T.reinterpret(I8[T.Ramp(4 * t, 1, 4)], T.int32), T.int8x4)
            B8[t, 4:8] = T.int8x4(I8[4 * t + 3], I8[4 * t + 2], I8[4 * t + 1], I8[4 * t]) * 2
    return k


def lanes_args():
    x = torch.randn(4 * N, dtype=torch.float64).float()
    h = torch.randn(4 * N).half()
    i8 = torch.randint(-60, 61, (4 * N,), dtype=torch.int8)
    outs = (torch.full((4 * N,), float("nan")), torch.full((4 * N,), float("nan")).half(),
            torch.full((2 * N,), float("nan")).half(), torch.full((N, 10), float("nan")),
            torch.full((N, 8), -999, dtype=torch.int32))
    return (x, h, i8) + outs


def lanes_check(x, h, i8, y, hs, yh, r, b8):
    xd = x.double().numpy()
    t = np.arange(N)
    keep = np.repeat(t % 3 != 1, 4)
    # 2x is exact, so the float32 result is the float64 one rounded once
    np.testing.assert_array_equal(y.numpy(), (np.where(keep, xd, 0.0) * 2.0 - xd[0]).astype(np.float32))
    np.testing.assert_array_equal(hs.numpy(), h.numpy()[::-1])
    np.testing.assert_array_equal(yh.double().numpy(), (xd.reshape(N, 4)[:, [0, 2]] * 0.5).astype(np.float16)
                                  .reshape(-1).astype(np.float64))
    q = xd.reshape(N, 4)
    rd = r.double().numpy()
    np.testing.assert_allclose(rd[:, 0], q.sum(1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rd[:, 1], (q * q).sum(1), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(rd[:, 2], x.view(N, 4)[:, 1].bfloat16().double().numpy())
    np.testing.assert_array_equal(rd[:, 3:5], q[:, [2, 0]])
    np.testing.assert_array_equal(rd[:, 5:7], q[:, [1, 0]])
    np.testing.assert_array_equal(rd[:, 8:10], q[:, 2:4])
    np.testing.assert_array_equal(rd[:, 7], h.view(N, 4).double().numpy().reshape(-1)[2 * t + 1])
    i = i8.numpy().astype(np.int64).reshape(N, 4)
    np.testing.assert_array_equal(b8.numpy()[:, 0:4], i)
    np.testing.assert_array_equal(b8.numpy()[:, 4:8], i[:, ::-1] * 2)


def atomics_kernel():
    @T.prim_func
    def k(D: T.Tensor((8,), "float32"), V: T.Tensor((N, 8), "float32"), P: T.Tensor((N, 6), "float32"),
          W: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=N):
            t = T.get_thread_binding()
            P[t, 0:2] = T.atomic_addx2(D[0:2], V[t, 0:2], return_prev=True)
            prev = T.atomic_addx4(D[T.Ramp(2, 1, 4)], V[t, 2:6], return_prev=True)
            P[t, 2:6] = prev
            T.atomic_addx2(D[6], V[t, 6])
            if t == 0:
                T.atomic_addx2(W, V[t, 0:2])  # a whole buffer: from its first element
    return k


def atomics_args():
    d = torch.randint(-50, 50, (8,)).float()
    v = torch.randint(1, 9, (N, 8)).float()  # small integers: every partial sum is exact
    return d, v, torch.full((N, 6), float("nan")), torch.randint(-9, 9, (2,)).float()


def atomics_check(d0, d, v, p, w0, w):
    """Each lane's previous values chain: sorted, each is the one before plus that thread's value."""
    np.testing.assert_array_equal(w.numpy(), (w0 + v[0, 0:2]).numpy())
    d0, d, v, p = (a.double().numpy() for a in (d0, d, v, p))
    for j in range(6):
        order = np.argsort(p[:, j], kind="stable")
        chain = np.concatenate([[d0[j]], d0[j] + np.cumsum(v[order, j])])
        np.testing.assert_array_equal(p[order, j], chain[:-1])
        assert d[j] == chain[-1]
    np.testing.assert_array_equal(d[6:8], d0[6:8] + v[:, 6:8].sum(0))


def test_vector_lanes_on_cpu():
    a = lanes_args()
    tilelang.compile(lanes_kernel(), target="cpu")(*a)
    lanes_check(*a)


def test_vector_atomics_return_prev_on_cpu():
    d, v, p, w = atomics_args()
    d0, w0 = d.clone(), w.clone()
    tilelang.compile(atomics_kernel(), target="cpu")(d, v, p, w)
    atomics_check(d0, d, v, p, w0, w)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_vector_lanes_on_host(arch):
    host = host_cuda_or_skip()
    a = lanes_args()
    kern = tilelang.compile(lanes_kernel(), target=f"cuda -arch={arch}")
    src = kern.get_kernel_source()
    # T.ldg128 / ldg64 / sts64 / lds64 at provably aligned addresses are single vector accesses
    for access in ("load_vec<4>(X_v", "load_vec<4>(H_v", "store_vec<4>(&S[", "load_vec<4>(S_v"):
        assert access in src, access
    host.HostProgram({"k": kern}).run("k", list(a))
    lanes_check(*a)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_vector_atomics_return_prev_on_host(arch):
    host = host_cuda_or_skip()
    d, v, p, w = atomics_args()
    d0, w0 = d.clone(), w.clone()
    host.HostProgram({"k": tilelang.compile(atomics_kernel(), target=f"cuda -arch={arch}")}).run("k", [d, v, p, w])
    atomics_check(d0, d, v, p, w0, w)


def test_values_outside_a_kernel():
    v = T.float32x2(1.5, 2)
    assert v.dtype == "float32x2" and v.lanes == 2
    assert float(T.extract_lane(v, 1).value) == 2.0
    r = T.Ramp(3, 2, 4)
    assert [e.value for e in r.values] == [3, 5, 7, 9] and r.dtype == "int32x4"
    assert T.Broadcast(1.0, 1).value == 1.0  # one lane: the scalar itself
    assert T.extract_lane(T.Shuffle([r, T.int32x2(20, 30)], [5, 0]), 0).value == 30
    bits = T.reinterpret(T.float16x2(1.0, -2.0), T.uint32)
    assert bits.dtype == "uint32"
    with pytest.raises(IndexError, match="out of bounds"):
        T.extract_lane(v, 2)
    with pytest.raises(TypeError, match="compile-time integer"):
        T.extract_lane(v, T.Var("i", "int32"))
    with pytest.raises(ValueError, match="expects a vector expression"):
        T.extract_lane(T.float32(1.0), 0)


def _parse(body):
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), H: T.Tensor((8,), "float16")):
        with T.Kernel(1, threads=1):
            body(A, H)
    return k


@pytest.mark.parametrize("body,msg", [
    (lambda A, H: T.reinterpret(T.float32x2(A[0], A[1]), T.float16x2), "64 bits, float16x2 has 32"),
    (lambda A, H: T.float32x2(A[0], A[1], A[2]), r"takes 2 lane values"),
    (lambda A, H: T.float32x2(A[0], A[1]) + T.float32x4(A[0]), "float32x4 vector where 2 lanes"),
    (lambda A, H: T.ldg64(H[0:2]), "must cover 8 bytes"),
    (lambda A, H: T.Ramp(0, 1, A[0]), "constant integer"),
    (lambda A, H: T.cast(T.float32x2(A[0], A[1]), "float16x4"), "lane counts differ"),
])
def test_unsupported_or_wrong_forms_are_clear_errors(body, msg):
    with pytest.raises(TileLangError, match=msg):
        _parse(body)


def test_vector_stores_that_do_not_fit_are_clear_errors():
    with pytest.raises(TileLangError, match="into one element") as e:
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1):
                A[0] = T.float32x2(1.0, 2.0)
    assert "A[0] = T.float32x2" in str(e.value)  # points at the user's line
    with pytest.raises(TileLangError, match="3 elements, the vector 2 lanes"):
        @T.prim_func
        def k2(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1):
                A[0:3] = T.float32x2(1.0, 2.0)
    with pytest.raises(TileLangError, match="into scalar|into one element"):
        @T.prim_func
        def k3(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1):
                s = T.alloc_var("float32")
                s = T.float32x2(A[0], A[1])
                A[0] = s


def packed_kernel(dtype):
    @T.prim_func
    def k(A: T.Tensor((2 * N,), dtype), B: T.Tensor((2 * N,), dtype), C: T.Tensor((2 * N,), dtype),
          O: T.Tensor((6, 2 * N), dtype)):
        with T.Kernel(1, threads=N):
            t = T.get_thread_binding()
            idx = T.Ramp(2 * t, 1, 2)
            a, b = A[idx], B[idx]
            O[0, 2 * t:2 * t + 2] = T.add2(a, b)
            O[1, idx] = T.sub2(a, b)
            O[2, idx] = T.mul2(a, b)
            O[3, idx] = T.fma2(a, b, C[idx])
            O[4, idx] = T.max2(a, b)
            O[5, idx] = T.abs2(T.min2(a, b))
    return k


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("target", ["cpu"] + [pytest.param(f"cuda -arch={a}", marks=pytest.mark.nvrtc)
                                               for a in ("sm_80", "sm_90a")])
def test_packed_x2_ops_lane_by_lane(dtype, target):
    td = getattr(torch, dtype)
    a, b, c = (torch.randn(2 * N, dtype=torch.float64).to(td) for _ in range(3))
    a[0], b[3] = float("nan"), float("nan")  # max2 / min2 ignore a NaN lane, as fmaxf / __hmax2
    o = torch.full((6, 2 * N), 7.0, dtype=td)
    kern = tilelang.compile(packed_kernel(dtype), target=target)
    if target == "cpu":
        kern(a, b, c, o)
    else:
        host_cuda_or_skip().HostProgram({"k": kern}).run("k", [a, b, c, o])
    x, y, z = (v.double().numpy() for v in (a, b, c))

    def rounded(v):
        return torch.from_numpy(v).to(td).double().numpy()

    got = o.double().numpy()
    for row, ref in enumerate([x + y, x - y, x * y, None, np.fmax(x, y), np.abs(np.fmin(x, y))]):
        if ref is not None:
            np.testing.assert_array_equal(got[row], rounded(ref))
    # one rounding of the exact x * y + z (bfloat16: the float32 fma rounded again, within an ulp)
    np.testing.assert_allclose(got[3], rounded(x * y + z), rtol=0 if dtype != "bfloat16" else 2 ** -7, atol=0)


def test_packed_x2_ops_check_their_operands():
    with pytest.raises(ValueError, match="same dtype"):
        T.add2(T.float16x2(1.0, 2.0), T.bfloat16x2(1.0, 2.0))
    with pytest.raises(ValueError, match="expected dtype in"):
        T.abs2(T.float64x2(1.0, 2.0))
    with pytest.raises(TypeError, match="packed x2 value"):
        T.max2(1.0, 2.0)


def negative_lanes_kernel():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((6, 4), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=1):
            for t in T.serial(6):
                B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t - 3, 1, 4)]  # lanes of unknown sign count from the end
            for t in T.serial(6):
                C[T.Ramp(2 * t - 5, 2, 2)] = B[t, 1:3]
    return k


@pytest.mark.parametrize("target", ["cpu"] + [pytest.param(f"cuda -arch={a}", marks=pytest.mark.nvrtc)
                                               for a in ("sm_80", "sm_90a")])
def test_vector_index_lanes_of_unknown_sign_wrap(target):
    a = torch.randn(64)
    b, c = torch.full((6, 4), float("nan")), torch.full((64,), float("nan"))
    kern = tilelang.compile(negative_lanes_kernel(), target=target)
    if target == "cpu":
        kern(a, b, c)
    else:
        host_cuda_or_skip().HostProgram({"k": kern}).run("k", [a, b, c])
    an = a.numpy()
    bref = np.array([[an[(t - 3 + j) % 64] for j in range(4)] for t in range(6)])
    np.testing.assert_array_equal(b.numpy(), bref)
    cref = np.full(64, np.nan, dtype=np.float32)
    for t in range(6):
        for j in range(2):
            cref[(2 * t - 5 + 2 * j) % 64] = bref[t, 1 + j]
    np.testing.assert_array_equal(c.numpy(), cref)


def lanewise_math_kernel():
    @T.prim_func
    def k(X: T.Tensor((4 * N,), "float32"), Y: T.Tensor((4 * N,), "float32"), Z: T.Tensor((4 * N,), "float32")):
        with T.Kernel(1, threads=N):
            t = T.get_thread_binding()
            v = X[T.Ramp(4 * t, 1, 4)]
            Y[4 * t:4 * t + 4] = T.if_then_else(v > 0, T.exp(-v), T.max(v, -0.5)) + T.abs(v) * T.sqrt(T.abs(v))
            Z[4 * t:4 * t + 4] = v
            Z[4 * t:4 * t + 4] += T.cast(T.cast(v, "float16x4"), "float32x4")  # a slice +=, a cast round trip
    return k


@pytest.mark.parametrize("target", ["cpu"] + [pytest.param(f"cuda -arch={a}", marks=pytest.mark.nvrtc)
                                               for a in ("sm_80", "sm_90a")])
def test_lanewise_math_select_and_slice_augassign(target):
    x = torch.randn(4 * N, dtype=torch.float64).float()
    y, z = torch.full((4 * N,), float("nan")), torch.full((4 * N,), float("nan"))
    kern = tilelang.compile(lanewise_math_kernel(), target=target)
    if target == "cpu":
        kern(x, y, z)
    else:
        host_cuda_or_skip().HostProgram({"k": kern}).run("k", [x, y, z])
    xd = x.double().numpy()
    ref = np.where(xd > 0, np.exp(-xd), np.maximum(xd, -0.5)) + np.abs(xd) * np.sqrt(np.abs(xd))
    np.testing.assert_allclose(y.double().numpy(), ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(z.numpy(), (xd + xd.astype(np.float16).astype(np.float64)).astype(np.float32))


def broadcast_once_kernel():
    @T.prim_func
    def k(Cnt: T.Tensor((2,), "int32"), P: T.Tensor((N, 6), "int32")):
        with T.Kernel(1, threads=N):
            t = T.get_thread_binding()
            P[t, 0:4] = T.Broadcast(T.atomic_add(Cnt[0], 1, return_prev=True), 4)
            P[t, 4:6] = T.int32x2(10, 20) + T.atomic_add(Cnt[1], 1, return_prev=True)
    return k


@pytest.mark.parametrize("target", ["cpu"] + [pytest.param("cuda -arch=sm_90a", marks=pytest.mark.nvrtc)])
def test_a_side_effect_in_every_lane_runs_once(target):
    cnt, p = torch.zeros(2, dtype=torch.int32), torch.full((N, 6), -1, dtype=torch.int32)
    kern = tilelang.compile(broadcast_once_kernel(), target=target)
    if target == "cpu":
        kern(cnt, p)
    else:
        host_cuda_or_skip().HostProgram({"k": kern}).run("k", [cnt, p])
    pn = p.numpy()
    assert cnt.tolist() == [N, N]
    assert (pn[:, 0:4] == pn[:, :1]).all() and sorted(pn[:, 0]) == list(range(N))
    assert (pn[:, 5] - pn[:, 4] == 10).all() and sorted(pn[:, 4] - 10) == list(range(N))
