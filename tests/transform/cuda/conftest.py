"""Kernels (written as users write them) and helpers shared by the CUDA pass tests.

Everything here runs without a GPU: layout inference and barrier insertion are pure Python,
the pipelining / warp-specialization / codegen tests compile through NVRTC (skipped when the
pip wheel is missing). Builds are memoized per (kernel, arguments, arch, pass configs) so the
codegen test reuses what the pass tests compiled; every build starts from a freshly parsed
prim_func (lowering must not see buffers a previous build touched).
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

import tilelang
import tilelang.language as T
from tilelang.testing import kernels as tk
from tilelang.backend.target import resolve
from tilelang.transform.pass_manager import PassContext

# ----------------------------------------------------------------------------- kernels


def gemm(M=256, N=256, K=256, bM=128, bN=128, bK=32, threads=128, stages=3, dtype="float16"):
    """The canonical tiled GEMM: pipelined global -> shared copies, T.gemm into a register tile, ReLU."""
    return tk.gemm(M, N, K, bM, bN, bK, threads, stages, dtype, out_dtype=dtype, relu=True)


def batched_gemm(Bt=2, M=256, N=256, K=256, bM=128, bN=128, bK=64, threads=128, stages=2):
    """A 3-d (batch, M, K) x (batch, K, N) GEMM: TMA boxes of 3-d tensors."""

    @T.prim_func
    def bgemm(A: T.Tensor((Bt, M, K), "float16"), B: T.Tensor((Bt, K, N), "float16"),
              C: T.Tensor((Bt, M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), Bt, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bK, bN), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                T.copy(A[bz, by * bM, ko * bK], A_s)
                T.copy(B[bz, ko * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[bz, by * bM, bx * bN])

    return bgemm


def gemm_nt(M=512, N=64, K=256, bM=512, bN=8, bK=32, threads=128, stages=2):
    """C = A @ B^T with B stored (N, K); bM=512 is past TMA's 256-row box limit."""
    return tk.gemm(M, N, K, bM, bN, bK, threads, stages, transpose_B=True)


