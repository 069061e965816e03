"""The asynchronous expert tier compiled for sm_90a with NVRTC: T.wgmma_gemm / T.wait_wgmma on
slices of staged tiles, per-thread T.ptx_cp_async with T.cp_async_barrier_noinc, warp groups
chosen by `if tx < 128` branches; the source holds the PTX wrappers meant, the SASS the Hopper
instructions; misuse errors."""
import re
import warnings

import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError, LoweringError
from tilelang.testing.kernels import gather_gemm

nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
if not nvrtc.nvrtc_available():
    pytest.skip("NVRTC from the pip wheels is not installed", allow_module_level=True)

_K = {}


def gg():
    if "k" not in _K:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _K["k"] = tilelang.compile(gather_gemm(64, 64, 256, 500, 3), target="cuda -arch=sm_90a")
    return _K["k"]


@pytest.mark.nvrtc
def test_gather_gemm_source():
    src = gg().get_kernel_source()
    # the stage `b % 2` of a loop counter prints as `b & 1` with the power-of-two floor shifts on
    # (tl.disable_pow2_floor_shift); read both as `% 2`
    src = re.sub(r"\((b(?:_1)?) & 1\)", r"(\1 % 2)", src)
    cons, prod = src.split("if (tid < 128) {")[1].split("if (tid >= 128 && tid < 256) {")
    # two async wgmma batches on 128-column slices: panel h of A_s, stage b % 2 and panel h of B_s
    assert "tl::gemm_ss_sm90<64, 64, 128, 1, 1, true, 256, 256, tl::half_t, -1>((A_s + (h * 8192)), " \
           "(B_s + (((b % 2) * 16384) + (h * 8192))), acc);" in cons
    assert "tl::warpgroup_wait<0>(); tl::fence_accumulator<32>(acc);" in cons
    assert cons.index("warpgroup_wait<0>") < cons.index("tl::mbarrier_arrive(&mbar_1[")
    # the gathered rows land in stage b_1 % 2, in the panel layout the wgmma descriptors read,
    # addressed as the tile's shared address plus a byte offset (tl.disable_cp_async_shared_offset)
    assert "tl::cp_async<16>((tl::smem_addr(B_s) + static_cast<uint32_t>(((b_1 % 2)) * 16384 + " \
           "tl::panel_xor_offset<64>(" in prod
    assert "&Bg[(int64_t)Idx[" in prod and "tl::cp_async_mbarrier_arrive(&mbar[(b_1 % 2)]);" in prod
    assert "cp_async_commit" not in prod  # the barrier, not commit groups, completes the copies


@pytest.mark.nvrtc
def test_gather_gemm_generic_destination_switch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(gather_gemm(64, 64, 256, 500, 3), target="cuda -arch=sm_90a",
                             pass_configs={"tl.disable_cp_async_shared_offset": True})
    src = re.sub(r"\((b(?:_1)?) & 1\)", r"(\1 % 2)", k.get_kernel_source())
    assert "tl::cp_async<16>(&B_s[((b_1 % 2)) * 16384 + tl::panel_xor_offset<64>(" in src
    assert "smem_addr(B_s)" not in src


@pytest.mark.parametrize("generic", [False, True])
def test_gather_gemm_host_run_matches_float64(generic, run_on_host):
    """Both forms of the cp.async destination (byte offset from the tile's shared address, and
    the generic pointer) gather the right rows into the right panels on the host emulator."""
    import torch

    M, N, K, R, nblk = 64, 64, 256, 500, 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(gather_gemm(M, N, K, R, nblk), target="cuda -arch=sm_90a",
                             pass_configs={"tl.disable_cp_async_shared_offset": generic})
    g = torch.Generator().manual_seed(11 + generic)
    a = torch.randn(M, K, generator=g).half()
    bg = torch.randn(R, K, generator=g).half()
    idx = torch.randint(0, R, (nblk * N,), generator=g, dtype=torch.int32)
    out = torch.full((M, nblk * N), float("nan"))
    run_on_host(k, [a, bg, idx, out])
    ref = a.double() @ bg.double()[idx.long()].T
    torch.testing.assert_close(out.double(), ref, rtol=1e-3, atol=1e-3)


