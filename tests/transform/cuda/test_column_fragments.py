"""Fragments read along the thread's own columns of a flat T.Parallel (mhc_post's
`x[i, j] += a[k, i] * b[k, j]`, `x[i, j] = c[i] * d[j]`) stay in registers where the loop's
layout gives each thread the same columns in every row; elsewhere they go to shared memory with
the reason. Results against float64 on the CPU backend and (marked cuda) on the GPU."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def mix(n, hc, hb, threads, dtype="float32"):
    @T.prim_func
    def k(A: T.Tensor((n, hc, hc), "float32"), Bm: T.Tensor((n, hc, hb), dtype), C: T.Tensor((n, hc), "float32"),
          D: T.Tensor((n, hb), dtype), X: T.Tensor((n, hc, hb), "float32")):
        with T.Kernel(n, threads=threads) as b:
            bs = T.alloc_shared((hc, hb), dtype)
            ds = T.alloc_shared((hb,), dtype)
            bl = T.alloc_fragment((hc, hb), "float32")
            dl = T.alloc_fragment((hb,), "float32")
            al = T.alloc_fragment((hc, hc), "float32")
            cl = T.alloc_fragment((hc,), "float32")
            xl = T.alloc_fragment((hc, hb), "float32")
            T.copy(A[b, 0, 0], al)
            T.copy(C[b, 0], cl)
            T.copy(Bm[b, 0, 0], bs)
            T.copy(D[b, 0], ds)
            T.copy(bs, bl)
            T.copy(ds, dl)
            for i, j in T.Parallel(hc, hb):
                xl[i, j] = cl[i] * dl[j]
                for q in T.serial(hc):
                    xl[i, j] += al[q, i] * bl[q, j]
            T.copy(xl, X[b, 0, 0])

    return k


def inputs(n, hc, hb, dtype, device="cpu"):
    tt = getattr(torch, dtype)
    return (torch.randn(n, hc, hc, device=device), torch.randn(n, hc, hb, device=device).to(tt),
            torch.randn(n, hc, device=device), torch.randn(n, hb, device=device).to(tt))


def reference(a, bm, c, d):
    a, bm, c, d = (t.double().cpu() for t in (a, bm, c, d))
    return c[:, :, None] * d[:, None, :] + torch.einsum("nqi,nqj->nij", a, bm)


def _compile(fn, target):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(fn, target=target)
    return kern, [str(w.message) for w in got]


@pytest.mark.parametrize("hb, threads, dtype", [(512, 128, "float32"), (256, 32, "bfloat16"), (64, 128, "float32")])
def test_column_reads_cpu_match_float64(hb, threads, dtype):
    n, hc = 3, 4
    kern, _ = _compile(mix(n, hc, hb, threads, dtype), "cpu")
    a, bm, c, d = inputs(n, hc, hb, dtype)
    x = torch.full((n, hc, hb), float("nan"))
    kern(a, bm, c, d, x)
    torch.testing.assert_close(x.double(), reference(a, bm, c, d), rtol=1e-5, atol=1e-5)


def test_column_reads_stay_in_registers():
    kern, msgs = _compile(mix(2, 4, 512, 128), "cuda -arch=sm_90a")
    src = kern.get_kernel_source()
    assert "float bl[16];" in src and "float dl[4];" in src, src
    assert not any("fragment bl " in m or "fragment dl " in m for m in msgs), msgs


def test_column_reads_without_stable_columns_go_to_shared():
    # 4 x 64 over 128 threads: one pass of the block covers two rows, so a thread's columns change by row
    _, msgs = _compile(mix(2, 4, 64, 128), "cuda -arch=sm_90a")
    assert any("fragment bl is kept in shared memory" in m and "same columns in every row" in m for m in msgs), msgs


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("hb, threads, dtype", [(512, 128, "float32"), (256, 32, "bfloat16"), (64, 128, "float32")])
def test_column_reads_cuda_match_float64(hb, threads, dtype):
    n, hc = 5, 4
    kern, _ = _compile(mix(n, hc, hb, threads, dtype), "cuda")
    a, bm, c, d = inputs(n, hc, hb, dtype, "cuda")
    x = torch.full((n, hc, hb), float("nan"), device="cuda")
    kern(a, bm, c, d, x)
    torch.cuda.synchronize()
    torch.testing.assert_close(x.double().cpu(), reference(a, bm, c, d), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hb, threads, dtype", [(512, 128, "float32"), (256, 32, "float32"), (64, 128, "float32")])
def test_column_reads_generated_cuda_on_host(hb, threads, dtype):
    """The sm_90a source itself, each block thread a host thread (tilelang/testing/host_cuda)."""
    import os

    from tilelang.testing import host_cuda as host
    if not host.available():
        pytest.skip("g++ not installed")
    n, hc = 3, 4
    kern, _ = _compile(mix(n, hc, hb, threads, dtype), "cuda -arch=sm_90a")
    a, bm, c, d = inputs(n, hc, hb, dtype)
    x = torch.full((n, hc, hb), float("nan"))
    host.HostProgram({"k": kern}).run("k", [a, bm, c, d, x])
    torch.testing.assert_close(x.double(), reference(a, bm, c, d), rtol=1e-5, atol=1e-5)


def apply_mix(n, hc, hb, threads):
    """mhc_pre's `_pre_apply_mix_fwd`: a 1-d T.Parallel over the columns reads row i_hc of a 2-d
    fragment, i_hc an enclosing serial loop's variable."""
    @T.prim_func
    def k(R: T.Tensor((n, hc, hb), "bfloat16"), P: T.Tensor((n, hc), "float32"), O: T.Tensor((n, hb), "float32")):
        with T.Kernel(n, threads=threads) as b:
            xs = T.alloc_shared((hc, hb), "float32")
            ps = T.alloc_shared((hc,), "float32")
            xl = T.alloc_fragment((hc, hb), "float32")
            ol = T.alloc_fragment((hb,), "float32")
            T.copy(R[b, 0, 0], xs)
            T.copy(P[b, 0], ps)
            T.copy(xs, xl)
            T.clear(ol)
            for i_hc in T.serial(hc):
                pre = ps[i_hc]
                for j in T.Parallel(hb):
                    ol[j] += pre * xl[i_hc, j]
            T.copy(ol, O[b, 0])

    return k


