"""Kernels with a T.sync_threads() in a T.Parallel body (transform/parallel_barriers.py), shared by the
CPU-backend tests (test_parallel_barriers.py) and the NVRTC + host-emulator ones
(cuda/test_parallel_barriers_cuda.py)."""
import tilelang.language as T


def reverse_add(N, threads=128):
    """A[i] += A[N - 1 - i], every read before any write (a T.sync_threads in the T.Parallel body)."""

    @T.prim_func
    def k(A: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=threads):
            L = T.alloc_fragment((N,), T.float32)
            for i in T.Parallel(N):
                L[i] = A[N - i - 1]
                T.sync_threads()
                A[i] = A[i] + L[i]
    return k


def two_dim(M, N, threads=64):
    """A 2-d nest, two barriers, each phase reading what other elements wrote in the one before."""

    @T.prim_func
    def k(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=threads):
            S = T.alloc_shared((M, N), T.float32)
            R = T.alloc_shared((M, N), T.float32)
            for i, j in T.Parallel(M, N):
                S[i, j] = A[i, j]
                T.sync_threads()
                R[i, j] = S[i, j] + S[M - 1 - i, N - 1 - j]
                T.sync_threads()
                B[i, j] = R[M - 1 - i, j] * 2.0
    return k
