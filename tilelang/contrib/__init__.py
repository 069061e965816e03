"""`tilelang.contrib`: compute-capability helpers under the public TileLang's names.

    from tilelang.contrib import nvcc
    nvcc.get_target_compute_version()        # "9.0" on an H100/H200
"""
from . import nvcc  # noqa: F401
