"""transform/cuda/unmasked_clear.py (`tl.disable_unmasked_tile_clear`): a wgmma accumulator's mask
fill runs only on tiles a block-uniform bound finds masked; elsewhere the gemm clears the
accumulator. The bound the pass writes is checked against every (block, key tile) of the examples'
causal attention (never true on a tile with a masked element, and true on every other); kernels
with masks in both select forms run on the host emulator against float64 on fresh random inputs,
outputs poisoned with NaN."""
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"
OFF = {"tl.disable_unmasked_tile_clear": True}
PRE = {"tl.disable_unmasked_post_mask": True}  # the fill before the gemm, the bound as the gemm's clear flag


def _flashattn():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from flash_attention import flashattn
    return flashattn


def _gemm_raws(k):
    from tilelang.ir.visitor import collect
    from tilelang.transform.cuda.raw import Raw

    return [r for r in collect(k.artifact.lowered.body, lambda n: isinstance(n, Raw)) if "gemm_ss_sm90" in r.fmt]


@pytest.mark.nvrtc
@pytest.mark.parametrize("cfg", [(128, 128, 2, 256), (128, 64, 2, 256), (64, 64, 2, 128)])
def test_causal_bound_is_exactly_the_tiles_left_of_the_diagonal(cfg, helpers):
    """U(bx, k) holds iff no key of tile k lies past a query of block bx."""
    from tilelang.ir import expr as E
    from tilelang.ir.visitor import collect

    bM, bN = cfg[:2]
    S = 1024
    k = tilelang.compile(_flashattn().get_tir(2, 4, S, 64, True, *cfg), target=SM90, pass_configs=PRE)
    (gemm,) = _gemm_raws(k)
    assert gemm.fmt.endswith("({0}, {1}, {2}, {3});")
    full = gemm.args[3]
    names = {v.name: v for v in collect(full, lambda n: isinstance(n, E.Var))}
    assert set(names) == {"bx", "k"}
    src = k.get_kernel_source()
    fill = src.index("? 0.0f : (-INFINITY));")
    assert src.rfind("if ((!(", 0, fill) > src.rfind("for (int k = 0;", 0, fill)  # the fill sits in the if
    for bx in range(S // bM):
        for kk in range(-(-(bx + 1) * bM // bN)):
            masked = any(bx * bM + i < kk * bN + j for i in range(bM) for j in range(bN))
            assert bool(helpers.eval_int(full, {names["bx"]: bx, names["k"]: kk})) == (not masked), (bx, kk)
    off = tilelang.compile(_flashattn().get_tir(2, 4, S, 64, True, *cfg), target=SM90, pass_configs=OFF)
    assert all(r.fmt.endswith("({0}, {1}, {2});") for r in _gemm_raws(off))


@pytest.mark.nvrtc
def test_two_row_blocks_a_warpgroup_keep_the_fill():
    """128 rows on one warpgroup (row_block_fission's case): left as it was (NVRTC 13.0 spilled)."""
    k = tilelang.compile(_flashattn().get_tir(1, 2, 256, 64, True, 128, 128, 1, 128), target=SM90)
    assert all("(bx * 128)" not in r.fmt and len(r.args) == 3 for r in _gemm_raws(k))


def _reference_attention(q, kk, v, causal):
    S, D = q.shape[1], q.shape[-1]
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), kk.double()) / D ** 0.5
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1), float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v.double())


@pytest.mark.nvrtc
@pytest.mark.parametrize("S,causal,cfg", [(320, True, (64, 64, 2, 128)), (200, False, (64, 64, 2, 128)),
                                          (384, True, (128, 64, 2, 256)), (640, True, (192, 128, 2, 384))])
@pytest.mark.parametrize("configs", [{}, PRE])
def test_attention_with_unmasked_tiles_matches_float64_on_host(host, S, causal, cfg, configs):
    """Causal: diagonal tiles masked, the rest cleared by the gemm; ragged S = 200: the last tile.
    Post-mask (default, up to two consumer warpgroups): every gemm clears, the mask is added after
    its wait; PRE, and 192 x 128 on three consumer warpgroups (ping-pong turns): the fill before the
    gemm on the masked tiles, the gemm's clear flag the bound."""
    B, H, D = 1, 2, 64
    k = tilelang.compile(_flashattn().get_tir(B, H, S, D, causal, *cfg), target=SM90, pass_configs=configs)
    (gemm,) = _gemm_raws(k)
    post = not configs and cfg[3] <= 256
    assert gemm.fmt.endswith(", true);") if post else len(gemm.args) == 4
    g = torch.Generator().manual_seed(51 + S)
    q, kk, v = (torch.randn(B, S, H, D, generator=g).half() for _ in range(3))
    o = torch.full((B, S, H, D), float("nan")).half()
    prog = host.HostProgram({"fa": k})
    prog.run("fa", [q, kk, v, o])
    prog.close()
    assert not torch.isnan(o).any()
    assert (o.double() - _reference_attention(q, kk, v, causal)).abs().max().item() < 3e-3