def two_gemms(M=128, D=64, N=128, policies=("Square", "Square")):
    """S = Q @ K (accumulator), P = half(S) elementwise, O = P @ V: P is a gemm A operand.
    policies: the two gemms' GemmWarpPolicy names."""
    pol = [getattr(T.GemmWarpPolicy, name) for name in policies]

    @T.prim_func
    def two_gemms(Q: T.Tensor((M, D), "float16"), Kt: T.Tensor((D, D), "float16"), V: T.Tensor((D, N), "float16"),
                  O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((M, D), "float16")
            K_s = T.alloc_shared((D, D), "float16")
            V_s = T.alloc_shared((D, N), "float16")
            S_l = T.alloc_fragment((M, D), "float32")
            P = T.alloc_fragment((M, D), "float16")
            O_l = T.alloc_fragment((M, N), "float32")
            T.copy(Q, Q_s)
            T.copy(Kt, K_s)
            T.copy(V, V_s)
            T.clear(S_l)
            T.gemm(Q_s, K_s, S_l, policy=pol[0])
            for i, j in T.Parallel(M, D):
                P[i, j] = S_l[i, j] * 0.125
            T.clear(O_l)
            T.gemm(P, V_s, O_l, policy=pol[1])
            T.copy(O_l, O)

    return two_gemms


def row_softmax(M=128, N=64, K=64, threads=128, full_row=False):
    """S = A @ B, then S - rowmax(S) with the row max read as m[i] inside the 2-d loop."""
    policy = T.GemmWarpPolicy.FullRow if full_row else T.GemmWarpPolicy.Square

    @T.prim_func
    def row_softmax(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            S_l = T.alloc_fragment((M, N), "float32")
            E_l = T.alloc_fragment((M, N), "float32")
            m = T.alloc_fragment((M,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(S_l)
            T.gemm(A_s, B_s, S_l, policy=policy)
            T.reduce_max(S_l, m, dim=1)
            for i, j in T.Parallel(M, N):
                E_l[i, j] = T.exp(S_l[i, j] - m[i])
            T.copy(E_l, C)

    return row_softmax


def gemm_int8(M=512, N=384, K=256, bM=128, bN=128, bK=64, threads=128, stages=3):
    """int8 x int8 -> int32, both operands K-major (B as (N, K)): the k32 wgmma form."""
    return tk.gemm(M, N, K, bM, bN, bK, threads, stages, "int8", out_dtype="int32", acc_dtype="int32",
                   transpose_B=True)


def gemm_f16acc(M=512, N=512, K=256, bM=128, bN=128, bK=64, threads=128, stages=3):
    """fp16 x fp16 accumulated in fp16 (the .f16 wgmma accumulator), fp16 out."""
    return tk.gemm(M, N, K, bM, bN, bK, threads, stages, "float16", out_dtype="float16", acc_dtype="float16")


KERNELS = {f.__name__: f for f in (gemm, batched_gemm, gemm_nt, gemm_int8, gemm_f16acc, two_gemms, row_softmax)}

# Every kernel the pass tests compile, with the arch and pass configs they use: the codegen
# test compiles (or reuses) each of them and inspects the cubin.
CASES = {
    "gemm-sm80": ("gemm", {}, "sm_80", {}),
    "gemm-sm80-4stages": ("gemm", {"stages": 4}, "sm_80", {}),
    "gemm-sm80-nopipe": ("gemm", {}, "sm_80", {"tl.disable_pipeline": True}),
    "gemm-sm80-K100": ("gemm", {"K": 100}, "sm_80", {}),
    "gemm-sm90-ws": ("gemm", {}, "sm_90a", {}),
    "gemm-sm90-ws-cl": ("gemm", {}, "sm_90a", {"tl.enable_cluster": True}),
    "gemm-sm90-ws-256-cl": ("gemm", {"bN": 256, "bK": 64, "threads": 256}, "sm_90a", {"tl.enable_cluster": True}),
    "bgemm-sm90-ws-cl": ("batched_gemm", {}, "sm_90a", {"tl.enable_cluster": True}),
    "gemm-sm90-ws-256": ("gemm", {"bN": 256, "bK": 64, "threads": 256}, "sm_90a", {}),
    "gemm-sm90-sk": ("gemm", {"M": 1536, "N": 1536, "K": 512}, "sm_90a", {}),  # 144 tiles: 12 on stream-K
    "gemm_int8-sm90": ("gemm_int8", {}, "sm_90a", {}),
    "gemm_f16acc-sm90": ("gemm_f16acc", {}, "sm_90a", {}),
    "gemm-sm90-no-ws": ("gemm", {}, "sm_90a", {"tl.disable_warp_specialized": True}),
    "gemm-sm90-no-tma": ("gemm", {}, "sm_90a", {"tl.disable_tma_lower": True}),
    "gemm-sm90-no-ws-no-inflight": ("gemm", {}, "sm_90a", {"tl.disable_warp_specialized": True,
                                                          "tl.disable_wgmma_inflight": True}),
    "gemm-sm90-K100": ("gemm", {"K": 100}, "sm_90a", {}),
    "bgemm-sm90-ws": ("batched_gemm", {}, "sm_90a", {}),
    "gemm_nt-sm90-box": ("gemm_nt", {}, "sm_90a", {}),
    "two_gemms-sm80": ("two_gemms", {}, "sm_80", {}),
    "two_gemms-sm90": ("two_gemms", {}, "sm_90a", {}),
    "row_softmax-sm80-rows": ("row_softmax", {"full_row": True}, "sm_80", {"tl.enable_row_fragments": True}),
    "row_softmax-sm90-rows": ("row_softmax", {}, "sm_90a", {"tl.enable_row_fragments": True}),
}

# ----------------------------------------------------------------------------- builds


@dataclass
class Built:
    kernel: object  # JITKernel
    source: str
    lowered: object  # PrimFunc after every pass
    warnings: list  # [(category, message)]

    def messages(self, category=None) -> list:
        return [m for c, m in self.warnings if category is None or issubclass(c, category)]

    def sass(self) -> str:
        """SASS listing (cuobjdump), disassembled once per build."""
        if not hasattr(self, "_sass"):
            self._sass = self.kernel.artifact.sass()
        return self._sass


_BUILDS: dict = {}


def nvrtc_or_skip():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


def build_sm90(prog, configs=None):
    """`prog` compiled for sm_90a (warnings silenced), with `configs` as its pass configs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(prog, target="cuda -arch=sm_90a", pass_configs=configs or {})


def build_case(name: str, args: dict, arch: str, configs: dict) -> Built:
    key = (name, tuple(sorted(args.items())), arch, tuple(sorted(configs.items())))
    if key not in _BUILDS:
        nvrtc_or_skip()
        func = KERNELS[name](**args)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            k = tilelang.compile(func, out_idx=[-1], target=f"cuda -arch={arch}", pass_configs=dict(configs))
        _BUILDS[key] = Built(k, k.artifact.source, k.artifact.lowered, [(w.category, str(w.message)) for w in rec])
    return _BUILDS[key]


def tile_kernel(func, arch="sm_80", configs=None):
    """The KernelLaunch lower_cuda receives: the func after every pass that runs before it."""
    from tilelang.backend.cuda.pipeline import PASSES, _the_kernel

    ctx = PassContext(target=resolve(f"cuda -arch={arch}"), pass_configs=dict(configs or {}))
    for name, fn in PASSES:
        if name == "lower_cuda":
            break
        func = fn(func, ctx)
    return _the_kernel(func)


def call_args(src: str, callee: str) -> list:
    """Argument lists (top-level comma split) of every call `callee(...)` in CUDA source."""
    out = []
    for m in re.finditer(re.escape(callee) + r"(?:<[^>]*>)?\(", src):
        depth, i, start, args = 1, m.end(), m.end(), []
        while depth:
            ch = src[i]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif ch == "," and depth == 1:
                args.append(src[start:i].strip())
                start = i + 1
            i += 1
        args.append(src[start:i - 1].strip())
        out.append(args)
    return out


def example_attention(B, H, S, D, causal, cfg, extra=None, target="cuda -arch=sm_90a"):
    """examples/flash_attention.py's kernel, built with the example's pass configs plus `extra`."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from flash_attention import PASS_CONFIGS, flashattn

    return tilelang.compile(flashattn.get_tir(B, H, S, D, causal, *cfg), target=target,
                            pass_configs={**PASS_CONFIGS, **(extra or {})})


def consumer_loop_ops(sass: str, op: str) -> int:
    """Instructions `op` between the consumer k-loop's first wgmma wait and its second one."""
    lines = sass.splitlines()
    waits = [i for i, ln in enumerate(lines) if "WARPGROUP.DEPBAR" in ln]
    return sum(1 for ln in lines[waits[0]:waits[1]] if re.search(rf"\b{op}\b", ln))


def run_attention_on_host(host, k, B, H, S, D, causal, seed, tol=3e-3):
    """One launch of a compiled [B, S, H, D] fp16 attention kernel `k` (parameters Q, K, V, O) on
    the host emulator, on fresh random inputs, against float64 softmax(Q K^T / sqrt(D)) V."""
    import torch

    g = torch.Generator().manual_seed(seed)
    q, kk, v = (torch.randn(B, S, H, D, generator=g).half() for _ in range(3))
    o = torch.full((B, S, H, D), float("nan")).half()
    prog = host.HostProgram({"fa": k})
    prog.run("fa", [q, kk, v, o])
    prog.close()
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), kk.double()) / D ** 0.5
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1), float("-inf"))
    ref = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v.double())
    assert not torch.isnan(o).any()
    assert (o.double() - ref).abs().max().item() < tol


