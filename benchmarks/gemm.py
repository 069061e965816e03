"""GEMM TFLOP/s: our TileLang kernels beside cuBLAS (torch.matmul) and a Triton matmul, one run.

    python benchmarks/gemm.py [--dtypes fp16 bf16] [--shapes 4096x4096x4096 8192x8192x16384]
                              [--sizes 4096 8192] [--path auto|mma|both] [--no-triton]
                              [--no-canonical] [--no-fp8] [--configs 128,256,64,256,3 ...] [--json out.json]
    python benchmarks/gemm.py --compile-only --target "cuda -arch=sm_90a"   # no GPU needed

Shapes are MxNxK (default 4096^3, 8192^3, 8192x8192x16384); `--sizes n` adds n^3. Per
shape and dtype: `make_gemm` (the kernel as a user writes it) over CONFIGS, best config
reported; cuBLAS; a Triton matmul autotuned over 4 configs. The reported figures time our two
best configs (of one timing each) and the baselines again in 5 interleaved rounds and take the
median of each: the H200's clock drifts with temperature by several % within a run, and one
timing per config picks a config by noise. Every result is checked
against float64 on two 256x256 corners (first and last) with the output poisoned first.
`--path mma` compiles with pass_configs={"tl.disable_wgmma": True} (Ampere mma.sync path);
`--path both` measures both. `--canonical` (on by default): the ARCHITECTURE.md GEMM+ReLU
program at 128x256x64, 3 stages, 256 threads vs torch.relu(torch.matmul(...)).
`--fp8` (on by default): e4m3 8192^3, fp32 accumulate, bf16 out, B given as (N, K) with
T.gemm(..., transpose_B=True), beside torch._scaled_mm with unit scales.
"""

import argparse
import gc
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (bench, device_info, error_text, ratio, rel_err, require_cuda, rnd, showdown,  # noqa: E402
                    skipped, table, tflops, write_json)

import torch  # noqa: E402

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402

try:
    import triton
    import triton.language as tl
    _TRITON_ERR = None
except Exception as _e:  # noqa: BLE001 - Triton is optional
    triton = tl = None
    _TRITON_ERR = _e


# ----------------------------------------------------------------------------- our kernels
def make_gemm(M, N, K, block_M, block_N, block_K, threads, stages, dtype="float16"):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.use_swizzle(panel_size=10, enable=True)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return gemm


def matmul_relu(M, N, K, block_M, block_N, block_K, threads=256, dtype="float16", accum_dtype="float"):
    """The canonical program of ARCHITECTURE.md (threads made a parameter)."""
    @T.prim_func
    def matmul_relu_kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                           C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel_size=10, enable=True)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return matmul_relu_kernel


def make_gemm_fp8(M, N, K, block_M, block_N, block_K, threads, stages):
    """e4m3 A (M, K) x e4m3 B given as (N, K), fp32 accumulate, bf16 out."""
    in_dtype = "float8_e4m3"

    @T.prim_func
    def gemm_fp8(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.use_swizzle(panel_size=10, enable=True)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return gemm_fp8


# (block_M, block_N, block_K, threads, stages)
CONFIGS = [(128, 256, 64, 256, 3), (128, 256, 64, 256, 4), (128, 128, 64, 128, 3), (256, 128, 64, 256, 3)]
# The mma.sync path keeps C in registers of fewer warps per tile: 64x64 warp tiles, more stages.
MMA_CONFIGS = [(128, 256, 32, 256, 4), (128, 256, 32, 256, 5), (128, 256, 32, 256, 6), (128, 256, 64, 256, 3),
               (128, 128, 32, 128, 4), (256, 128, 32, 256, 4)]
CANONICAL_CONFIG = (128, 256, 64, 256)  # 3 stages are written in the program
FP8_CONFIGS = [(128, 256, 128, 256, 3), (128, 128, 128, 128, 4)]
DEFAULT_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 16384)]
DTYPES = {"fp16": ("float16", torch.float16), "bf16": ("bfloat16", torch.bfloat16)}
PATHS = {"auto": None, "mma": {"tl.disable_wgmma": True}}
TOL = 1e-2


