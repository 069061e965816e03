"""Shared tiles declared inside the T.Pipelined body (`a_s = T.alloc_shared(...)` under the loop,
as the public examples write them) on the warp-specialized sm_90a path (TMA producer, mbarrier
consumers): the declaration moves before the loop, where it becomes the stage storage and the
consumers' view. It used to stay in the body, so the view was declared (`a_s = a_s_stages;`) and
the storage never was: NVRTC failed with `identifier "a_s_stages" is undefined`.

Checks: NVRTC compiles the kernels with no pass configs, the source declares every stage
storage and view before its first use, a GEMM declaring its tiles in the loop gets the very
source of one declaring them before it, a declaration the pass cannot move says so and the
loop takes the cp.async pipeline; CPU float64 numerics; the same kernels on the GPU."""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.backend.cuda.pipeline import PerformanceWarning

SM90 = "cuda -arch=sm_90a"


def gemv_kernel(M, N, bM, bN, threads, stages=2):
    """The public example's gemv_alloc_reducer: the a tile declared inside the pipelined loop."""
    @T.prim_func
    def k(a: T.Tensor((M, N), "float16"), x: T.Tensor((N,), "float16"), o: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bM), threads=threads) as i0:
            r = T.alloc_reducer(bM, "float32", replication="all")
            T.clear(r)
            for i1 in T.Pipelined(T.ceildiv(N, bN), num_stages=stages):
                a_s = T.alloc_shared((bM, bN), "float16")
                T.copy(a[i0 * bM, i1 * bN], a_s)
                a_f = T.alloc_fragment((bM, bN), "float16")
                T.copy(a_s, a_f)
                x_f = T.alloc_fragment(bN, "float16")
                T.copy(x[i1 * bN], x_f)
                for i, j in T.Parallel(bM, bN):
                    r[i] += a_f[i, j].astype("float32") * x_f[j].astype("float32")
            T.finalize_reducer(r)
            T.copy(r, o[i0 * bM])
    return k


def gemm_kernel(M, N, K, bM=128, bN=128, bK=64, where="inner", annotate=False):
    """C = A @ B with A_s / B_s declared in the loop body ("inner"), before it ("outer"), or A_s
    one statement deeper in the body ("nested")."""
    @T.prim_func
    def g(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            if where == "outer":
                A_s = T.alloc_shared((bM, bK), "float16")
                B_s = T.alloc_shared((bK, bN), "float16")
                if annotate:
                    T.annotate_layout({A_s: tilelang.layout.make_swizzled_layout(A_s)})
            C_l = T.alloc_fragment((bM, bN), "float")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=3):
                if where == "inner":
                    A_s = T.alloc_shared((bM, bK), "float16")
                    B_s = T.alloc_shared((bK, bN), "float16")
                    if annotate:
                        T.annotate_layout({A_s: tilelang.layout.make_swizzled_layout(A_s)})
                if where == "nested":
                    for _ in T.serial(1):
                        A_s = T.alloc_shared((bM, bK), "float16")
                    B_s = T.alloc_shared((bK, bN), "float16")
                T.copy(A[by * bM, ko * bK], A_s)
                T.copy(B[ko * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bM, bx * bN])
    return g


def compiled(func, target=SM90):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        kern = tilelang.compile(func, target=target)  # NVRTC compiles it (a CompileError otherwise)
    return kern, [str(w.message) for w in rec if issubclass(w.category, PerformanceWarning)]


def assert_declared_before_use(src, tiles):
    """Each staged tile's storage and view is declared once, above every other mention of it."""
    for t in tiles:
        for name in (f"{t}_stages", t):
            decl = re.search(rf"\btl_half\* {name} = ", src)
            assert decl, f"{name} is not declared:\n{src}"
            first = re.search(rf"\b{name}\b", src)
            assert first.start() == decl.start() + len("tl_half* "), f"{name} used before its declaration:\n{src}"
        assert re.search(rf"\b{t} = {t}_stages \+ \(tl_stage\) \* \d+;", src), src  # re-pointed each iteration


