"""Fresh thread indices for tile-level copy loops (transform/cuda/fresh_index.py): a warp-specialized
split-KV attention consumer whose Q copy, O staging stores and O copy-out ptxas would otherwise
hoist out of the persistent tile loop and spill beside the accumulators. Checked on the NVRTC
build (ptxas report, where the fresh indices go) and, marked cuda, against float64 on a GPU."""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def split_attn(heads, seq_q, seq_kv, dim, splits, block_M=128, block_N=64):
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    part = seq_kv // splits

    @T.prim_func
    def k(Q: T.Tensor((seq_q, heads, dim), "float16"), K: T.Tensor((seq_kv, heads, dim), "float16"),
          V: T.Tensor((seq_kv, heads, dim), "float16"), O: T.Tensor((splits, seq_q, heads, dim), "float16"),
          L: T.Tensor((splits, heads, seq_q), "float32")):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, splits, threads=128) as (bx, h, sp):
            Qs = T.alloc_shared((block_M, dim), "float16")
            Ks = T.alloc_shared((block_N, dim), "float16")
            Vs = T.alloc_shared((block_N, dim), "float16")
            Os = T.alloc_shared((block_M, dim), "float16")
            s = T.alloc_fragment((block_M, block_N), "float32")
            p = T.alloc_fragment((block_M, block_N), "float16")
            o = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            r = T.alloc_fragment((block_M,), "float32")
            rs = T.alloc_fragment((block_M,), "float32")
            l = T.alloc_fragment((block_M,), "float32")
            T.copy(Q[bx * block_M:(bx + 1) * block_M, h, :], Qs, disable_tma=True)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            for kk in T.Pipelined(T.ceildiv(part, block_N), num_stages=2):
                T.copy(K[sp * part + kk * block_N:sp * part + (kk + 1) * block_N, h, :], Ks)
                T.clear(s)
                T.gemm(Qs, Ks, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, rs, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r[i] + rs[i]
                T.copy(s, p)
                for i, j in T.Parallel(block_M, dim):
                    o[i, j] *= r[i]
                T.copy(V[sp * part + kk * block_N:sp * part + (kk + 1) * block_N, h, :], Vs)
                T.gemm(p, Vs, o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                o[i, j] /= l[i]
            for i in T.Parallel(block_M):
                l[i] = T.log2(l[i]) + m[i] * scale
            T.copy(l, L[sp, h, bx * block_M:(bx + 1) * block_M])
            T.copy(o, Os)
            T.copy(Os, O[sp, bx * block_M:(bx + 1) * block_M, h, :], disable_tma=True)
    return k


# the passes that alone take this kernel's spills away (the index arithmetic ones, and the attention
# loop by 64-row blocks of row_block_fission): off, so that the spills the fresh index removes are
# there to remove
_SPILLING_BASELINE = {"tl.disable_assume_tid_range": True, "tl.disable_swizzle_row_split": True,
                  "tl.disable_let_floor_split": True, "tl.disable_row_block_fission": True}


def _compile(target, **cfg):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        k = tilelang.compile(split_attn(32, 128, 8192, 128, 4), target=target,
                             pass_configs={**_SPILLING_BASELINE, **cfg})
    return k, [str(w.message) for w in got]


def _loop_body(src, loop):
    """The text of the loop starting at `loop`, by brace depth."""
    depth, i = 0, src.index("{", loop)
    while True:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        if depth == 0:
            return src[loop:i]
        i += 1


@pytest.mark.nvrtc
def test_spilling_consumer_is_rebuilt_with_fresh_indices():
    off, msgs_off = _compile("cuda -arch=sm_90a", **{"tl.fresh_copy_index": False})
    auto, msgs = _compile("cuda -arch=sm_90a")
    spill_off = off.artifact.compiled.ptxas_info().get("spill_stores", 0)
    assert spill_off > 0 and any("spills" in m for m in msgs_off), (off.artifact.compiled.ptxas_info(), msgs_off)
    info = auto.artifact.compiled.ptxas_info()
    assert info.get("spill_stores", 0) < spill_off and not any("spills" in m for m in msgs), (info, msgs)
    src = auto.get_kernel_source()
    # the Q copy, the O staging stores and the copy out: each loop reads its own fresh index
    # (masked by the thread count: the compiler then knows its range, which the opaque copy hides)
    fresh = re.findall(r"const int32_t (tl_tid_f\d+) = \(?tl_fresh_index\(tid\)(?: & \d+\))?;", src)
    assert len(fresh) >= 3, src
    for name in fresh:
        assert len(re.findall(rf"\b{name}\b", src)) >= 2, name  # declared and used
    assert "tl_fresh_index" not in off.get_kernel_source()


@pytest.mark.nvrtc
def test_fresh_indices_keep_the_shared_memory_plan():
    """The consumer's k-loop (it waits on barriers) keeps the thread index: wrapping it moved the
    loop out of the place the warp-specialized shared-memory plan looks for it, every tile got
    bytes of its own, and the peer's MLA decode asked for 296192 bytes (more than a block has)."""
    off, _ = _compile("cuda -arch=sm_90a", **{"tl.fresh_copy_index": False})
    on, _ = _compile("cuda -arch=sm_90a", **{"tl.fresh_copy_index": True})
    assert on.artifact.csource.smem_bytes == off.artifact.csource.smem_bytes
    src = on.get_kernel_source()
    body = _loop_body(src, src.rindex("for (int kk"))  # the consumers' k-loop (the producer's is first)
    assert "mbarrier_wait" in body
    declared = set(re.findall(r"const int32_t (tl_tid_f\d+) = ", body))
    assert set(re.findall(r"\btl_tid_f\d+\b", body)) <= declared, body  # none from outside the loop


@pytest.mark.nvrtc
def test_copies_inside_the_k_loop_keep_the_thread_index():
    """On the cp.async path (sm_80) the K/V stage loads run inside the pipelined loop: they keep
    their hoisted addresses; only copies at tile level read a fresh index."""
    k, _ = _compile("cuda -arch=sm_80", **{"tl.fresh_copy_index": True})
    src = k.get_kernel_source()
    loop = src.index("for (int kk")
    body = _loop_body(src, loop)
    assert "cp_async" in body and "tl_fresh_index" not in body, body
    assert "tl_fresh_index" in src[:loop], src[:loop]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("fresh", [None, True, False])
def test_split_attention_matches_float64_on_gpu(fresh):
    heads, sq, skv, dim, splits = 4, 128, 1024, 128, 4
    cfg = {} if fresh is None else {"tl.fresh_copy_index": fresh}
    k = tilelang.compile(split_attn(heads, sq, skv, dim, splits), target="cuda", pass_configs=cfg)
    q, kk, v = (torch.randn(n, heads, dim, device="cuda", dtype=torch.float16) for n in (sq, skv, skv))
    o = torch.full((splits, sq, heads, dim), float("nan"), device="cuda", dtype=torch.float16)
    lse = torch.full((splits, heads, sq), float("nan"), device="cuda")
    k(q, kk, v, o, lse)
    torch.cuda.synchronize()
    part = skv // splits
    for s in range(splits):
        ks, vs = kk[s * part:(s + 1) * part].double(), v[s * part:(s + 1) * part].double()
        att = torch.einsum("qhd,khd->hqk", q.double(), ks) / dim ** 0.5
        ref = torch.einsum("hqk,khd->qhd", att.softmax(-1), vs)
        torch.testing.assert_close(o[s].double(), ref, rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(lse[s].double(), torch.logsumexp(att, -1) * 1.4426950408889634, rtol=1e-3, atol=1e-3)