@pytest.mark.nvrtc
def test_gather_gemm_sass():
    k = gg()
    assert "wgmma.wait_group.sync.aligned 0" in k.artifact.ptx
    assert "cp.async.mbarrier.arrive.noinc.shared.b64" in k.artifact.ptx
    try:
        sass = k.artifact.sass()
    except Exception as e:  # noqa: BLE001 - cuobjdump missing here
        pytest.skip(f"cuobjdump unavailable: {e}")
    for op in ("HGMMA", "LDGSTS", "WARPGROUP.DEPBAR"):
        assert op in sass, f"{op} missing from the SASS"


def _wgmma(a_cols=(0, 64), target="cuda -arch=sm_90a"):
    lo, hi = a_cols

    @T.prim_func
    def f(A: T.Tensor((64, 128), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 128), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_l)
            T.wgmma_gemm(A_s[:, lo:hi], B_s[:, lo:hi], C_l, transpose_B=True)
            T.wait_wgmma(0)
            T.copy(C_l, C)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(f, target=target)


@pytest.mark.nvrtc
def test_wgmma_gemm_second_panel():
    src = _wgmma((64, 128)).get_kernel_source()
    assert "tl::gemm_ss_sm90<64, 64, 64, 1, 1, true, 128, 128, tl::half_t, -1>((A_s + 4096), (B_s + 4096), C_l, true);" in src


def test_wgmma_gemm_has_no_fallback():
    with pytest.raises(LoweringError, match=r"T\.wgmma_gemm A_s x B_s -> C_l cannot use wgmma: the target is sm_80"):
        _wgmma(target="cuda -arch=sm_80")
    with pytest.raises(LoweringError, match="64-column panel edge"):
        _wgmma((32, 96))


def test_if_chain_becomes_scopes():
    from tilelang.ir import stmt as S
    from tilelang.ir.visitor import collect
    from tilelang.op.hopper import WarpGroupScope
    from tilelang.transform.thread_scopes import thread_scopes_pass

    @T.prim_func
    def f(A: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=384) as bx:
            tx = T.get_thread_binding()
            F = T.alloc_fragment((128, 64), "float32")
            if tx < 128:
                T.fill(F, 1)
            elif tx >= 128 and tx < 256:
                T.fill(F, 2)
            else:
                T.fill(F, 3)
            if tx < 64:  # whole warps, not whole warp groups: a scope of unit 32
                T.fill(F, 4)
            if tx >= 40 and tx < 48:  # lanes of one warp: a scope of unit 1
                T.fill(F, 5)
            if tx < 48:  # no tile op: stays a branch
                A[0, tx] = 6.0

    body = thread_scopes_pass(f).body
    scopes = collect(body, lambda n: isinstance(n, WarpGroupScope))
    assert [(s.lo, s.hi, s.unit) for s in scopes] == [(0, 1, 128), (1, 2, 128), (2, 3, 128), (0, 2, 32), (40, 48, 1)]
    assert not any(collect(s.body, lambda n: isinstance(n, WarpGroupScope)) for s in scopes)  # not nested
    ifs = collect(body, lambda n: isinstance(n, S.IfThenElse))
    assert len(ifs) == 1
    k = collect(body, lambda n: isinstance(n, S.KernelLaunch))[0]
    assert len(k.thread_vars) == 1  # still read by the `tx < 48` branch


@pytest.mark.parametrize("call, match", [
    (lambda A, S: T.ptx_cp_async(S[0, 0], A[0, 0], 3), "6 bytes"),
    (lambda A, S: T.ptx_cp_async(A[0, 0], S[0, 0], 8), "global -> shared"),
    (lambda A, S: T.wait_wgmma(8), r"\[0, 7\]"),
    (lambda A, S: T.ptx_cp_async(1, A[0, 0], 8), "T.access_ptr"),
])
def test_argument_errors(call, match):
    with pytest.raises(DSLTypeError, match=match):
        @T.prim_func
        def f(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                S_ = T.alloc_shared((64, 64), "float16")
                call(A, S_)
