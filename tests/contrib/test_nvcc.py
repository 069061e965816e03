"""tilelang.contrib.nvcc compute-capability helpers."""
import pytest

import tilelang.contrib
from tilelang.backend.cuda import driver
from tilelang.contrib import nvcc


def test_versions_from_targets():
    assert nvcc.get_target_compute_version("cuda -arch=sm_90a") == "9.0"
    assert nvcc.get_target_compute_version("cuda -arch=sm_86") == "8.6"
    assert nvcc.get_target_compute_version("cuda -arch=sm_100a") == "10.0"
    assert nvcc.parse_compute_version("8.9") == (8, 9)
    assert nvcc.get_target_arch("9.0") == "90a" and nvcc.get_target_arch((8, 0)) == "80"
    with pytest.raises(RuntimeError, match="not 'major.minor'"):
        nvcc.parse_compute_version("sm90")
    with pytest.raises(ValueError, match="not a CUDA target"):
        nvcc.get_target_compute_version("cpu")


def test_feature_predicates():
    assert nvcc.have_fp8("8.9") and not nvcc.have_fp8("8.6")
    assert nvcc.have_bf16("8.0") and not nvcc.have_bf16("7.5")
    assert nvcc.have_fp16("5.3") and not nvcc.have_fp16("5.2")
    assert nvcc.have_tma("cuda -arch=sm_90a") and not nvcc.have_tma("cuda -arch=sm_80") and not nvcc.have_tma("cpu")
    assert nvcc.is_hopper("cuda -arch=sm_90a") and not nvcc.is_hopper("cuda -arch=sm_100a")
    assert tilelang.contrib.nvcc is nvcc


@pytest.mark.skipif(driver.device_available(), reason="checks the no-GPU error")
def test_no_gpu_and_no_target_is_a_clear_error():
    with pytest.raises(ValueError, match="no GPU is usable"):
        nvcc.get_target_compute_version()
