"""carried_clear.py: a wgmma accumulator zeroed late in a loop iteration is zeroed by the next
iteration's gemm (runtime scale-d = 0), and after the loop where the last iteration zeroed it."""
import re

import pytest
import torch

from .conftest import build_sm90, nvrtc_or_skip
from .test_stream_k_promoted import promoted_gemm

OFF = {"tl.disable_stream_k_promoted": True}  # whole tiles: the loop and its suffix as written


def compile90(prog, configs):
    nvrtc_or_skip()
    return build_sm90(prog, configs)


def consumer_loop(src: str) -> str:
    at = src.index("for (int k = ", src.index("setmaxnreg_inc"))  # the consumers' k-loop
    return src[at:src.index("\n      }\n", at)]


def test_the_promotion_clear_becomes_the_next_gemms_scale_d():
    src = compile90(promoted_gemm(256, 256, 768, 2), OFF).get_kernel_source()
    loop = consumer_loop(src)
    assert re.search(r"gemm_ss_sm90<[^>]*>\(As, Bs, loc, tl_clear_loc\[0\] != 0\);\s*tl_clear_loc\[0\] = 0;", loop)
    assert "tl_clear_loc[0] = 1;" in loop and not re.search(r"\bloc\[\w+\] = 0\.0f", loop)
    after = src[src.index(loop) + len(loop):]
    assert re.search(r"if \(\(tl_clear_loc\[0\] != 0\)\) \{\s*#pragma unroll\s*for \(int \w+ = 0; \w+ < 128", after)
    off = compile90(promoted_gemm(256, 256, 768, 2), {**OFF, "tl.disable_carried_accum_clear": True}).get_kernel_source()
    assert "tl_clear_loc" not in off and re.search(r"\bloc\[\w+\] = 0\.0f", consumer_loop(off))


def test_sass_main_loop_loses_the_register_moves():
    from tilelang.backend.cuda import sass

    if not sass.sass_available():
        pytest.skip("no cuobjdump")
    on = compile90(promoted_gemm(256, 256, 768, 2), OFF)
    off = compile90(promoted_gemm(256, 256, 768, 2), {**OFF, "tl.disable_carried_accum_clear": True})
    n_on, n_off = (len(sass.disassemble(k.artifact.compiled.cubin).splitlines()) for k in (on, off))
    assert n_on < n_off - 100  # 128 zero moves per thread (not all of them in the loop body)


@pytest.mark.parametrize("K,every,configs", [
    (768, 3, OFF),                # 12 k-steps: the last one promotes, the after-loop fill zeroes loc
    (704, 3, OFF),                # 11 k-steps: the rest stays in loc for the tail
    (2048, 3, {}),                # with stream-K: partials fold the rest
])
def test_tail_reading_loc_after_a_final_promotion_matches_float64(K, every, configs, run_on_host):
    k = compile90(promoted_gemm(256, 128, K, every, always_tail=True), configs)
    assert "tl_clear_loc" in k.get_kernel_source()
    g = torch.Generator().manual_seed(K + every)
    a = torch.randn(256, K, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(128, K, generator=g).to(torch.float8_e4m3fn)
    c = torch.full((256, 128), float("nan"))
    run_on_host(k, [a, b, c])
    ref = a.double() @ b.double().T
    err = (c.double() - ref).abs().max().item()
    assert err <= 1e-5 * ref.abs().max().item() + 1e-3, err
