"""T.im2col in a warp-specialized T.Pipelined loop (transform/cuda/ws_im2col.py): the producer thread
loads the convolution's input tile with one im2col-mode TMA load per iteration (per 64-channel panel)
instead of the consumers' cp.async address math. Run on the host emulator (host_tma.h walks the
im2col map's bounding box) and on the CPU backend against float64 torch conv2d; with
tl.disable_tma_im2col, where one load cannot take the tile, or (by default) where the accumulator is
under 64 elements per thread, the loop keeps the cp.async pipeline. The small cases below take the
producer through tl.enable_tma_im2col_small_tiles."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError

from tests.op.test_im2col import conv_kernel, reference

pytestmark = pytest.mark.nvrtc

SMALL = {"tl.enable_tma_im2col_small_tiles": True}
CASES = [  # N, H, W, C, F, K, S, D, P, bM, bN, bK
    (2, 9, 7, 32, 64, 3, 1, 1, 1, 64, 64, 32),     # 64-byte rows, ragged last row block, two images
    (1, 11, 10, 32, 64, 3, 2, 2, 2, 64, 64, 32),   # stride 2, dilation 2
    (1, 12, 12, 32, 64, 5, 2, 1, 3, 64, 64, 32),   # 5x5 filter, padding 3
    (2, 9, 7, 64, 64, 3, 1, 1, 1, 64, 64, 64),     # 128-byte rows (the peer example's 128B swizzle)
    (1, 8, 9, 128, 64, 3, 1, 1, 0, 64, 64, 128),   # two 64-channel panels per iteration, no padding
    (2, 9, 7, 16, 64, 3, 1, 1, 1, 64, 64, 16),     # 32-byte rows
]


def _compile(fn, target="cuda -arch=sm_90a", **configs):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(fn, target=target, pass_configs=configs or None)
    return kern, [str(w.message) for w in got]


def _check(kern, run, case, seed):
    N, H, W, C, F, K, S, D, P, bM, bN, bK = case
    OH, OW = (H + 2 * P - D * (K - 1) - 1) // S + 1, (W + 2 * P - D * (K - 1) - 1) // S + 1
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(N, H, W, C, generator=g).half(), torch.randn(K, K, C, F, generator=g).half()
    out = torch.full((N * OH * OW, F), float("nan"))
    run(kern, [x, w.reshape(K * K * C, F), out])
    torch.testing.assert_close(out.double(), reference(x, w, S, D, P), rtol=2e-3, atol=2e-3)


def _conv(case, stages=3):
    N, H, W, C, F, K, S, D, P, bM, bN, bK = case
    return conv_kernel(N, H, W, C, F, K, S, D, P, bM, bN, bK, stages, 128, "float16")[0]


@pytest.mark.parametrize("case", CASES)
def test_producer_loads_im2col_tiles(case, run_on_host):
    kern, msgs = _compile(_conv(case), **SMALL)
    src = kern.get_kernel_source()
    producer = src.split("if (tid >= 128)")[1].split("tl::setmaxnreg_inc")[0]
    panels = max(1, case[-1] * 2 // 128)
    assert producer.count("tl::tma_load_im2col(") == panels, producer
    assert "cp_async" not in src and not any("im2col" in m for m in msgs), msgs
    _check(kern, run_on_host, case, 1)


def test_two_consumer_warpgroups_and_a_ragged_filter_tile(run_on_host):
    """The peer convolution's H200 shape: 128x256x64 tiles, 256 consumer threads, F = 128 < block_N."""
    case = (2, 12, 10, 128, 128, 3, 1, 1, 1, 128, 256, 64)
    N, H, W, C, F, K, S, D, P, bM, bN, bK = case
    kern, _ = _compile(conv_kernel(N, H, W, C, F, K, S, D, P, bM, bN, bK, 3, 256, "float16")[0])
    producer = kern.get_kernel_source().split("if (tid >= 256)")[1].split("tl::setmaxnreg_inc")[0]
    assert producer.count("tl::tma_load_im2col(") == 1, producer
    _check(kern, run_on_host, case, 5)


def test_small_accumulators_keep_cp_async_by_default(run_on_host):
    kern, msgs = _compile(_conv(CASES[0]))  # 64x64 accumulator over 128 threads: 32 per thread
    assert "tma_load_im2col" not in kern.get_kernel_source()
    assert any("accumulator is under 64 elements per thread" in m for m in msgs), msgs
    _check(kern, run_on_host, CASES[0], 6)


