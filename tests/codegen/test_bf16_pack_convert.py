"""bf16 -> float in CUDA code is one `mov.b32 f, {0, x}` (tl/c_compat.h, TL_BF16_PACK_CVT; off with
pass_config `tl.disable_bf16_pack_convert`): one byte permute whichever half of a 32-bit register
the bf16 sits in, where __bfloat162float costs the high half a PRMT and a shift.

No GPU here and the host emulator compiles the portable branch, so the device branch is checked on
its SASS: every conversion is `PRMT Rd, RZ, 0x5410 | 0x7610, Rx` (bytes 0-1 zero, bytes 2-3 the
bf16's two bytes: exactly its float's bits), and a loop converting bf16 vectors loses its shifts.
The numbers of the same kernel are checked on the host (portable branch) against float64 torch."""
import re

import pytest
import torch

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"
OFF = {"tl.disable_bf16_pack_convert": True}


def widen(n=1024):
    @T.prim_func
    def main(A: T.Tensor((n,), "bfloat16"), B: T.Tensor((n,), "bfloat16"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(n):
                C[i] = T.cast(A[i], "float32") * T.cast(B[i], "float32") + 1.0

    return main


def nvrtc_or_skip():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


def _opcodes(k) -> list:
    return [re.sub(r"^@!?U?P\w+\s+", "", m.group(1)) for m in
            re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", k.artifact.sass())]


def test_conversions_are_single_zeroing_permutes():
    nvrtc_or_skip()
    on = _opcodes(tilelang.compile(widen(), target=SM90))
    off = _opcodes(tilelang.compile(widen(), target=SM90, pass_configs=OFF))
    prmt = [i for i in on if i.startswith("PRMT")]
    assert len(prmt) >= 16  # 8 bf16 a thread from each of A and B
    assert all(re.fullmatch(r"PRMT R\d+, RZ, 0x(5410|7610), R\d+(\.reuse)?", i) for i in prmt), prmt
    shifts = lambda ops: sum(1 for i in ops if re.match(r"(IMAD\.U32 .*0x10000|IMAD\.SHL|SHF\.L|PRMT)", i))
    assert shifts(on) < shifts(off), (shifts(on), shifts(off))


def test_switch_defines_the_macro():
    on = tilelang.compile(widen(), target=SM90).get_kernel_source()
    off = tilelang.compile(widen(), target=SM90, pass_configs=OFF).get_kernel_source()
    assert "TL_BF16_PACK_CVT" not in on and "#define TL_BF16_PACK_CVT 0" in off


def test_widening_matches_float64_on_host():
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    k = tilelang.compile(widen(), target=SM90)
    g = torch.Generator().manual_seed(41)
    a = torch.randn(1024, generator=g).bfloat16()
    b = torch.randn(1024, generator=g).bfloat16()
    c = torch.full((1024,), 7.0)
    host_cuda.HostProgram({"w": k}).run("w", [a, b, c])
    ref = a.double() * b.double() + 1.0
    assert torch.allclose(c.double(), ref, rtol=2.0 ** -23, atol=1e-6)
