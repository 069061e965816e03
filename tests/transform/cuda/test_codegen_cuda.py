"""CUDA codegen: every kernel of the pass tests compiles with NVRTC for its arch, and its machine
code is what the source promises (tensor-core, TMA and cp.async instructions; no local memory)."""
import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.backend.cuda import sass

# Builds whose GEMM spills today (stack frames in cuobjdump -res-usage): ptxas fully unrolls the
# scalar-copy fallback and runs out of registers. (The unpipelined sm80 GEMM spilled 584 bytes
# until the copies' provably redundant bounds guards were dropped.)
SPILLS: dict = {}  # name -> why ptxas spills it (gemm-sm80-K100 did, before 8-byte cp.async pipelined it)


def test_every_kernel_compiles_for_its_arch(case):
    name, b = case
    compiled = b.kernel.artifact.compiled
    arch = b.kernel.artifact.target.arch
    assert isinstance(compiled.cubin, bytes) and len(compiled.cubin) > 1000
    assert compiled.cubin[:4] == b"\x7fELF"
    entry = b.kernel.artifact.csource.entry
    assert re.search(rf"\.entry {entry}\(", compiled.ptx), f"{name}: no .entry {entry} in the PTX"
    assert re.search(rf"\.target {arch}\b", compiled.ptx), f"{name}: PTX not for {arch}"


def _sass_or_skip(b):
    if not sass.sass_available():
        pytest.skip("cuobjdump / nvdisasm not installed")
    return b.sass()


def test_gemm_sass_has_no_local_memory(case, request):
    name, b = case
    if name in SPILLS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=SPILLS[name]))
    ops = sass.opcodes(_sass_or_skip(b))
    res = sass.resource_usage(b.kernel.artifact.compiled.cubin)
    assert ops["LDL"] == 0 and ops["STL"] == 0, f"{name}: {ops['LDL']} LDL, {ops['STL']} STL"
    assert all(r.local == 0 and r.stack == 0 for r in res.values()), res


def test_sass_uses_the_instructions_the_source_asks_for(case):
    name, b = case
    src = b.source
    ops = sass.opcodes(_sass_or_skip(b))
    int8 = "int8_t, 1, int32_t>" in src or "int8_t, 0, int32_t>" in src
    want = {
        "HMMA": "tl::gemm_ss<" in src or "tl::gemm_ss_pipe<" in src,
        "HGMMA": ("gemm_ss_sm90<" in src or "gemm_rs_sm90<" in src) and not int8,
        "IGMMA": int8,  # the k32 integer form
        "UTMALDG": "tl::tma_load(" in src,
        "LDGSTS": "tl::cp_async_zfill<" in src,
    }
    for op, present in want.items():
        assert (ops[op] > 0) == present, f"{name}: {op} x{ops[op]}, source asks for it: {present}"
    if b.kernel.artifact.target.arch == "sm_80":
        assert ops["HGMMA"] == 0 and ops["UTMALDG"] == 0


# ----------------------------------------------------------------------------- known bugs


@T.prim_func
def _column_sums(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        for i, j in T.Parallel(64, 64):
            T.atomic_add(B[j], A[i, j])


def test_atomic_add_in_a_parallel_loop_runs_on_every_thread():
    pytest.importorskip("tilelang.backend.cuda.nvrtc")
    src = tilelang.compile(_column_sums, target="cuda -arch=sm_80").artifact.source
    loop = src[src.index("for (int q"):]
    assert "tl_atomic_add_v4_f32(&B[j], A[" in loop  # four columns of a row a thread: one 16-byte reduction
    assert "(tid == 0)" not in loop, loop


@T.prim_func
def _shared_trip_count(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32")):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_shared((128,), "int32")
        T.copy(A, F)
        for ko in T.serial(F[0]):
            for i in T.Parallel(128):
                F[i] = F[i] + 1
        T.copy(F, B)


def test_loop_extent_is_evaluated_once():
    pytest.importorskip("tilelang.backend.cuda.nvrtc")
    src = tilelang.compile(_shared_trip_count, out_idx=[-1], target="cuda -arch=sm_80").artifact.source
    cond = re.search(r"for \(int ko = 0; ko < ([^;]+);", src)
    assert cond and "F[" not in cond.group(1), cond and cond.group(0)


def test_spills_come_with_a_warning(case):
    """A kernel ptxas had to spill says so (PerformanceWarning with the bytes); the others stay quiet."""
    name, b = case
    info = b.kernel.artifact.compiled.ptxas_info()
    notes = [m for _, m in b.warnings if "spills" in m and "local memory" in m]
    spilled = max(info.get("spill_stores", 0), info.get("spill_loads", 0))
    assert "registers" in info, f"{name}: no ptxas report in the compile log"
    assert bool(notes) == bool(spilled), (name, info, notes)
    assert bool(spilled) == (name in SPILLS), (name, info)


@pytest.mark.nvrtc
@pytest.mark.parametrize("dtype,conv", [("bfloat16", "tl_f32_to_bf16"), ("float8_e4m3fn", "tl_f32_to_fp8e4m3")])
def test_accumulator_pair_stores_round_once(dtype, conv):
    """An accumulator copied to a bf16 / fp8 tile is stored in pairs, each value rounded once from
    float (it was f32 -> bf16 -> f32 -> bf16, exact but three conversions per element)."""
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), dtype)):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(acc)
            T.gemm(a, b, acc)
            T.copy(acc, C)

    src = tilelang.compile(k, target="cuda -arch=sm_80").get_kernel_source()
    stores = re.findall(r"tl_store2\(&C\[[^;]*;", src)
    assert stores and all(s.count(conv) == 2 and "_to_f32" not in s for s in stores), stores
