"""The CUDA call fast path (jit/fast_call.py + driver.PreparedLaunch) without a GPU.

NVRTC compiles real kernels; the driver's cuLaunchKernel is replaced by a recorder that
reads the kernelParams array the way the driver would (void** -> 8-byte slots), CPU
tensors report device cuda:0 to both the fast path and the binder, and outputs are
allocated on the CPU. What needs a GPU: the real launch and its timing
(benchmarks/launch_overhead.py, tests marked `cuda`).
"""
import ctypes
import types
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.backend.cuda import driver
from tilelang.jit.fast_call import MISS, FastCall

pytestmark = pytest.mark.nvrtc
CUDA0 = torch.device("cuda", 0)


def mixed():
    """Out (a parameter between the inputs) = X (2x128 float32, flattened) + Y (256 float16)."""
    @T.prim_func
    def mixed(X: T.Tensor((2, 128), "float32"), Out: T.Tensor((256,), "float32"),
              Y: T.Tensor((256,), "float16")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                Out[bx * 128 + i] = X[bx, i] + T.cast(Y[bx * 128 + i], "float32")
    return mixed


def split():
    """One input, two outputs."""
    @T.prim_func
    def split(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841
            for i in T.Parallel(128):
                B[i] = A[i] * 2.0
                C[i] = A[i] + 1.0
    return split


def pointer(arg):
    """The address an untyped ctypes pointer argument (c_void_p, from_param's or byref's object) passes."""
    return ctypes.cast(arg, ctypes.c_void_p).value or 0


class Recorder:
    """Stands in for the untyped cuLaunchKernel (11 arguments) or cuLaunchKernelEx (4: config,
    function, kernelParams, extra): records what the driver would read, in one form for both."""

    def __init__(self, rcs=()):
        self.calls, self.rcs, self.forms = [], list(rcs), []

    def __call__(self, *args):
        if len(args) == 4:
            config, handle, params, extra = args
            c = ctypes.cast(config, ctypes.POINTER(driver.LaunchConfig)).contents
            dims = (c.gridDimX, c.gridDimY, c.gridDimZ, c.blockDimX, c.blockDimY, c.blockDimZ, c.sharedMemBytes)
            assert c.attrs is None and c.numAttrs == 0
            stream = c.hStream or 0
        else:
            handle, *dims, stream, params, extra = args
            dims, stream = tuple(dims), pointer(stream)
        self.forms.append(len(args))
        n = len(self.signature)
        slots = (ctypes.c_void_p * n).from_address(pointer(params))
        values = [ctypes.c_uint64.from_address(slots[i]).value for i in range(n)]
        self.calls.append(dict(handle=pointer(handle), dims=dims, stream=stream, params=pointer(params),
                               values=values, extra=extra))
        return self.rcs.pop(0) if self.rcs else 0


@pytest.fixture(params=["ex", "plain", "ex-first"])
def fake_cuda(monkeypatch, request):
    """(compile(func, out_idx) -> kernel whose fast path launches into a Recorder, recorder), through
    cuLaunchKernelEx and through cuLaunchKernel (a driver without the Ex entry point) with the lean
    launcher, and through cuLaunchKernelEx with the first one (tl.disable_lean_launcher)."""
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    rec = Recorder()
    ex = request.param.startswith("ex")
    monkeypatch.setattr(driver, "_launch_holding_gil", lambda: rec)
    monkeypatch.setattr(driver, "_launch_ex_holding_gil", lambda: rec if ex else None)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda dev: 0x5000 + dev, raising=False)
    monkeypatch.setattr(torch.Tensor, "device", property(lambda self: CUDA0))

    def compile_(func, out_idx=None, pass_configs=None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            k = tilelang.compile(func, out_idx=out_idx, target="cuda -arch=sm_80", pass_configs=pass_configs)
        art = k.artifact
        rec.signature = art.csource.signature
        art._fn = types.SimpleNamespace(name=art.csource.entry, module=types.SimpleNamespace(device=0),
                                        _raw_handle=0xF00D, _smem_limit=48 * 1024,
                                        packer=types.SimpleNamespace(signature=art.csource.signature))
        fast = k._fast_call()
        if request.param == "ex-first":
            fast.lean = False
        fast.prepare()
        fast.out_device = torch.device("cpu")  # no CUDA allocator here
        fast.call = fast.compile_simple()
        assert fast.prepared.ex == (ex and not (pass_configs or {}).get("tl.disable_launch_kernel_ex"))
        return k

    return compile_, rec


def c_order(k, by_param):
    """The data pointers the kernel must receive, in C argument order."""
    index = {id(p): i for i, p in enumerate(k.prim_func.params)}
    return [by_param[index[id(obj)]].data_ptr() for kind, obj in k.artifact.csource.arg_kinds]


def test_slots_hold_the_data_pointers_in_c_argument_order(fake_cuda):
    compile_, rec = fake_cuda
    k = compile_(mixed(), out_idx=[1])
    assert k._fast.simple
    for _ in range(2):  # fresh tensors each call: the slots are rewritten, the storage is reused
        x, y = torch.randn(2, 128), torch.randn(256).half()
        out = k(x, y)
        assert out.shape == (256,) and out.dtype == torch.float32 and out.is_cpu
        want = c_order(k, {0: x, 1: out, 2: y})
        assert rec.calls[-1]["values"] == want and len(set(want)) == 3
    first, second = rec.calls
    assert first["params"] == second["params"] == k._fast.prepared.params_address
    assert first["handle"] == 0xF00D and first["dims"] == (2, 1, 1, 128, 1, 1, 0)
    assert first["stream"] == 0x5000 and first["extra"] is None  # torch's current stream of device 0
    k(x, y, stream=0x77)
    assert rec.calls[-1]["stream"] == 0x77
    k(x, y)
    assert rec.calls[-1]["stream"] == 0x5000


def test_every_output_gets_its_slot_and_is_returned(fake_cuda):
    compile_, rec = fake_cuda
    k = compile_(split(), out_idx=[1, 2])
    a = torch.randn(128)
    b, c = k(a)
    assert rec.calls[-1]["values"] == c_order(k, {0: a, 1: b, 2: c})
    k_none = compile_(split())
    bb, cc = torch.empty(128), torch.empty(128)
    assert k_none(a, bb, cc) is None
    assert rec.calls[-1]["values"] == [a.data_ptr(), bb.data_ptr(), cc.data_ptr()]


def tf32_scale():
    """Out = 2 * X over a tfloat32 tensor (stored as float32)."""
    @T.prim_func
    def tf32_scale(X: T.Tensor((128,), "tfloat32"), Out: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841
            for i in T.Parallel(128):
                Out[i] = T.cast(X[i], "float32") * 2.0
    return tf32_scale


def test_tfloat32_parameters_take_float32_tensors(fake_cuda):
    """A tfloat32 parameter is a float32 torch tensor (torch has no tfloat32 dtype): the fast path
    checks it as float32 and allocates the output as the dtype's storage."""
    compile_, rec = fake_cuda
    k = compile_(tf32_scale(), out_idx=[1])
    assert k._fast.simple and k._fast.in_specs[0][0] is torch.float32
    x = torch.randn(128)
    out = k(x)
    assert out.dtype == torch.float32 and rec.calls[-1]["values"] == [x.data_ptr(), out.data_ptr()]
    with pytest.raises(TypeError, match="float"):
        k(x.double())


def misaligned():
    return torch.randn(257).half()[1:]  # 2 bytes past a 16-byte boundary


@pytest.mark.parametrize("args,error,match", [
    (lambda: (torch.randn(2, 128).double(), torch.randn(256).half()), TypeError, r"expected dtype float32"),
    (lambda: (torch.randn(2, 128), torch.randn(256)), TypeError, r"'Y'.*expected dtype float16"),
    (lambda: (torch.randn(128, 2), torch.randn(256).half()), ValueError, r"expected shape \(2, 128\)"),
    (lambda: (torch.randn(128, 2).t(), torch.randn(256).half()), ValueError, r"contiguous"),
    (lambda: (torch.randn(2, 128), misaligned()), ValueError, r"16-byte aligned"),
    (lambda: (torch.randn(2, 128),), TypeError, r"expects 2 arguments.*missing Y"),
    (lambda: ([0.0] * 256, torch.randn(256).half()), TypeError, r"expected a torch.Tensor"),
])
def test_mismatches_fall_back_to_the_binders_precise_errors(fake_cuda, args, error, match):
    compile_, rec = fake_cuda
    k = compile_(mixed(), out_idx=[1])
    args = args()
    assert k._fast.call(args, None) is MISS
    with pytest.raises(error, match=match):
        k(*args)
    assert rec.calls == []  # nothing was launched


def test_a_tensor_on_another_device_takes_the_general_path(fake_cuda):
    compile_, rec = fake_cuda
    k = compile_(mixed(), out_idx=[1])
    fast = k._fast
    x, y = torch.randn(2, 128), torch.randn(256).half()
    assert fast.call((x, y), None) is not MISS
    fast.check_device = torch.device("cuda", 1)  # as if the module were loaded on device 1
    fast.call = fast.compile_simple()
    assert fast.call((x, y), None) is MISS
    assert len(rec.calls) == 1


def test_invalid_context_is_made_current_and_the_launch_retried(fake_cuda, monkeypatch):
    compile_, rec = fake_cuda
    k = compile_(split())
    made = []
    monkeypatch.setattr(driver, "_ensure_context", made.append)
    rec.rcs = [201, 0]  # CUDA_ERROR_INVALID_CONTEXT, then success
    a, b, c = torch.randn(128), torch.empty(128), torch.empty(128)
    k(a, b, c)
    assert made == [0] and [x["values"] for x in rec.calls] == [[a.data_ptr(), b.data_ptr(), c.data_ptr()]] * 2


def test_prepared_launch_takes_pointer_signatures_only():
    fn = types.SimpleNamespace(packer=types.SimpleNamespace(signature=("ptr", "i32")), _smem_limit=0)
    with pytest.raises(driver.TileLangError, match="pointer arguments only"):
        driver.PreparedLaunch(fn, (1, 1, 1), (128, 1, 1), 0)


class FakeFlag:
    def __init__(self, code):
        self.code, self.ptr = code, 0xF1A6

    def read_and_reset(self, stream=None):
        code, self.code = self.code, 0
        return code


def test_kernels_with_an_assert_flag_keep_the_checked_general_path(fake_cuda):
    from tests.backend.cuda.test_device_assert import checked_double

    compile_, rec = fake_cuda
    k = compile_(split())  # installs the fakes; the asserting kernel is compiled below
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(checked_double(), target="cuda -arch=sm_80")
    fast = k._fast_call()
    assert isinstance(fast, FastCall) and not fast.simple and fast.call == fast.launch_general
    launches = []
    art = k.artifact
    art._fn = types.SimpleNamespace(launch=lambda grid, block, smem, args, stream=None: launches.append(list(args)))
    art._flags[driver._torch_current_device()] = FakeFlag(2)
    a, b = torch.rand(256), torch.empty(256)
    with pytest.raises(RuntimeError, match="T.device_assert failed in kernel checked_double: A must be below 100"):
        k(a, b)
    assert launches == [[a.data_ptr(), b.data_ptr(), 0xF1A6]]
    k(a, b)  # the flag was reset
    assert len(launches) == 2 and rec.calls == []


def test_outputs_take_their_own_dtype_and_shape_not_the_inputs(fake_cuda):
    """Outputs are allocated from the first input (its device); dtype and shape are the output's."""
    @T.prim_func
    def narrow(A: T.Tensor((2, 64), "float32"), B: T.Tensor((128,), "float16")):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841
            for i in T.Parallel(128):
                B[i] = T.cast(A[i // 64, i % 64] * 3.0, "float16")

    compile_, rec = fake_cuda
    k = compile_(narrow, out_idx=[1])
    a = torch.randn(2, 64)
    b = k(a)
    assert b.dtype == torch.float16 and b.shape == (128,) and b.is_contiguous()
    assert rec.calls[-1]["values"] == [a.data_ptr(), b.data_ptr()]
    assert "a0.new_empty(128, dtype=out_dtype0)" in k._fast.simple_source()  # int sizes: cheaper to parse


def three():
    """Out (4x32 float32) = A (4x32 float32) * B (4x32 float32) + C (32 float16), broadcast over rows."""
    @T.prim_func
    def three(A: T.Tensor((4, 32), "float32"), B: T.Tensor((4, 32), "float32"), C: T.Tensor((32,), "float16"),
              Out: T.Tensor((4, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841
            for i, j in T.Parallel(4, 32):
                Out[i, j] = A[i, j] * B[i, j] + T.cast(C[j], "float32")
    return three


def good3():
    return [torch.randn(4, 32), torch.randn(4, 32), torch.randn(32).half()]


@pytest.mark.parametrize("pos", [0, 1, 2])
@pytest.mark.parametrize("bad,error,match", [
    (lambda t: t.double(), TypeError, r"expected dtype"),
    (lambda t: t.reshape(-1) if t.dim() == 2 else t.reshape(2, 16), ValueError, r"expected \d dims"),
    (lambda t: torch.randn(4, 16, dtype=t.dtype) if t.dim() == 2 else t[:16], ValueError, r"expected shape"),
    (lambda t: torch.empty(t.shape[::-1], dtype=t.dtype).t() if t.dim() == 2
     else torch.empty(64, dtype=t.dtype)[::2], ValueError, r"contiguous"),
    (lambda t: t.tolist(), TypeError, r"expected a torch.Tensor"),
])
def test_the_generated_launcher_checks_every_argument(fake_cuda, pos, bad, error, match):
    """Each input position, each kind of mismatch: the launcher misses, the binder names it, nothing launches."""
    compile_, rec = fake_cuda
    k = compile_(three(), out_idx=[-1])
    names = ["A", "B", "C"]
    args = good3()
    args[pos] = bad(args[pos])
    assert k._fast.call(tuple(args), None) is MISS
    with pytest.raises(error, match=match) as info:
        k(*args)
    assert f"'{names[pos]}'" in str(info.value)
    assert rec.calls == []
    out = k(*good3())  # the same kernel still launches on good arguments
    assert out.shape == (4, 32) and len(rec.calls) == 1


def test_outputs_are_fresh_per_call_and_contiguous(fake_cuda):
    compile_, rec = fake_cuda
    k = compile_(three(), out_idx=[-1])
    assert "a0.new_empty(4, 32)" in k._fast.simple_source()  # same dtype as A: no dtype/device to parse
    a, b, c = good3()
    outs = [k(a, b, c) for _ in range(3)]  # all kept alive: no storage may be shared
    ptrs = [o.data_ptr() for o in outs]
    assert len(set(ptrs) | {a.data_ptr(), b.data_ptr(), c.data_ptr()}) == 6
    for o, call in zip(outs, rec.calls):
        assert o.shape == (4, 32) and o.dtype == torch.float32 and o.is_contiguous() and o.stride() == (32, 1)
        assert not o.requires_grad
        assert call["values"] == [a.data_ptr(), b.data_ptr(), c.data_ptr(), o.data_ptr()]
    assert outs[0].untyped_storage().data_ptr() != outs[1].untyped_storage().data_ptr()


def test_the_kernel_call_is_the_generated_entry_and_keeps_every_call_form(fake_cuda):
    """After the first call k(...) runs the generated entry; a stream, inputs by name and
    misses keep their semantics (by name: the general binder and the artifact's launch)."""
    compile_, rec = fake_cuda
    k = compile_(three())
    assert k._launcher.__code__.co_filename.startswith("<tilelang launcher")
    a, b, c = good3()
    o = torch.empty(4, 32)
    assert k(a, b, c, o, stream=0x99) is None
    assert rec.calls[-1]["stream"] == 0x99 and rec.calls[-1]["values"] == [t.data_ptr() for t in (a, b, c, o)]
    general = []
    k.artifact._fn.launch = lambda grid, block, smem, args, stream=None: general.append((list(args), stream))
    assert k(a, b, Out=o, C=c, stream=0x42) is None
    assert general == [([t.data_ptr() for t in (a, b, c, o)], 0x42)]
    with pytest.raises(TypeError, match="unexpected keyword argument 'D'"):
        k(a, b, c, D=o)
    with pytest.raises(TypeError, match=r"expects 4 arguments"):
        k(a, b, c)
    assert len(rec.calls) == 1 and len(general) == 1


def test_launch_config_has_the_drivers_layout():
    """driver.LaunchConfig read at the address of cuda-bindings' CUlaunchConfig gives back every field."""
    bindings = pytest.importorskip("cuda.bindings.driver")
    c = bindings.CUlaunchConfig()
    c.gridDimX, c.gridDimY, c.gridDimZ, c.blockDimX, c.blockDimY, c.blockDimZ = 3, 5, 7, 128, 2, 1
    c.sharedMemBytes, c.hStream, c.numAttrs = 4096, bindings.CUstream(0x7F0012345600), 0
    ours = driver.LaunchConfig.from_address(int(c.getPtr()))
    assert [getattr(ours, name) for name, _ in driver.LaunchConfig._fields_] == \
        [3, 5, 7, 128, 2, 1, 4096, 0x7F0012345600, None, 0]
    assert ctypes.sizeof(driver.LaunchConfig) == 56


def test_the_launch_form_follows_the_pass_config(fake_cuda):
    """cuLaunchKernelEx (4 arguments) by default where the driver has it; tl.disable_launch_kernel_ex
    keeps cuLaunchKernel (11). Both launch the same grid, block, stream and pointers."""
    compile_, rec = fake_cuda
    k = compile_(split(), out_idx=[1, 2])
    k_off = compile_(split(), out_idx=[1, 2], pass_configs={"tl.disable_launch_kernel_ex": True})
    assert not k_off._fast.prepared.ex and not k_off.artifact.launch_ex
    a = torch.randn(128)
    for kern in (k, k_off, k, k_off):
        b, c = kern(a, stream=0x99 if kern is k else 0x98)
        assert rec.calls[-1]["values"] == [a.data_ptr(), b.data_ptr(), c.data_ptr()]
        assert rec.calls[-1]["dims"] == (1, 1, 1, 128, 1, 1, 0) and rec.calls[-1]["handle"] == 0xF00D
        assert rec.calls[-1]["stream"] == (0x99 if kern is k else 0x98) and rec.calls[-1]["extra"] is None
    assert rec.forms == [4 if k._fast.prepared.ex else 11, 11] * 2


def test_each_stream_keeps_its_own_arguments(fake_cuda):
    """The argument tuple (and launch config) made for one stream stays valid after another stream's:
    a tuple held across a stream change still launches on its own stream."""
    compile_, rec = fake_cuda
    k = compile_(split(), out_idx=[1, 2])
    k(torch.randn(128))
    prepared = k._fast.prepared
    first = prepared.args_for(0x11)
    prepared.args_for(0x22)
    prepared.call(*first)
    assert rec.calls[-1]["stream"] == 0x11
    prepared.launch(0x33)
    assert rec.calls[-1]["stream"] == 0x33


def general_function(monkeypatch, ex_recorder, typed_recorder, signature):
    """A driver.CudaFunction without a driver: its launches go to the recorders."""
    monkeypatch.setattr(driver, "_launch_ex_holding_gil", lambda: ex_recorder)
    fn = driver.CudaFunction.__new__(driver.CudaFunction)
    fn.module, fn.name, fn._raw_handle = types.SimpleNamespace(device=0), "k", 0xBEEF
    fn.packer, fn._smem_limit, fn._launch = driver.ArgPacker(signature), 48 * 1024, typed_recorder
    fn.ex, fn._ex_last = True, (None, None)
    return fn


def test_artifact_launches_take_cuLaunchKernelEx_and_keep_their_packed_arguments(monkeypatch):
    """CudaFunction.launch (kernels with scalars, flags or tensor maps, dynamic shapes): cuLaunchKernelEx
    with the packer's kernelParams; the arguments are rebuilt only when grid, block, smem or stream
    change; fn.ex = False (tl.disable_launch_kernel_ex) keeps the typed cuLaunchKernel."""
    rec = Recorder()
    rec.signature = ("ptr", "ptr")  # the recorder reads 8-byte slots: the ptr arguments only
    typed = []
    fn = general_function(monkeypatch, rec, lambda *a: typed.append(a) or 0, ("ptr", "ptr", "i32"))
    a, b = torch.randn(64), torch.randn(64)
    fn.launch((3, 2), 128, 1024, [a, b, 7], stream=0x55)
    first = fn._ex_last[1]
    assert rec.calls[-1] == dict(handle=0xBEEF, dims=(3, 2, 1, 128, 1, 1, 1024), stream=0x55,
                                 params=fn.packer.params_address, values=[a.data_ptr(), b.data_ptr()], extra=None)
    slots = (ctypes.c_void_p * 3).from_address(fn.packer.params_address)
    assert ctypes.c_int32.from_address(slots[2]).value == 7
    fn.launch((3, 2), 128, 1024, [b, a, 9], stream=0x55)
    assert fn._ex_last[1] is first and rec.calls[-1]["values"] == [b.data_ptr(), a.data_ptr()]
    assert ctypes.c_int32.from_address(slots[2]).value == 9
    fn.launch(5, 64, 0, [a, b, 1], stream=0x66)
    assert fn._ex_last[1] is not first
    assert rec.calls[-1]["dims"] == (5, 1, 1, 64, 1, 1, 0) and rec.calls[-1]["stream"] == 0x66
    assert rec.forms == [4, 4, 4] and typed == []
    fn.ex = False
    fn.launch(5, 64, 0, [a, b, 1], stream=0x66)
    assert len(rec.calls) == 3 and typed == [(0xBEEF, 5, 1, 1, 64, 1, 1, 0, 0x66, fn.packer.params_address, None)]


def test_artifact_launch_errors_name_the_kernel(monkeypatch):
    rec = Recorder(rcs=[201, 0, 700])  # invalid context (retried after making it current), then a failure
    rec.signature = ("ptr",)
    made = []
    monkeypatch.setattr(driver, "_ensure_context", made.append)
    fn = general_function(monkeypatch, rec, None, ("ptr",))
    a = torch.randn(4)
    fn.launch(1, 32, 0, [a], stream=0)
    assert made == [0] and len(rec.calls) == 2
    monkeypatch.setattr(driver, "_driver", lambda: pytest.importorskip("cuda.bindings.driver"))
    with pytest.raises(driver.CudaDriverError, match=r"cuLaunchKernelEx\('k', grid=1, block=32, smem=0\) failed"):
        fn.launch(1, 32, 0, [a], stream=0)


def test_disable_launch_kernel_ex_reaches_the_artifacts_function(fake_cuda):
    """tl.disable_launch_kernel_ex clears the artifact's launch_ex, which its CudaFunction takes on."""
    compile_, rec = fake_cuda
    k = compile_(split(), out_idx=[1, 2], pass_configs={"tl.disable_launch_kernel_ex": True})
    assert not k.artifact.launch_ex and k.artifact._function().ex is False
    assert compile_(split(), out_idx=[1, 2]).artifact.launch_ex


def lean_kernel(compile_, func, out_idx=None, **attrs):
    """`func` compiled through the fixture with its launcher regenerated in the lean form, `attrs` set."""
    k = compile_(func, out_idx=out_idx)
    fast = k._fast
    fast.lean = True
    for name, value in attrs.items():
        setattr(fast, name, value)
    fast.call = fast.compile_simple()
    return k


def test_lean_slots_are_rewritten_when_their_pointer_changes(fake_cuda):
    """The lean launcher writes a slot only when its pointer differs from the one it holds; the
    driver still reads every call's own pointers (same input again, another, the first again)."""
    compile_, rec = fake_cuda
    k = lean_kernel(compile_, split(), out_idx=[1, 2])
    assert "if p0 != c0:" in k._fast.simple_source()
    a, b = torch.randn(128), torch.randn(128)
    kept = []
    for x in (a, a, b, a, b, b):
        out = k(x)
        kept.append(out)  # alive: every call's outputs get fresh storage
        assert rec.calls[-1]["values"] == [x.data_ptr(), out[0].data_ptr(), out[1].data_ptr()]
    for x in (a, b, a):  # outputs dropped at once: the allocator may hand back the same storage
        b_out, c_out = k(x)
        assert rec.calls[-1]["values"] == [x.data_ptr(), b_out.data_ptr(), c_out.data_ptr()]
        del b_out, c_out
    assert k._fast.call((b,), None) is not MISS and rec.calls[-1]["values"][0] == b.data_ptr()


def test_lean_entry_keeps_every_call_form_and_error(fake_cuda):
    """Positional-only inputs: too few, too many, None, inputs by name, an unknown name (also one
    spelled like the entry's own parameters) and a stream reach the same paths and messages."""
    compile_, rec = fake_cuda
    k = lean_kernel(compile_, three(), out_idx=[-1])
    a, b, c = good3()
    with pytest.raises(TypeError, match=r"expects 3 arguments"):
        k()
    with pytest.raises(TypeError, match=r"expects 3 arguments"):
        k(a, b)
    with pytest.raises(TypeError, match=r"expects 3 arguments"):
        k(a, b, c, c)
    with pytest.raises(TypeError, match=r"'B'.*expected a torch.Tensor"):
        k(a, None, c)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'a0'"):
        k(a, b, c, a0=a)
    with pytest.raises(TypeError, match=r"got multiple values for argument 'A'"):
        k(a, b, c, A=a)
    assert rec.calls == []
    general = []
    k_in = lean_kernel(compile_, three())  # inputs by name: the general binder (no CUDA allocator here)
    k_in.artifact._fn.launch = lambda grid, block, smem, args, stream=None: general.append((list(args), stream))
    o = torch.empty(4, 32)
    assert k_in(a, C=c, Out=o, B=b, stream=0x42) is None
    assert general == [([t.data_ptr() for t in (a, b, c, o)], 0x42)] and rec.calls == []
    out = k(a, b, c, stream=0x43)
    assert rec.calls[-1]["stream"] == 0x43 and rec.calls[-1]["values"] == [t.data_ptr() for t in (a, b, c, out)]
    out = k(a, b, c)
    assert rec.calls[-1]["stream"] == 0x5000 and len(general) == 1


def test_lean_device_test_is_one_flag_on_a_single_device(fake_cuda):
    """Where the process sees one CUDA device, the lean launcher's device test is the tensor's flag
    (`is_cuda` there; here the CPU tensors' `is_cpu`): a tensor without it misses, and the general
    binder takes it."""
    compile_, rec = fake_cuda
    k = lean_kernel(compile_, mixed(), out_idx=[1], single_device=True, device_flag="is_cpu")
    src = k._fast.simple_source()
    assert "not a0.is_cpu" in src and "not a1.is_cpu" in src and ".device" not in src
    x, y = torch.randn(2, 128), torch.randn(256).half()
    out = k(x, y)
    assert rec.calls[-1]["values"] == c_order(k, {0: x, 1: out, 2: y})
    k = lean_kernel(compile_, mixed(), out_idx=[1], single_device=True, device_flag="is_meta")
    assert k._fast.call((x, y), None) is MISS
    assert lean_kernel(compile_, mixed(), out_idx=[1])._fast.device_test("a0") == "a0.device != check_device"


def test_disable_lean_launcher_keeps_the_first_form(fake_cuda):
    compile_, rec = fake_cuda
    k = compile_(split(), out_idx=[1, 2], pass_configs={"tl.disable_lean_launcher": True})
    assert not k._fast.lean and "def entry(*args, stream=None, **kwargs):" in k._fast.simple_source()
    a = torch.randn(128)
    b, c = k(a)
    assert rec.calls[-1]["values"] == [a.data_ptr(), b.data_ptr(), c.data_ptr()]


def test_lean_launcher_takes_parameters(fake_cuda):
    """nn.Parameter inputs (a model's weights) take the lean launcher, not the general binder per call;
    other Tensor subclasses still go to the binder."""
    compile_, rec = fake_cuda
    k = lean_kernel(compile_, mixed(), out_idx=[1])
    x, y = torch.nn.Parameter(torch.randn(2, 128)), torch.nn.Parameter(torch.randn(256).half(), requires_grad=False)
    out = k(x, y)
    assert len(rec.calls) == 1 and rec.calls[-1]["values"] == c_order(k, {0: x, 1: out, 2: y})

    class Other(torch.Tensor):
        pass

    assert k._fast.call((torch.randn(2, 128).as_subclass(Other), y), None) is MISS
    with torch.no_grad():
        with pytest.raises(TypeError, match=r"'X'.*expected dtype float32"):
            k(torch.nn.Parameter(torch.randn(2, 128).double()), y)
