"""Compile-only CUDA tier (no GPU): every example compiles for sm_80 and sm_90a through NVRTC,
and the GEMM's SASS uses the tensor-core path (HMMA, LDSM, LDGSTS) without local memory."""
import importlib.util
import pathlib
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
if not nvrtc.nvrtc_available():
    pytest.skip("NVRTC from the pip wheels is not installed", allow_module_level=True)

spec = importlib.util.spec_from_file_location("compile_examples", ROOT / "scripts" / "compile_examples.py")
compile_examples = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compile_examples)

EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.py"))


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_compiles_for_cuda(name, arch):
    status = compile_examples.compile_example(ROOT / "examples" / f"{name}.py", arch)
    assert not status.startswith("FAILED"), status


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch,ops", [("sm_80", ("HMMA", "LDSM", "LDGSTS")), ("sm_90a", ("HGMMA", "UTMALDG"))])
def test_gemm_sass_uses_tensor_cores_and_async_copies(arch, ops):
    import tilelang
    import tilelang.language as T
    from tilelang.backend.cuda import sass

    M = N = K = 512  # block_K 64: 128-byte rows, the wgmma 128B-swizzle tile

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // 128, M // 128, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(K // 64, num_stages=3):
                T.copy(A[by * 128, ko * 64], A_s)
                T.copy(B[ko * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the aligned GEMM must take every fast path silently
        k = tilelang.compile(gemm, out_idx=[-1], target=f"cuda -arch={arch}")
    try:
        text = k.artifact.sass()
    except Exception as e:  # noqa: BLE001 - cuobjdump missing on this machine
        pytest.skip(f"cuobjdump unavailable: {e}")
    for op in ops:
        assert op in text, f"{op} missing from the GEMM's SASS"
    for op in ("LDL", "STL"):
        assert f" {op}" not in text, f"local memory ({op}) in the GEMM's SASS"
    if arch == "sm_90a":  # as a 2-block cluster: GPU-scope fences only in the entry and exit cluster syncs,
        # none in the mainloop's releases of a stage to the partner block
        text = tilelang.compile(gemm, out_idx=[-1], target=f"cuda -arch={arch}",
                                pass_configs={"tl.enable_cluster": True}).artifact.sass()
        assert "UCGABAR_WAIT" in text and "UTMALDG" in text
        assert text.count("MEMBAR.ALL.GPU") <= 2, "a GPU-scope fence per stage release"
    _ = sass


@pytest.mark.nvrtc
def test_flash_attention_row_fragments_compile_register_resident():
    """With tl.enable_row_fragments the softmax row values stay in registers (no shared fallback)."""
    import sys

    import tilelang

    sys.path.insert(0, str(ROOT / "examples"))
    import flash_attention as fa

    func = fa.flashattn.__wrapped__(1, 2, 256, 64, True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = tilelang.compile(func, out_idx=[3], target="cuda -arch=sm_90a",
                             pass_configs={"tl.enable_row_fragments": True})
    msgs = [str(x.message) for x in w]
    assert not [m for m in msgs if "kept in shared memory" in m], msgs
    src = k.get_kernel_source()
    assert "tl_quad_max(" in src and "tl_quad_sum(" in src
    # every shuffle is a statement of its own (all lanes reach it), never inside a select
    for line in src.splitlines():
        if "tl_quad_" in line:
            assert "?" not in line, line