def compile_ours(func, target, path):
    """Compile; returns (kernel, warning messages, isa seen in the PTX)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = tilelang.compile(func, target=target, pass_configs=PATHS[path])
    msgs = [str(x.message) for x in w]
    try:
        ptx = k.export_ptx()
        isa = "wgmma" if "wgmma.mma_async" in ptx else "mma.sync" if "mma.sync" in ptx else "no-tensor-core"
    except Exception:  # noqa: BLE001 - inspection only
        isa = "?"
    return k, msgs, isa


# ----------------------------------------------------------------------------- Triton baseline
if triton is not None:
    _TRITON_CONFIGS = [
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=8),
    ]

    @triton.autotune(configs=_TRITON_CONFIGS, key=["M", "N", "K"])
    @triton.jit
    def _triton_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                              stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                              BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        # Grouped ordering of the output tiles: GROUP_M tile rows share their B columns in L2.
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BLOCK_M)
        tiles_n = tl.cdiv(N, BLOCK_N)
        per_group = GROUP_M * tiles_n
        first_m = (pid // per_group) * GROUP_M
        rows_here = tl.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (pid % per_group) % rows_here
        pid_n = (pid % per_group) // rows_here
        rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        rm = tl.max_contiguous(tl.multiple_of(rm, BLOCK_M), BLOCK_M)
        rn = tl.max_contiguous(tl.multiple_of(rn, BLOCK_N), BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
        b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(0, tl.cdiv(K, BLOCK_K)):
            k_left = K - kt * BLOCK_K
            a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        om = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        on = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + om[:, None] * stride_cm + on[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(om[:, None] < M) & (on[None, :] < N))


def triton_matmul(a, b, c):
    M, K = a.shape
    N = b.shape[1]

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    _triton_matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                c.stride(0), c.stride(1))
    return c


# ----------------------------------------------------------------------------- checking
class Corners:
    """float64 products of the first and last 256x256 output tiles."""

    def __init__(self, a, b_kn, post=None):
        M, N = a.shape[0], b_kn.shape[1]
        r, c = min(256, M), min(256, N)
        self.slices = [(slice(0, r), slice(0, c)), (slice(M - r, M), slice(N - c, N))]
        self.exact = []
        for rs, cs in self.slices:
            e = a[rs].double() @ b_kn[:, cs].double()
            self.exact.append(post(e) if post else e)

    def err(self, out) -> float:
        if torch.isnan(out).any().item():
            return float("nan")
        return max(rel_err(out[rs, cs], e) for (rs, cs), e in zip(self.slices, self.exact))


def ok(err) -> bool:
    return err == err and err < TOL


def poisoned(shape, dtype):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


def check(name, fn, out, corners) -> float:
    """Run `fn` once on a poisoned `out`; returns the corners' rel err (prints when wrong)."""
    out.fill_(float("nan"))
    fn()
    torch.cuda.synchronize()
    err = corners.err(out)
    if not ok(err):
        print(f"  {name}: WRONG rel_err={err:.3e} (not timed)", flush=True)
    return err


def measure(name, fn, out, corners, flops, timed_fn=None):
    """Check `fn`, then time `timed_fn` (default `fn`). Returns (tflops or None, err)."""
    err = check(name, fn, out, corners)
    if not ok(err):
        return None, err
    tf = tflops(flops, bench(timed_fn or fn))
    print(f"  {name}: {tf:8.1f} TFLOP/s  rel_err={err:.2e}", flush=True)
    return tf, err


# ----------------------------------------------------------------------------- cases
def run_ours(label, make, cfgs, target, paths, out, inputs, corners, flops, records):
    """Per path, the (tflops, cfg, isa, kernel) of the best TOP configs of one timing each, best first."""
    best = {}
    for path in paths:
        for cfg in cfgs:
            name = f"ours[{path}] {label} cfg={cfg}"
            rec = {"case": label, "path": path, "config": list(cfg)}
            try:
                t0 = time.perf_counter()
                k, msgs, isa = compile_ours(make(cfg), target, path)
                rec.update(compile_s=round(time.perf_counter() - t0, 2), isa=isa, warnings=msgs[:4])
                print(f"  {name}: compiled in {rec['compile_s']}s isa={isa}", flush=True)
                for m in msgs[:2]:
                    print(f"    warning: {m[:220]}", flush=True)
                tf, err = measure(name, lambda: k(*inputs, out), out, corners, flops)
                rec.update(tflops=rnd(tf), rel_err=err)
            except Exception as e:  # noqa: BLE001 - one config failing must not stop the run
                rec["error"] = error_text(e)
                print(f"  {name}: FAILED {error_text(e)}", flush=True)
                tf = None
            records.append(rec)
            if tf:
                best.setdefault(path, []).append((tf, cfg, rec.get("isa"), k))
    return {p: sorted(c, key=lambda x: -x[0])[:TOP] for p, c in best.items()}


TOP = 2  # configs of ours that go on to the interleaved rounds


ROUNDS = 5


def call(kernel, *args):
    return lambda: kernel(*args)


