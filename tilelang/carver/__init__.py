"""`tilelang.carver`: hardware descriptions programs read to size their kernels.

    from tilelang.carver.arch import CUDA, driver, auto_infer_current_arch
    sms = driver.get_num_sms()                 # the current GPU's multiprocessor count
    arch = CUDA("cuda -arch=sm_90a")          # sm_version 90, compute_capability "90"

Only `carver.arch` exists here: the public carver's schedule templates and roller
(`carver.template`, `carver.roller`) are not implemented.
"""


def __getattr__(name):
    if name == "arch":
        import importlib

        return importlib.import_module(".arch", __name__)
    raise AttributeError(f"module 'tilelang.carver' has no attribute {name!r} (only tilelang.carver.arch exists "
                         "here; the schedule templates and roller are not implemented)")
