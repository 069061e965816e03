"""tilelang.carver.arch: device descriptions importable and usable without a GPU."""
import pytest

from tilelang.backend.cuda import driver as cuda_driver
from tilelang.carver.arch import (CDNA, CPU, CUDA, auto_infer_current_arch, check_sm_version, driver, get_arch,
                                  has_mma_support, is_ampere_arch, is_hopper_arch, is_tensorcore_supported_precision)


def test_cuda_from_the_target():
    a = CUDA("cuda -arch=sm_90a")
    assert (a.sm_version, a.compute_capability, a.platform, a.warp_size) == (90, "90", "CUDA", 32)
    assert is_hopper_arch(a) and has_mma_support(a) and not is_ampere_arch(a)
    b = CUDA("cuda -arch=sm_86")
    assert is_ampere_arch(b) and b.compute_capability == "86"
    assert is_tensorcore_supported_precision("float8_e4m3", "float32", a)
    assert not is_tensorcore_supported_precision("float8_e4m3", "float32", b)
    assert b.get_avaliable_tensorintrin_shapes() == [[16, 16], [16, 16]]
    assert [check_sm_version(s) for s in ("sm_90a", "80", "gfx942")] == [90, 80, -1]


@pytest.mark.skipif(cuda_driver.device_available(), reason="checks the no-GPU error")
def test_device_properties_need_a_gpu():
    a = CUDA("cuda")
    for prop in ("compute_max_core", "smem_cap", "l2_cache_size_bytes", "name"):
        with pytest.raises(RuntimeError, match="needs CUDA device 0"):
            getattr(a, prop)
    with pytest.raises(RuntimeError, match="needs CUDA device 0"):
        driver.get_num_sms()
    assert isinstance(auto_infer_current_arch(), CPU)


def test_other_vendors_and_get_arch():
    with pytest.raises(ValueError, match="AMD CDNA devices are not supported"):
        CDNA("hip")
    assert isinstance(get_arch("cpu"), CPU) and isinstance(get_arch("cuda -arch=sm_80"), CUDA)
    with pytest.raises(ValueError, match="format must be one of"):
        driver._scaled(1024, "gb")
