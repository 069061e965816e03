"""On sm_90, T.copy of a wgmma accumulator into a 16-bit shared tile goes by stmatrix
(transform/cuda/stmatrix.py; off with pass_config `tl.disable_stmatrix_store`). The generated CUDA
runs on the host (tilelang/testing/host_cuda: host wgmma and a host stmatrix that places each
lane's registers by the PTX ISA's 8x8 layout) against float64 torch on random inputs, both ways:
one and two warpgroups, a swizzled tile and a column box of a wider one, mma.sync's accumulator
with an odd atom count (the last matrix pair by stmatrix.x2), bf16 and f16; the shared tile is read back through a second
wgmma (the flash-attention P tile) or copied out to global memory."""
import re

import pytest
import torch

import tilelang
import tilelang.language as T

from .conftest import nvrtc_or_skip

SM90 = "cuda -arch=sm_90a"
OFF = {"tl.disable_stmatrix_store": True}
TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def score_out(M, N, K, dtype, threads, col0=0, width=None):
    """S = A @ B^T (float accumulator) -> T.copy into S_s[:, col0:col0 + N] (16-bit) -> global."""
    width = width or N

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=threads) as _bx:
            a_s = T.alloc_shared((M, K), dtype)
            b_s = T.alloc_shared((N, K), dtype)
            s_s = T.alloc_shared((M, width), dtype)
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.clear(acc)
            T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, s_s[:, col0:col0 + N])
            T.copy(s_s[:, col0:col0 + N], C)

    return main