def pick(final: dict, path: str, cands: list):
    """(tflops, cfg, isa) of the candidate of `path` with the best median in the rounds."""
    scored = [(final.get(f"{path} {c[1]}"), c) for c in cands]
    scored = [(t, c) for t, c in scored if t]
    if not scored:
        return None, None, None
    t, c = max(scored, key=lambda x: x[0])
    return t, c[1], c[2]


def gemm_case(M, N, K, dt, args, records):
    tl_dtype, tdt = DTYPES[dt]
    label = f"{dt} {M}x{N}x{K}"
    print(f"== GEMM {label}", flush=True)
    flops = 2.0 * M * N * K
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    out = poisoned((M, N), tdt)
    corners = Corners(a, b)
    cub, _ = measure("cuBLAS", lambda: torch.matmul(a, b, out=out), out, corners, flops)
    tri = None
    if args.triton and triton is not None:
        try:
            tri, _ = measure("Triton", lambda: triton_matmul(a, b, out), out, corners, flops)
            best_cfg = getattr(_triton_matmul_kernel, "best_config", None)
            if best_cfg is not None:
                print(f"    Triton best config: {best_cfg}", flush=True)
        except Exception as e:  # noqa: BLE001
            skipped("Triton", e)
    elif args.triton:
        skipped("Triton", f"triton does not import ({error_text(_TRITON_ERR, 120)})")
    best = {}
    for path in args.paths:
        cfgs = args.configs or (MMA_CONFIGS if path == "mma" else CONFIGS)
        best.update(run_ours(label, lambda cfg: make_gemm(M, N, K, *cfg, dtype=tl_dtype), cfgs, args.target,
                             [path], out, (a, b), corners, flops, records))
    # the best config of each path against the baselines, in interleaved rounds
    fns = {"cuBLAS": lambda: torch.matmul(a, b, out=out)} if cub else {}
    if tri:
        fns["Triton"] = lambda: triton_matmul(a, b, out)
    for path in args.paths:
        for c in best.get(path, []):
            fns[f"{path} {c[1]}"] = call(c[3], a, b, out)
    final = showdown(fns, flops, ROUNDS)
    print(f"  median of {ROUNDS} interleaved rounds: " + ", ".join(f"{n} {v:.1f}" for n, v in final.items()), flush=True)
    cub, tri = final.get("cuBLAS"), final.get("Triton")
    rows = []
    for path in args.paths:
        tf, cfg, isa = pick(final, path, best.get(path, []))
        rows.append({"dtype": dt, "shape": f"{M}x{N}x{K}", "path": path, "ours": rnd(tf), "cuBLAS": rnd(cub),
                     "Triton": rnd(tri), "ours/cuBLAS": ratio(tf, cub), "ours/Triton": ratio(tf, tri),
                     "best_cfg": cfg, "isa": isa})
        print(f"GEMM {label} [{path}]: ours {rnd(tf)} TFLOP/s (cfg {cfg}, {isa}), cuBLAS {rnd(cub)}, "
              f"Triton {rnd(tri)} -> ours/cuBLAS {ratio(tf, cub)}, ours/Triton {ratio(tf, tri)}", flush=True)
    return rows


def canonical_case(M, N, K, args, records):
    label = f"canonical relu fp16 {M}x{N}x{K}"
    print(f"== {label} (tiles {CANONICAL_CONFIG[:3]}, 3 stages, {CANONICAL_CONFIG[3]} threads)", flush=True)
    flops = 2.0 * M * N * K
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    out = poisoned((M, N), torch.float16)
    corners = Corners(a, b, post=torch.relu)

    def cublas_relu():
        out.copy_(torch.relu(torch.matmul(a, b)))

    # Timed without the copy: relu(matmul) is what a PyTorch user writes.
    cub, _ = measure("cuBLAS+relu", cublas_relu, out, corners, flops, lambda: torch.relu(torch.matmul(a, b)))
    best = run_ours(label, lambda cfg: matmul_relu(M, N, K, *cfg), [CANONICAL_CONFIG], args.target, args.paths,
                    out, (a, b), corners, flops, records)
    fns = {"cuBLAS+relu": lambda: torch.relu(torch.matmul(a, b))} if cub else {}
    for path in args.paths:
        for c in best.get(path, []):
            fns[f"{path} {c[1]}"] = call(c[3], a, b, out)
    final = showdown(fns, flops, ROUNDS)
    print(f"  median of {ROUNDS} interleaved rounds: " + ", ".join(f"{n} {v:.1f}" for n, v in final.items()), flush=True)
    cub = final.get("cuBLAS+relu")
    rows = []
    for path in args.paths:
        tf = pick(final, path, best.get(path, []))[0]
        rows.append({"shape": f"{M}x{N}x{K}", "path": path, "ours": rnd(tf), "cuBLAS+relu": rnd(cub),
                     "ours/cuBLAS": ratio(tf, cub)})
        print(f"canonical GEMM+ReLU {M}x{N}x{K} [{path}]: ours {rnd(tf)} TFLOP/s, cuBLAS+relu {rnd(cub)} "
              f"-> {ratio(tf, cub)}", flush=True)
    return rows


