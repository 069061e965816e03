"""T.Parallel over a row chunk of a register accumulator (fragment_slices.py).

    for s in range(2):
        for i, j in T.Parallel(M, N):
            if i < M // 2:
                stage[i, j] = acc[i + s * (M // 2), j]       # acc stays in registers

The slots each thread runs are checked by enumeration (every element of the slice exactly once),
the kernel on the CPU backend against float64, the generated CUDA (NVRTC, sm_90a / sm_80) for
the accumulator staying in registers, a flat-layout version of the CUDA source run on the host
(tilelang/testing/host_cuda), and the kernel on a GPU (marked cuda).
"""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout.fragment import FlatFragment, MmaAccFragment, WgmmaAccFragment
from tilelang.transform.cuda.fragment_slices import slice_slots, slot_runs


def gemm_chunks(M=32, N=64, K=32, split=2, threads=128, guard=True, dtype="float16", accum="float32",
                rows=None, runtime_offset=False):
    """C = A @ B, the accumulator stored `rows` rows at a time through a shared stage."""
    rows = rows or M // split
    chunks = M // rows

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((M, K), dtype)
            B_s = T.alloc_shared((K, N), dtype)
            acc = T.alloc_fragment((M, N), accum)
            stage = T.alloc_shared((rows, N), accum)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for s in range(chunks):
                if runtime_offset:
                    for i, j in T.Parallel(rows, N):
                        stage[i, j] = acc[i + (bx + s) * rows, j]
                elif guard:
                    for i, j in T.Parallel(M, N):
                        if i < rows:
                            stage[i, j] = acc[i + s * rows, j]
                else:
                    for i, j in T.Parallel(rows, N):
                        stage[i, j] = acc[i + s * rows, j]
                for i, j in T.Parallel(rows, N):
                    C[i + s * rows, j] = stage[i, j] * 2
    return main


def flat_chunks(M=32, N=64, split=2, threads=128):
    """No gemm: a fragment in the flat layout, stored in row chunks (runs on the host harness)."""
    rows = M // split

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            frag = T.alloc_fragment((M, N), "float32")
            stage = T.alloc_shared((rows, N), "float32")
            for i, j in T.Parallel(M, N):
                frag[i, j] = A[i, j] * 3 + 1
            for s in range(split):
                for i, j in T.Parallel(M, N):
                    if i < rows:
                        stage[i, j] = frag[i + s * rows, j]
                for i, j in T.Parallel(rows, N):
                    C[i + s * rows, j] = stage[i, j] - A[i + s * rows, j]
    return main


def compile_quiet(func, target, configs=None):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = tilelang.compile(func, target=target, pass_configs=configs or {})
    return k, [str(x.message) for x in w]


def demoted(msgs, name="acc"):
    return [m for m in msgs if f"fragment {name} is kept in shared memory" in m]


def nvrtc_or_skip():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


# ----------------------------------------------------------------------------- the slots
def covered(lay, offsets, box, slots):
    seen = []
    for t in range(lay.threads):
        for l in slots:
            seen.append(tuple(c - o for c, o in zip(lay.coords(t, l), offsets)))
    return seen


@pytest.mark.parametrize("lay", [MmaAccFragment((32, 512), 1, 8), MmaAccFragment((64, 64), 2, 2),
                                 WgmmaAccFragment((128, 64), 1, 1), FlatFragment((32, 64), 128, 4)],
                         ids=["mma1x8", "mma2x2", "wgmma", "flat"])
