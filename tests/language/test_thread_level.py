"""Thread-level and buffer-view names on the CPU backend, against float64 / numpy references."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import LoweringError


def _philox_ref(seed, counter):
    """Philox4x32-10 in plain Python (Random123's definition)."""
    M0, M1, W0, W1, m32 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85, 0xFFFFFFFF
    c = [counter & m32, (counter >> 32) & m32, 0, 0]
    k = [seed & m32, (seed >> 32) & m32]
    for _ in range(10):
        p0, p1 = M0 * c[0], M1 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & m32, (p0 >> 32) ^ c[3] ^ k[1], p0 & m32]
        k = [(k[0] + W0) & m32, (k[1] + W1) & m32]
    return c


def test_rng_matches_philox_numbering():
    @tilelang.jit
    def rand(M=300, seed=7):
        A = T.empty((M,), "uint32")
        with T.Kernel(T.ceildiv(M, 128), threads=1) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed, 0, bx * 128 + tx * 128)
            for i, j in T.Parallel(1, 128):
                idx = (bx + i) * 128 + j
                if idx < M:
                    A[idx] = T.rng_rand()
        return A

    seed = int(np.random.randint(1, 2**40))
    got = rand(300, seed).numpy().astype(np.int64) & 0xFFFFFFFF
    want = [_philox_ref(seed, e // 4)[e % 4] for e in range(300)]
    assert got.tolist() == want
    assert [hex(v) for v in _philox_ref(0, 0)] == ["0x6627e8d5", "0xe169c58d", "0xbc57ac4c", "0x9b00dbd8"]


def test_make_tensor_from_pointer_table_and_views():
    G, M, N = 3, 4, 8

    @T.prim_func
    def k(P: T.Tensor([G], T.ptr), O: T.Tensor((G, M, N), "float32"), V: T.Tensor((G, M * N), "int32")):
        with T.Kernel(G, threads=32) as g:
            A = T.make_tensor(P[g], (M, N), "float32")
            S = T.alloc_shared((M, N), "float32")
            T.copy(A, S)
            R = T.reshape(S, (M * N,))
            Bits = T.view(S, (M * N,), "int32")
            for i, j in T.Parallel(M, N):
                O[g, i, j] = R[i * N + j] * 2 + 1
            for i in T.Parallel(M * N):
                V[g, i] = Bits[i]

    kern = tilelang.compile(k, target="cpu")
    xs = [torch.randn(M, N) for _ in range(G)]
    P = torch.tensor([x.data_ptr() for x in xs], dtype=torch.int64)
    O, V = torch.full((G, M, N), float("nan")), torch.zeros(G, M * N, dtype=torch.int32)
    kern(P, O, V)
    ref = torch.stack(xs).double() * 2 + 1
    torch.testing.assert_close(O.double(), ref)
    assert torch.equal(V, torch.stack(xs).reshape(G, -1).view(torch.int32))


def test_reshape_size_mismatch_is_an_error():
    with pytest.raises(tilelang.errors.TileLangError, match="T.reshape"):
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((16,), "float32")
                T.reshape(S, (3, 5))


def test_cummax_and_reducer_gemv():
    M, N, bM, bN = 64, 96, 32, 32

    @T.prim_func
    def k(a: T.Tensor((M, N), "float32"), x: T.Tensor((N,), "float32"), o: T.Tensor((M,), "float32"),
          c: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bM), threads=128) as i0:
            r = T.alloc_reducer(bM, "float32", replication="all")
            T.clear(r)
            for i1 in T.serial(T.ceildiv(N, bN)):
                a_f = T.alloc_fragment((bM, bN), "float32")
                T.copy(a[i0 * bM, i1 * bN], a_f)
                for i, j in T.Parallel(bM, bN):
                    r[i] += a_f[i, j] * x[i1 * bN + j]
            T.finalize_reducer(r)
            T.copy(r, o[i0 * bM])
            t = T.alloc_shared((bM, N), "float32")
            T.copy(a[i0 * bM, 0], t)
            T.cummax(t, dim=1)
            T.copy(t, c[i0 * bM, 0])

    kern = tilelang.compile(k, target="cpu")
    a, x = torch.randn(M, N), torch.randn(N)
    o, c = torch.full((M,), float("nan")), torch.full((M, N), float("nan"))
    kern(a, x, o, c)
    torch.testing.assert_close(o.double(), a.double() @ x.double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c, torch.cummax(a, dim=1).values)


def test_im2col_convolution_against_conv2d():
    N, H, W, C, F, K, S, D, P = 2, 9, 7, 4, 8, 3, 2, 1, 1
    OH, OW = (H + 2 * P - D * (K - 1) - 1) // S + 1, (W + 2 * P - D * (K - 1) - 1) // S + 1
    bM, bK = 16, 16

    @T.prim_func
    def conv(data: T.Tensor((N, H, W, C), "float32"), kern: T.Tensor((K * K * C, F), "float32"),
             out: T.Tensor((N * OH * OW, F), "float32")):
        with T.Kernel(1, T.ceildiv(N * OH * OW, bM), threads=128) as (bx, by):
            d_s = T.alloc_shared((bM, bK), "float32")
            k_s = T.alloc_shared((bK, F), "float32")
            acc = T.alloc_fragment((bM, F), "float32")
            T.clear(acc)
            for ki in T.serial(T.ceildiv(K * K * C, bK)):
                T.im2col(data, d_s, by, ki, K, S, D, P)
                T.copy(kern[ki * bK, 0], k_s)
                T.gemm(d_s, k_s, acc)
            T.copy(acc, out[by * bM, 0])

    f = tilelang.compile(conv, target="cpu")
    x, w = torch.randn(N, H, W, C), torch.randn(K, K, C, F)
    out = torch.full((N * OH * OW, F), float("nan"))
    f(x, w.reshape(K * K * C, F), out)
    ref = torch.nn.functional.conv2d(x.double().permute(0, 3, 1, 2), w.double().permute(3, 2, 0, 1),
                                     stride=S, padding=P, dilation=D)
    torch.testing.assert_close(out.double(), ref.permute(0, 2, 3, 1).reshape(-1, F), rtol=1e-5, atol=1e-5)


SRC_C = "static void add_k(float* p, int n, float k) { for (int i = 0; i < n; ++i) p[i] += k; }\n"


def test_extern_dp4a_atomics_and_coordinates():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), Q: T.Tensor((8,), "int8"), R: T.Tensor((6,), "int32"),
          X: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=1):
            T.import_source(SRC_C)
            v = T.alloc_local((8,), "float32")
            T.copy(A, v)
            T.call_extern("handle", "add_k", T.access_ptr(v, "rw"), 8, T.float32(1.5))
            T.copy(v, A)
            acc = T.alloc_local((1,), "int32")
            acc[0] = 3
            T.dp4a(Q[0], Q[4], acc)
            R[0] = acc[0]
            T.atomic_store(R[1], T.atomic_load(R[2], "acquire") + 5, "release")
            i, j = T.index_to_coordinates(29, (4, 8))
            R[3] = i
            R[4] = j
            T.atomic_addx4(X[1, 2], X[0, 0])
            T.sync_threads()

    f = tilelang.compile(k, target="cpu")
    a = torch.randn(8)
    q = torch.randint(-128, 128, (8,), dtype=torch.int8)
    r = torch.zeros(6, dtype=torch.int32)
    r[2] = 11
    x = torch.randn(4, 8)
    a0, x0 = a.clone(), x.clone()
    f(a, q, r, x)
    torch.testing.assert_close(a, a0 + 1.5)
    assert int(r[0]) == 3 + int((q[:4].long() * q[4:].long()).sum())
    assert r[1:5].tolist() == [16, 11, 3, 5]
    x0[1, 2:6] += x0[0, 0:4]
    torch.testing.assert_close(x, x0)


