"""The TMA-store epilogue of warp-specialized kernels, and T.copy of a box of an accumulator.

On sm_90a the consumers' final T.copy(C_l, C[...]) of a gemm accumulator to a 2-d fp16/bf16
tensor goes through a 128B-swizzled shared staging tile and TMA stores issued by thread 0.
When the staging tile cannot hold the whole accumulator beside the pipeline stages, it is
written in chunks of rows, each chunk waiting until the previous stores have read the tile.
Checked on the emitted CUDA (compiled by NVRTC, no GPU needed); results of the box copies
are checked on the CPU backend against float64 torch.
"""
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.backend.cuda.pipeline import PerformanceWarning

from .conftest import build_case, call_args


def _consumer(src):
    return src.partition("} else {")[2]


BETWEEN = {"tl.disable_deferred_epilogue": True}  # the epilogue between k-loops (see the deferred test below)


def test_whole_accumulator_in_one_chunk_when_it_fits():
    # 128x256x64 tiles, 3 stages: 144 KB of stages leave room for the 64 KB staging tile
    # (a one-block grid's bx / by would be the constant 0: kept as block indices to read the coordinates)
    src = build_case("gemm", {"bN": 256, "bK": 64, "threads": 256}, "sm_90a",
                     {**BETWEEN, "tl.disable_unit_grid_fold": True}).source
    cons = _consumer(src)
    assert "tl_half* C_tma = " in src
    stores = call_args(cons, "tl::tma_store")
    assert [s[1] for s in stores] == [f"C_tma + {q * 128 * 64}" for q in range(4)]
    assert [s[2] for s in stores] == [f"(bx * 256) + {q * 64}" for q in range(4)]
    assert all(s[3] == "(by * 128) + 0" for s in stores)
    assert "tl_store2(" not in cons.split("tl::tma_store_wait<0>();")[0].split("tl_cbase[0] = ")[-1]
    # every slot, no guard: 16 stmatrix.x4 of 8 slots (transform/cuda/stmatrix.py), or 64 slot pairs without it
    assert re.search(r"for \(int stsm_p = 0; stsm_p < 16; \+\+stsm_p\) \{[^}]*tl::stmatrix_pack<4>\(&C_tma\[", cons)
    off = build_case("gemm", {"bN": 256, "bK": 64, "threads": 256}, "sm_90a",
                     {**BETWEEN, "tl.disable_unit_grid_fold": True, "tl.disable_stmatrix_store": True}).source
    assert "stmatrix" not in off
    assert re.search(r"for \(int l_\d+ = 0; l_\d+ < 64; \+\+l_\d+\)", _consumer(off))
    assert cons.count("tl::tma_store_commit();") == 1
    assert cons.rstrip().endswith("if (tid == 0) tl::tma_store_wait_all();\n  }") or \
        "if (tid == 0) tl::tma_store_wait_all();" in cons


def test_rows_in_chunks_beside_four_stages():
    # 4 stages of 48 KB leave 32 KB: two chunks of 64 rows, each its own slot range, no guards
    src = build_case("gemm", {"bN": 256, "bK": 64, "threads": 256, "stages": 4, "M": 512, "N": 512},
                     "sm_90a", BETWEEN).source
    cons = _consumer(src)
    assert re.search(r"tl_half\* C_tma = reinterpret_cast<tl_half\*>\(tl_smem \+ (\d+)\);", src)
    off = int(re.search(r"C_tma = reinterpret_cast<tl_half\*>\(tl_smem \+ (\d+)\);", src).group(1))
    assert off % 1024 == 0 and off + 64 * 256 * 2 <= 232448
    loops = re.findall(r"for \(int (l_\d+) = (\d+); \1 < ([\d +]+); \+\+\1\) \{\n(.*?)\n\s*\}", cons, re.S)
    loops = [x for x in loops if "C_tma" in x[3]]
    assert [(lo, hi.replace(" ", "")) for _, lo, hi, _ in loops] == [("0", "32"), ("32", "32+32")]
    assert all("if (" not in body and "tl_store2(&C_tma[tl::panel_xor_offset<64>(" in body for *_, body in loops)
    stores = call_args(cons, "tl::tma_store")
    assert [s[3] for s in stores] == ["(by * 128) + 0"] * 4 + ["(by * 128) + 64"] * 4
    # order per chunk: wait until read, barrier, registers -> C_tma, fence + barrier, stores, commit
    # (the first barrier orders a finished TMA read before generic writes: no proxy fence needed)
    chunk = r"if \(tid == 0\) tl::tma_store_wait<0>\(\);\s*tl::barrier_sync<1, 256>\(\);" \
            r"\s*#pragma unroll\s*for .*?tl::fence_proxy_async\(\); tl::barrier_sync<1, 256>\(\);\s*" \
            r"if \(tid == 0\) \{ (?:tl::tma_store\(.*?\); ){4}tl::tma_store_commit\(\); \}"
    assert len(re.findall(chunk, cons, re.S)) == 2, cons


