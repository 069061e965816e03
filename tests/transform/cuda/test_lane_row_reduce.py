"""T.reduce over the rows of a flat register tile (per-token absmax, rmsnorm's sum of squares)
stays in registers: each thread folds its slots of a row, an xor all-reduce combines the row's
lanes of a warp, and rows spanning several warps fold their warps' partials through a small
shared scratch. The row values then keep the lanes' layout, so `x[i, j] / s[i]` reads a register.
Results against float64 on the CPU backend, in the generated CUDA run on the host, and (marked
cuda) on the GPU."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

OPS = {"sum": T.reduce_sum, "max": T.reduce_max, "min": T.reduce_min, "absmax": T.reduce_absmax,
       "abssum": T.reduce_abssum}


def rows_kernel(m, w, bm, threads, kind, dtype="float32", chunks=1):
    """out[i, j] = x[i, j] - r[i] and r = reduce_kind(x[i, :]) over `chunks` column chunks of w
    (clear=False after the first; T.reduce_abssum has no clear, so it takes one chunk)."""
    red = OPS[kind]
    assert kind != "abssum" or chunks == 1

    @T.prim_func
    def k(X: T.Tensor((m, w * chunks), dtype), R: T.Tensor((m,), "float32"), O: T.Tensor((m, w * chunks), "float32")):
        with T.Kernel(T.ceildiv(m, bm), threads=threads) as b:
            xs = T.alloc_fragment((bm, w), "float32")
            r = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            o = T.alloc_fragment((bm, w), "float32")
            T.copy(X[b * bm, 0], xs)
            red(xs, r, dim=1)
            if chunks > 1:
                for c in T.serial(1, chunks):
                    T.copy(X[b * bm, c * w], xs)
                    red(xs, r, dim=1, clear=False)
            for i in T.Parallel(bm):
                s[i] = r[i] * 0.5
                R[b * bm + i] = r[i]
            for c in T.serial(chunks):
                T.copy(X[b * bm, c * w], xs)
                for i, j in T.Parallel(bm, w):
                    o[i, j] = xs[i, j] - s[i]
                T.copy(o, O[b * bm, c * w])

    return k


def reference(x, kind, chunks):
    xd = x.double()
    f = {"sum": lambda t: t.sum(1), "max": lambda t: t.amax(1), "min": lambda t: t.amin(1),
         "absmax": lambda t: t.abs().amax(1), "abssum": lambda t: t.abs().sum(1)}[kind]
    r = f(xd)
    return r, xd - 0.5 * r[:, None]


# (m, w, bm, threads, chunks): lanes per row 8, 32, 64 (two warps), 128 (four), and 128 at one element a thread
CASES = [(16, 32, 4, 32, 1), (24, 128, 8, 128, 1), (12, 256, 4, 128, 2), (8, 512, 2, 128, 1), (8, 128, 1, 128, 3)]


def _compile(fn, target):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(fn, target=target)
    return kern, [str(w.message) for w in got]


def _run_cpu(kern, m, w, chunks):
    x = torch.randn(m, w * chunks)
    r = torch.full((m,), float("nan"))
    o = torch.full((m, w * chunks), float("nan"))
    kern(x, r, o)
    return x, r, o


@pytest.mark.parametrize("kind", list(OPS))
@pytest.mark.parametrize("case", CASES[:3])
def test_lane_rows_cpu_match_float64(case, kind):
    m, w, bm, threads, chunks = case
    if kind == "abssum" and chunks > 1:
        case = (m, w * chunks, bm, threads, 1)
        m, w, bm, threads, chunks = case
    kern, _ = _compile(rows_kernel(m, w, bm, threads, kind, chunks=chunks), "cpu")
    x, r, o = _run_cpu(kern, m, w, chunks)
    rr, oo = reference(x, kind, chunks)
    torch.testing.assert_close(r.double(), rr, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(o.double(), oo, rtol=1e-5, atol=1e-4)


@pytest.mark.nvrtc
@pytest.mark.parametrize("case", CASES)
def test_lane_rows_stay_in_registers(case):
    """No shared scratch for the reduced tile, a lanes all-reduce over min(L, 32) lanes, and no
    PerformanceWarning about the reduce or the row tiles."""
    m, w, bm, threads, chunks = case
    kern, msgs = _compile(rows_kernel(m, w, bm, threads, "max", chunks=chunks), "cuda -arch=sm_90a")
    src = kern.get_kernel_source()
    vec = next(v for v in (4, 2, 1) if (bm * w) % (threads * v) == 0 and w % v == 0)  # the flat layout's vector
    lanes = w // vec if (threads * vec) % w == 0 else threads  # threads a row is dealt to
    assert f"tl_lanes_allreduce_max(rpart1[0], {min(lanes, 32)})" in src, src
    assert "xs_red" not in src, src
    assert ("xs_lanes" in src) == (lanes > 32), src
    assert not [m_ for m_ in msgs if "shared" in m_], msgs


@pytest.mark.parametrize("kind", ["sum", "absmax"])
@pytest.mark.parametrize("case", CASES)
def test_lane_rows_generated_cuda_on_host(case, kind):
    """The sm_90a source itself, each block thread a host thread (tilelang/testing/host_cuda)."""
    from tilelang.testing import host_cuda as host
    if not host.available():
        pytest.skip("g++ not installed")
    m, w, bm, threads, chunks = case
    kern, _ = _compile(rows_kernel(m, w, bm, threads, kind, chunks=chunks), "cuda -arch=sm_90a")
    x = torch.randn(m, w * chunks)
    r = torch.full((m,), float("nan"))
    o = torch.full((m, w * chunks), float("nan"))
    host.HostProgram({"k": kern}).run("k", [x, r, o])
    rr, oo = reference(x, kind, chunks)
    torch.testing.assert_close(r.double(), rr, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(o.double(), oo, rtol=1e-5, atol=1e-4)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("kind", list(OPS))
@pytest.mark.parametrize("case", CASES)
def test_lane_rows_cuda_match_float64(case, kind):
    m, w, bm, threads, chunks = case
    if kind == "abssum" and chunks > 1:
        w, chunks = w * chunks, 1
    kern = tilelang.compile(rows_kernel(m, w, bm, threads, kind, chunks=chunks), target="cuda")
    x = torch.randn(m, w * chunks, device="cuda")
    r = torch.full((m,), float("nan"), device="cuda")
    o = torch.full((m, w * chunks), float("nan"), device="cuda")
    kern(x, r, o)
    torch.cuda.synchronize()
    rr, oo = reference(x.cpu(), kind, chunks)
    torch.testing.assert_close(r.double().cpu(), rr, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(o.double().cpu(), oo, rtol=1e-5, atol=1e-4)
