"""T.create_tma_descriptor + T.tma_load (a tensor map built from the program's own shape, strides,
box and swizzle; a box load into shared memory completing on an mbarrier) and T.ptx_cp_async_bulk.
The kernels read the loaded tiles back through the swizzle rule by hand, so the CPU backend, the
host emulator of the sm_90a source, and torch (float64 / exact references) must agree."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError
from tilelang.testing import host_cuda_or_skip

M, K = 160, 192  # not multiples of the 64-row box: the last boxes are partly outside (zero fill)


def swizzled(byte, swizzle):
    """The swizzle rule (cpu/tl_smem_desc.h), on a byte offset from a 1024-aligned tile."""
    bits = {128: 7, 64: 3, 32: 1, 0: 0}[swizzle]
    return byte ^ (((byte >> 7) & bits) << 4)


def box_loader(swizzle_enum, box_cols):
    """Block (bx, by) loads the box_cols x 64 box at (column 32 + bx * box_cols, row 64 by - 16) of A,
    then each thread reads elements back through the swizzle and writes them to C[by, bx]."""
    swz = {0: 0, 1: 32, 2: 64, 3: 128}[swizzle_enum]
    n = box_cols * 64

    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), C: T.Tensor((3, 2, 64, box_cols), "float32")):
        with T.Kernel(2, 3, threads=128) as (bx, by):
            A_s = T.alloc_shared((n,), "float16")
            T.create_barriers(1)
            tx = T.get_thread_binding()
            desc = T.create_tma_descriptor(6, 2, A.data, K, M, 2, K * 2, box_cols, 64, 1, 1, 0, swizzle_enum, 2, 0)
            if tx == 0:
                T.ptx_init_barrier_thread_count(0, 1)
            T.ptx_fence_barrier_init()
            T.sync_threads()
            if tx == 0:
                T.ptx_arrive_barrier_expect_tx(0, n * 2)
                T.tma_load(desc, 0, T.access_ptr(A_s, "w"), 32 + bx * box_cols, by * 64 - 16, 0)
            T.ptx_wait_barrier(0)
            for e in T.serial(n // 128):
                byte = (e * 128 + tx) * 2
                sw = byte ^ (((byte >> 7) & {0: 0, 32: 1, 64: 3, 128: 7}[swz]) << 4)
                C[by, bx, (e * 128 + tx) // box_cols, (e * 128 + tx) % box_cols] = A_s[sw // 2]
    return f


def ref_boxes(a, box_cols):
    out = torch.zeros(3, 2, 64, box_cols, dtype=torch.float64)
    for by in range(3):
        for bx in range(2):
            r0, c0 = by * 64 - 16, 32 + bx * box_cols
            for r in range(64):
                if 0 <= r0 + r < M:
                    cs = [c for c in range(box_cols) if 0 <= c0 + c < K]
                    out[by, bx, r, cs] = a[r0 + r, [c0 + c for c in cs]].double()
    return out


def compile_(f, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(f, target=target)


CASES = [(3, 64), (2, 32), (1, 16), (0, 24)]  # (CUtensorMapSwizzle, box columns): 128, 64, 32 B, none


@pytest.mark.parametrize("swizzle,cols", CASES)
def test_tma_load_on_cpu(swizzle, cols):
    a = torch.randn(M, K, generator=torch.Generator().manual_seed(swizzle)).half()
    c = torch.full((3, 2, 64, cols), float("nan"))
    compile_(box_loader(swizzle, cols), "cpu")(a, c)
    torch.testing.assert_close(c.double(), ref_boxes(a, cols), rtol=0, atol=0)


@pytest.mark.nvrtc
@pytest.mark.parametrize("swizzle,cols", CASES[:2])
def test_tma_load_sm90a_on_host_emulator(swizzle, cols):
    host = host_cuda_or_skip()
    k = compile_(box_loader(swizzle, cols), "cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert "const __grid_constant__ tl::TensorMap tmap_0" in src
    assert "tl::tma_load(&tmap_0, barrier, A_s, ((bx * " in src
    a = torch.randn(M, K, generator=torch.Generator().manual_seed(10 + swizzle)).half()
    c = torch.full((3, 2, 64, cols), float("nan"))
    prog = host.HostProgram({"f": k})
    prog.barrier_timeout = 10
    prog.run("f", [a, c])
    torch.testing.assert_close(c.double(), ref_boxes(a, cols), rtol=0, atol=0)


def dynamic_rows():
    """A 3-d map whose outer dim is the dynamic batch: dims and strides are evaluated per launch."""
    B = T.dynamic("b")

    @T.prim_func
    def f(X: T.Tensor((B, 8, 32), "float32"), Y: T.Tensor((B, 8, 32), "float32")):
        with T.Kernel(B, threads=128) as bx:
            X_s = T.alloc_shared((8, 32), "float32")
            bars = T.alloc_barrier(1)
            tx = T.get_thread_binding()
            desc = T.create_tma_descriptor(7, 3, X.data, 32, 8, B, 4, 128, 1024, 32, 8, 1, 1, 1, 1, 0, 0, 0, 0)
            if tx == 0:
                T.mbarrier_arrive_expect_tx(bars[0], 8 * 32 * 4)
                T.tma_load(desc, bars[0], X_s, 0, 0, bx)
            T.mbarrier_wait_parity(bars[0], 0)
            for j in T.serial(2):
                Y[bx, tx // 16, (tx % 16) * 2 + j] = X_s[tx // 16, (tx % 16) * 2 + j] + 1.0
    return f


def test_dynamic_map_on_cpu_and_host_emulator():
    x = torch.randn(5, 8, 32, generator=torch.Generator().manual_seed(3))
    y = torch.full_like(x, float("nan"))
    compile_(dynamic_rows(), "cpu")(x, y)
    torch.testing.assert_close(y.double(), x.double() + 1)
    host = host_cuda_or_skip()
    y2 = torch.full_like(x, float("nan"))
    prog = host.HostProgram({"f": compile_(dynamic_rows(), "cuda -arch=sm_90a")})
    prog.run("f", [x, y2])
    torch.testing.assert_close(y2.double(), x.double() + 1)


def bulk_copy():
    @T.prim_func
    def f(X: T.Tensor((4, 64), "int32"), Y: T.Tensor((4, 64), "int32")):
        with T.Kernel(4, threads=64) as bx:
            X_s = T.alloc_shared((2, 64), "int32")
            T.create_barriers(1)
            tx = T.get_thread_binding()
            if tx == 0:
                T.ptx_init_barrier_thread_count(0, 1)
            T.ptx_fence_barrier_init()
            T.sync_threads()
            if tx == 0:
                T.ptx_arrive_barrier_expect_tx(0, 256)
                T.ptx_cp_async_bulk("handle", X_s.data, 64, X.data, bx * 64, 256, 0)
            T.ptx_wait_barrier(0)
            Y[bx, tx] = X_s[1, tx] * 3
    return f


def test_cp_async_bulk_on_cpu_and_host_emulator():
    x = torch.randint(-1000, 1000, (4, 64), generator=torch.Generator().manual_seed(4), dtype=torch.int32)
    y = torch.zeros_like(x)
    compile_(bulk_copy(), "cpu")(x, y)
    assert torch.equal(y, x * 3)
    host = host_cuda_or_skip()
    k = compile_(bulk_copy(), "cuda -arch=sm_90a")
    assert "tl::bulk_copy_g2s(" in k.get_kernel_source()
    y2 = torch.zeros_like(x)
    host.HostProgram({"f": k}).run("f", [x, y2])
    assert torch.equal(y2, x * 3)


def test_descriptor_errors():
    def build(*args, **load):
        @T.prim_func
        def f(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((64, 64), "float16")
                bars = T.alloc_barrier(1)
                d = T.create_tma_descriptor(*[A.data if a == "A" else a for a in args])
                T.tma_load(d, bars[0], A_s, *load.get("coords", (0, 0)))
        return f

    ok = (6, 2, "A", 64, 64, 2, 128, 64, 64, 1, 1, 0, 3, 2, 0)
    build(*ok)
    with pytest.raises(DSLTypeError, match="needs 7 \\+ 4 \\* rank = 15 arguments"):
        build(*ok[:-1])
    with pytest.raises(DSLTypeError, match="2-byte elements; A is float16|4-byte elements; A is float16"):
        build(7, *ok[1:])
    with pytest.raises(DSLTypeError, match="element strides \\[2, 1\\] are not supported"):
        build(*ok[:9], 2, 1, *ok[11:])
    with pytest.raises(DSLTypeError, match="interleave 1 / oob_fill 0 are not supported"):
        build(*ok[:11], 1, *ok[12:])
    with pytest.raises(DSLTypeError, match="at most the 64-byte swizzle span"):
        build(*ok[:12], 2, 2, 0)
    with pytest.raises(DSLTypeError, match="takes 2 coordinates"):
        build(*ok, coords=(0,))


gpu = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                         reason="needs an sm_90 GPU")


@pytest.mark.cuda
@gpu
@pytest.mark.parametrize("swizzle,cols", CASES)
def test_tma_load_on_the_gpu(swizzle, cols):
    """The swizzle rule the CPU backend and the host emulator share, against the hardware's."""
    a = torch.randn(M, K, generator=torch.Generator().manual_seed(40 + swizzle)).half()
    c = torch.full((3, 2, 64, cols), float("nan"), device="cuda")
    compile_(box_loader(swizzle, cols), "cuda")(a.cuda(), c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double().cpu(), ref_boxes(a, cols), rtol=0, atol=0)


@pytest.mark.cuda
@gpu
def test_dynamic_map_and_bulk_copy_on_the_gpu():
    x = torch.randn(5, 8, 32, generator=torch.Generator().manual_seed(43)).cuda()
    y = torch.full_like(x, float("nan"))
    compile_(dynamic_rows(), "cuda")(x, y)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double(), x.double() + 1)
    xi = torch.randint(-1000, 1000, (4, 64), generator=torch.Generator().manual_seed(44), dtype=torch.int32).cuda()
    yi = torch.zeros_like(xi)
    compile_(bulk_copy(), "cuda")(xi, yi)
    torch.cuda.synchronize()
    assert torch.equal(yi, xi * 3)