def _masked_scores(S, D=64, bM=64, bN=64):
    """O[q, key] = Q K^T, -inf where key > q or key >= S: the mask's `select(cond, -inf, 0)` form
    with an `||`, so the bound is the conjunction of the two negated comparisons."""
    @T.prim_func
    def scores(Q: T.Tensor((S, D), "float16"), K: T.Tensor((S, D), "float16"), O: T.Tensor((S, S), "float32")):
        with T.Kernel(T.ceildiv(S, bM), threads=128) as bx:
            Q_s = T.alloc_shared((bM, D), "float16")
            K_s = T.alloc_shared((bN, D), "float16")
            acc = T.alloc_fragment((bM, bN), "float32")
            T.copy(Q[bx * bM, 0], Q_s)
            for k in T.Pipelined(T.ceildiv(S, bN), num_stages=2):
                T.copy(K[k * bN, 0], K_s)
                for i, j in T.Parallel(bM, bN):
                    acc[i, j] = T.if_then_else((k * bN + j >= S) | (bx * bM + i < k * bN + j),
                                               -T.infinity("float32"), 0)
                T.gemm(Q_s, K_s, acc, transpose_B=True)
                T.copy(acc, O[bx * bM, k * bN])
    return scores


@pytest.mark.nvrtc
@pytest.mark.parametrize("configs", [{}, OFF, PRE])
def test_masked_scores_match_float64_on_host(host, configs):
    S = 200
    k = tilelang.compile(_masked_scores(S), target=SM90, pass_configs=configs)
    (gemm,) = _gemm_raws(k)
    assert len(gemm.args) == (4 if configs == PRE else 3)
    g = torch.Generator().manual_seed(61)
    q, kk = (torch.randn(S, 64, generator=g).half() for _ in range(2))
    o = torch.full((S, S), float("nan"))
    prog = host.HostProgram({"s": k})
    prog.run("s", [q, kk, o])
    prog.close()
    ref = (q.double() @ kk.double().T).masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1), float("-inf"))
    assert torch.equal(torch.isinf(o), torch.isinf(ref))
    fin = ~torch.isinf(ref)
    assert (o.double()[fin] - ref[fin]).abs().max().item() < 1e-3


@pytest.mark.nvrtc
def test_a_build_that_spills_more_with_the_guarded_fill_is_rebuilt_without_it():
    """D64 causal on three consumer warpgroups (128 registers): NVRTC 13.0 spilled 32 bytes with
    the guarded fill and none without; the kept build never spills more than the pass-off build."""
    import warnings

    from tilelang.backend.cuda.nvrtc import spilled

    tir = _flashattn().get_tir(2, 4, 768, 64, True, 192, 128, 2, 384)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on = tilelang.compile(tir, target=SM90)
        off = tilelang.compile(tir, target=SM90, pass_configs=OFF)
    assert spilled(on.artifact.compiled.ptxas_info()) <= spilled(off.artifact.compiled.ptxas_info())



@pytest.mark.nvrtc
@pytest.mark.parametrize("D,cfg,pingpong", [(64, (128, 128, 2, 256), False), (128, (128, 128, 2, 256), True)])
def test_post_mask_keeps_the_pv_wgmma_in_flight(D, cfg, pingpong):
    """Causal attention: the scores gemm always clears, the mask is added after the gemm's wait on
    the diagonal tiles only (the bound: k * bN + bN - 1 > bx * bM) -- a wait<0> after the gemm where
    ping-pong consumers keep the P.V wgmma in flight (D128), the gemm's own wait otherwise (D64) --
    and ptxas no longer injects a wgmma wait (C7517) for the fill the earlier form wrote before it."""
    import re

    tir = _flashattn().get_tir(2, 4, 1024, D, True, *cfg)
    k = tilelang.compile(tir, target=SM90)
    (gemm,) = _gemm_raws(k)
    assert gemm.fmt.endswith(", true);") and gemm.fmt.rstrip().split(">(")[0].endswith("-1") == pingpong
    src = k.get_kernel_source()
    body = src[src.index("for (int k = 0;", src.index("setmaxnreg_inc")):]
    issue = body.index("gemm_ss_sm90")
    wait = body.index("tl::warpgroup_wait<0>();", issue) if pingpong else body.index(";", issue)
    post = body.index("? 0.0f : (-INFINITY)) + acc_s[", wait)
    guard = body.rfind("if ((!(", wait, post)
    assert issue < wait < guard < post and f"* {cfg[0]})" in body[guard:post]
    assert "C7517" not in k.artifact.compiled.log
    pre = tilelang.compile(tir, target=SM90, pass_configs=PRE)
    if pingpong:
        assert re.search(r"\(C7517\)", pre.artifact.compiled.log), "the form this replaces had the injected wait"


@pytest.mark.nvrtc
def test_three_consumer_warpgroups_keep_the_fill_before_the_gemm():
    """192 x 128 on three consumer warpgroups (128 registers a thread): the post-mask is not taken
    (it ran at 0.68 of the fill-before form on the H100); the fill runs before the gemm on the
    masked tiles, the gemm's clear flag the bound."""
    k = tilelang.compile(_flashattn().get_tir(2, 4, 1024, 64, True, 192, 128, 2, 384), target=SM90)
    (gemm,) = _gemm_raws(k)
    assert gemm.fmt.endswith("({0}, {1}, {2}, {3});")
    src = k.get_kernel_source()
    assert "? 0.0f : (-INFINITY));" in src and "(-INFINITY)) + acc_s[" not in src