def scaled_mm_callable(a, b_nk, out_dtype, fast_accum):
    """torch._scaled_mm with unit scales across its API versions; returns fn() -> tensor."""
    if not hasattr(torch, "_scaled_mm"):
        raise RuntimeError("torch has no _scaled_mm")
    bt = b_nk.t()  # column-major (K, N), as cuBLASLt fp8 wants
    s0 = torch.ones((), device="cuda", dtype=torch.float32)
    s1 = torch.ones((1,), device="cuda", dtype=torch.float32)
    tries = [
        lambda s: torch._scaled_mm(a, bt, scale_a=s, scale_b=s, out_dtype=out_dtype, use_fast_accum=fast_accum),
        lambda s: torch._scaled_mm(a, bt, s, s, out_dtype=out_dtype, use_fast_accum=fast_accum),
        lambda s: torch._scaled_mm(a, bt, scale_a=s, scale_b=s, out_dtype=out_dtype),
    ]
    last = None
    for s in (s0, s1):
        for t in tries:
            try:
                r = t(s)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - try the next signature
                last = e
                continue
            if isinstance(r, (tuple, list)):  # torch <= 2.3 returned (out, amax)
                return lambda t=t, s=s: t(s)[0]
            return lambda t=t, s=s: t(s)
    raise last


def fp8_case(n, args, records):
    M = N = K = n
    label = f"fp8 e4m3 {M}x{N}x{K}"
    print(f"== GEMM {label} (fp32 accumulate, bf16 out, B as (N, K))", flush=True)
    if not hasattr(torch, "float8_e4m3fn"):
        skipped("fp8", "torch has no float8_e4m3fn")
        return []
    flops = 2.0 * M * N * K
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b_nk = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
    out = poisoned((M, N), torch.bfloat16)
    corners = Corners(a.float(), b_nk.float().t())
    cub, base_fns = {}, {}
    for fast in (False, True):
        name = f"torch._scaled_mm(use_fast_accum={fast})"
        try:
            fn = scaled_mm_callable(a, b_nk, torch.bfloat16, fast)
            cub[fast], _ = measure(name, lambda fn=fn: out.copy_(fn()), out, corners, flops, fn)  # timed w/o copy
            if cub[fast]:
                base_fns[fast] = fn
        except Exception as e:  # noqa: BLE001
            skipped(name, e)
    best = {}
    try:
        best = run_ours(label, lambda cfg: make_gemm_fp8(M, N, K, *cfg), FP8_CONFIGS, args.target, ["auto"],
                        out, (a, b_nk), corners, flops, records)
    except Exception as e:  # noqa: BLE001
        print(f"  ours: not supported yet ({error_text(e)})", flush=True)
    fp8_recs = [r for r in records if r["case"] == label]
    if fp8_recs and all("error" in r for r in fp8_recs):
        print(f"  ours: not supported yet ({fp8_recs[0]['error']})", flush=True)
    fns = {f"scaled_mm fast={fast}": fn for fast, fn in base_fns.items()}
    for c in best.get("auto", []):
        fns[f"auto {c[1]}"] = call(c[3], a, b_nk, out)
    final = showdown(fns, flops, ROUNDS)
    print(f"  median of {ROUNDS} interleaved rounds: " + ", ".join(f"{n} {v:.1f}" for n, v in final.items()), flush=True)
    cub = {fast: final.get(f"scaled_mm fast={fast}") for fast in (False, True)}
    tf, cfg, isa = pick(final, "auto", best.get("auto", []))
    base = max((v for v in cub.values() if v), default=None)
    row = {"shape": f"{M}x{N}x{K}", "ours": rnd(tf), "scaled_mm": rnd(cub.get(False)),
           "scaled_mm_fast": rnd(cub.get(True)), "ours/best_scaled_mm": ratio(tf, base), "best_cfg": cfg, "isa": isa}
    print(f"GEMM {label}: ours {rnd(tf)} TFLOP/s (cfg {cfg}, {isa}), _scaled_mm {rnd(cub.get(False))} "
          f"(fast accum {rnd(cub.get(True))}) -> ours/best {ratio(tf, base)}", flush=True)
    return [row]


