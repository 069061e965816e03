"""Control flow as calls (language/control.py), T.any_of / T.all_of (language/logical.py) and the
kernel annotations (language/annotations.py), on the CPU backend and, as CUDA, on the host
emulator and NVRTC, against numpy references on fresh random inputs."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip
from tilelang.errors import TileLangError

R, C = 64, 16


def scan():
    """Per row (one thread each): the count of positive entries before the first one below -1
    (break), skipping entries above 1 (continue); any_of / all_of of the row's first 4 entries."""
    @T.prim_func
    def k(A: T.Tensor((R, C), "float32"), O: T.Tensor((R, 3), "int32")):
        with T.Kernel(1, threads=R):
            tx = T.get_thread_binding()
            T.Assert(R % 2 == 0, "R is even")
            row = T.alloc_local((C,), "float32")
            n = T.alloc_var("int32")
            n = 0
            for j in T.serial(C):
                row[j] = A[tx, j]
            for j in T.serial(C):
                if row[j] < -1.0:
                    T.loop_break()
                if row[j] > 1.0:
                    T.evaluate(T.continue_loop())
                if row[j] > 0:
                    n = n + 1
            T.Assert(n >= 0, "a count is never negative")
            O[tx, 0] = n
            pos = T.alloc_local((4,), "int32")
            for j in T.serial(4):
                pos[j] = T.cast(row[j] > 0, "int32")
            O[tx, 1] = T.cast(T.any_of(pos), "int32")
            O[tx, 2] = T.cast(T.all_of(pos[0:4]), "int32")
            for j in T.serial(C):
                if j == 3:
                    T.evaluate(T.break_loop())
                O[tx, 2] = O[tx, 2] + 2
    return k


def check_scan(a, o):
    for i, row in enumerate(a.numpy()):
        n = 0
        for x in row:
            if x < -1:
                break
            if x > 1:
                continue
            n += x > 0
        assert o[i, 0] == n
        assert o[i, 1] == int((row[:4] > 0).any())
        assert o[i, 2] == int((row[:4] > 0).all()) + 6


def test_control_and_logical_on_cpu():
    kern = tilelang.compile(scan(), target="cpu")
    a, o = torch.randn(R, C) * 1.5, torch.full((R, 3), -7, dtype=torch.int32)
    kern(a, o)
    check_scan(a, o)


@pytest.mark.nvrtc
def test_control_and_logical_on_host():
    host = host_cuda_or_skip()
    from tilelang.backend.cuda import nvrtc
    kern = tilelang.compile(scan(), target="cuda -arch=sm_80")
    nvrtc.compile_cuda(kern.get_kernel_source(), "sm_80")
    a, o = torch.randn(R, C) * 1.5, torch.full((R, 3), -7, dtype=torch.int32)
    host.HostProgram({"k": kern}).run("k", [a, o])
    check_scan(a, o)


def annotated():
    @T.prim_func
    def k(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32"), Z: T.Tensor((1,), "int32")):
        T.annotate_restrict_buffers(X, Y)
        T.annotate_compile_flags(["-DTL_TEST_FLAG=37"])
        T.annotate_pass_configs({"tl.disable_unit_grid_fold": True})
        with T.Kernel(1, threads=128):
            T.annotate_min_blocks_per_sm(2)
            T.annotate_safe_value({X: 0})
            T.import_source("#if !defined(TL_TEST_FLAG) || TL_TEST_FLAG != 37\n#error the kernel's flag is missing\n"
                            "#endif\nstatic int tl_test_flag(void) { return TL_TEST_FLAG; }\n")
            tx = T.get_thread_binding()
            Y[tx] = X[tx] * 3
            if tx == 0:
                Z[0] = T.call_extern("int32", "tl_test_flag")
    return k


def test_annotations_on_cpu():
    kern = tilelang.compile(annotated(), target="cpu")
    f = kern.get_kernel_source()
    assert "float* X = " in f and "float* Y = " in f and "int32_t* restrict Z = " in f
    x, y, z = torch.randn(128), torch.full((128,), float("nan")), torch.zeros(1, dtype=torch.int32)
    kern(x, y, z)
    torch.testing.assert_close(y.double(), x.double() * 3, rtol=1e-6, atol=1e-6)
    assert z.item() == 37  # the kernel's own compile flag reached the C compiler


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_annotations_on_cuda(arch):
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    kern = tilelang.compile(annotated(), target=f"cuda -arch={arch}")
    src = kern.get_kernel_source()
    assert "__launch_bounds__(128, 2)" in src
    assert "float* X" in src and "float* Y" in src and "int32_t* __restrict__ Z" in src
    # NVRTC compiled it (at tilelang.compile), so -DTL_TEST_FLAG=37 reached it: the source #errors without


def test_errors():
    with pytest.raises(TileLangError, match="T.thread_return"):
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                T.thread_return()
    with pytest.raises(TileLangError, match="T.Assert failed"):
        @T.prim_func
        def k2(A: T.Tensor((4,), "float32")):
            T.Assert(4 % 3 == 0, "4 is a multiple of 3")
            with T.Kernel(1, threads=32):
                A[0] = 1.0
    with pytest.raises(TileLangError, match="the keys must be tensor parameters"):
        @T.prim_func
        def k3(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((4,), "float32")
                T.annotate_safe_value({s: 1.5})
    with pytest.raises(TileLangError, match="is a fragment"):
        @T.prim_func
        def k4(A: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=32):
                f = T.alloc_fragment((4,), "int32")
                A[0] = T.cast(T.any_of(f), "int32")


def test_pass_configs_annotation_under_the_callers():
    """The kernel's own configs apply (unit-grid folding off keeps `bx * 128`); the caller's win."""
    @T.prim_func
    def k(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        T.annotate_pass_configs({"tl.disable_unit_grid_fold": True})
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((128,), "float32")
            T.copy(X[bx * 128:(bx + 1) * 128], S)
            T.copy(S, Y[bx * 128:(bx + 1) * 128])

    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    assert "&X[((bx * 128) + i)]" in tilelang.compile(k, target="cuda -arch=sm_80").get_kernel_source()
    src = tilelang.compile(k, target="cuda -arch=sm_80",
                           pass_configs={"tl.disable_unit_grid_fold": False}).get_kernel_source()
    assert "&X[i]" in src
    x, y = torch.randn(128), torch.full((128,), float("nan"))
    tilelang.compile(k, target="cpu")(x, y)
    assert torch.equal(x, y)


def printer():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((4,), "float32")
            T.copy(A, S)
            T.print(msg="hello from k")
            T.print(S, msg="tile", warp_group_id=0, warp_id=1)
    return k


def test_print_message_and_printing_thread(capfd):
    a = torch.tensor([1.5, -2.0, 3.25, 7.0])
    tilelang.compile(printer(), target="cpu")(a)
    out = capfd.readouterr().out
    assert "hello from k" in out and "1.5 -2 3.25 7" in out
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if nvrtc.nvrtc_available():
        src = tilelang.compile(printer(), target="cuda -arch=sm_80").get_kernel_source()
        assert 'printf("hello from k\\n")' in src and "if (tid == 32)" in src
    with pytest.raises(TileLangError, match="names thread 256"):
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=128):
                T.print(A, warp_group_id=2)