def score_value(M, N, D, dtype):
    """O = half(Q @ K^T) @ V with the 16-bit scores through a shared tile (a wgmma A operand)."""

    @T.prim_func
    def main(Q: T.Tensor((M, D), dtype), Kt: T.Tensor((N, D), dtype), V: T.Tensor((N, D), dtype),
             O: T.Tensor((M, D), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            q_s = T.alloc_shared((M, D), dtype)
            k_s = T.alloc_shared((N, D), dtype)
            v_s = T.alloc_shared((N, D), dtype)
            p_s = T.alloc_shared((M, N), dtype)
            s = T.alloc_fragment((M, N), "float32")
            o = T.alloc_fragment((M, D), "float32")
            T.copy(Q, q_s)
            T.copy(Kt, k_s)
            T.copy(V, v_s)
            T.clear(s)
            T.gemm(q_s, k_s, s, transpose_B=True)
            for i, j in T.Parallel(M, N):
                s[i, j] = s[i, j] * 0.5
            T.copy(s, p_s)
            T.clear(o)
            T.gemm(p_s, v_s, o)
            T.copy(o, O)

    return main


# name: (M, N, K, dtype, threads, col0, width, gemm, stmatrix calls (x4, x2) in the source)
OUT = {
    "bf16_one_warpgroup": (64, 64, 64, "bfloat16", 128, 0, None, "tl::gemm_ss_sm90", (1, 0)),
    "f16_two_warpgroups": (128, 64, 64, "float16", 256, 0, None, "tl::gemm_ss_sm90", (1, 0)),
    "bf16_column_box": (64, 64, 64, "bfloat16", 128, 64, 192, "tl::gemm_ss_sm90", (1, 0)),  # S_s[:, 64:128]
    # 32 x 24 at 64 threads (no warpgroup: mma.sync's accumulator), 3 atoms a thread (one x4, one x2)
    "bf16_mma_odd_atoms": (32, 24, 64, "bfloat16", 64, 0, None, "tl::gemm_ss<", (1, 1)),
    # wgmma m64n24 (a width of 8 mod 16): 3 atoms a thread as well
    "bf16_wgmma_odd_atoms": (64, 24, 64, "bfloat16", 128, 0, None, "tl::gemm_ss_sm90", (1, 1)),
}


def _kernel(prog, configs):
    return tilelang.compile(prog, target=SM90, pass_configs=configs)


def _run(host, k, args):
    p = host.HostProgram({"k": k})
    try:
        p.run("k", args)
    finally:
        p.close()


@pytest.mark.nvrtc
@pytest.mark.parametrize("on", [True, False], ids=["stmatrix", "pairs"])
@pytest.mark.parametrize("name", list(OUT))
def test_accumulator_to_shared_by_stmatrix_matches_float64(host, name, on):
    M, N, K, dtype, threads, col0, width, gemm, calls = OUT[name]
    k = _kernel(score_out(M, N, K, dtype, threads, col0, width), None if on else OFF)
    src = k.get_kernel_source()
    assert gemm in src
    got = (src.count("tl::stmatrix_pack<4>"), src.count("tl::stmatrix_pack<2>"))
    assert got == (calls if on else (0, 0)), got
    if on:  # staging_swizzle takes stmatrix stores as it takes pair stores: rows of 128 bytes are swizzled
        assert ("stmatrix_pack<4>(&s_s[tl::swizzle_xor_offset<" in src) == ((width or N) * 2 % 128 == 0)
    g = torch.Generator().manual_seed(hash(name) % 1000 + on)
    a = torch.randn(M, K, generator=g).to(TORCH[dtype])
    b = torch.randn(N, K, generator=g).to(TORCH[dtype])
    c = torch.full((M, N), float("nan")).to(TORCH[dtype])
    _run(host, k, [a, b, c])
    ref = a.double() @ b.double().T
    # one rounding of the float accumulator to the 16-bit type: half an ulp of it
    ulp = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    assert not torch.isnan(c).any()
    assert ((c.double() - ref).abs() <= ulp * ref.abs() + 1e-4 * ref.abs().max()).all()


@pytest.mark.nvrtc
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_scores_through_stmatrix_feed_the_second_wgmma(host, dtype):
    M, N, D = 64, 128, 64
    outs = []
    g = torch.Generator().manual_seed(5)
    q, kk, v = (torch.randn(r, D, generator=g).to(TORCH[dtype]) for r in (M, N, N))
    for cfg in (None, OFF):
        k = _kernel(score_value(M, N, D, dtype), cfg)
        assert ("tl::stmatrix_pack<4>" in k.get_kernel_source()) == (cfg is None)
        o = torch.full((M, D), float("nan"))
        _run(host, k, [q, kk, v, o])
        outs.append(o)
    p = ((q.double() @ kk.double().T) * 0.5).to(TORCH[dtype]).double()  # the kernel rounds P once
    ref = p @ v.double()
    for o in outs:
        assert (o.double() - ref).abs().max().item() <= 1e-2 * ref.abs().max().item()
    assert torch.equal(outs[0], outs[1])  # the same rounded P either way


@pytest.mark.nvrtc
def test_stmatrix_only_on_sm90():
    """sm_80 has no stmatrix: the copy keeps its paired 4-byte stores."""
    nvrtc_or_skip()
    k = tilelang.compile(score_out(64, 64, 64, "float16", 128), target="cuda -arch=sm_80")
    src = k.get_kernel_source()
    assert "stmatrix" not in src and "tl_store2(&s_s[" in src


@pytest.mark.nvrtc
def test_stmatrix_store_in_sass():
    """ptxas keeps the four row addresses: one STSM.16.M88.4 per pair of 16x8 atoms, no 4-byte STS."""
    nvrtc_or_skip()
    from tilelang.backend.cuda import sass
    if not sass.sass_available():
        pytest.skip("cuobjdump / nvdisasm wheels not installed")
    outs = {}
    for cfg in (None, OFF):
        k = _kernel(score_value(64, 128, 64, "bfloat16"), cfg)
        text = sass.disassemble(k.artifact.compiled.cubin)
        outs[cfg is None] = (len(re.findall(r"STSM\.16\.M88\.4", text)), len(re.findall(r"\bSTS\b", text)))
    (stsm_on, sts_on), (stsm_off, sts_off) = outs[True], outs[False]
    assert (stsm_on, stsm_off) == (8, 0)  # a 64 x 128 accumulator: 16 atoms a thread, 8 x4
    assert sts_off - sts_on == 32  # the 32 column-pair stores they replace