def eval_int(e, env):
    """The value of integer IR expression e, env binding its Vars (to ints or expressions)."""
    from tilelang.ir import expr as E

    e = E.as_expr(e)
    if isinstance(e, E.Const):
        return int(e.value)
    if isinstance(e, E.Var):
        return eval_int(env[e], env) if not isinstance(env[e], int) else env[e]
    if isinstance(e, E.Binary):
        a, b = eval_int(e.a, env), eval_int(e.b, env)
        return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else None, "%": a % b if b else None,
                "min": min(a, b), "max": max(a, b), "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
                "==": a == b, "!=": a != b, "&&": a and b, "||": a or b}[e.op]
    if isinstance(e, E.Select):
        return eval_int(e.a, env) if eval_int(e.cond, env) else eval_int(e.b, env)
    if isinstance(e, E.Cast):
        return eval_int(e.value, env)
    if isinstance(e, E.Call) and e.op in ("min", "max"):
        return (min if e.op == "min" else max)(eval_int(a, env) for a in e.args)
    if isinstance(e, E.Call) and e.op == "tl_tile_order":  # env["tl_tile_order"]: the kernel's tile table
        return env["tl_tile_order"][eval_int(e.args[0], env)]
    raise AssertionError(f"cannot evaluate {e!r}")


