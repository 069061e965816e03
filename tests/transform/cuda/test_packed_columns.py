"""Packed tiles read as P[i, j // k] in a T.Parallel (transform/cuda/packed_columns.py; off with pass
config `tl.disable_packed_column_reads`).

dequantize_gemm's fp4 hopper example: bytes B_local (N, K / 2) unpacked two 4-bit weights a byte into
the register A tile of a wgmma gemm, `B_dq[i, j] = f(B_local[i, j // 2], j % 2)`. The A tile's column
pairs read one byte each, so B_local stays in registers, one byte a pair, instead of a shared copy with
two block barriers a k-step. A flat driver (vectors of 8 halves) keeps it in registers too; four values
a byte over column pairs, and the switch, fall back to shared memory. Numbers: the generated CUDA run
on the host and the CPU backend, against float64 torch on random inputs."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout.fragment import FlatFragment, PackedFragment, WgmmaAccFragment
from tilelang.transform.cuda.packed_columns import packed_layout

SM90 = "cuda -arch=sm_90a"
SM80 = "cuda -arch=sm_80"
OFF = {"tl.disable_packed_column_reads": True}
M, N, K, BM, BN, BK = 128, 256, 256, 128, 128, 128


def _unpack(byte, pos, bits):
    """The half whose bits the example builds from one s1e2m1 code (bits == 4) or a 2-bit code."""
    code = (byte >> (pos.astype("uint8") * T.uint8(bits))) & T.uint8((1 << bits) - 1)
    c = code.astype("uint16")
    if bits == 4:
        sign, exp, man = c >> T.uint16(3), ((c & T.uint16(6)) >> T.uint16(1)) + T.uint16(14), c & T.uint16(1)
    else:
        sign, exp, man = c >> T.uint16(1), T.uint16(15), c & T.uint16(1)
    return T.reinterpret(((exp | (sign << T.uint16(5))) << T.uint16(10)) | (man << T.uint16(9)), "float16")


def dequant_gemm(bits=4):
    """Ct (N, M) = dequant(B) @ A^T, B (N, K * bits / 8) packed bytes, A (M, K) half."""
    per = 8 // bits

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K // per), "uint8"), Ct: T.Tensor((N, M), "float32")):
        with T.Kernel(N // BN, M // BM, threads=256) as (bx, by):
            A_s = T.alloc_shared((BM, BK), "float16")
            B_s = T.alloc_shared((BN, BK // per), "uint8")
            B_local = T.alloc_fragment((BN, BK // per), "uint8")
            B_dq = T.alloc_fragment((BN, BK), "float16")
            C_l = T.alloc_fragment((BN, BM), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // BK, num_stages=2):
                T.copy(A[by * BM, k * BK], A_s)
                T.copy(B[bx * BN, k * BK // per], B_s)
                T.copy(B_s, B_local)
                for i, j in T.Parallel(BN, BK):
                    B_dq[i, j] = _unpack(B_local[i, j // per], j % per, bits)
                T.gemm(B_dq, A_s, C_l, transpose_B=True)
            T.copy(C_l, Ct[bx * BN, by * BM])

    return main


def dequant_flat(bits=4, R=64, C=256):
    """Out (R, C) = dequant(B): the unpacked tile laid out flat (8 halves a vector)."""
    per = 8 // bits

    @T.prim_func
    def main(B: T.Tensor((R, C // per), "uint8"), Out: T.Tensor((R, C), "float16")):
        with T.Kernel(1, threads=128) as bx:
            B_local = T.alloc_fragment((R, C // per), "uint8")
            dq = T.alloc_fragment((R, C), "float16")
            T.copy(B[0, 0], B_local)
            for i, j in T.Parallel(R, C):
                dq[i, j] = _unpack(B_local[i, j // per], j % per, bits)
            T.copy(dq, Out[0, 0])

    return main


def _ref_dequant(b: torch.Tensor, bits: int) -> torch.Tensor:
    """float64 values of the packed codes (column-major within a byte: low bits first)."""
    per = 8 // bits
    codes = torch.stack([(b.long() >> (bits * p)) & ((1 << bits) - 1) for p in range(per)], -1).flatten(-2)
    if bits == 4:
        sign, exp, man = codes >> 3, (codes & 6) >> 1, codes & 1
        val = torch.pow(2.0, exp.double() - 1) * (1 + 0.5 * man.double())
    else:
        sign, man = codes >> 1, codes & 1
        val = 1 + 0.5 * man.double()
    return torch.where(sign == 1, -val, val)


def _compile(func, target, configs=None):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = tilelang.compile(func, target=target, pass_configs=configs)
    return k, " ".join(str(x.message) for x in w)


def _inputs(bits, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randint(0, 256, (N, K * bits // 8), generator=g, dtype=torch.int32).to(torch.uint8)
    return a, b, torch.full((N, M), 7.0)


def _check_gemm(a, b, ct, bits):
    ref = _ref_dequant(b, bits) @ a.double().T
    assert torch.allclose(ct.double(), ref, rtol=1e-4, atol=1e-3), (ct.double() - ref).abs().max()


# ------------------------------------------------------------------ the rule on layouts

def test_packed_layout_of_accumulator_pairs():
    acc = WgmmaAccFragment((128, 128), 2, 1)
    p = packed_layout(acc, 2)
    assert isinstance(p, PackedFragment) and p.shape == (128, 64) and p.nlocal == 32
    owners = {}
    for t in range(256):
        for s in range(p.nlocal):
            owners.setdefault(p.coords(t, s), []).append(t)
            for r in range(2):  # both slots of the pair read the byte slot s holds
                i, j = acc.coords(t, 2 * s + r)
                assert p.coords(t, s) == (i, j // 2)
    assert len(owners) == 128 * 64 and all(len(v) == 1 for v in owners.values())
    assert packed_layout(acc, 4) is None  # pairs only: four columns a byte span two threads


def test_packed_layout_of_flat_vectors():
    flat = FlatFragment((64, 256), 128, 8)
    p = packed_layout(flat, 4)
    assert p == FlatFragment((64, 64), 128, 2) and p.nlocal == flat.nlocal // 4
    for t in range(128):
        for s in range(p.nlocal):
            i, j = flat.coords(t, 4 * s)
            assert p.coords(t, s) == (i, j // 4)
    assert packed_layout(FlatFragment((64, 256), 128, 1), 2) is None


# ------------------------------------------------------------------ generated code

def test_bytes_stay_in_registers():
    k, warns = _compile(dequant_gemm(4), SM90)
    src = k.get_kernel_source()
    assert "B_local is kept in shared memory" not in warns
    assert "uint8_t B_local[32];" in src and "B_local[(l_2 / 2)]" in src  # one byte a column pair
    assert "barrier_sync" not in src.split("setmaxnreg_inc")[1]  # the consumers run no block barrier


@pytest.mark.parametrize("func,target,why", [(dequant_gemm(4), SM90, "tl.disable_packed_column_reads"),
                                             (dequant_gemm(2), SM90, "runs of 4 columns")])
def test_fallback_to_shared(func, target, why):
    k, warns = _compile(func, target, OFF if why.startswith("tl.") else None)
    assert "fragment B_local is kept in shared memory" in warns
    if not why.startswith("tl."):
        assert why in warns
    assert "barrier_sync" in k.get_kernel_source()


def test_flat_driver_stays_in_registers():
    k, warns = _compile(dequant_flat(4), SM80)
    assert "B_local is kept in shared memory" not in warns
    src = k.get_kernel_source()
    assert "uint8_t B_local[64];" in src and "tl::load_vec<4>(B_v0, &B[" in src  # 4 bytes = 8 halves a vector


# ------------------------------------------------------------------ numbers

@pytest.fixture(scope="module")
def host():
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    cases = {"fp4": (dequant_gemm(4), SM90, None), "fp4_off": (dequant_gemm(4), SM90, OFF),
             "int2": (dequant_gemm(2), SM90, None), "flat": (dequant_flat(4), SM80, None),
             "flat2": (dequant_flat(2), SM80, None)}
    return host_cuda.HostProgram({n: _compile(f, t, c)[0] for n, (f, t, c) in cases.items()})


@pytest.mark.parametrize("name,bits", [("fp4", 4), ("fp4_off", 4), ("int2", 2)])
def test_gemm_matches_float64_on_host(host, name, bits):
    a, b, ct = _inputs(bits, 40 + bits)
    host.run(name, [a, b, ct])
    _check_gemm(a, b, ct, bits)


@pytest.mark.parametrize("name,bits", [("flat", 4), ("flat2", 2)])
def test_flat_matches_float64_on_host(host, name, bits):
    g = torch.Generator().manual_seed(50 + bits)
    b = torch.randint(0, 256, (64, 256 * bits // 8), generator=g, dtype=torch.int32).to(torch.uint8)
    out = torch.full((64, 256), 7.0).half()
    host.run(name, [b, out])
    assert torch.equal(out.double(), _ref_dequant(b, bits))


@pytest.mark.parametrize("bits", [4, 2])
def test_gemm_matches_float64_on_cpu(bits):
    k = tilelang.compile(dequant_gemm(bits), target="cpu")
    a, b, ct = _inputs(bits, 60 + bits)
    k(a, b, ct)
    _check_gemm(a, b, ct, bits)
