"""C codegen name hygiene: user names that collide with lowering's variables, C keywords,
libm functions or the generated code's own `tl_` names still compile and compute right."""
import torch

import tilelang
import tilelang.language as T
from tilelang.codegen.c import codegen_c, unique_names
from tilelang.ir import stmt as S
from tilelang.ir.visitor import collect


def test_colliding_names_compile_and_run():
    M, N = 20, 12

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), free: T.Tensor((M,), "float32"), tl_b: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 8)) as bx:
            r = T.alloc_fragment((8,), "float32")        # reduce_* lowers with a loop var `r`
            i0 = T.alloc_fragment((8, N), "float32")      # copies lower with loop vars `i0`, `i1`
            gi = T.alloc_fragment((8, N), "float32")      # gemm lowers with `gi`, `gj`, `gk`
            exp = T.alloc_fragment((8, N), "float32")     # shadows libm exp
            T.copy(A[bx * 8, 0], i0)
            T.copy(A[bx * 8, 0], gi)
            T.reduce_sum(i0, r, dim=1)
            for q, double in T.Parallel(8, N):
                exp[q, double] = T.exp(i0[q, double]) + gi[q, double]
            T.copy(r, free[bx * 8])
            T.copy(exp, tl_b[bx * 8, 0])

    a = torch.randn(M, N)
    f, o = torch.full((M,), float("nan")), torch.full((M, N), float("nan"))
    tilelang.compile(k, target="cpu")(a, f, o)
    torch.testing.assert_close(f.double(), a.double().sum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(o.double(), a.double().exp() + a.double(), rtol=1e-5, atol=1e-5)


def test_unique_names_gives_distinct_binders():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            i = T.alloc_fragment((16, 16), "float32")
            T.copy(A, i)
            for i0 in T.serial(4):
                T.copy(i, A)  # lowers to loops named i0/i1 inside a user loop named i0
            T.copy(i, A)

    from tilelang.backend.cpu.pipeline import PASSES
    from tilelang.transform.pass_manager import PassContext, run_passes

    lowered = unique_names(run_passes(k, PASSES, PassContext()))
    binders = [n.var.name for n in collect(lowered.body, lambda n: isinstance(n, S.For))]
    assert len(binders) == len(set(binders)), binders
    text = codegen_c(lowered).text
    assert "float* restrict A = (float*)tl_arg0;" in text


def test_keyword_buffer_names_compile_for_cuda_and_cpu():
    """Buffers named `do` / `new` / `tid` (a FlashAttention backward names dO's tile `do`)."""
    M, N = 64, 32

    @T.prim_func
    def k(do: T.Tensor((M, N), "float16"), new: T.Tensor((M,), "float32")):
        with T.Kernel(M // 16, threads=128) as bx:
            tid = T.alloc_fragment((16, N), "float32")
            s = T.alloc_fragment((16,), "float32")
            for i, j in T.Parallel(16, N):
                tid[i, j] = do[bx * 16 + i, j] * 2.0
            T.reduce_sum(tid, s, dim=1)
            T.copy(s, new[bx * 16])

    src = tilelang.compile(k, target="cuda -arch=sm_90a").get_kernel_source()
    assert " do[" not in src and "tid[" not in src.replace("v_tid[", "")
    a = torch.randn(M, N).half()
    out = torch.full((M,), float("nan"))
    tilelang.compile(k, target="cpu")(a, out)
    torch.testing.assert_close(out.double(), a.double().sum(1) * 2, rtol=1e-4, atol=1e-3)