def tile_units(k, branch, loop_name, keep_head, blocks, table=()):
    """Evaluate a persistent branch's tile loop per block: yields (block, iteration, env) per
    unit, env binding every LetStmt of the loop's head (those `keep_head(name)` selects) and body;
    table: the kernel's tile table (WSInfo.tile_order), where it reads one."""
    from tilelang.ir import stmt as S
    from tilelang.ir.visitor import collect

    loop = next(s for s in collect(branch, lambda n: isinstance(n, S.For)) if s.var.name == loop_name)
    head = [s for s in collect(branch, lambda n: isinstance(n, S.LetStmt)) if keep_head(s.var.name)]
    inner = [s for s in loop.body.stmts if isinstance(s, S.LetStmt)]
    for b in range(blocks):
        env = {k.block_vars[0]: b, "tl_tile_order": table}
        for s in head:
            env[s.var] = eval_int(s.value, env)
        for it in range(eval_int(loop.extent, env)):
            env[loop.var] = it
            for s in inner:
                env[s.var] = eval_int(s.value, env)
            yield b, it, env


@pytest.fixture(scope="session")
def kernels():
    return SimpleNamespace(**KERNELS)


@pytest.fixture(scope="session")
def build():
    """build(case_name) or build(kernel_name, arch, configs, **kernel_args) -> Built (memoized)."""

    def _build(name, arch=None, configs=None, **args):
        if arch is None:
            name, args, arch, configs = CASES[name]
        return build_case(name, args, arch, configs or {})

    return _build


@pytest.fixture(scope="session")
def helpers():
    return SimpleNamespace(tile_kernel=tile_kernel, call_args=call_args, Built=Built, eval_int=eval_int,
                           tile_units=tile_units)


@pytest.fixture(params=sorted(CASES))
def case(request, build):
    return request.param, build(request.param)


@pytest.fixture(scope="module")
def host():
    """tilelang.testing.host_cuda (generated CUDA run on the host), or skip without NVRTC or g++."""
    nvrtc_or_skip()
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    return host_cuda


@pytest.fixture(scope="module")
def run_on_host(host):
    """run_on_host(kernel, tensors): one launch of a compiled sm_80 / sm_90a kernel on the host emulator."""

    def run(kernel, tensors):
        prog = host.HostProgram({"k": kernel})
        try:
            prog.run("k", tensors)
        finally:
            prog.close()

    return run


def gemm_nt_operands(M, N, K, dtype, acc, seed):
    """Fresh random A (M, K) and B (N, K) in `dtype` and an output C (M, N) poisoned with 7."""
    import torch

    g = torch.Generator().manual_seed(seed)
    if dtype == "int8":
        a = torch.randint(-128, 128, (M, K), dtype=torch.int8, generator=g)
        b = torch.randint(-128, 128, (N, K), dtype=torch.int8, generator=g)
    else:
        a = torch.randn(M, K, generator=g).to(getattr(torch, dtype))
        b = torch.randn(N, K, generator=g).to(getattr(torch, dtype))
    return a, b, torch.full((M, N), 7, dtype=torch.int32 if acc == "int32" else torch.float32)


def check_gemm_nt(a, b, c, dtype):
    """C = A @ B.T against float64: exact for int8, else within fp32-accumulation bounds (tf32 inputs
    rounded: relative 2^-10 per product)."""
    import torch

    ref = a.double() @ b.double().T
    if dtype == "int8":
        assert torch.equal(c.long(), ref.long())
        return
    bound = (a.double().abs() @ b.double().abs().T) * (2.0 ** -10 if dtype == "float32" else 2.0 ** -20) + 1e-4
    assert ((c.double() - ref).abs() <= bound).all(), (c.double() - ref).abs().max()
