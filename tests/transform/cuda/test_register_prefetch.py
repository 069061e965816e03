"""register_prefetch: a synchronous element copy of a cp.async pipeline (a uint8 mask column that
cp.async cannot move) is loaded into registers one iteration ahead; and software_pipeline's
join_prologues joins a copy before the loop (an attention block's Q) to the loop's prologue across
fills of register tiles.

The flash-decoding shape, small: per iteration a 16-byte-vector tile X_s (staged by cp.async),
a fill of a register tile, then a strided mask column m_s[i] = M[k * BN + i, bx] (1-byte
elements, stride G: a synchronous copy), then compute. W (loaded once before the loop, behind
`T.clear(acc)`) scales the result. Checked against float64 on the CPU backend and, for the
generated CUDA, on the host (tilelang/testing/host_cuda), with either switch on and off.
"""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import stmt as S
from tilelang.transform.cuda.raw import Raw
from tilelang.transform.cuda.register_prefetch import prefetch_element_copies

BN, D, G, NI = 32, 64, 3, 5  # rows per step, row length, blocks (mask columns), steps
NOPEEL = {"tl.disable_pipeline_tail_peel": 1}  # the source checks read one loop of NI passes


def masked_sum(stages=2):
    """O[b, i, d] = W[b, i, d] * sum_k (k + 1) * X[k*BN + i, d] * (M[k*BN + i, b] != 0)."""

    @T.prim_func
    def masked_sum(X: T.Tensor((NI * BN, D), "float16"), M: T.Tensor((NI * BN, G), "uint8"),
                   W: T.Tensor((G * BN, D), "float16"), O: T.Tensor((G * BN, D), "float32")):
        with T.Kernel(G, threads=128) as bx:
            X_s = T.alloc_shared((BN, D), "float16")
            W_s = T.alloc_shared((BN, D), "float16")
            m_s = T.alloc_shared((BN,), "uint8")
            part = T.alloc_fragment((BN, D), "float32")
            acc = T.alloc_fragment((BN, D), "float32")
            T.copy(W[bx * BN, 0], W_s)
            T.clear(acc)
            for k in T.Pipelined(NI, num_stages=stages):
                T.copy(X[k * BN, 0], X_s)
                T.clear(part)
                T.copy(M[k * BN:(k + 1) * BN, bx], m_s)
                for i, d in T.Parallel(BN, D):
                    part[i, d] = T.if_then_else(m_s[i] != 0, X_s[i, d], 0.0)
                for i, d in T.Parallel(BN, D):
                    acc[i, d] += part[i, d] * (k + 1)
            for i, d in T.Parallel(BN, D):
                O[bx * BN + i, d] = acc[i, d] * W_s[i, d]

    return masked_sum


def inputs():
    x = torch.randn(NI * BN, D).half()
    m = torch.randint(0, 2, (NI * BN, G), dtype=torch.uint8)
    w = torch.randn(G * BN, D).half()
    return x, m, w


def reference(x, m, w):
    k = torch.arange(1, NI + 1, dtype=torch.float64).repeat_interleave(BN)[:, None]  # (NI*BN, 1)
    out = []
    for b in range(G):
        contrib = x.double() * k * (m[:, b] != 0).double()[:, None]
        out.append(contrib.reshape(NI, BN, D).sum(0) * w.double()[b * BN:(b + 1) * BN])
    return torch.cat(out)