@pytest.mark.parametrize("stages", [3, 4])
def test_deferred_epilogue_stores_chunks_during_the_next_k_loop(stages):
    """A persistent plain GEMM converts its accumulator into a packed fp16 copy (two values per
    register) at the end of a tile and stores it in 64-row chunks at k-iterations 0 and 2 of
    the next tile's k-loop (each after the wait for the previous chunk's TMA read and a barrier),
    with the tile corner it noted; what is left is stored after the block's last tile. The
    k-loop gets no barrier of its own at its end."""
    src = build_case("gemm", {"bN": 256, "bK": 64, "threads": 256, "stages": stages, "M": 2048, "N": 2048,
                              "K": 512}, "sm_90a", {}).source
    cons = _consumer(src)
    assert re.search(r"uint32_t C_l_out\[64\];", cons)
    kloop = cons[cons.index("for (int ko = 0;"):cons.index("tl::warpgroup_wait<0>();")]
    assert "if (((tl_out_next[0] == 0) && (ko == 0)))" in kloop and "if (((tl_out_next[0] == 1) && (ko == 2)))" in kloop
    assert kloop.count("tl::tma_store_commit();") == 2 and "tl_out_row[0] + 64" in kloop
    assert kloop.count("barrier_sync") == 4  # two per chunk, inside the chunks' ifs
    tail = cons[cons.index("tl::warpgroup_wait<0>();"):]
    assert re.search(r"tl::set_half<tl_half>\(C_l_out\[\(\w+\) >> 1\], \(\w+\) & 1, \(\(tl_half\)\(C_l\[\w+\]\)\)\);",
                     tail)
    assert "tl_out_row[0] = (by * 128);" in tail and "tl_out_col[0] = (bx * 256);" in tail
    last = cons[cons.rindex("tl_out_next[0] = 0;"):]
    assert last.count("tl::tma_store_commit();") == 2 and last.index("tl_out_next[0] == 1") < \
        last.index("tl::tma_store_wait_all();")


def test_ragged_tiles_keep_tma_stores_and_fp32_outputs_keep_register_stores():
    # TMA clips the out-of-range part of a ragged tile: no guard needed
    src = build_case("gemm", {"M": 1000, "N": 1000, "K": 1000, "bN": 256, "bK": 64, "threads": 256},
                     "sm_90a", {}).source
    assert "tl::tma_store(" in src
    # a float32 C (two_gemms writes O in float32) is stored from registers
    src = build_case("gemm_nt", {"M": 256, "N": 256, "bM": 128, "bN": 128}, "sm_90a", {}).source
    assert "tl::tma_store(" not in src and "tl_store2(&C[" in src


