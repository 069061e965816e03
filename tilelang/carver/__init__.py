"""`tilelang.carver`: hardware descriptions programs read to size their kernels.

    from tilelang.carver.arch import CUDA, driver, auto_infer_current_arch
    sms = driver.get_num_sms()                 # the current GPU's multiprocessor count
    arch = CUDA("cuda -arch=sm_90a")          # sm_version 90, compute_capability "90"

    from tilelang.carver.template import MatmulTemplate    # GEMM tile recommendations
    from tilelang.carver.roller.rasterization import NoRasterization, Rasterization2DColumn

`carver.template` has MatmulTemplate only; `carver.roller` has Hint and the rasterization plans
(not the public roller's policy search).
"""
_SUBMODULES = ("arch", "template", "roller")


def __getattr__(name):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'tilelang.carver' has no attribute {name!r} (it has "
                         "arch, template and roller)")
