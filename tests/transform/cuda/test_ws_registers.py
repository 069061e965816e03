"""The consumers' setmaxnreg budget in warp-specialized kernels (warp_specialize.consumer_registers).

setmaxnreg moves registers within the block's launch allocation: the 128-thread producer's decrease
to P (24; 40 in the rebuild of a kernel that spills) frees (R - P) x 128 registers, and a consumer
increase that needs more waits forever. The fp8 lighting indexer (4 consumer warpgroups, R = 96) once
asked for 112 with P = 40 and hung on the H200. Checked here with the formula and on compiled kernels
(NVRTC, no GPU); ptxas's fatal C7406 (a producer decrease to more registers than the program uses,
seen with --Ofast-compile) drops setmaxnreg instead."""
import re
import warnings

import pytest

import tilelang
import tilelang.language as T
from tilelang.transform.cuda.warp_specialize import consumer_registers


def fits(T_, inc, r, p=24):
    return (inc - r) * T_ <= (r - p) * 128


@pytest.mark.parametrize("p, T_, want", [(24, 128, 240), (24, 256, 240), (24, 384, 160), (24, 512, 112),
                                         (40, 128, 240), (40, 256, 232), (40, 384, 152), (40, 512, 104)])
def test_budget_at_the_launch_bound(p, T_, want):
    r = min(255, 65536 // (T_ + 128)) // 8 * 8
    assert consumer_registers(T_, producer_regs=p) == want
    assert fits(T_, want, r, p) and (want == 240 or not fits(T_, want + 8, r, p))  # 240: the most asked for


@pytest.mark.parametrize("p", [24, 40])
@pytest.mark.parametrize("r", [64, 80, 96, 120, 168])
@pytest.mark.parametrize("T_", [128, 256, 384, 512])
def test_budget_from_a_smaller_launch_count(T_, r, p):
    if r * (T_ + 128) > 65536:
        pytest.skip("more registers than the register file")
    inc = consumer_registers(T_, r, p)
    assert fits(T_, inc, r, p) and inc % 8 == 0


def gemm(threads, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((512, 512), T.float16), B: T.Tensor((512, 512), T.float16), C: T.Tensor((512, 512), T.float16)):
        with T.Kernel(512 // bn, 512 // bm, threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, 64), T.float16)
            b_s = T.alloc_shared((64, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=3):
                T.copy(A[by * bm, k * 64], a_s)
                T.copy(B[k * 64, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("threads, bm, bn", [(128, 128, 128), (256, 128, 256), (512, 256, 128)])
def test_compiled_kernels_stay_within_their_launch_allocation(threads, bm, bn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(gemm(threads, bm, bn), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    inc = [int(x) for x in re.findall(r"setmaxnreg_inc<(\d+)>", src)]
    assert inc, "expected a warp-specialized kernel"
    r = min(255, 65536 // (threads + 128)) // 8 * 8  # the block's allocation under __launch_bounds__(n, 1)
    assert f"__launch_bounds__({threads + 128}, 1)" in src
    assert fits(threads, inc[0], r), (inc, r)


def test_fast_compile_small_kernel_drops_setmaxnreg():
    """fuzz (pipe seed 4): a 128x16 accumulator on 128 threads under --Ofast-compile=mid. ptxas
    reports 34 registers for it; a rebuild sized to that report (since removed: the block's pool is
    what __launch_bounds__ gives) asked setmaxnreg_dec<40> of a 24-register program, which ptxas
    refuses (C7406). It compiles warp-specialized with the usual 40 / 240."""
    M, N, K = 256, 24, 8

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16), O: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, 16), T.ceildiv(M, 128), threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), T.bfloat16)
            B_s = T.alloc_shared((16, 64), T.bfloat16)
            C = T.alloc_fragment((128, 16), T.float32)
            T.clear(C)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=1):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[bx * 16, k * 64], B_s)
                T.gemm(A_s, B_s, C, transpose_B=True)
            T.copy(C, O[by * 128:by * 128 + 128, bx * 16:bx * 16 + 16])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(main, target="cuda -arch=sm_90a",
                             pass_configs={"tl.device_compile_flags": ["--Ofast-compile=mid"]})
    src = k.get_kernel_source()
    assert "tma_load" in src and "setmaxnreg_inc<240>" in src


def test_ptxas_c7406_drops_setmaxnreg(monkeypatch):
    """Where ptxas refuses the producer's decrease (C7406), the kernel is built again without
    setmaxnreg and stays warp-specialized (ptxas's refusal is simulated here)."""
    from tilelang.backend.cuda import pipeline
    from tilelang.errors import CompileError

    real = pipeline.compile_cached

    def refusing(source, arch, options=()):
        if "setmaxnreg_dec" in source:
            raise CompileError("ptxas fatal   : (C7406) setmaxnreg.dec has register count (40) which is larger "
                               "than the largest temporal register count in the program (24)")
        return real(source, arch, options)

    monkeypatch.setattr(pipeline, "compile_cached", refusing)
    monkeypatch.setenv("TILELANG_KERNEL_CACHE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(gemm(128, 128, 128), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert "tma_load" in src and "setmaxnreg" not in src


@pytest.mark.nvrtc
def test_three_consumer_warpgroups_get_160_registers_and_do_not_spill(host):
    """Attention D128 at 192x128 (three consumer warpgroups): with the producer at 24 the consumers get 160
    registers and ptxas spills nothing; with the producer at 40 (`tl.ws_producer_regs`) they get 152 and it
    spills. The kernel at 24 runs on the host emulator against float64."""
    from .conftest import example_attention, run_attention_on_host

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = example_attention(1, 1, 192, 128, False, (192, 128, 2, 384))
        wide = example_attention(1, 1, 192, 128, False, (192, 128, 2, 384), {"tl.ws_producer_regs": 40})
    src, wsrc = k.get_kernel_source(), wide.get_kernel_source()
    assert "tl::setmaxnreg_dec<24>();" in src and "tl::setmaxnreg_inc<160>();" in src
    assert "tl::setmaxnreg_dec<40>();" in wsrc and "tl::setmaxnreg_inc<152>();" in wsrc
    info, winfo = k.artifact.compiled.ptxas_info(), wide.artifact.compiled.ptxas_info()
    assert info["spill_stores"] == 0 and winfo["spill_stores"] > 0, (info, winfo)
    run_attention_on_host(host, k, 1, 1, 192, 128, False, seed=24)


@pytest.mark.nvrtc
def test_attention_with_two_consumer_warpgroups_takes_the_producer_at_40():
    """`tl.ws_producer_regs` unset (warp_specialize.default_producer_regs): attention D128 at 128x128
    with two consumer warpgroups decreases the producer to 40 and the consumers get 232 registers with
    no spill; a GEMM with two consumer warpgroups keeps 24 / 240; an explicit 24 is kept for attention."""
    from .conftest import example_attention

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        att = example_attention(1, 1, 256, 128, False, (128, 128, 2, 256))
        att24 = example_attention(1, 1, 256, 128, False, (128, 128, 2, 256), {"tl.ws_producer_regs": 24})
        g = tilelang.compile(gemm(256, 128, 256), target="cuda -arch=sm_90a")
    src = att.get_kernel_source()
    assert "tl::setmaxnreg_dec<40>();" in src and "tl::setmaxnreg_inc<232>();" in src
    assert att.artifact.compiled.ptxas_info()["spill_stores"] == 0
    assert "tl::setmaxnreg_dec<24>();" in att24.get_kernel_source()
    assert "tl::setmaxnreg_dec<24>();" in g.get_kernel_source()


def _mark_producer_24(monkeypatch, note):
    """compile_cached, with `note` added to ptxas's log of every build whose producer decreases to 24."""
    import dataclasses

    from tilelang.backend.cuda import pipeline

    real = pipeline.compile_cached

    def marked(source, arch, options=()):
        got = real(source, arch, options)
        return dataclasses.replace(got, log=got.log + note) if "setmaxnreg_dec<24>" in source else got

    monkeypatch.setattr(pipeline, "compile_cached", marked)
    monkeypatch.setenv("TILELANG_KERNEL_CACHE", "0")


@pytest.mark.nvrtc
@pytest.mark.parametrize("note", [
    "\nptxas warning : 'setmaxnreg' ignored; unable to determine register count at entry",
    "\nptxas info    : Function properties for main_kernel\n    64 bytes stack frame, 64 bytes spill stores, "
    "64 bytes spill loads\nptxas info    : Used 168 registers"])
def test_a_build_that_loses_setmaxnreg_or_spills_at_24_is_built_at_40(monkeypatch, note):
    """Where the producer at 24 costs the kernel setmaxnreg or spills (ptxas's report simulated here), the
    build with the producer at 40 is kept; an explicit `tl.ws_producer_regs` is kept as given."""
    _mark_producer_24(monkeypatch, note)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(gemm(256, 128, 256), target="cuda -arch=sm_90a")
        asked = tilelang.compile(gemm(256, 128, 256), target="cuda -arch=sm_90a",
                                 pass_configs={"tl.ws_producer_regs": 24})
    assert "tl::setmaxnreg_dec<40>();" in k.get_kernel_source()
    assert "tl::setmaxnreg_inc<232>();" in k.get_kernel_source()
    assert "tl::setmaxnreg_dec<24>();" in asked.get_kernel_source()


@pytest.mark.parametrize("bad", [20, 30, 264, True, "24"])
def test_producer_regs_config_is_checked(bad):
    with pytest.raises(ValueError, match=r"tl.ws_producer_regs.*multiple of 8 from 24 to 256"):
        tilelang.compile(gemm(256, 128, 256), target="cuda -arch=sm_90a", pass_configs={"tl.ws_producer_regs": bad})
