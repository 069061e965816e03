"""The warp-specialized TMA ring holds no more stages than its loop's most iterations
(warp_specialize.trip_bound; off: tl.disable_ring_trip_cap), and T.min loop bounds prove the bounds
guards of laid-out atomics redundant (Ranges(minmax_calls=True) in global_layouts and
legalize_safe_memory; off: tl.disable_minmax_call_ranges).

The kernel is shaped like the sliding-window attention backward: block `by` runs the k-tiles
[2 * by, min(2 * by + 4, NK)) -- at most 4 -- with two wgmma gemms on the staged tiles and a
per-k-step tile atomic into a dQ laid out as the public flash-attention backward lays it out.
Compiled with NVRTC for sm_90a and run on the host emulator against float64 on fresh inputs.
"""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.arith.ranges import Ranges
from tilelang.ir import expr as E

M, KC, D, BM, BK = 256, 512, 64, 64, 64
NK = KC // BK
SM90 = "cuda -arch=sm_90a"
OFF = {"tl.disable_ring_trip_cap": True, "tl.disable_minmax_call_ranges": True}


def dq_layout(G):
    return T.Layout(G.shape, lambda i, j: [i // 8, j // 8, j % 2, 4 * (i % 8) + (j % 8) // 2])


def to_phys(x):
    """x (KC, D) stored the way dq_layout lays it out, as a (KC, D) tensor of the same memory."""
    i = torch.arange(KC)[:, None].expand(KC, D)
    j = torch.arange(D)[None, :].expand(KC, D)
    flat = (((i // 8) * (D // 8) + j // 8) * 2 + j % 2) * 32 + 4 * (i % 8) + (j % 8) // 2
    out = torch.empty(KC * D, dtype=x.dtype)
    out[flat.reshape(-1)] = x.reshape(-1)
    return out.reshape(KC, D)


def banded():
    @T.prim_func
    def band(A: T.Tensor((M, KC), T.float16), B: T.Tensor((KC, D), T.float16), W: T.Tensor((D, D), T.float16),
             C: T.Tensor((M, D), T.float32), dQ: T.Tensor((KC, D), T.float32)):
        with T.Kernel(M // BM, threads=128) as by:
            T.annotate_layout({dQ: dq_layout(dQ)})
            A_s = T.alloc_shared((BM, BK), T.float16)
            B_s = T.alloc_shared((BK, D), T.float16)
            W_s = T.alloc_shared((D, D), T.float16)
            acc = T.alloc_fragment((BM, D), T.float32)
            dq = T.alloc_fragment((BK, D), T.float32)
            T.copy(W, W_s)
            T.clear(acc)
            lo = by * 2
            hi = T.min(by * 2 + 4, NK)
            for k in T.Pipelined(lo, hi, num_stages=2):
                T.copy(A[by * BM, k * BK], A_s)
                T.copy(B[k * BK, 0], B_s)
                T.gemm(A_s, B_s, acc)
                T.clear(dq)
                T.gemm(B_s, W_s, dq)
                T.atomic_add(dQ[k * BK:(k + 1) * BK, :], dq)
            T.copy(acc, C[by * BM, 0])
    return band


_BUILT = {}


def build(configs):
    key = tuple(sorted(configs.items()))
    if key not in _BUILT:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _BUILT[key] = tilelang.compile(banded(), target=SM90, pass_configs=dict(configs))
    return _BUILT[key]


def stages(src):
    full = re.findall(r"tl::mbarrier_init\(&tl_full\[(\d+)\], 1\);", src)
    assert full, src
    return len(full)


def atomics(src):
    return [ln for ln in src.splitlines() if "tl_atomic_add_f32(&dQ_phys[" in ln]


def test_upper_split_keeps_the_shared_term():
    by = E.Var("by", E.as_expr(0).dtype)
    r = Ranges(minmax_calls=True)
    r._set(by, (0, 3))
    trips = E.call("min", by * 4 + 8, 16) - by * 4
    assert r.upper(trips) == 16  # the interval sum loses that both sides hold by * 4
    assert r.upper_split(trips) == 8
    assert r.upper_split(E.call("max", by * 4 + 8, 16) - by * 4) == 16
    assert r.upper_split(1 - E.call("min", by, 2)) == 1  # a negative coefficient turns min and max
    assert r.upper_split(1 - E.call("max", by, 2)) == -1
    assert Ranges().bounds(E.call("min", by, 16)) is None  # calls are bounded only when asked
    assert r.bounds(E.call("min", by * 4 + 8, 16)) == (8, 16)


@pytest.mark.nvrtc
def test_ring_capped_at_trip_bound_and_guards_dropped():
    on, off = build({}).get_kernel_source(), build(OFF).get_kernel_source()
    assert stages(on) == 4 and stages(off) == 8  # 16 KB stages: RING_BYTES would take 8
    assert re.search(r"tl_stage = (?:tl_floormod_i32\(tl_it, 4\)|\(tl_it & 3\));", on), on
    assert len(atomics(on)) == 1 and not re.search(r"if \(\(\(k \* 64\)", on), on
    assert "< 512" in off  # the guard a T.min bound cannot prove without the calls


@pytest.mark.nvrtc
@pytest.mark.parametrize("configs", [{}, OFF], ids=["on", "off"])
@pytest.mark.parametrize("seed", [0, 1])
def test_banded_matches_float64_on_host(host, configs, seed):
    k = build(configs)
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, KC, generator=g).half()
    b = torch.randn(KC, D, generator=g).half()
    w = (torch.randn(D, D, generator=g) / 8).half()
    c = torch.full((M, D), float("nan"))
    dq0 = torch.randn(KC, D, generator=g)
    dq = to_phys(dq0)
    prog = host.HostProgram({"k": k})
    try:
        prog.run("k", [a, b, w, c, dq])
    finally:
        prog.close()
    ref_c = torch.zeros(M, D, dtype=torch.float64)
    ref_dq = dq0.double().clone()
    for by in range(M // BM):
        for kt in range(2 * by, min(2 * by + 4, NK)):
            rows, ks = slice(by * BM, (by + 1) * BM), slice(kt * BK, (kt + 1) * BK)
            ref_c[rows] += a[rows, ks].double() @ b[ks].double()
            ref_dq[ks] += b[ks].double() @ w.double()
    torch.testing.assert_close(c.double(), ref_c, rtol=1e-3, atol=2e-3)
    torch.testing.assert_close(dq.double(), to_phys(ref_dq), rtol=1e-3, atol=2e-3)
