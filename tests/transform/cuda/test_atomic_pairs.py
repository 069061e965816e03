"""float32 atomic adds as vector reductions (vectorize.atomic_vector_loop), run on the host
emulator against float64: from an mma / wgmma accumulator, 8 bytes per column pair (the split-K
GEMM's epilogue, element form -- a T.Parallel of T.atomic_add -- and tile form, on sm_90a
warp-specialized with wgmma and on sm_80 with mma.sync); from a shared tile, 16 bytes per four
row elements (linear attention's `T.atomic_add(O[...], o_shared)`). An odd row length keeps scalar
atomics (its pairs are not aligned), and still adds right.
"""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def splitk(M, N, K, bM=128, bN=128, bK=32, split=2, tile_form=False, stages=0):
    sk = K // split

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), split, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bK, bN), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(sk, bK), num_stages=stages):
                T.copy(A[by * bM, bz * sk + ko * bK], A_s)
                T.copy(B[bz * sk + ko * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l)
            if tile_form:
                T.atomic_add(C[by * bM, bx * bN], C_l)
            else:
                for i, j in T.Parallel(bM, bN):
                    T.atomic_add(C[by * bM + i, bx * bN + j], C_l[i, j])

    return main


def build(func, arch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(func, target=f"cuda -arch={arch}")


CASES = [
    ("sm_90a", dict(M=256, N=256, K=128)),
    ("sm_90a", dict(M=256, N=256, K=128, tile_form=True)),
    ("sm_90a", dict(M=200, N=192, K=128, stages=2)),  # ragged rows and columns: bounds guards per pair
    ("sm_80", dict(M=256, N=128, K=128, stages=2)),
    ("sm_80", dict(M=128, N=128, K=64, bK=32, tile_form=True)),
]


@pytest.mark.parametrize("arch,cfg", CASES)
def test_split_k_atomic_pairs(arch, cfg, run_on_host):
    k = build(splitk(**cfg), arch)
    src = k.get_kernel_source()
    assert "tl_atomic_add_v2_f32(" in src and "tl_atomic_add_f32(" not in src, src
    M, N, K = cfg["M"], cfg["N"], cfg["K"]
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c0 = torch.randn(M, N, dtype=torch.float32)
    c = c0.clone()
    run_on_host(k, [a, b, c])
    ref = c0.double() + a.double() @ b.double()
    torch.testing.assert_close(c.double(), ref, rtol=1e-3, atol=1e-3)


def test_odd_rows_stay_scalar(run_on_host):
    k = build(splitk(128, 131, 64, bN=128, bK=32, split=2, stages=2), "sm_80")
    src = k.get_kernel_source()
    assert "tl_atomic_add_v2_f32(" not in src and "tl_atomic_add_f32(" in src
    a = torch.randn(128, 64, dtype=torch.float16)
    b = torch.randn(64, 131, dtype=torch.float16)
    c = torch.zeros(128, 131)
    run_on_host(k, [a, b, c])
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-3, atol=1e-3)


def test_sm90_sass_vector_reduction():
    from tilelang.backend.cuda import nvrtc, sass
    if not (nvrtc.nvrtc_available() and sass.sass_available()):
        pytest.skip("NVRTC or nvdisasm not installed")
    k = build(splitk(256, 256, 128), "sm_90a")
    text = k.artifact.sass()
    assert "REDG.E.ADD.F32x2" in text and "REDG.E.ADD.F32.FTZ" not in text


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("cfg", [dict(M=1024, N=1024, K=1024, split=4), dict(M=1000, N=904, K=512, stages=2),
                                 dict(M=512, N=512, K=512, tile_form=True)])
def test_split_k_atomic_pairs_gpu(cfg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(splitk(**cfg), target="cuda")
    M, N, K = cfg["M"], cfg["N"], cfg["K"]
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c0 = torch.randn(M, N, device="cuda")
    c = c0.clone()
    k(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double(), c0.double() + a.double() @ b.double(), rtol=1e-3, atol=2e-3)


def shared_atomic(M, N, rows=64, tile_form=True):
    """O[rows-block] += X (via a shared tile), twice per block (two blocks add to one O tile)."""

    @T.prim_func
    def main(X: T.Tensor((2 * M, N), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, rows), 2, threads=128) as (bx, by):
            S_ = T.alloc_shared((rows, N), "float32")
            T.copy(X[by * M + bx * rows, 0], S_)
            if tile_form:
                T.atomic_add(O[bx * rows, 0], S_)
            else:
                for i, j in T.Parallel(rows, N):
                    T.atomic_add(O[bx * rows + i, j], S_[i, j])

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("tile_form", [True, False])
@pytest.mark.parametrize("M,N,vec", [(128, 64, 4), (96, 64, 4), (128, 6, 2), (64, 7, 1)])
@pytest.mark.parametrize("configs", [{}, {"tl.disable_atomic_vector_source": True}])
def test_shared_source_vector_atomics(arch, tile_form, M, N, vec, configs, run_on_host):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(shared_atomic(M, N, tile_form=tile_form), target=f"cuda -arch={arch}", pass_configs=configs)
    src = k.get_kernel_source()
    if vec > 1:
        # the values are one shared row's aligned elements: one vector read (else one load each)
        form = f"tl_atomic_add_v{vec}_f32(" if configs else f"tl_atomic_add_v{vec}_f32_from("
        assert form in src and "tl_atomic_add_f32(" not in src, src
        assert configs or f"tl_atomic_add_v{vec}_f32(" not in src, src
    else:
        assert "tl_atomic_add_v" not in src and "tl_atomic_add_f32(" in src
    x = torch.randn(2 * M, N)
    o0 = torch.randn(M, N)
    o = o0.clone()
    run_on_host(k, [x, o])
    torch.testing.assert_close(o.double(), o0.double() + x[:M].double() + x[M:].double(), rtol=1e-5, atol=1e-5)


def staged_atomic(M=128, N=64, K=32, split=2):
    """dK += A_k @ B_k for `split` blocks (GQA's heads of one KV head), the accumulator staged
    through a float32 shared tile (swizzled by staging_swizzle) and added with T.atomic_add."""

    @T.prim_func
    def main(A: T.Tensor((split, M, K), "float16"), B: T.Tensor((split, N, K), "float16"),
             dK: T.Tensor((M, N), "float32")):
        with T.Kernel(split, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            acc_s = T.alloc_shared((M, N), "float32")
            T.copy(A[bx, 0:M, 0:K], A_s)
            T.copy(B[bx, 0:N, 0:K], B_s)
            T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, acc_s)
            T.atomic_add(dK[0:M, 0:N], acc_s)

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("configs", [{}, {"tl.disable_atomic_vector_source": True}])
def test_staged_tile_vector_reads(arch, configs, run_on_host):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(staged_atomic(), target=f"cuda -arch={arch}", pass_configs=configs)
    src = k.get_kernel_source()
    assert "tl::swizzle_xor_offset<64, sizeof(float)>" in src, src  # the staging tile is swizzled
    if configs:
        assert "tl_atomic_add_v4_f32(&dK[" in src and "_from(" not in src, src
    else:  # one 16-byte read of the swizzled chunk holding the 4 values
        assert "tl_atomic_add_v4_f32_from(&dK[" in src and "tl_atomic_add_v4_f32(" not in src, src
        assert "&acc_s[tl::swizzle_xor_offset<64, sizeof(float)>(" in src.split("_from(")[-1], src
    g = torch.Generator().manual_seed(21)
    a = torch.randn(2, 128, 32, generator=g).half()
    b = torch.randn(2, 64, 32, generator=g).half()
    d0 = torch.randn(128, 64, generator=g)
    d = d0.clone()
    run_on_host(k, [a, b, d])
    ref = d0.double() + sum(a[s].double() @ b[s].double().T for s in range(2))
    torch.testing.assert_close(d.double(), ref, rtol=1e-4, atol=1e-4)
