"""T.device_assert on CUDA: the failing thread records its assert's index in a device flag and
returns; the host reads the flag after the launch and raises the CPU backend's RuntimeError.

No GPU here: the CUDA source and signature are checked after NVRTC compiles them, the host
side runs with a fake flag and a fake launcher, and the flag's driver calls with a fake driver.
What still needs a GPU: tests marked `cuda` at the bottom.
"""
import ctypes
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.backend.cuda import driver
from tilelang.backend.cuda.pipeline import raise_device_assert

N = 256


def checked_double():
    @T.prim_func
    def checked_double(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // 128, threads=128) as bx:
            for i in T.Parallel(128):
                T.device_assert(A[bx * 128 + i] >= 0, "A must be non-negative")
                T.device_assert(A[bx * 128 + i] < 100, "A must be below 100")
                B[bx * 128 + i] = A[bx * 128 + i] * 2

    return checked_double


def plain_double():
    @T.prim_func
    def plain_double(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // 128, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2

    return plain_double


def cuda_kernel(func, arch="sm_80"):
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(func, target=f"cuda -arch={arch}")


# ----------------------------------------------------------------------------- generated code


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_failing_thread_records_its_assert_index_and_returns(arch):
    k = cuda_kernel(checked_double(), arch)
    src, cs = k.get_kernel_source(), k.artifact.csource
    sig = re.search(r"checked_double\((.*)\) \{", src).group(1)
    assert sig.endswith("int* __restrict__ tl_assert_flag")
    assert cs.signature == ("ptr", "ptr", "ptr") and cs.arg_kinds[-1] == ("assert_flag", None)
    assert cs.asserts == ("A must be non-negative", "A must be below 100")
    for idx in (1, 2):  # first failure wins; the thread stops there
        assert re.search(rf"if \(atomicCAS\(tl_assert_flag, 0, {idx}\) == 0\) \{{ printf\([^;]*\); \}} return; \}}", src)
    assert "__trap" not in src and "assert(" not in src.replace("device_assert(", "")


@pytest.mark.nvrtc
def test_kernels_without_asserts_get_no_flag_argument():
    k = cuda_kernel(plain_double())
    assert "tl_assert_flag" not in k.get_kernel_source()
    assert k.artifact.csource.signature == ("ptr", "ptr") and k.artifact.csource.asserts == ()
    calls = []
    k.artifact._function = lambda: FakeFunction(calls)
    k.artifact.launch([1, 2], stream=7)  # no flag is read: no driver call, no sync
    assert len(calls) == 1 and not k.artifact._flags


@pytest.mark.nvrtc
def test_warp_specialized_kernels_record_without_returning():
    """A returning consumer thread would hang the counted named barrier / mbarrier waits."""

    @T.prim_func
    def ws_gemm(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
                C: T.Tensor((256, 256), "float16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(4, num_stages=3):
                T.copy(A[by * 128, ko * 64], A_s)
                T.copy(B[ko * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(128, 128):
                T.device_assert(C_l[i, j] == C_l[i, j], "C is NaN")
            T.copy(C_l, C[by * 128, bx * 128])

    src = cuda_kernel(ws_gemm, "sm_90a").get_kernel_source()
    assert "tl_full" in src  # warp-specialized
    line = next(ln for ln in src.splitlines() if "atomicCAS(tl_assert_flag, 0, 1)" in ln)
    assert "return;" not in line


@pytest.mark.nvrtc
def test_asserting_kernels_take_the_fast_path_that_fills_the_flag():
    from tilelang.jit.fast_call import FastCall

    k = cuda_kernel(checked_double())
    fast = FastCall(k)
    assert not fast.simple and fast.arg_plan[-1] == ("x", "assert_flag", None)
    assert FastCall(cuda_kernel(plain_double())).simple


# ----------------------------------------------------------------------------- host side


class FakeFlag:
    """Stands in for driver.AssertFlag: returns the code a kernel would have left."""

    def __init__(self, code):
        self.code, self.ptr, self.streams = code, 0xF1A6, []

    def read_and_reset(self, stream=None):
        self.streams.append(stream)
        code, self.code = self.code, 0
        return code


class FakeFunction:
    def __init__(self, calls):
        self.calls = calls

    def launch(self, grid, block, smem, args, stream=None):
        self.calls.append((grid, block, smem, list(args), stream))


def cpu_message(a):
    k = tilelang.compile(checked_double(), target="cpu")
    with pytest.raises(RuntimeError) as e:
        k(a, torch.full((N,), float("nan")))
    return str(e.value)


@pytest.mark.nvrtc
@pytest.mark.parametrize("bad,code", [(-1.0, 1), (500.0, 2)])
def test_host_raises_the_cpu_backends_error(bad, code):
    a = torch.rand(N) * 10
    a[77] = bad
    expected = cpu_message(a)
    assert expected == f"T.device_assert failed in kernel checked_double: {checked_double_msgs()[code - 1]}"
    k = cuda_kernel(checked_double())
    art = k.artifact
    flag = FakeFlag(code)
    calls = []
    art._flags[driver._torch_current_device()] = flag
    art._function = lambda: FakeFunction(calls)
    # the flag travels as the last kernel argument (what JITKernel passes for the "assert_flag" kind)
    values = k._c_values([FakePtr(0x1000), FakePtr(0x2000)], {})
    assert values == [0x1000, 0x2000, 0xF1A6]
    with pytest.raises(RuntimeError) as e:
        art.launch(values, stream=5)
    assert str(e.value) == expected
    assert calls[0][3][-1] == 0xF1A6 and flag.streams == [5]  # read after the launch, on its stream
    art.launch(values, stream=5)  # the flag was reset: the next clean launch does not raise
    assert flag.streams == [5, 5]


def checked_double_msgs():
    return ("A must be non-negative", "A must be below 100")


class FakePtr:
    def __init__(self, p):
        self.p = p

    def data_ptr(self):
        return self.p


def test_error_for_an_unknown_code():
    with pytest.raises(RuntimeError, match=r"T.device_assert failed in kernel k: code 9"):
        raise_device_assert(9, ("x",), "k")


def test_assert_flag_waits_reads_and_resets_only_when_set(monkeypatch):
    """driver.AssertFlag against a fake driver: the order of calls is the contract."""
    calls, device_value = [], [0]

    class FakeDriver:
        CUstream = CUdeviceptr = staticmethod(lambda x: int(x))

        def __getattr__(self, name):
            def call(*args):
                calls.append(name)
                if name == "cuMemAlloc":
                    return (0, 0xD0)
                if name == "cuMemcpyDtoH":
                    ctypes.c_int32.from_address(args[0]).value = device_value[0]
                if name in ("cuMemsetD32", "cuMemsetD32Async"):
                    device_value[0] = args[1]
                return (0,)
            return call

    monkeypatch.setattr(driver, "_driver", lambda: FakeDriver())
    monkeypatch.setattr(driver, "_ensure_context", lambda dev: None)
    flag = driver.AssertFlag(0)
    assert flag.ptr == 0xD0 and calls == ["cuMemAlloc", "cuMemsetD32", "cuCtxSynchronize"]
    del calls[:]
    assert flag.read_and_reset(3) == 0 and calls == ["cuStreamSynchronize", "cuMemcpyDtoH"]
    del calls[:]
    device_value[0] = 2  # a thread failed assert #2
    assert flag.read_and_reset(3) == 2
    assert calls == ["cuStreamSynchronize", "cuMemcpyDtoH", "cuMemsetD32Async", "cuStreamSynchronize"]
    assert device_value[0] == 0 and flag.read_and_reset(3) == 0
    flag.ptr = 0  # nothing to free on the fake device


# ----------------------------------------------------------------------------- GPU tier


def _gpu():
    return torch.cuda.is_available() and driver.device_available()


@pytest.mark.cuda
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("bad,code", [(-1.0, 1), (500.0, 2)])
def test_gpu_failed_assert_raises_and_the_context_survives(bad, code):
    k = tilelang.compile(checked_double(), target="cuda")
    a = torch.rand(N, device="cuda") * 10
    b = torch.full((N,), float("nan"), device="cuda")
    k(a, b)  # passes: no error, every element written
    torch.testing.assert_close(b, a * 2)
    bad_a = a.clone()
    bad_a[77] = bad
    with pytest.raises(RuntimeError, match=re.escape(checked_double_msgs()[code - 1])):
        k(bad_a, b)
    k(a, b)  # the flag was reset and the context still works
    torch.testing.assert_close(b, a * 2)
    assert (torch.ones(4, device="cuda") * 2).sum().item() == 8