def _shfl_kernel(threads):
    @T.prim_func
    def k(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=threads):
            t = T.get_thread_binding()
            A[t] = T.shfl_xor(A[t], 1)
    return k


def test_warp_shuffles_run_on_cpu_per_lane():
    k = tilelang.compile(_shfl_kernel(32), target="cpu")
    a = torch.randn(32)
    ref = a.view(16, 2).flip(1).reshape(32).clone()
    k(a)
    assert torch.equal(a, ref)


@pytest.mark.parametrize("n", [32, 48, 100, 130])
def test_activemask_on_cpu_is_the_warps_existing_lanes(n):
    """Converged code (transform/cpu_activemask.py): each thread gets the mask of its warp's lanes that exist."""
    @T.prim_func
    def m(A: T.Tensor((n,), "int64")):
        with T.Kernel(1, threads=n):
            t = T.get_thread_binding()
            A[t] = T.activemask()
    a = torch.full((n,), -1, dtype=torch.int64)
    tilelang.compile(m, target="cpu")(a)
    want = [(1 << min(32, n - t // 32 * 32)) - 1 for t in range(n)]
    assert a.tolist() == want


def test_activemask_under_a_thread_branch_refused_on_cpu():
    @T.prim_func
    def m(A: T.Tensor((32,), "int64")):
        with T.Kernel(1, threads=32):
            t = T.get_thread_binding()
            if t < 5:
                A[t] = T.activemask()
    with pytest.raises(LoweringError, match="T.activemask is not supported on target cpu"):
        tilelang.compile(m, target="cpu")


def test_allreduce_runs_and_sync_grid_compiles_for_cuda():

    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4):
            t = T.get_thread_binding()
            out = T.alloc_local((1,), "float32")
            with T.attr(T.comm_reducer(lambda x, y: T.max(x, y), [T.float32(-1e30)]), "reduce_scope", 0):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[t], True, out[0], t, dtype="handle"))
            A[t] = out[0]
    a = torch.randn(4)
    ref = torch.full((4,), float(a.max()))
    tilelang.compile(k, target="cpu")(a)
    assert torch.equal(a, ref)

    @T.prim_func
    def g(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.serial(2):  # at the top level it splits the kernel (tests/transform/test_grid_barrier.py)
                T.sync_grid()
    assert tilelang.compile(g, target="cuda -arch=sm_80").artifact.csource.cooperative  # no refusal


def test_thread_binding_checks_the_extent():
    with pytest.raises(tilelang.errors.TileLangError, match="launches 128 threads"):
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=128):
                T.thread_binding(0, 64, thread="threadIdx.x")


@pytest.mark.parametrize("a,b,c", [("float16", "float16", "int32"), ("int8", "int8", "float32"),
                                   ("uint8", "uint8", "int32"), ("int8", "float16", "int32")])
def test_dp4a_operand_dtypes_are_value_errors(a, b, c):
    """int8 x int8 -> int32 only: anything else is a ValueError naming the operand and its dtype."""
    with pytest.raises(ValueError, match=r"T.dp4a requires (int8|int32) [ABC], got [ABC].dtype="):
        @T.prim_func
        def k(A: T.Tensor((4,), a), B: T.Tensor((4,), b), C: T.Tensor((1,), c)):
            with T.Kernel(1, threads=1):
                T.dp4a(A, B, C)
