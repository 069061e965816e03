"""PassConfigKey: every public key exists and says what it does here; lookups and aliases."""
import torch

import tilelang
import tilelang.language as T
from tilelang.transform import PassConfigKey, simplify_prim_func
from tilelang.transform.pass_config import get, merge_device_flags

# the public TileLang 0.1.15 key set (names and strings), plus the older ones peer programs use
PUBLIC = {
    "TL_DISABLE_THREAD_STORAGE_SYNC": "tl.disable_thread_storage_sync", "TL_DEVICE_COMPILE_FLAGS":
    "tl.device_compile_flags", "TL_ENABLE_FAST_MATH": "tl.enable_fast_math", "TL_DISABLE_WARP_SPECIALIZED":
    "tl.disable_warp_specialized", "TL_DISABLE_TMA_LOWER": "tl.disable_tma_lower", "TL_PTXAS_REGISTER_USAGE_LEVEL":
    "tl.ptxas_register_usage_level", "TL_DISABLE_SHARED_MEMORY_REUSE": "tl.disable_shared_memory_reuse",
    "TIR_DISABLE_VECTORIZE": "tirx.disable_vectorize", "TL_LAYOUT_VISUALIZATION_ENABLE":
    "tl.layout_visualization_enable", "TL_LAYOUT_VISUALIZATION_FORMATS": "tl.layout_visualization_formats",
    "TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE": "tl.enable_aggressive_shared_memory_merge",
    "TL_ENABLE_PTXAS_VERBOSE_OUTPUT": "tl.enable_ptxas_verbose_output", "TL_DISABLE_FAST_MATH":
    "tl.disable_fast_math", "CUDA_KERNELS_OUTPUT_DIR": "cuda.kernels_output_dir", "TL_SIMPLIFY": "tl.Simplify",
    "TL_PASS_PROFILE_THRESHOLD_MS": "tl.pass_profile_threshold_ms", "TIR_NOALIAS": "tirx.noalias",
}


def test_public_keys_and_docs():
    for name, value in PUBLIC.items():
        assert PassConfigKey[name].value == value
    assert len(PassConfigKey) >= 70
    for m in PassConfigKey:
        assert m.__doc__ and m.__doc__ != PassConfigKey.__doc__, m.name
    assert PassConfigKey.TL_DISABLE_SHUFFLE_ELECT.__doc__.startswith("No effect in this TileLang")
    assert "__syncthreads" in PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC.__doc__
    assert tilelang.PassConfigKey is PassConfigKey
    assert "TL_DEVICE_COMPILE_FLAGS = 'tl.device_compile_flags'" in tilelang.transform.pass_config.describe()


def test_get_by_member_string_and_alias():
    cfg = {PassConfigKey.TL_ENABLE_FAST_MATH: True, "tl.disable_smem_reuse": True}
    assert get(cfg, "tl.enable_fast_math") is True and get(cfg, PassConfigKey.TL_ENABLE_FAST_MATH) is True
    assert get(cfg, PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE) is True
    assert get(cfg, "tl.disable_wgmma", 7) == 7 and get(None, "x", 1) == 1


def test_merge_device_flags():
    cfg = {PassConfigKey.TL_DEVICE_COMPILE_FLAGS: "-DA=1 -DB", "tl.enable_fast_math": True}
    out = merge_device_flags(cfg, ["-DC"])
    assert out["tl.device_compile_flags"] == ["-DA=1", "-DB", "-DC"] and out["tl.enable_fast_math"] is True
    assert merge_device_flags({}, "-DX") == {"tl.device_compile_flags": ["-DX"]}
    assert merge_device_flags(cfg, None) == cfg


def test_dump_ir_config_writes_each_pass(tmp_path):
    @T.prim_func
    def f(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16):
            for i in T.Parallel(16):
                B[i] = A[i] + 1.0

    k = tilelang.compile(f, target="cpu", pass_configs={PassConfigKey.TL_ENABLE_DUMP_IR: True,
                                                        PassConfigKey.TL_DUMP_IR_DIR: str(tmp_path)})
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[0] == "f.00_input.py" and len(names) >= 3
    a = torch.randn(16)
    b = torch.full((16,), float("nan"))
    k(a, b)
    torch.testing.assert_close(b.double(), a.double() + 1)


def test_simplify_prim_func_folds_and_keeps_meaning():
    @simplify_prim_func
    def make(n):
        @T.prim_func
        def g(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=n):
                for i in T.Parallel(n):
                    B[i * 1 + 0] = A[(i + 3) - 3] * (2 * 1)

        return g

    g = make(32)
    text = str(g)
    assert "i * 1" not in text and "+ 3) - 3" not in text, text
    a = torch.randn(32)
    b = torch.full((32,), float("nan"))
    tilelang.compile(g, target="cpu")(a, b)
    torch.testing.assert_close(b.double(), a.double() * 2)
