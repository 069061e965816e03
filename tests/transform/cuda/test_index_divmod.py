"""Global indices over fragment coordinates (transform/cuda/index_divmod.py) and the swizzled staging
tile of an accumulator (transform/cuda/staging_swizzle.py), as in the attention backward's epilogue:
a dQ accumulator laid out by the public flash-attention layout receives atomics from an mma / wgmma
accumulator, and the accumulator goes out to global memory through a shared tile."""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

S, D, KC, BM, BK = 64, 64, 64, 32, 32


def dq_layout(G):
    return T.Layout(G.shape, lambda i, j: [i // 8, j // 8, j % 2, 4 * (i % 8) + (j % 8) // 2])


def to_phys(x):
    """x (S, D) stored the way dq_layout lays it out, as an (S, D) tensor of the same memory."""
    out = torch.empty(S * D, dtype=x.dtype)
    for i in range(S):
        for j in range(D):
            p = (i // 8, j // 8, j % 2, 4 * (i % 8) + (j % 8) // 2)
            out[((p[0] * (D // 8) + p[1]) * 2 + p[2]) * 32 + p[3]] = x[i, j]
    return out.reshape(S, D)


def backward_like():
    """Per k-step: a partial product's atomics into the laid-out dQ (inside the k-loop, as dQ's in
    the attention backward); after the loop: the full product out through a shared tile."""
    @T.prim_func
    def k(A: T.Tensor((S, KC), T.float16), B: T.Tensor((KC, D), T.float16), dQ: T.Tensor((S, D), T.float32),
          O: T.Tensor((S, D), T.float16)):
        with T.Kernel(S // BM, threads=128) as bx:
            T.annotate_layout({dQ: dq_layout(dQ)})
            A_s = T.alloc_shared((BM, BK), T.float16)
            B_s = T.alloc_shared((BK, D), T.float16)
            O_s = T.alloc_shared((BM, D), T.float16)
            part = T.alloc_fragment((BM, D), T.float32)
            acc = T.alloc_fragment((BM, D), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(KC // BK, num_stages=2):
                T.copy(A[bx * BM, ko * BK], A_s)
                T.copy(B[ko * BK, 0], B_s)
                T.gemm(A_s, B_s, part, clear_accum=True)
                T.gemm(A_s, B_s, acc)
                for i, j in T.Parallel(BM, D):
                    T.atomic_add(dQ[bx * BM + i, j], part[i, j])
            T.copy(acc, O_s)
            T.copy(O_s, O[bx * BM, 0])
    return k


def build(arch, configs=None):
    cfg = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True, **(configs or {})}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(backward_like(), target=f"cuda -arch={arch}", pass_configs=cfg)


def _needs_tools():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


def atomic_lines(src):
    return [ln for ln in src.splitlines() if "atomic_add" in ln and "dQ_phys" in ln]


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_atomic_addresses_are_one_base_plus_slot_constants(arch):
    _needs_tools()
    src = build(arch).get_kernel_source()
    lines = atomic_lines(src)
    assert lines, src
    for ln in lines:
        idx = ln[ln.index("dQ_phys["):]
        # the layout's l // 8, l % 8, d // 8, d % 2 are split by the coordinates' ranges: no division
        # of a value that mixes the thread index with the slot remains
        assert not re.search(r"\(\(bx \* 32\) \+ i", idx) and "/ 8" not in idx and ">> 3" not in idx, idx
        assert "(int64_t)" in idx, idx  # the thread's part in 64-bit, the slot's part a constant
    old = build(arch, {"tl.disable_index_divmod_folding": True}).get_kernel_source()
    assert any(">> 3" in ln or "/ 8" in ln for ln in atomic_lines(old)), "the reference build lost its divisions"


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_staging_tile_is_swizzled(arch):
    _needs_tools()
    src = build(arch).get_kernel_source()
    store = "tl::stmatrix_pack<4>(" if arch == "sm_90a" else "tl_store2("  # the accumulator's stores
    assert re.search(re.escape(store) + r"&O_s\[tl::swizzle_xor_offset<64, sizeof\(tl_half\)>", src), src
    assert re.search(r"&O_s\[tl::swizzle_xor_offset<64", src.split(store + "&O_s")[-1]), "the read side is not swizzled"
    plain = build(arch, {"tl.disable_staging_swizzle": True}).get_kernel_source()
    assert "&O_s[tl::swizzle" not in plain and "&O_s[" in plain


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("configs", [{}, {"tl.disable_index_divmod_folding": True, "tl.disable_staging_swizzle": True}])
def test_runs_right_on_host(arch, configs):
    _needs_tools()
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    g = torch.Generator().manual_seed(7)
    a = torch.randn(S, KC, generator=g).half()
    b = torch.randn(KC, D, generator=g).half()
    dq_init = torch.randn(S, D, generator=g)
    dq = to_phys(dq_init)
    o = torch.full((S, D), float("nan")).half()
    host.HostProgram({"k": build(arch, configs)}).run("k", [a, b, dq, o])
    ref = a.double() @ b.double()
    torch.testing.assert_close(dq.double(), to_phys(dq_init.double() + ref), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(o.double(), ref.half().double(), rtol=1e-3, atol=1e-2)


def test_a_half_pair_is_stored_as_one_word():
    """tl_store2 of two halves is one 32-bit store (nvcc split a struct of two __half in two)."""
    from tilelang.backend.cuda.nvrtc import TL_INCLUDE_DIR
    text = open(f"{TL_INCLUDE_DIR}/tl/c_compat.h").read()
    body = text[text.index("TL_DEVICE void tl_store2"):]
    assert "sizeof(T) == 2" in body[:600] and "unsigned int" in body[:600]
