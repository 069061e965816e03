"""tl::gemm_ss's ldmatrix reads of a swizzled K-contiguous tile take their K-slice addresses from 4
per-lane offsets plus an immediate (gemm_sm80.h `koff`, TL_LDSM_LANE_OFFSETS; off with pass_config
`tl.disable_ldsm_lane_offsets`). The generated CUDA runs on the host (tilelang/testing/host_cuda:
the header with host ldmatrix / mma.sync) against float64 torch on random inputs, both ways, for
tiles whose rows span 8+ swizzle chunks (the split applies) and shorter ones (it does not); the
SASS of a tf32 pipelined gemm loses integer instructions from its main loop."""
import re

import pytest

import tilelang
import tilelang.language as T

from .conftest import check_gemm_nt, gemm_nt_operands, nvrtc_or_skip

SM80 = "cuda -arch=sm_80"
OFF = {"tl.disable_ldsm_lane_offsets": True}


def gemm(M, N, K, dtype, acc, ta=False, tb=True):
    sdt = "tfloat32" if dtype == "float32" else dtype
    a_shape = (K, M) if ta else (M, K)
    b_shape = (N, K) if tb else (K, N)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(1, threads=128) as _bx:
            a_s = T.alloc_shared(a_shape, sdt)
            b_s = T.alloc_shared(b_shape, sdt)
            c = T.alloc_fragment((M, N), acc)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.clear(c)
            T.gemm(a_s, b_s, c, transpose_A=ta, transpose_B=tb)
            T.copy(c, C)

    return main


# name: (M, N, K, dtype, acc, transpose_A, transpose_B)
CASES = {
    "f16_rows128B": (32, 64, 128, "float16", "float32", False, True),  # 16 chunks a row: split
    "f16_rows64B": (32, 32, 32, "float16", "float32", False, True),  # 4 chunks: swizzle_offset
    "f16_b_kn": (64, 32, 64, "float16", "float32", False, False),  # B K x N: only A splits
    "bf16_x2": (32, 16, 256, "bfloat16", "float32", False, True),  # one 8-wide B tile: ldmatrix x2
    "tf32": (32, 32, 64, "float32", "float32", False, True),
    "tf32_ta": (32, 32, 64, "float32", "float32", True, True),  # A K x M: lds32, B splits
    "i8": (32, 32, 256, "int8", "int32", False, True),
}


def _host(configs=None):
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    return host_cuda.HostProgram({name: tilelang.compile(gemm(*args), target=SM80, pass_configs=configs)
                                  for name, args in CASES.items()})


@pytest.fixture(scope="module")
def prog():
    return _host()


@pytest.fixture(scope="module")
def prog_off():
    return _host(OFF)


def _run_and_check(p, name, seed):
    M, N, K, d, acc, ta, tb = CASES[name]
    a, b, c = gemm_nt_operands(M, N, K, d, acc, seed)
    p.run(name, [a.T.contiguous() if ta else a, b if tb else b.T.contiguous(), c])
    check_gemm_nt(a, b, c, d)


@pytest.mark.parametrize("name", list(CASES))
def test_lane_offsets_match_float64_on_host(prog, name):
    _run_and_check(prog, name, 21)


@pytest.mark.parametrize("name", ["f16_rows128B", "tf32"])
def test_switched_off_matches_float64_on_host(prog_off, name):
    _run_and_check(prog_off, name, 22)


def test_switch_defines_the_macro():
    on = tilelang.compile(gemm(*CASES["tf32"]), target=SM80).get_kernel_source()
    off = tilelang.compile(gemm(*CASES["tf32"]), target=SM80, pass_configs=OFF).get_kernel_source()
    assert "TL_LDSM_LANE_OFFSETS" not in on and "#define TL_LDSM_LANE_OFFSETS 0" in off


def _pipelined_tf32(M=32, N=32, K=4096, bk=256):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            c = T.alloc_fragment((M, N), "float32")
            T.clear(c)
            for ko in T.Pipelined(K // bk, num_stages=2):
                a_s = T.alloc_shared((M, bk), "tfloat32")
                b_s = T.alloc_shared((N, bk), "tfloat32")
                T.copy(A[0, ko * bk], a_s)
                T.copy(B[0, ko * bk], b_s)
                T.gemm(a_s, b_s, c, transpose_B=True)
            T.copy(c, C)

    return main


def _main_loop_int_ops(kernel) -> int:
    ins = []
    for line in kernel.artifact.sass().splitlines():
        m = re.match(r"\s+/\*([0-9a-f]+)\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2)))
    loops = [(int(m.group(1), 16), a) for a, t in ins
             if (m := re.search(r"BRA (0x[0-9a-f]+)", t)) and int(m.group(1), 16) < a]
    lo, hi = max(loops, key=lambda r: r[1] - r[0])
    ops = [re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for a, t in ins if lo <= a <= hi]
    return sum(op in ("IMAD", "LOP3", "LEA", "IADD3", "VIADD", "SHF") for op in ops)


def test_tf32_main_loop_loses_address_math():
    nvrtc_or_skip()
    on = tilelang.compile(_pipelined_tf32(), target="cuda -arch=sm_90a")
    off = tilelang.compile(_pipelined_tf32(), target="cuda -arch=sm_90a", pass_configs=OFF)
    n_on, n_off = _main_loop_int_ops(on), _main_loop_int_ops(off)
    # 32 K slices a stage, one A and one B ldmatrix each: ~3 integer instructions an address before
    assert n_on + 64 <= n_off, (n_on, n_off)