# ----------------------------------------------------------------------------- driver
def parse_shape(s: str):
    parts = [int(x) for x in s.lower().replace("*", "x").split("x")]
    if len(parts) == 1:
        parts *= 3
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"shape {s!r}: expected MxNxK or a single n")
    return tuple(parts)


def parse_cfg(s: str):
    parts = tuple(int(x) for x in s.split(","))
    if len(parts) != 5:
        raise argparse.ArgumentTypeError(f"config {s!r}: expected block_M,block_N,block_K,threads,stages")
    return parts


def compile_only(args):
    """Compile every kernel the benchmark would run (no GPU needed for an explicit arch)."""
    jobs = []
    for M, N, K in args.shapes:
        for dt in args.dtypes:
            cfgs = args.configs or sorted(set(CONFIGS) | (set(MMA_CONFIGS) if "mma" in args.paths else set()))
            jobs += [(f"{dt} {M}x{N}x{K} {cfg}", make_gemm(M, N, K, *cfg, dtype=DTYPES[dt][0])) for cfg in cfgs]
        if args.canonical:
            jobs.append((f"canonical {M}x{N}x{K}", matmul_relu(M, N, K, *CANONICAL_CONFIG)))
    if args.fp8:
        jobs += [(f"fp8 {args.fp8_size}^3 {cfg}", make_gemm_fp8(*(args.fp8_size,) * 3, *cfg)) for cfg in FP8_CONFIGS]
    failures = 0  # fp8 may not be wired yet: its failures are reported, not counted
    for name, func in jobs:
        for path in args.paths:
            try:
                t0 = time.perf_counter()
                _, msgs, isa = compile_ours(func, args.target, path)
                print(f"compiled [{path}] {name}: {time.perf_counter() - t0:.2f}s isa={isa} warnings={len(msgs)}")
                for m in msgs[:2]:
                    print(f"    warning: {m[:220]}")
            except Exception as e:  # noqa: BLE001
                failures += not name.startswith("fp8")
                print(f"FAILED [{path}] {name}: {error_text(e)}")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=None, help="square sizes n (n^3 GEMMs)")
    ap.add_argument("--shapes", type=parse_shape, nargs="*", default=None, help="MxNxK shapes")
    ap.add_argument("--dtypes", nargs="*", default=["fp16", "bf16"], choices=sorted(DTYPES))
    ap.add_argument("--path", default="auto", choices=["auto", "mma", "both"],
                    help="mma: pass_configs={'tl.disable_wgmma': True}; both: measure each")
    ap.add_argument("--triton", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--canonical", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--fp8", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--fp8-size", type=int, default=8192)
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--compile-only", action="store_true", help="compile every kernel and stop (no GPU needed "
                                                                    "with --target 'cuda -arch=sm_90a')")
    ap.add_argument("--configs", type=parse_cfg, nargs="*", default=None,
                    help="block_M,block_N,block_K,threads,stages (replaces the default configs)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    args.shapes = list(args.shapes or []) + [(n, n, n) for n in (args.sizes or [])] or DEFAULT_SHAPES
    args.paths = ["auto", "mma"] if args.path == "both" else [args.path]
    if args.compile_only:
        return compile_only(args)
    if not require_cuda("gemm.py"):
        return 0
    torch.manual_seed(0)
    records, gemm_rows, canon_rows, fp8_rows = [], [], [], []
    for M, N, K in args.shapes:
        for dt in args.dtypes:
            gemm_rows += gemm_case(M, N, K, dt, args, records)
            gc.collect()
            torch.cuda.empty_cache()
    if args.canonical:
        for M, N, K in args.shapes:
            canon_rows += canonical_case(M, N, K, args, records)
    if args.fp8:  # last: a faulting kernel would poison the CUDA context for what follows
        fp8_rows = fp8_case(args.fp8_size, args, records)
    print()
    table(gemm_rows, title="GEMM TFLOP/s (median; best config of ours)")
    if canon_rows:
        print()
        table(canon_rows, title="canonical GEMM+ReLU 128x256x64, 3 stages, 256 threads")
    if fp8_rows:
        print()
        table(fp8_rows, title="fp8 e4m3 GEMM (fp32 acc, bf16 out)")
    write_json(args.json, {"meta": device_info(), "gemm": gemm_rows, "canonical": canon_rows, "fp8": fp8_rows,
                           "configs": records})
    return 0


if __name__ == "__main__":
    sys.exit(main())
