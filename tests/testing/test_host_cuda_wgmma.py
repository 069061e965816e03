"""tilelang/testing/host_cuda runs sm_90a kernels on the host: wgmma (host_wgmma.h: a warpgroup
collective reading shared memory through the descriptors, in the PTX ISA's canonical swizzled
layouts) and TMA with mbarriers (host_tma.h: synchronous box copies, swizzled in shared memory). The kernels are the ones the GPU tier verified on the H200 (K-major A and B with 32, 64
and 128-byte rows and 64-column panels, N-major B, bf16, fp8, int8, f16 accumulators, and the RS
form with A in registers); each is checked against float64 torch on fresh random inputs, so a
wrong descriptor model (or a wrong tile layout in the compiler) fails here."""
import pytest
import torch

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"
CFG = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}  # TMA and mbarriers stay refused
TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn,
         "int8": torch.int8, "int32": torch.int32, "float32": torch.float32}


def matmul(M, N, K, bm, bn, bk, threads, dtype, acc, ta, tb):
    ashape, bshape = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))

    @T.prim_func
    def f(A: T.Tensor(ashape, dtype), B: T.Tensor(bshape, dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(N // bn, M // bm, threads=threads) as (bx, by):
            As = T.alloc_shared((bk, bm) if ta else (bm, bk), dtype)
            Bs = T.alloc_shared((bn, bk) if tb else (bk, bn), dtype)
            Cl = T.alloc_fragment((bm, bn), acc)
            T.clear(Cl)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[k * bk, by * bm] if ta else A[by * bm, k * bk], As)
                T.copy(B[bx * bn, k * bk] if tb else B[k * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cl, transpose_A=ta, transpose_B=tb)
            T.copy(Cl, C[by * bm, bx * bn])

    return f


# name: (M, N, K, bm, bn, bk, threads, dtype, acc, ta, tb)
CASES = {
    "f16_kmajor_128B": (128, 128, 128, 128, 128, 64, 128, "float16", "float32", False, True),
    "f16_kmajor_64B": (64, 64, 64, 64, 64, 32, 128, "float16", "float32", False, True),
    "f16_kmajor_32B": (64, 64, 64, 64, 64, 16, 128, "float16", "float32", False, True),
    "f16_kmajor_panels": (64, 64, 256, 64, 64, 128, 128, "float16", "float32", False, True),
    "f16_nmajor_b": (128, 256, 64, 64, 128, 32, 128, "float16", "float32", False, False),
    "bf16_two_warpgroups": (128, 128, 128, 128, 64, 64, 256, "bfloat16", "float32", False, True),
    "fp8_e4m3": (128, 128, 128, 64, 128, 64, 128, "float8_e4m3fn", "float32", False, True),
    "int8": (64, 64, 128, 64, 64, 64, 128, "int8", "int32", False, True),
    "f16_acc": (64, 64, 64, 64, 64, 64, 128, "float16", "float16", False, True),
    # M-major A (transpose_A, tnspA): not yet run on a GPU; the descriptor is the N-major B's
    "f16_mmajor_a": (128, 128, 128, 64, 128, 64, 128, "float16", "float32", True, True),
    "f16_mmajor_a_nmajor_b": (128, 128, 128, 64, 64, 32, 128, "float16", "float32", True, False),
    "f16_mmajor_a_panels_two_warpgroups": (256, 128, 128, 128, 128, 64, 256, "float16", "float32", True, True),
    "bf16_mmajor_a_two_panels_one_warpgroup": (128, 64, 64, 128, 64, 64, 128, "bfloat16", "float32", True, False),
}


@pytest.fixture(scope="module")
def prog(host):
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    kernels = {name: tilelang.compile(matmul(*c), target=SM90, pass_configs=CFG) for name, c in CASES.items()}
    return host.HostProgram(kernels)


def _operand(shape, dtype, g):
    if dtype == "int8":
        return torch.randint(-128, 128, shape, dtype=torch.int8, generator=g)
    return torch.randn(shape, generator=g).to(TORCH[dtype])


@pytest.mark.nvrtc
@pytest.mark.parametrize("name", list(CASES))
def test_sm90a_wgmma_gemm_runs_on_host_and_matches_float64(prog, name):
    M, N, K, bm, bn, bk, th, dt, acc, ta, tb = CASES[name]
    src = prog.kernels[name].get_kernel_source()
    assert "tl::gemm_ss_sm90" in src  # the wgmma path
    assert (", true>(" in src) == ta  # tnspA exactly for a transposed A
    g = torch.Generator().manual_seed(hash(name) % 1000)
    a = _operand((K, M) if ta else (M, K), dt, g)
    b = _operand((N, K) if tb else (K, N), dt, g)
    c = torch.full((M, N), 7, dtype=TORCH[acc])
    prog.run(name, [a, b, c])
    av, bv = a.double(), b.double()
    ref = (av.T if ta else av) @ (bv.T if tb else bv)
    if dt == "int8":
        assert torch.equal(c.long(), ref.long())
        return
    rel = 1e-2 if acc == "float16" else 1e-5
    err = (c.double() - ref).abs().max().item()
    assert err <= rel * ref.abs().max().item() + 1e-5, f"{name}: max error {err}"


def run_attention_on_host(host, causal, cfg, configs, seed):
    """The example's flash attention (B1 H2, 200 ragged keys, D64) built for sm_90a with `cfg` =
    (block_M, block_N, stages, threads) and pass `configs`, run on the host against float64.
    Returns the kernel's CUDA source."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from flash_attention import flashattn

    B, H, S, D = 1, 2, 200, 64
    k = tilelang.compile(flashattn.get_tir(B, H, S, D, causal, *cfg), target=SM90, pass_configs=configs)
    g = torch.Generator().manual_seed(seed)
    q, kk, v = (torch.randn(B, S, H, D, generator=g).half() for _ in range(3))
    o = torch.zeros(B, S, H, D).half()
    prog = host.HostProgram({"fa": k})
    prog.run("fa", [q, kk, v, o])
    prog.close()
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), kk.double()) / D ** 0.5
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1), float("-inf"))
    ref = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v.double())
    assert (o.double() - ref).abs().max().item() < 3e-3
    return k.get_kernel_source()


@pytest.mark.nvrtc
@pytest.mark.parametrize("causal", [False, True])
def test_sm90a_flash_attention_rs_form_runs_on_host(host, causal):
    """S = Q K^T (SS), then P V with P in registers (RS), on the cp.async pipeline."""
    src = run_attention_on_host(host, causal, (128, 64, 2, 256), CFG, seed=5)
    assert "tl::gemm_rs_sm90" in src and "tl::gemm_ss_sm90" in src


# ----------------------------------------------------------------------------- TMA + mbarriers
def ws_gemm(M, N, K, bm, bn, bk, stages, threads, tb):
    """The default sm_90a GEMM: warp-specialized (a TMA producer warp, mbarrier rings), persistent,
    with the TMA-store epilogue; ragged shapes exercise TMA's zero fill and clipped stores."""

    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K) if tb else (K, N), "float16"),
          C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bn, bk) if tb else (bk, bn), "float16")
            Cl = T.alloc_fragment((bm, bn), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], As)
                T.copy(B[bx * bn, k * bk] if tb else B[k * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cl, transpose_B=tb)
            T.copy(Cl, C[by * bm, bx * bn])

    return f


@pytest.mark.nvrtc
@pytest.mark.parametrize("case", [(256, 256, 256, 128, 128, 64, 3, 256, True),
                                  (200, 264, 136, 128, 128, 64, 2, 128, False)])
def test_warp_specialized_tma_gemm_runs_on_host(host, case):
    M, N, K, bm, bn, bk, st, th, tb = case
    k = tilelang.compile(ws_gemm(*case), target=SM90)
    src = k.get_kernel_source()
    assert all(f in src for f in ("tl::tma_load", "tl::mbarrier_wait", "tl::gemm_ss_sm90", "tl::tma_store"))
    g = torch.Generator().manual_seed(7)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn((N, K) if tb else (K, N), generator=g).half()
    c = torch.full((M, N), float("nan")).half()
    prog = host.HostProgram({"g": k})
    prog.run("g", [a, b, c])
    prog.close()
    ref = a.double() @ (b.double().T if tb else b.double())
    assert (c.double() - ref).abs().max().item() <= 2e-3 * ref.abs().max().item()


@pytest.mark.nvrtc
@pytest.mark.parametrize("overlap", [False, True])
def test_warp_specialized_flash_attention_runs_on_host(host, overlap):
    """As sm_90a builds it by default (TMA producer, two-gemm consumer), and with
    tl.enable_ws_overlap's schedule; causal."""
    cfg = {"tl.enable_ws_overlap": True} if overlap else {}
    src = run_attention_on_host(host, True, (128, 64, 3, 256), cfg, seed=9)
    assert "tl::mbarrier_wait" in src



@pytest.mark.nvrtc
@pytest.mark.parametrize("rows_outer", [True, False], ids=["rows-outer", "k-outer"])
def test_attention_p_v_on_one_warpgroup_in_either_wgmma_order_runs_on_host(host, rows_outer):
    """128 rows on one warpgroup: P V is two 64-row blocks of register-A wgmmas, issued a block's
    k-steps at a time (default) or k-steps outermost (tl.disable_wgmma_rows_outer); both exact."""
    import re

    cfg = {} if rows_outer else {"tl.disable_wgmma_rows_outer": True}
    src = run_attention_on_host(host, True, (128, 128, 1, 128), cfg, seed=17)
    pv = re.search(r"tl::gemm_rs_sm90<128, [^>]*>", src).group(0)
    assert pv.endswith(", true>") != rows_outer, pv

def staged_gemm_3d(Bt, M, N, K, bm, bn, bk):
    """C[b] = A[b] @ B stored through the kernel's own shared tile (`T.copy(C_l, C_s); T.copy(C_s,
    C[b, rows, cols])`, as attention stores O): warp specialization takes the pair as one copy
    through its swizzled staging tile and 3-d TMA stores; ragged M exercises TMA's clipping."""

    @T.prim_func
    def f(A: T.Tensor((Bt, M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((Bt, M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), Bt, threads=128) as (bx, by, bz):
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            Cs = T.alloc_shared((bm, bn), "float16")
            Cl = T.alloc_fragment((bm, bn), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[bz, by * bm:(by + 1) * bm, k * bk:(k + 1) * bk], As)
                T.copy(B[k * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, Cs)
            T.copy(Cs, C[bz, by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])

    return f


@pytest.mark.nvrtc
def test_kernel_staged_output_through_tma_store_runs_on_host(host):
    Bt, M, N, K = 2, 200, 128, 128
    k = tilelang.compile(staged_gemm_3d(Bt, M, N, K, 128, 128, 64), target=SM90)
    src = k.get_kernel_source()
    assert "tl::tma_store(" in src and "tl_half* Cs = " not in src and "C_tma[tl::panel_" in src
    g = torch.Generator().manual_seed(11)
    a = torch.randn(Bt, M, K, generator=g).half()
    b = torch.randn(K, N, generator=g).half()
    c = torch.full((Bt, M, N), float("nan")).half()
    prog = host.HostProgram({"g": k})
    prog.run("g", [a, b, c])
    prog.close()
    ref = a.double() @ b.double()
    assert (c.double() - ref).abs().max().item() <= 2e-3 * ref.abs().max().item()


@pytest.mark.nvrtc
@pytest.mark.parametrize("cfg", [(128, 128, 1, 128), (64, 64, 2, 128)], ids=["128x128", "64x64"])
def test_attention_output_through_tma_store_runs_on_host(host, cfg):
    """The example's attention (Output[b, rows, h, :] of a 4-d tensor, 200 ragged rows) stores O
    through the swizzled staging tile and 4-d TMA stores; the output starts as NaN."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from flash_attention import flashattn

    B, H, S, D = 1, 2, 200, 64
    k = tilelang.compile(flashattn.get_tir(B, H, S, D, False, *cfg), target=SM90)
    src = k.get_kernel_source()
    assert "O_shared" not in src and "copy_vec16(&Output" not in src
    assert src[src.index("tl::tma_store(&"):].split(";")[0].count(",") == 5  # map, tile, 4 coordinates
    g = torch.Generator().manual_seed(13)
    q, kk, v = (torch.randn(B, S, H, D, generator=g).half() for _ in range(3))
    o = torch.full((B, S, H, D), float("nan")).half()
    prog = host.HostProgram({"fa": k})
    prog.run("fa", [q, kk, v, o])
    prog.close()
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), kk.double()) / D ** 0.5
    ref = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v.double())
    assert (o.double() - ref).abs().max().item() < 3e-3