def test_no_room_for_a_staging_tile_warns():
    @T.prim_func
    def big(A: T.Tensor((512, 512), "float16"), B: T.Tensor((512, 512), "float16"),
            C: T.Tensor((512, 512), "float16"), D: T.Tensor((112, 256), "float16")):
        with T.Kernel(2, 4, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 256), "float16")
            X_s = T.alloc_shared((112, 256), "float16")  # 56 KB: 25 KB left beside 3 stages, < 64 rows
            C_l = T.alloc_fragment((128, 256), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(8, num_stages=3):
                T.copy(A[by * 128, ko * 64], A_s)
                T.copy(B[ko * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(B[0:112, 0:256], X_s)
            T.copy(X_s, D)
            T.copy(C_l, C[by * 128, bx * 256])

    with pytest.warns(PerformanceWarning, match="stores from registers, not through TMA: a 64x256 staging tile"):
        k = tilelang.compile(big, target="cuda -arch=sm_90a")
    assert "tl::tma_store(" not in k.get_kernel_source()


def _box_copy_kernel(M, N, K, part):
    """C = A @ B stored in two row halves (part="rows") or column halves ("cols") of the accumulator."""

    @T.prim_func
    def boxes(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            H_s = T.alloc_shared((32, 64) if part == "rows" else (64, 32), "float32")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
                T.copy(A[by * 64, ko * 32], A_s)
                T.copy(B[ko * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_l)
            if part == "rows":
                for h in T.serial(2):
                    T.copy(C_l[h * 32:h * 32 + 32, :], H_s)
                    T.copy(H_s, C[by * 64 + h * 32, bx * 64])
            else:
                T.copy(C_l[:, 0:32], C[by * 64, bx * 64])
                T.copy(C_l[:, 32:64], H_s)
                T.copy(H_s, C[by * 64, bx * 64 + 32])

    return boxes


@pytest.mark.parametrize("part", ["rows", "cols"])
def test_copy_of_an_accumulator_box_matches_float64(part):
    M, N, K = 192, 128, 96
    k = tilelang.compile(_box_copy_kernel(M, N, K, part), target="cpu")
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"))
    k(a, b, c)
    ref = a.double() @ b.double()
    assert torch.allclose(c.double(), ref, rtol=1e-3, atol=1e-3), (c.double() - ref).abs().max()


@pytest.mark.parametrize("part", ["rows", "cols"])
def test_accumulator_box_copies_stay_in_registers_on_cuda(part):
    """No demotion of the accumulator to shared memory; each box is a paired store loop."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        k = tilelang.compile(_box_copy_kernel(192, 128, 96, part), target="cuda -arch=sm_80")
    src = k.get_kernel_source()
    assert "float C_l[" in src and "C_l = reinterpret_cast" not in src
    assert src.count("tl_store2(") == (1 if part == "rows" else 2)


def _staged_out(read_back: bool, no_tma: bool = False):
    """A GEMM that stores C through its own shared tile C_s (attention's O epilogue); with
    read_back, C_s is also read by an element loop (a ragged varlen store), so it must stay."""

    @T.prim_func
    def staged(A: T.Tensor((2, 256, 128), "float16"), B: T.Tensor((128, 128), "float16"),
               C: T.Tensor((2, 256, 128), "float16"), D: T.Tensor((256, 128), "float16")):
        with T.Kernel(1, 2, 2, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_s = T.alloc_shared((128, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(2, num_stages=2):
                T.copy(A[bz, by * 128:(by + 1) * 128, ko * 64:(ko + 1) * 64], A_s)
                T.copy(B[ko * 64, 0], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.copy(C_s, C[bz, by * 128:(by + 1) * 128, 0:128], disable_tma=no_tma)
            if read_back:
                for i, j in T.Parallel(128, 128):
                    D[by * 128 + i, j] = C_s[i, j]

    return staged


def test_kernel_staging_tile_becomes_the_tma_staging_tile():
    """T.copy(C_l, C_s); T.copy(C_s, C[bz, rows, :]) is stored as one accumulator copy: the
    swizzled staging tile (conflict-free fragment stores) and 3-d TMA stores, no C_s."""
    src = tilelang.compile(_staged_out(False), target="cuda -arch=sm_90a").get_kernel_source()
    cons = _consumer(src)
    assert "tl_half* C_s = " not in src and "copy_vec16(" not in cons
    stores = call_args(cons, "tl::tma_store")
    assert [s[2:] for s in stores][:2] in ([["0 + 0", "(by * 128) + 0", "bz"], ["0 + 64", "(by * 128) + 0", "bz"]],
                                           [["tl_out_2[0] + 0", "tl_out_1[0] + 0", "tl_out_0[0]"],
                                            ["tl_out_2[0] + 64", "tl_out_1[0] + 0", "tl_out_0[0]"]]), stores
    assert "C_tma[tl::panel_" in cons


def test_kernel_staging_tile_read_elsewhere_stays():
    src = tilelang.compile(_staged_out(True), target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl_half* C_s = " in src and "tl::tma_store(" not in src


def test_kernel_staging_tile_stays_with_the_fold_switched_off():
    src = tilelang.compile(_staged_out(False), target="cuda -arch=sm_90a",
                           pass_configs={"tl.disable_fold_staged_store": True}).get_kernel_source()
    assert "tl_half* C_s = " in src and "tl::tma_store(" not in src


def test_kernel_staging_tile_stays_where_the_copy_out_disables_tma():
    src = tilelang.compile(_staged_out(False, no_tma=True), target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl_half* C_s = " in src and "tl::tma_store(" not in src
