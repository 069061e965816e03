"""carver.template.MatmulTemplate (its prim_func computes the product; its hints fit the device and
rank big tiles first on big GEMMs) and carver.roller.rasterization (a bijection of the grid whose
CUDA text computes the same map: compiled here as C against the Python map)."""
import shutil
import subprocess

import pytest
import torch

import tilelang
from tilelang.carver.arch import CUDA, CPU
from tilelang.carver.roller.rasterization import NoRasterization, Rasterization2DColumn, Rasterization2DRow
from tilelang.carver.template import MatmulTemplate


@pytest.mark.parametrize("trans_A,trans_B,bias", [(False, True, False), (True, False, True)])
def test_equivalent_function_computes_the_product(trans_A, trans_B, bias):
    M, N, K = 37, 20, 19
    t = MatmulTemplate(M=M, N=N, K=K, trans_A=trans_A, trans_B=trans_B, in_dtype="float16", out_dtype="float32",
                       accum_dtype="float32", with_bias=bias)
    k = tilelang.compile(t.equivalent_function(), target="cpu")
    a = torch.randn((K, M) if trans_A else (M, K)).half()
    b = torch.randn((N, K) if trans_B else (K, N)).half()
    ref = (a.double().T if trans_A else a.double()) @ (b.double().T if trans_B else b.double())
    c = torch.full((M, N), float("nan"))
    if bias:
        v = torch.randn(N)
        k(a, b, v, c)
        ref = ref + v.double()
    else:
        k(a, b, c)
    assert (c.double() - ref).abs().max().item() < 1e-4


def test_hints_fit_the_device_and_prefer_big_tiles_for_big_gemms():
    arch = CUDA("cuda -arch=sm_90a")
    t = MatmulTemplate(M=4096, N=4096, K=4096, in_dtype="float16", accum_dtype="float32").with_arch(arch)
    assert t.arch is arch and t.has_arch()
    hints = t.recommend_hints(topk=20)
    assert len(hints) == 20
    assert [h.score for h in hints] == sorted((h.score for h in hints), reverse=True)
    for h in hints:
        (bm, bn), (wm, wn), (bk,) = h.block, h.warp, h.rstep
        assert bm % wm == 0 and bn % wn == 0 and (bm // wm) * (bn // wn) in (1, 2, 4, 8)
        assert h.pipeline_stage * (bm + bn) * bk * 2 <= 227 * 1024
        assert h.use_tc and isinstance(h.rasterization_plan, Rasterization2DColumn)  # 1000+ blocks
    assert hints[0].block[0] * hints[0].block[1] >= 128 * 128
    small = MatmulTemplate(M=16, N=16, K=512, in_dtype="float16", accum_dtype="float32").with_arch(arch)
    top = small.recommend_hints(topk=3)[0]
    assert top.block == [16, 16] and isinstance(top.rasterization_plan, NoRasterization)
    assert "block" in top.to_dict() and "warp" in top.to_dict()


def test_hints_need_a_cuda_architecture():
    t = MatmulTemplate(M=64, N=64, K=64).with_arch(CPU())
    with pytest.raises(ValueError, match="need a CUDA architecture"):
        t.recommend_hints()
    with pytest.raises(ValueError, match="M, N, K must be ints"):
        MatmulTemplate(M=64, N=None, K=64)


GRIDS = [(5, 8), (3, 10), (7, 7), (1, 3), (16, 9)]


@pytest.mark.parametrize("panel", [1, 4, 10])
def test_column_rasterization_is_a_bijection_that_walks_panels(panel):
    r = Rasterization2DColumn(panel)
    for gx, gy in GRIDS:
        seen = [r.remap(x, y, gx, gy) for y in range(gy) for x in range(gx)]  # launch order
        assert sorted(seen) == sorted((x, y) for x in range(gx) for y in range(gy))
        for n, (x, y) in enumerate(seen):  # launch block n lands in panel n // (panel * gx)
            assert y // panel == n // (panel * gx)


def test_column_rasterization_code_computes_the_same_map(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    fn = Rasterization2DColumn(3).get_code()[0]
    # the CUDA text as C: dim3 / blockIdx / gridDim supplied by a tiny prelude
    prelude = ("#include <stdio.h>\ntypedef struct { unsigned x, y, z; } dim3;\n"
               "static dim3 blockIdx, gridDim;\nstatic dim3 mk(unsigned x, unsigned y, unsigned z)"
               " { dim3 d = {x, y, z}; return d; }\n#define dim3(a, b, c) mk(a, b, c)\n#define __device__\n"
               "#define __inline__ static\n")
    main = ("int main(void) { unsigned g[][2] = {{5,8},{3,10},{7,7},{1,3},{16,9}};\n"
            " for (int t = 0; t < 5; ++t) { gridDim.x = g[t][0]; gridDim.y = g[t][1]; gridDim.z = 1;\n"
            "  for (unsigned y = 0; y < gridDim.y; ++y) for (unsigned x = 0; x < gridDim.x; ++x) {\n"
            "   blockIdx.x = x; blockIdx.y = y; blockIdx.z = 0; dim3 r = rasterization2DColumn(3);\n"
            "   printf(\"%u %u\\n\", r.x, r.y); } } return 0; }\n")
    src = tmp_path / "r.c"
    src.write_text(prelude + fn + main)
    subprocess.run([cc, "-o", str(tmp_path / "r"), str(src)], check=True)
    out = subprocess.run([str(tmp_path / "r")], check=True, capture_output=True, text=True).stdout.split("\n")
    want = [f"{a} {b}" for gx, gy in GRIDS for y in range(gy) for x in range(gx)
            for a, b in [Rasterization2DColumn(3).remap(x, y, gx, gy)]]
    assert out[:-1] == want
    assert Rasterization2DColumn(3).get_code()[1] == "const dim3 blockIdx = rasterization2DColumn(3);\n"


def test_other_plans():
    assert NoRasterization().get_code() == [] and NoRasterization().remap(3, 4, 8, 8) == (3, 4)
    with pytest.raises(NotImplementedError, match="Rasterization2DRow.get_code"):
        Rasterization2DRow(4).get_code()
    assert Rasterization2DRow(6).panel_width == 6
