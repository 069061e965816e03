"""T.create_barriers / T.ptx_init_barrier_thread_count: mbarriers named by integer ids, initialised
by the program, used by the raw names (T.ptx_arrive_barrier(0), T.ptx_wait_barrier(1), ...) and the
mbarrier_* ones. NVRTC sm_90a source, host emulator and CPU runs against float64, the errors."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError
from tilelang.testing import host_cuda_or_skip

R, W = 128, 8


def relay(steps=3, blocks=2):
    """Warp group 1 writes a row tile, arrives on barrier 0; warp group 0 waits (phase p), reads it,
    arrives on barrier 1 that group 1 waits for before its next write: `steps` rounds, both phases."""
    @T.prim_func
    def f(A: T.Tensor((steps, R, W), "float32"), C: T.Tensor((steps, R, W), "float32")):
        with T.Kernel(blocks, threads=256) as bx:
            X_s = T.alloc_shared((R, W), "float32")
            T.create_barriers(2)
            tx = T.get_thread_binding()
            if tx == 0:
                T.ptx_init_barrier_thread_count(0, 128)
                T.ptx_init_barrier_thread_count(1, 128)
            T.ptx_fence_barrier_init()
            T.sync_threads()
            for s in T.serial(steps):
                if tx >= 128:
                    if s > 0:
                        T.mbarrier_wait_parity(1, (s - 1) % 2)
                    for j in T.serial(W):
                        X_s[tx - 128, j] = A[s, tx - 128, j] + bx
                    T.ptx_arrive_barrier(0)
                else:
                    T.mbarrier_wait_parity(0, s % 2)
                    for j in T.serial(W):
                        C[s, tx, j] = C[s, tx, j] + X_s[tx, j] * 2.0
                    T.ptx_arrive_barrier(1)
    return f


def compile_(f, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(f, target=target)


def ref(a):
    return 2 * (a.double() + 0) + 2 * (a.double() + 1)  # both blocks add into C


def test_relay_on_cpu():
    a = torch.randn(3, R, W, generator=torch.Generator().manual_seed(1))
    c = torch.zeros(3, R, W)
    compile_(relay(), "cpu")(a, c)
    torch.testing.assert_close(c.double(), ref(a), rtol=1e-6, atol=1e-6)


@pytest.mark.nvrtc
def test_relay_sm90a_source_and_host_emulator():
    host = host_cuda_or_skip()
    k = compile_(relay(), "cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert "tl::mbarrier_init(barrier, 128);" in src and "tl::mbarrier_init(&barrier[1], 128);" in src
    assert src.count("mbarrier_init") == 2  # no initialisation of the compiler's own
    a = torch.randn(3, R, W, generator=torch.Generator().manual_seed(2))
    c = torch.zeros(3, R, W)
    prog = host.HostProgram({"f": k})
    prog.barrier_timeout = 10
    prog.run("f", [a, c])
    torch.testing.assert_close(c.double(), ref(a), rtol=1e-6, atol=1e-6)


def test_uninitialised_barrier_fails_on_cpu():
    @T.prim_func
    def f(C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.create_barriers(2)
            tx = T.get_thread_binding()
            if tx == 0:
                T.ptx_init_barrier_thread_count(0, 128)
            T.sync_threads()
            T.ptx_arrive_barrier(1)
            C[tx] = 1.0

    with pytest.raises(RuntimeError, match="not initialised"):
        compile_(f, "cpu")(torch.zeros(128))


def test_id_errors():
    def build(body):
        @T.prim_func
        def f(C: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                body()
                C[T.get_thread_binding()] = 1.0
        return f

    with pytest.raises(DSLTypeError, match="has not called it"):
        build(lambda: T.ptx_arrive_barrier(0))
    with pytest.raises(DSLTypeError, match="out of range"):
        build(lambda: (T.create_barriers(2), T.ptx_wait_barrier(2)))
    with pytest.raises(DSLTypeError, match="comes from T.alloc_barrier"):
        build(lambda: T.ptx_init_barrier_thread_count(T.alloc_barrier(128), 1))
    with pytest.raises(DSLTypeError, match="one call per kernel"):
        build(lambda: (T.create_barriers(1), T.create_barriers(1)))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                    reason="needs an sm_90 GPU")
def test_relay_on_the_gpu():
    """One block (two would add into C at once): the barrier ids' phases on the hardware."""
    a = torch.randn(3, R, W, generator=torch.Generator().manual_seed(5)).cuda()
    c = torch.zeros(3, R, W, device="cuda")
    compile_(relay(blocks=1), "cuda")(a, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double().cpu(), 2 * a.double().cpu(), rtol=1e-6, atol=1e-6)
