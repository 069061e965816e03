"""T.gemm over int4 / uint4 tiles with an int32 accumulator (the public TileLang's gemm_int4 example:
A (M, K) and B (N, K) as int8 tensors of shape (., K // 2), two values a byte, the even k in the
low nibble). On CUDA the shared tiles become byte tiles (nibble_tiles.py) read by ldmatrix and
mma.sync m16n8k64 .s4 / .u4 (tl::gemm_ss on tl::int4x2_t), on sm_80 and sm_90a alike (wgmma has
no 4-bit integer form: on sm_90a a PerformanceWarning says so). Shapes mma.sync cannot
take run on CUDA cores and say why. Exact int32 results against torch int64 matmuls of the
unpacked values: CPU backend, and the CUDA source on the host emulator."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout import make_swizzled_layout

LIMITS = {"int4": (-8, 8), "uint4": (0, 16)}


def gemm_nt(M, N, K, bM, bN, bK, threads=128, dtype="int4", stages=3, trans_b=True, c_shared=False,
            touch_a=False, annotate=False):
    """c_shared: the accumulator is a shared tile; touch_a: A's tile is also read element by element;
    annotate: both tiles pinned to make_swizzled_layout."""
    b_shape, bs_shape = ((N, K), (bN, bK)) if trans_b else ((K, N), (bK, bN))

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((bM, bK), dtype)
            B_shared = T.alloc_shared(bs_shape, dtype)
            if c_shared:
                C_acc = T.alloc_shared((bM, bN), T.int32)
            else:
                C_acc = T.alloc_fragment((bM, bN), T.int32)
            if annotate:
                T.annotate_layout({A_shared: make_swizzled_layout(A_shared), B_shared: make_swizzled_layout(B_shared)})
            T.clear(C_acc)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                T.copy(A[by * bM, ko * bK], A_shared)
                if trans_b:
                    T.copy(B[bx * bN, ko * bK], B_shared)
                else:
                    T.copy(B[ko * bK, bx * bN], B_shared)
                if touch_a:
                    for i, j in T.Parallel(bM, bK):
                        A_shared[i, j] = A_shared[i, j] + 1
                T.gemm(A_shared, B_shared, C_acc, transpose_B=trans_b)
            T.copy(C_acc, C[by * bM, bx * bN])

    return main


def pack(v: torch.Tensor) -> torch.Tensor:
    """Logical values (..., K) -> (..., K // 2) int8 bytes, the even element in the low nibble."""
    v = v.to(torch.int16)
    return ((v[..., 0::2] & 15) | ((v[..., 1::2] & 15) << 4)).to(torch.int8)


def operands(M, N, K, dtype, trans_b=True):
    lo, hi = LIMITS[dtype]
    a = torch.randint(lo, hi, (M, K), dtype=torch.int8)
    b = torch.randint(lo, hi, (N, K) if trans_b else (K, N), dtype=torch.int8)
    return a, b, torch.full((M, N), -7, dtype=torch.int32)


def reference(a, b, dtype, trans_b=True, touch_a=False):
    av = a.long()
    if touch_a:  # A_shared + 1 stored back into the 4-bit tile wraps
        av = av + 1
        av = ((av + 8) % 16 - 8) if dtype == "int4" else av % 16
    return av @ (b.long().T if trans_b else b.long())


def compile_(fn, target):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(fn, target=target)
    return kern, [str(w.message) for w in got]


def host_run(host, kern, args):
    prog = host.HostProgram({"k": kern})
    try:
        prog.run("k", args)
    finally:
        prog.close()


CASES = [  # M, N, K, bM, bN, bK, threads, stages: one k-slice a stage; a fused gemm_ss_pipe mainloop; ragged M, N
    (64, 64, 128, 32, 32, 64, 128, 3),
    (64, 64, 384, 64, 64, 128, 128, 2),
    (80, 48, 256, 64, 32, 128, 128, 2),
]


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
@pytest.mark.parametrize("M, N, K, bM, bN, bK, threads, stages", CASES)
def test_cpu_exact(dtype, M, N, K, bM, bN, bK, threads, stages):
    kern, _ = compile_(gemm_nt(M, N, K, bM, bN, bK, threads, dtype, stages), "cpu")
    a, b, c = operands(M, N, K, dtype)
    kern(pack(a), pack(b), c)
    assert torch.equal(c.long(), reference(a, b, dtype))


def test_cpu_out_idx_allocates_the_int32_output():
    kern = tilelang.compile(gemm_nt(64, 32, 128, 32, 32, 64), out_idx=-1, target="cpu")
    a, b, _ = operands(64, 32, 128, "int4")
    c = kern(pack(a), pack(b))
    assert c.dtype == torch.int32 and tuple(c.shape) == (64, 32)
    assert torch.equal(c.long(), reference(a, b, "int4"))


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", ["int4", "uint4"])
@pytest.mark.parametrize("M, N, K, bM, bN, bK, threads, stages", CASES)
def test_mma_sync_s4_on_the_host_emulator(host, arch, dtype, M, N, K, bM, bN, bK, threads, stages):
    kern, msgs = compile_(gemm_nt(M, N, K, bM, bN, bK, threads, dtype, stages), f"cuda -arch={arch}")
    src = kern.get_kernel_source()
    t = "tl::int4x2_t" if dtype == "int4" else "tl::uint4x2_t"
    assert f"{t}>(" in src or f"{t}, 1>(" in src, src
    assert "cp_async" in src and "tl_nibble" not in src, src  # whole bytes: cp.async, no nibble accesses
    assert not any("CUDA cores" in m for m in msgs), msgs
    # sm_90a: wgmma, Hopper's fast path, has no int4 form; the warning says so (sm_80: nothing to say)
    hopper = [m for m in msgs if "uses mma.sync, not wgmma: wgmma has no 4-bit integer form" in m]
    assert len(hopper) == (1 if arch == "sm_90a" else 0), msgs
    a, b, c = operands(M, N, K, dtype)
    host_run(host, kern, [pack(a), pack(b), c])
    assert torch.equal(c.long(), reference(a, b, dtype))


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_swizzle_annotated_tiles_still_take_mma_sync(host, arch):
    """T.annotate_layout(make_swizzled_layout) of the int4 tiles: their byte tiles are swizzled instead."""
    M, N, K = 64, 64, 256
    for target in ("cpu", f"cuda -arch={arch}"):
        kern, msgs = compile_(gemm_nt(M, N, K, 32, 32, 128, stages=2, annotate=True), target)
        a, b, c = operands(M, N, K, "int4")
        if target == "cpu":
            kern(pack(a), pack(b), c)
        else:
            assert "tl::int4x2_t" in kern.get_kernel_source() and not any("CUDA cores" in m for m in msgs), msgs
            host_run(host, kern, [pack(a), pack(b), c])
        assert torch.equal(c.long(), reference(a, b, "int4")), target


@pytest.mark.nvrtc
def test_dynamic_k_with_a_ragged_last_tile(host):
    """K symbolic (the byte views' rows are K // 2): K = 200 leaves a last tile of 8 values, zero-filled."""
    for target in ("cpu", "cuda -arch=sm_80"):
        kern, _ = compile_(gemm_nt(64, 64, T.dynamic("K"), 32, 32, 64, stages=2), target)
        for K in (192, 200):
            a, b, c = operands(64, 64, K, "int4")
            if target == "cpu":
                kern(pack(a), pack(b), c)
            else:
                host_run(host, kern, [pack(a), pack(b), c])
            assert torch.equal(c.long(), reference(a, b, "int4")), (target, K)


@pytest.mark.nvrtc
@pytest.mark.parametrize("variant, why", [
    ({"trans_b": False}, "int4 mma.sync needs both operands K-major"),
    ({"touch_a": True}, "int4 tiles take mma.sync only as whole bytes"),
    ({"c_shared": True}, "C in shared memory"),
])
def test_other_forms_run_on_cuda_cores_and_say_why(host, variant, why):
    M, N, K = 32, 32, 128
    kern, msgs = compile_(gemm_nt(M, N, K, 32, 32, 64, 128, stages=2, **variant), "cuda -arch=sm_80")
    assert any("runs on CUDA cores" in m and why in m for m in msgs), msgs
    trans_b = variant.get("trans_b", True)
    a, b, c = operands(M, N, K, "int4", trans_b)
    host_run(host, kern, [pack(a), pack(b), c])
    assert torch.equal(c.long(), reference(a, b, "int4", trans_b, variant.get("touch_a", False)))


@pytest.mark.nvrtc
def test_real_example_shape_compiles_for_sm80_and_sm90a():
    """The public example's 1024^3 gemm with 128 x 128 x 64 tiles at 128 threads: the SASS has the
    4-bit IMMA on sm_80 and ldmatrix + 16-byte cp.async (LDGSTS) on both."""
    from tilelang.backend.cuda import sass

    for arch in ("sm_80", "sm_90a"):
        kern, msgs = compile_(gemm_nt(1024, 1024, 1024, 128, 128, 64), f"cuda -arch={arch}")
        assert "tl::int4x2_t" in kern.get_kernel_source()
        assert not any("CUDA cores" in m for m in msgs), msgs
        if sass.sass_available():
            text = sass.disassemble(kern.artifact.compiled.cubin)
            assert "LDSM" in text and "LDGSTS.E.BYPASS.128" in text
            assert ("IMMA.16864.S4.S4" in text) == (arch == "sm_80")  # sm_90: int8 IMMA steps


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("dtype", ["int4", "uint4"])
@pytest.mark.parametrize("M, N, K, bM, bN, bK, threads, stages", CASES + [(1024, 1024, 1024, 128, 128, 64, 128, 3)])
def test_gpu_exact(dtype, M, N, K, bM, bN, bK, threads, stages):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(gemm_nt(M, N, K, bM, bN, bK, threads, dtype, stages), target="cuda")
    a, b, c = operands(M, N, K, dtype)
    c = c.cuda()
    kern(pack(a).cuda(), pack(b).cuda(), c)
    assert torch.equal(c.cpu().long(), reference(a, b, dtype))