def compile_cuda(arch, **configs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(masked_sum(), target=f"cuda -arch={arch}",
                                pass_configs={k: True for k in configs})


def _loop(src):
    return src.split(f"for (int k = 0; k < {NI}; ++k) {{")[1]


def test_masked_sum_on_the_cpu_backend_matches_float64():
    x, m, w = inputs()
    o = torch.full((G * BN, D), float("nan"))
    tilelang.compile(masked_sum(), target="cpu")(x, m, w, o)
    torch.testing.assert_close(o.double(), reference(x, m, w), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_mask_column_is_loaded_one_iteration_ahead(arch):
    src = compile_cuda(arch, **NOPEEL).get_kernel_source()
    before, loop = src.split(f"for (int k = 0; k < {NI}; ++k) {{")
    assert "uint8_t tl_prefetch1[1];" in before and "tl_prefetch1[" in before.split("uint8_t tl_prefetch1[1];")[1]
    use = loop.index("] = tl_prefetch1[")  # the store reads the register ...
    nxt = loop.index(f"if ((((k + 1) < {NI}) && (((l_")  # ... the next iteration's elements go out after it
    assert loop[nxt:].split("\n")[1].strip().startswith("tl_prefetch1[l_") and "] = M[" in loop[nxt:nxt + 200], src
    assert "] = M[" not in loop[:nxt] and use < nxt and loop.rindex("tl::cp_async_wait<", 0, nxt) >= 0, src
    assert "tl::cp_async_wait<" not in loop[nxt:loop.index("\n  }\n")], src  # after the body's last wait
    off = compile_cuda(arch, **{"tl.disable_register_prefetch": 1}, **NOPEEL).get_kernel_source()
    assert "tl_prefetch" not in off and "] = M[" in _loop(off)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_copy_before_the_loop_joins_its_prologue_across_register_fills(arch):
    src = compile_cuda(arch, **NOPEEL).get_kernel_source()
    before = src.split(f"for (int k = 0; k < {NI}; ++k) {{")[0]
    assert "W_s" in before and "tl::cp_async_wait<" not in before, src  # W lands at the loop's first wait
    off = compile_cuda(arch, **{"tl.disable_prologue_join_past_registers": 1}, **NOPEEL).get_kernel_source()
    assert "tl::cp_async_wait<0>" in off.split(f"for (int k = 0; k < {NI}; ++k) {{")[0]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("switch", [None, "tl.disable_register_prefetch", "tl.disable_prologue_join_past_registers",
                                    "tl.disable_pipeline_tail_peel"])
def test_generated_cuda_runs_right_on_host(arch, switch):
    from tilelang.testing import host_cuda as host
    if not host.available():
        pytest.skip("g++ not installed")
    kern = compile_cuda(arch, **({switch: 1} if switch else {}))
    x, m, w = inputs()
    o = torch.full((G * BN, D), float("nan"))
    host.HostProgram({"k": kern}).run("k", [x, m, w, o])
    torch.testing.assert_close(o.double(), reference(x, m, w), rtol=1e-3, atol=1e-3)


def _copy_loop(buf_name, k):
    """for l in T.unroll(2): i = l * 128 + tid; s[i] = g[k * 256 + i * 3] (the lowered shape)."""
    from tilelang import dtypes as dt
    from tilelang.ir import expr as E
    from tilelang.ir.buffer import Buffer
    g = Buffer(buf_name, (4096,), dt.uint8, "global")
    s = Buffer("s", (256,), dt.uint8, "shared.dyn")
    l, i, tid = E.Var("l", dt.int32), E.Var("i", dt.int32), E.Var("tid", dt.int32)
    body = S.seq(S.LetStmt(i, l * 128 + tid), S.BufferStore(s, (i,), E.BufferLoad(g, (k * 256 + i * 3,), dt.uint8)))
    return g, s, S.For(l, E.as_expr(0), E.as_expr(2), "unroll", body)


def test_only_pipelined_loops_and_read_only_sources_are_prefetched():
    from tilelang import dtypes as dt
    from tilelang.ir import expr as E
    k = E.Var("k", dt.int32)
    g, s, copy = _copy_loop("g", k)
    wait = Raw("tl::cp_async_wait<0>(); __syncthreads();")
    piped = S.For(k, E.as_expr(0), E.as_expr(6), "serial", S.seq(copy, wait))
    out = prefetch_element_copies(piped)
    assert isinstance(out, S.SeqStmt) and isinstance(out.stmts[0], S.Allocate)
    assert out.stmts[0].buffer.shape == (2,) and out.stmts[0].buffer.scope == "local"
    plain = S.For(k, E.as_expr(0), E.as_expr(6), "serial", S.seq(copy, Raw("__syncthreads();")))
    assert prefetch_element_copies(plain) is plain  # no cp.async wait: not a pipelined loop
    written = S.seq(piped, S.BufferStore(g, (E.as_expr(0),), E.Const(1, dt.uint8)))
    assert prefetch_element_copies(written) is written  # the kernel writes the source
    t = E.Var("t", dt.int32)  # the index reads a value the body computes
    _, _, copy_t = _copy_loop("g", t)
    inner = S.For(k, E.as_expr(0), E.as_expr(6), "serial", S.seq(S.LetStmt(t, k * 2), copy_t, wait))
    assert prefetch_element_copies(inner) is inner