@pytest.mark.parametrize("rows", [16, 8])
def test_slots_cover_each_chunk_once(lay, rows):
    for s in range(lay.shape[0] // rows):
        box = ((0, rows - 1), (0, lay.shape[1] - 1))
        slots = slice_slots(lay, (s * rows, 0), box)
        if slots is None:
            continue  # a chunk some threads own only partly: demoted (checked below)
        seen = covered(lay, (s * rows, 0), box, slots)
        want = [(i, j) for i in range(rows) for j in range(lay.shape[1])]
        assert sorted(seen) == want, f"{lay} chunk {s}: slots {slots}"
        assert [a + k for a, n in slot_runs(slots) for k in range(n)] == list(slots)


def test_slots_none_when_the_chunk_cuts_a_slot():
    # rows 4..7 of an mma atom: lanes with g < 4 hold row g, the others g + 4: no slot is whole
    assert slice_slots(MmaAccFragment((32, 64), 1, 4), (4, 0), ((0, 3), (0, 63))) is None
    # 2x2 warps, chunks of 16 rows: rows 0..15 are warp row 0's only -> threads disagree
    assert slice_slots(MmaAccFragment((32, 64), 2, 2), (0, 0), ((0, 15), (0, 63))) is None
    # aligned: 1x8 warps, the second 16-row chunk is exactly slots 32..63 on every thread
    assert slice_slots(MmaAccFragment((32, 512), 1, 8), (16, 0), ((0, 15), (0, 511))) == tuple(range(32, 64))


# ----------------------------------------------------------------------------- CPU backend, float64
@pytest.mark.parametrize("guard", [True, False], ids=["guarded", "chunk_loop"])
def test_cpu_gemm_accumulator_in_row_chunks(guard):
    M, N, K = 32, 64, 32
    k = tilelang.compile(gemm_chunks(M, N, K, guard=guard, dtype="float64", accum="float64"), target="cpu")
    a, b = torch.randn(M, K, dtype=torch.float64), torch.randn(K, N, dtype=torch.float64)
    c = torch.full((M, N), float("nan"), dtype=torch.float64)
    k(a, b, c)
    torch.testing.assert_close(c, 2 * (a @ b), rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- generated CUDA
@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("guard", [True, False], ids=["guarded", "chunk_loop"])
def test_accumulator_stays_in_registers(arch, guard):
    nvrtc_or_skip()
    k, msgs = compile_quiet(gemm_chunks(guard=guard), f"cuda -arch={arch}")
    assert not demoted(msgs), msgs
    src = k.get_kernel_source()
    assert "float acc[16];" in src, src
    assert "float* acc " not in src and "float* acc=" not in src, src
    # the two chunks read registers 0..7 and 8..15, no guard left per slot
    # (as column pairs: tl_store2(.., acc[(l * 2)], acc[((l * 2) + 1)]) and acc[((l * 2) + 8)], ..)
    assert ("= acc[l" in src and "= acc[(l" in src or re.search(r"acc\[\(l(_\d+)? \* 2\)\]", src)) and "+ 8)]" in src, src
    # shared memory: A_s (2 KB) + B_s (4 KB), the stage (4 KB) reusing B_s's bytes once the gemm is done
    assert k.artifact.csource.smem_bytes <= 2048 + 4096 + 4096, k.artifact.csource.smem_bytes


@pytest.mark.nvrtc
@pytest.mark.parametrize("kw", [{"rows": 4}, {"runtime_offset": True, "rows": 16}], ids=["cuts_slots", "runtime"])
def test_misaligned_or_runtime_offsets_demote(kw):
    nvrtc_or_skip()
    # (a one-block grid's bx is the constant 0, which would make the runtime offset a constant one)
    _, msgs = compile_quiet(gemm_chunks(guard=False, **kw), "cuda -arch=sm_90a", {"tl.disable_unit_grid_fold": True})
    assert demoted(msgs), msgs


# ----------------------------------------------------------------------------- CUDA source on the host
def _host():
    from tilelang.testing import host_cuda as mod
    return mod


@pytest.mark.nvrtc
def test_flat_fragment_chunks_run_on_host():
    host = _host()
    if not host.available():
        pytest.skip("g++ not installed")
    nvrtc_or_skip()
    k, msgs = compile_quiet(flat_chunks(), "cuda -arch=sm_90a")
    assert not demoted(msgs, "frag"), msgs
    prog = host.HostProgram({"chunks": k})
    a = torch.randn(32, 64, dtype=torch.float32)
    c = torch.full((32, 64), float("nan"), dtype=torch.float32)
    prog.run("chunks", [a, c])
    want = (a.double() * 3 + 1 - a.double()).float()
    torch.testing.assert_close(c, want, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- on a GPU
@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("shape", [(32, 512, 64, 256), (64, 128, 32, 128), (128, 64, 64, 128)],
                         ids=["32x512_8warps", "64x128", "128x64_wgmma"])
@pytest.mark.parametrize("guard", [True, False], ids=["guarded", "chunk_loop"])
def test_gpu_accumulator_in_row_chunks(shape, guard):
    M, N, K, threads = shape
    k, msgs = compile_quiet(gemm_chunks(M, N, K, threads=threads, guard=guard), "cuda")
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    c = torch.full((M, N), float("nan"), dtype=torch.float32, device="cuda")
    k(a, b, c)
    torch.cuda.synchronize()
    want = 2 * (a.double() @ b.double())
    torch.testing.assert_close(c.double(), want, rtol=1e-3, atol=1e-2)


@pytest.mark.nvrtc
def test_guarded_loop_over_the_whole_tile_keeps_its_guard():
    """`if i < 4` in a loop over the whole accumulator: not a slice (rows 0..3 cut the mma
    pattern), the plain per-slot loop with the guard, the accumulator in registers as before."""
    nvrtc_or_skip()
    M, N, K = 32, 64, 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for i, j in T.Parallel(M, N):
                if i < 4:
                    C[i, j] = acc[i, j]

    k, msgs = compile_quiet(main, "cuda -arch=sm_90a")
    assert not demoted(msgs), msgs
    assert "float acc[16];" in k.get_kernel_source()


# ----------------------------------------------------------------------------- column pairs (slice_pairs)
@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("shape", [(32, 512, 64, 256), (64, 128, 32, 128)], ids=["32x512_8warps", "64x128"])
@pytest.mark.parametrize("guard", [True, False], ids=["guarded", "chunk_loop"])
@pytest.mark.parametrize("pairs", [True, False], ids=["pairs", "scalar"])
def test_row_chunks_store_column_pairs_and_run_on_host(arch, shape, guard, pairs):
    """The chunk's `stage[i, j] = acc[i + s * rows, j]` is one tl_store2 per column pair (and the
    stage, only stored to in pairs and read element-wise, is swizzled); the numbers match float64."""
    host = _host()
    if not host.available():
        pytest.skip("g++ not installed")
    nvrtc_or_skip()
    M, N, K, threads = shape
    cfg = {} if pairs else {"tl.disable_slice_pair_stores": True}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(gemm_chunks(M, N, K, threads=threads, guard=guard), target=f"cuda -arch={arch}",
                             pass_configs=cfg)
    src = k.get_kernel_source()
    if not pairs:
        assert "tl_store2(&stage[" not in src, src
    elif shape[0] == 32:  # 8 warps over 32 x 512: the chunk is a slice of each thread's slots
        assert "tl_store2(&stage[tl::swizzle_xor_offset" in src, src
    g = torch.Generator().manual_seed(3)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(K, N, generator=g).half()
    c = torch.full((M, N), float("nan"))
    host.HostProgram({"main": k}).run("main", [a, b, c])
    torch.testing.assert_close(c.double(), 2 * (a.double() @ b.double()), rtol=1e-4, atol=1e-3)