def view_conv(N, H, W, C, F, K, bM, bN, bK, threads):
    """The peer convolution's form: 2-d T.Tensor views of the 4-d filter and output, the output
    staged through a shared tile (stride 1, dilation 1, padding 1)."""
    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), "float16"), kernel: T.Tensor((K, K, C, F), "float16"),
             out: T.Tensor((N, H, W, F), "float16")):
        with T.Kernel(T.ceildiv(F, bN), T.ceildiv(N * H * W, bM), threads=threads) as (bx, by):
            data_shared = T.alloc_shared((bM, bK), "float16")
            kernel_shared = T.alloc_shared((bK, bN), "float16")
            out_local = T.alloc_fragment((bM, bN), "float32")
            out_shared = T.alloc_shared((bM, bN), "float16")
            kernel_flat = T.Tensor((K * K * C, F), "float16", kernel.data)
            out_flat = T.Tensor((N * H * W, F), "float16", out.data)
            T.clear(out_local)
            for k_iter in T.Pipelined(T.ceildiv(K * K * C, bK), num_stages=3):
                T.im2col(data, data_shared, by, k_iter, K, 1, 1, 1)
                T.copy(kernel_flat[k_iter * bK, bx * bN], kernel_shared)
                T.gemm(data_shared, kernel_shared, out_local)
            T.copy(out_local, out_shared)
            T.copy(out_shared, out_flat[by * bM, bx * bN])

    return main


def test_peer_form_with_views_and_a_staged_output(run_on_host):
    N, H, W, C, F, K = 2, 12, 10, 128, 128, 3
    kern, _ = _compile(view_conv(N, H, W, C, F, K, 128, 256, 64, 256))
    src = kern.get_kernel_source()
    assert src.count("tl::tma_load_im2col(") == 1 and "cp_async" not in src, src
    g = torch.Generator().manual_seed(7)
    x, w = torch.randn(N, H, W, C, generator=g).half(), torch.randn(K, K, C, F, generator=g).half()
    out = torch.full((N, H, W, F), float("nan")).half()
    run_on_host(kern, [x, w, out])
    ref = reference(x, w, 1, 1, 1).reshape(N, H, W, F)
    torch.testing.assert_close(out.double(), ref, rtol=1e-3, atol=1e-3)  # fp16 output: within half an ulp


def test_cpu_backend_runs_the_same_program():
    kern, _ = _compile(_conv(CASES[1]), target="cpu")
    _check(kern, lambda k, t: k(*t), CASES[1], 2)


def test_switch_off_keeps_the_cp_async_pipeline(run_on_host):
    kern, msgs = _compile(_conv(CASES[0]), **{"tl.disable_tma_im2col": True}, **SMALL)
    src = kern.get_kernel_source()
    assert "tma_load_im2col" not in src and "cp_async_zfill<16>(&d_s_w[" in src, src
    assert any("tl.disable_tma_im2col" in m for m in msgs), msgs
    _check(kern, run_on_host, CASES[0], 3)


def test_channels_not_a_multiple_of_block_k_keep_cp_async(run_on_host):
    case = (1, 7, 7, 48, 64, 3, 1, 1, 1, 64, 64, 32)  # a block of columns spans two filter taps
    kern, msgs = _compile(_conv(case), **SMALL)
    assert "tma_load_im2col" not in kern.get_kernel_source()
    assert any("T.im2col data -> d_s: the channel count (48) is not a constant multiple of block_K" in m
               for m in msgs), msgs
    _check(kern, run_on_host, case, 4)


def test_driver_checks_im2col_map_arguments():
    from tilelang.backend.cuda.driver import check_im2col_args

    dims, strides = [64, 64, 64, 128], [128, 128 * 64, 128 * 64 * 64]
    kind, d, s, e = check_im2col_args("float16", 0, dims, [x * 2 for x in strides], [-1, -1], [-1, -1],
                                      64, 128, [1, 1, 1, 1], 128)
    assert (kind, d, e) == ("FLOAT16", dims, [1, 1, 1, 1])
    with pytest.raises(TileLangError, match="corner offsets in \\[-128, 127\\]"):
        check_im2col_args("float16", 0, dims, strides, [-200, -1], [-1, -1], 64, 128, [1, 1, 1, 1], 128)
    with pytest.raises(TileLangError, match="exceeds the 64B swizzle"):
        check_im2col_args("float16", 0, dims, strides, [-1, -1], [-1, -1], 64, 128, [1, 1, 1, 1], 64)
    with pytest.raises(TileLangError, match="1-1024 pixels"):
        check_im2col_args("float16", 0, dims, strides, [-1, -1], [-1, -1], 64, 2048, [1, 1, 1, 1], 128)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("case", CASES + [(2, 12, 10, 128, 128, 3, 1, 1, 1, 128, 256, 64)])
def test_im2col_tma_on_the_gpu(case):
    """The hardware's im2col walk against float64 (the host emulator models it; this checks the model)."""
    N, H, W, C, F, K, S, D, P, bM, bN, bK = case
    threads = 256 if bM == 128 else 128
    fn, OH, OW = conv_kernel(N, H, W, C, F, K, S, D, P, bM, bN, bK, 3, threads, "float16")
    kern, _ = _compile(fn, target="cuda", **SMALL)
    assert "tma_load_im2col" in kern.get_kernel_source() or torch.cuda.get_device_capability()[0] < 9
    x, w = torch.randn(N, H, W, C, device="cuda").half(), torch.randn(K, K, C, F, device="cuda").half()
    out = torch.full((N * OH * OW, F), float("nan"), device="cuda")
    kern(x, w.reshape(K * K * C, F), out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double().cpu(), reference(x.cpu(), w.cpu(), S, D, P), rtol=2e-3, atol=2e-3)
