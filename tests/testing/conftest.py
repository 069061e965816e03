"""Fixtures of the tilelang.testing tests."""
import pytest


@pytest.fixture(scope="module")
def host():
    """tilelang.testing.host_cuda (generated CUDA run on the host), or skip without g++."""
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    return host_cuda