def _mix_inputs(n, hc, hb):
    g = torch.Generator().manual_seed(n * hb)
    return torch.randn(n, hc, hb, generator=g).bfloat16(), torch.randn(n, hc, generator=g)


def _mix_reference(r, p):
    return (r.double() * p.double()[:, :, None]).sum(1)


@pytest.mark.parametrize("hb, threads", [(512, 64), (256, 32), (128, 64)])
def test_row_of_1d_loop_in_registers_cpu_and_host(hb, threads):
    n, hc = 3, 4
    kern, msgs = _compile(apply_mix(n, hc, hb, threads), "cuda -arch=sm_90a")
    src = kern.get_kernel_source()
    per = hc * hb // threads
    assert f"float xl[{per}];" in src, src
    assert not any("fragment xl " in m for m in msgs), msgs
    r, p = _mix_inputs(n, hc, hb)
    cpu, _ = _compile(apply_mix(n, hc, hb, threads), "cpu")
    o = torch.full((n, hb), float("nan"))
    cpu(r, p, o)
    torch.testing.assert_close(o.double(), _mix_reference(r, p), rtol=1e-5, atol=1e-5)
    from tilelang.testing import host_cuda as host
    if not host.available():
        pytest.skip("g++ not installed")
    o = torch.full((n, hb), float("nan"))
    host.HostProgram({"k": kern}).run("k", [r, p, o])
    torch.testing.assert_close(o.double(), _mix_reference(r, p), rtol=1e-5, atol=1e-5)


def test_row_of_1d_loop_without_whole_passes_goes_to_shared():
    # 96 columns over 64 threads: a pass of the block is not a whole number of rows of xl
    _, msgs = _compile(apply_mix(2, 4, 96, 64), "cuda -arch=sm_90a")
    assert any("fragment xl is kept in shared memory" in m for m in msgs), msgs


def test_row_of_1d_loop_switch_off():
    _, msgs = _compile_cfg(apply_mix(2, 4, 512, 64), "cuda -arch=sm_90a", {"tl.disable_column_rows_1d": True})
    assert any("fragment xl is kept in shared memory" in m for m in msgs), msgs


def test_small_input_read_across_rows_is_replicated():
    """mhc_post's a_local (4 x 4, copied in from global, read as al[q, i] across the loop's rows):
    every thread holds it whole (no shared copy, no stack), and the row of a flat slot is a
    constant once unrolled."""
    kern, msgs = _compile(mix(2, 4, 512, 128), "cuda -arch=sm_90a")
    src = kern.get_kernel_source()
    assert "float al[16];" in src, src
    assert not any("fragment al " in m for m in msgs), msgs
    info = kern.artifact.compiled.ptxas_info()
    assert info["stack"] == 0 and info["spill_stores"] == 0, info
    off, msgs = _compile_cfg(mix(2, 4, 512, 128), "cuda -arch=sm_90a", {"tl.disable_replicated_inputs": True})
    assert any("fragment al is kept in shared memory" in m for m in msgs), msgs


def _compile_cfg(fn, target, cfg):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(fn, target=target, pass_configs=cfg)
    return kern, [str(w.message) for w in got]
