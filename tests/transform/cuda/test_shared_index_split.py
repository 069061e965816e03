"""Shared-memory indices of a flat element counter (transform/cuda/shared_index_split.py) and the
proxy fences of cp.async waits by commit group (transform/cuda/cp_async_groups.py), on a kernel
shaped like the dequant GEMMs: a pipelined k-loop whose packed tile is expanded by a thread loop
(`index = i * threads * v + tx * v`) into the wgmma operand tile."""
import random
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang import dtypes as dt
from tilelang.ir import expr as E
from tilelang.transform.cuda.shared_index_split import split_divmod

M, N, K, BM, BN, BK, THREADS, VEC = 64, 64, 256, 64, 64, 64, 128, 8


def expand_gemm():
    @T.prim_func
    def k(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // BN, M // BM, threads=THREADS) as (bx, by):
            A_s = T.alloc_shared((BM, BK), T.float16)
            B_s = T.alloc_shared((BN, BK), T.float16)
            B2_s = T.alloc_shared((BN, BK), T.float16)
            loc = T.alloc_local((VEC,), T.float16)
            acc = T.alloc_fragment((BM, BN), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // BK, num_stages=2):
                T.copy(A[by * BM, ko * BK], A_s)
                T.copy(B[bx * BN, ko * BK], B_s)
                tx = T.get_thread_binding()
                for i in T.serial(BN * BK // THREADS // VEC):
                    for v in T.vectorized(VEC):
                        index = i * THREADS * VEC + tx * VEC + v
                        loc[v] = B_s[index // BK, index % BK] * T.float16(2)
                    for v in T.vectorized(VEC):
                        index = i * THREADS * VEC + tx * VEC + v
                        B2_s[index // BK, index % BK] = loc[v]
                T.gemm(A_s, B2_s, acc, transpose_B=True)
            T.copy(acc, C[by * BM, bx * BN])
    return k


def build(configs=None):
    cfg = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True, **(configs or {})}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(expand_gemm(), target="cuda -arch=sm_90a", pass_configs=cfg)


def _needs_tools():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


def _eval(e, env):
    if isinstance(e, E.Const):
        return e.value
    if isinstance(e, E.Var):
        return env[e.name]
    a, b = _eval(e.a, env), _eval(e.b, env)
    ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a // b,
           "%": lambda: a % b, ">>": lambda: a >> b, "&": lambda: a & b}
    return ops[e.op]()


@pytest.mark.parametrize("seed", range(4))
def test_split_divmod_is_exact_in_floor_semantics(seed):
    rng = random.Random(seed)
    x, y = E.Var("x", dt.int32), E.Var("y", dt.int32)
    for _ in range(40):
        c = rng.choice([2, 3, 8, 12, 64, 128])
        kx, ky, k0 = rng.choice([1, 2, 4, 8, 16, c, 2 * c, 3 * c]), rng.choice([1, 4, c, 5 * c]), rng.randint(-300, 300)
        a = E.Binary("+", E.Binary("+", E.Binary("*", x, E.Const(kx, dt.int32), dt.int32),
                                   E.Binary("*", y, E.Const(ky, dt.int32), dt.int32), dt.int32), E.Const(k0, dt.int32), dt.int32)
        for op in ("//", "%"):
            new = split_divmod(op, a, c, dt.int32)
            if new is None:
                continue
            for _ in range(30):
                env = {"x": rng.randint(-2000, 2000), "y": rng.randint(-2000, 2000)}
                ref = (kx * env["x"] + ky * env["y"] + k0)
                ref = ref // c if op == "//" else ref % c
                assert _eval(new, env) == ref, (op, kx, ky, k0, c, new, env)


@pytest.mark.nvrtc
def test_flat_counter_indices_lose_their_divisions():
    _needs_tools()
    src = build().get_kernel_source()
    body = src[src.index("for (int ko"):]
    # B_s read by its flat offset; B2_s (the wgmma operand, paneled / swizzled) by row and column
    # without the counter's carries through the division
    assert re.search(r"&B_s\[\(\(i\w* \* 1024\) \+ \(tid \* 8\)\)\]", body), body
    # (with the swizzle row split on, the loop's whole rows i * 16 are moved out of the swizzle)
    assert re.search(r"&B2_s\[\(\(i\w* \* 16\)\) \* 64 \+ tl::\w+<64, sizeof\(tl_half\)>"
                     r"\(\(tid >> 3\), \(\(tid & 7\) \* 8\)\)\]", body), body
    assert not re.search(r"\(\(i\w* \* 1024\) \+ \(tid \* 8\)\) >> 6", body), body
    alone = build({"tl.disable_swizzle_row_split": True}).get_kernel_source()
    assert re.search(r"&B2_s\[tl::\w+<64, sizeof\(tl_half\)>"
                     r"\(\(\(i\w* \* 16\) \+ \(tid >> 3\)\), \(\(tid & 7\) \* 8\)\)\]", alone), alone
    old = build({"tl.disable_shared_index_split": True}).get_kernel_source()
    assert re.search(r"\(\(i\w* \* 1024\) \+ \(tid \* 8\)\) >> 6", old), "the reference build lost its divisions"


@pytest.mark.nvrtc
def test_only_the_wait_that_lands_the_wgmma_operand_is_fenced():
    _needs_tools()
    src = build().get_kernel_source()
    loop = src[src.index("for (int ko"):]
    waits = re.findall(r"tl::cp_async_wait<\d+>\(\);[^\n]*__syncthreads\(\);", loop)
    assert len(waits) >= 2, loop
    # the first wait drains B_s (read by plain loads), the second A_s (a wgmma operand)
    assert "fence_proxy_async" not in waits[0] and "fence_proxy_async" in waits[1], waits
    old = build({"tl.disable_cp_async_group_fences": True}).get_kernel_source()
    old_loop = old[old.index("for (int ko"):]
    assert all("fence_proxy_async" in w for w in re.findall(r"tl::cp_async_wait<\d+>\(\);[^\n]*__syncthreads\(\);", old_loop))


@pytest.mark.nvrtc
@pytest.mark.parametrize("configs", [{}, {"tl.disable_shared_index_split": True, "tl.disable_cp_async_group_fences": True}])
def test_runs_right_on_host(configs):
    _needs_tools()
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    g = torch.Generator().manual_seed(11)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(N, K, generator=g).half()
    c = torch.full((M, N), float("nan"))
    host.HostProgram({"k": build(configs)}).run("k", [a, b, c])
    ref = a.double() @ (2 * b.double()).T
    torch.testing.assert_close(c.double(), ref, rtol=1e-3, atol=1e-2)


def test_runs_right_on_cpu():
    g = torch.Generator().manual_seed(12)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(N, K, generator=g).half()
    c = torch.full((M, N), float("nan"))
    tilelang.compile(expand_gemm(), target="cpu")(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ (2 * b.double()).T, rtol=1e-3, atol=1e-2)