@pytest.mark.nvrtc
@pytest.mark.parametrize("bM,bN,threads", [(128, 128, 256), (32, 512, 128)])
def test_gemv_with_the_tile_declared_in_the_loop_is_warp_specialized(bM, bN, threads):
    kern, warns = compiled(gemv_kernel(4 * bM, 4 * bN, bM, bN, threads))
    src = kern.get_kernel_source()
    assert not warns, warns
    assert_declared_before_use(src, ["a_s"])
    assert f"if (tid >= {threads}) {{" in src and "tl::tma_load(&tmap_0" in src
    storage = re.search(r"tl_half\* a_s_stages = ", src).start()
    assert storage < src.index("if (tid >= ")  # at the kernel's top: the producer writes it too
    assert "atomic" not in src and "tl_lanes_allreduce_sum(r[0]" in src  # the reducer stays in registers


@pytest.mark.nvrtc
@pytest.mark.parametrize("annotate", [False, True])
def test_gemm_declaring_its_tiles_in_the_loop_gets_the_same_kernel(annotate):
    inner, w_in = compiled(gemm_kernel(512, 512, 512, where="inner", annotate=annotate))
    outer, w_out = compiled(gemm_kernel(512, 512, 512, where="outer", annotate=annotate))
    assert not w_in and not w_out, (w_in, w_out)
    src = inner.get_kernel_source()
    assert src == outer.get_kernel_source()
    assert_declared_before_use(src, ["A_s", "B_s"])
    assert "gemm_ss_sm90<" in src and "tl::tma_load(&tmap_1" in src


@pytest.mark.nvrtc
def test_a_declaration_deeper_in_the_body_leaves_warp_specialization_with_the_reason():
    kern, warns = compiled(gemm_kernel(256, 256, 256, where="nested"))
    assert any("no warp specialization" in w and "declared inside a nested statement" in w for w in warns), warns
    assert "tma_load" not in kern.get_kernel_source()


def gemv_reference(a, x):
    return (a.double() * x.double()[None, :]).sum(1)


def run_gemv(kern, M, N, device):
    a, x = torch.randn(M, N, dtype=torch.float16, device=device), torch.randn(N, dtype=torch.float16, device=device)
    o = torch.full((M,), float("nan"), device=device)
    kern(a, x, o)
    torch.testing.assert_close(o.double().cpu(), gemv_reference(a, x).cpu(), rtol=1e-4, atol=1e-3)


def run_gemm(kern, M, N, K, device):
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(K, N, dtype=torch.float16, device=device)
    c = torch.full((M, N), float("nan"), dtype=torch.float16, device=device)
    kern(a, b, c)
    torch.testing.assert_close(c.double().cpu(), (a.double() @ b.double()).cpu(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("bM,bN,threads", [(128, 128, 256), (32, 512, 128)])
def test_gemv_on_cpu(bM, bN, threads):
    M, N = 2 * bM, 3 * bN
    run_gemv(tilelang.compile(gemv_kernel(M, N, bM, bN, threads), target="cpu"), M, N, "cpu")


@pytest.mark.parametrize("where", ["inner", "nested"])
def test_gemm_on_cpu(where):
    M, N, K = 256, 128, 192
    run_gemm(tilelang.compile(gemm_kernel(M, N, K, where=where), target="cpu"), M, N, K, "cpu")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("bM,bN,threads", [(128, 128, 256), (32, 512, 128)])
@pytest.mark.parametrize("stages", [2, 3])
def test_gemv_on_gpu(bM, bN, threads, stages):
    M, N = 8 * bM, 6 * bN  # several tiles per block once persistent; several k-steps per tile
    run_gemv(tilelang.compile(gemv_kernel(M, N, bM, bN, threads, stages), target="cuda"), M, N, "cuda")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("where", ["inner", "nested"])
def test_gemm_on_gpu(where):
    M, N, K = 1024, 768, 512
    run_gemm(tilelang.compile(gemm_kernel(M, N, K, where=where), target="cuda"), M, N, K, "cuda")
