"""Compile-only (NVRTC, no GPU): pass configs and jit compile_flags reach NVRTC, the CUDA
post-processing callback edits the compiled source, TL_DISABLE_THREAD_STORAGE_SYNC drops
our automatic __syncthreads()."""
import pytest

import tilelang
import tilelang.language as T
from tilelang.backend.cuda.pipeline import device_options
from tilelang.engine import callback
from tilelang.errors import CompileError, LoweringError
from tilelang.transform import PassConfigKey

nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
if not nvrtc.nvrtc_available():
    pytest.skip("NVRTC from the pip wheels is not installed", allow_module_level=True)

pytestmark = [pytest.mark.nvrtc, pytest.mark.filterwarnings("ignore::UserWarning")]
TARGET = "cuda -arch=sm_80"


def make():
    @T.prim_func
    def f(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((256,), "float32")
            T.copy(A, S)
            for i in T.Parallel(256):
                B[i] = T.exp(S[255 - i])

    return f


@pytest.fixture(autouse=True)
def no_callbacks():
    callback.unregister_postproc("cuda")
    yield
    callback.unregister_postproc("cuda")


def test_fast_math_changes_the_ptx():
    plain = tilelang.compile(make(), target=TARGET)
    fast = tilelang.compile(make(), target=TARGET, pass_configs={PassConfigKey.TL_ENABLE_FAST_MATH: True})
    assert "--use_fast_math" in fast.artifact.compiled.options
    assert "--use_fast_math" not in plain.artifact.compiled.options
    assert "fma.rm.f32" in plain.artifact.ptx and "fma.rm.f32" not in fast.artifact.ptx  # expf's range reduction
    both = {PassConfigKey.TL_ENABLE_FAST_MATH: True, PassConfigKey.TL_DISABLE_FAST_MATH: True}
    assert "--use_fast_math" not in device_options(both)[0]


def test_device_compile_flags_reach_nvrtc_with_the_callback():
    @callback.register_cuda_postproc_callback
    def needs_flag(code, target):
        assert target.arch == "sm_80"
        return "#ifndef TL_TEST_FLAG\n#error TL_TEST_FLAG was not passed\n#endif\n" + code

    with pytest.raises(CompileError, match="TL_TEST_FLAG was not passed"):
        tilelang.compile(make(), target=TARGET)
    k = tilelang.compile(make(), target=TARGET, pass_configs={PassConfigKey.TL_DEVICE_COMPILE_FLAGS: "-DTL_TEST_FLAG=1"})
    assert k.get_kernel_source().startswith("#ifndef TL_TEST_FLAG")  # the edited source is what was compiled
    k2 = tilelang.compile(make(), target=TARGET, compile_flags=["-DTL_TEST_FLAG"])  # jit's compile_flags
    assert "-DTL_TEST_FLAG" in k2.artifact.compiled.options


def test_nvcc_spellings_are_translated():
    peer_flags = ["-O3", "-Wno-deprecated-declarations", "-U__CUDA_NO_HALF_OPERATORS__", "--expt-relaxed-constexpr",
                  "--expt-extended-lambda", "--ptxas-options=-v,--register-usage-level=10", "-DNDEBUG"]
    k = tilelang.compile(make(), target=TARGET, compile_flags=peer_flags)
    opts = k.artifact.compiled.options
    assert "--ptxas-options=--register-usage-level=10" in opts and "-DNDEBUG" in opts
    assert "-O3" not in opts and "--expt-relaxed-constexpr" not in opts
    with pytest.raises(CompileError, match="unrecognized option --no-such-flag"):
        tilelang.compile(make(), target=TARGET, pass_configs={"tl.device_compile_flags": ["--no-such-flag"]})


def test_register_usage_level():
    opts, _ = device_options({PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL: 5})
    assert opts == ["--ptxas-options=--register-usage-level=5"]
    tilelang.compile(make(), target=TARGET, pass_configs={PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL: 5})
    with pytest.raises(LoweringError, match=r"integer in \[0, 10\]"):
        device_options({"tl.ptxas_register_usage_level": 11})


def test_disable_thread_storage_sync():
    on = tilelang.compile(make(), target=TARGET).get_kernel_source()
    off = tilelang.compile(make(), target=TARGET,
                           pass_configs={PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}).get_kernel_source()
    assert on.count("__syncthreads()") == 1 and off.count("__syncthreads()") == 0
    assert on.replace("__syncthreads();", "") .split() == off.replace("__syncthreads();", "").split()


def test_callback_misuse():
    callback.register_cuda_postproc(lambda code, target: None)
    with pytest.raises(tilelang.TileLangError, match="must return the \\(edited\\) source code as a str"):
        tilelang.compile(make(), target=TARGET)
    with pytest.raises(tilelang.TileLangError, match="already registered"):
        callback.register_cuda_postproc(lambda c, t: c, override=False)
    with pytest.raises(TypeError):
        callback.register_cuda_postproc_callback(42)


def test_kernels_output_dir(tmp_path):
    k = tilelang.compile(make(), target=TARGET, pass_configs={PassConfigKey.CUDA_KERNELS_OUTPUT_DIR: str(tmp_path)})
    assert (tmp_path / "f.cu").read_text() == k.get_kernel_source()
