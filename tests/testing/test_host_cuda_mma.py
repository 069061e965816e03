"""tilelang/testing/host_cuda runs sm_80 tensor-core GEMMs on the host: the generated kernel and the
shipped tl/gemm_sm80.h (ldmatrix + mma.sync + cp.async pipeline, tl::gemm_ss_pipe, staged epilogue)
against host versions of ldmatrix / mma.sync that follow the PTX ISA fragment layouts. Each GEMM is
checked against float64 torch on fresh random inputs, so a wrong fragment layout (emulation or
compiler) fails here."""
import pytest
import torch

import tilelang
import tilelang.language as T

SM80 = "cuda -arch=sm_80"


def matmul(M, N, K, bm, bn, bk, stages, threads, dtype, out, acc="float32", ta=False, tb=False):
    ashape, bshape = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))

    @T.prim_func
    def f(A: T.Tensor(ashape, dtype), B: T.Tensor(bshape, dtype), C: T.Tensor((M, N), out)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            sdt = "tfloat32" if dtype == "float32" else dtype
            As = T.alloc_shared((bk, bm) if ta else (bm, bk), sdt)
            Bs = T.alloc_shared((bn, bk) if tb else (bk, bn), sdt)
            Cl = T.alloc_fragment((bm, bn), acc)
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[k * bk, by * bm] if ta else A[by * bm, k * bk], As)
                T.copy(B[bx * bn, k * bk] if tb else B[k * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cl, transpose_A=ta, transpose_B=tb)
            T.copy(Cl, C[by * bm, bx * bn])

    return f


TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
         "int8": torch.int8, "int32": torch.int32}

# name: (M, N, K, bm, bn, bk, stages, threads, dtype, out, ta, tb)
CASES = {
    "f16_nn": (128, 128, 128, 64, 64, 32, 2, 128, "float16", "float32", False, False),
    "f16_tn_ragged": (100, 72, 88, 64, 64, 32, 3, 128, "float16", "float16", True, False),
    "f16_nt_256thr": (128, 128, 96, 128, 64, 32, 4, 256, "float16", "float32", False, True),
    "f16_tt": (64, 64, 64, 64, 64, 32, 2, 128, "float16", "float32", True, True),
    "bf16_nt_ragged": (72, 136, 80, 64, 128, 32, 3, 256, "bfloat16", "float32", False, True),
    "bf16_nn": (64, 128, 64, 64, 64, 64, 2, 128, "bfloat16", "bfloat16", False, False),
    "tf32_nn": (64, 64, 64, 64, 32, 32, 2, 128, "float32", "float32", False, False),
    "tf32_tt": (64, 64, 64, 64, 32, 32, 2, 128, "float32", "float32", True, True),
    "i8_nt": (64, 64, 128, 64, 64, 64, 2, 128, "int8", "int32", False, True),
    # float16 accumulators: mma.sync m16n8k16 .f16 (two packed registers per 16x8 tile)
    "f16acc_nn": (128, 128, 128, 64, 64, 32, 2, 128, "float16", "float16", False, False),
    "f16acc_nt_ragged_256thr": (100, 136, 96, 128, 64, 32, 3, 256, "float16", "float32", False, True),
}
ACC = {"f16acc_nn": "float16", "f16acc_nt_ragged_256thr": "float16"}  # the others: float32 (int32 for int8)


@pytest.fixture(scope="module")
def prog(host):
    kernels = {}
    for name, (M, N, K, bm, bn, bk, st, th, dt, out, ta, tb) in CASES.items():
        acc = ACC.get(name, "int32" if dt == "int8" else "float32")
        kernels[name] = tilelang.compile(matmul(M, N, K, bm, bn, bk, st, th, dt, out, acc, ta, tb), target=SM80)
    return host.HostProgram(kernels)


def _operand(shape, dtype, g):
    if dtype == "int8":
        return torch.randint(-128, 128, shape, dtype=torch.int8, generator=g)
    return torch.randn(shape, generator=g).to(TORCH[dtype])


@pytest.mark.parametrize("name", list(CASES))
def test_sm80_gemm_runs_on_host_and_matches_float64(prog, name):
    M, N, K, bm, bn, bk, st, th, dt, out, ta, tb = CASES[name]
    src = prog.kernels[name].get_kernel_source()
    assert "tl::gemm_ss" in src  # the tensor-core path, not CUDA cores
    g = torch.Generator().manual_seed(hash(name) % 1000)
    a = _operand((K, M) if ta else (M, K), dt, g)
    b = _operand((N, K) if tb else (K, N), dt, g)
    c = torch.full((M, N), 7, dtype=TORCH[out])
    prog.run(name, [a, b, c])
    av, bv = a.double(), b.double()
    ref = (av.T if ta else av) @ (bv.T if tb else bv)
    if dt == "int8":
        assert torch.equal(c.long(), ref.long())
        return
    rel = {"float16": 2e-3, "bfloat16": 8e-3, "float32": 1e-6 if dt != "float32" else 3e-3}[out]
    if ACC.get(name) == "float16":  # every partial sum is rounded to fp16 (K <= 128 here)
        rel = 1e-2
    tol = rel * ref.abs().max().item() + 1e-5
    err = (c.double() - ref).abs().max().item()
    assert err <= tol, f"{name}: max error {err} > {tol}"
    # a wrong fragment layout gives errors of the size of the result itself
    assert err < 0.05 * ref.abs().max().item()


def flash(seq, dim, bm, bn, threads=128, stages=2):
    """Attention on sm_80: S = Q K^T (gemm), online softmax row stats (quad shuffles), O += P V."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504

    @T.prim_func
    def f(Q: T.Tensor((seq, dim), "float16"), K: T.Tensor((seq, dim), "float16"), V: T.Tensor((seq, dim), "float16"),
          O: T.Tensor((seq, dim), "float16")):
        with T.Kernel(T.ceildiv(seq, bm), threads=threads) as bx:
            Q_s = T.alloc_shared((bm, dim), "float16")
            K_s = T.alloc_shared((bn, dim), "float16")
            V_s = T.alloc_shared((bn, dim), "float16")
            acc_s = T.alloc_fragment((bm, bn), "float32")
            acc_c = T.alloc_fragment((bm, bn), "float16")
            acc_o = T.alloc_fragment((bm, dim), "float32")
            m = T.alloc_fragment((bm,), "float32")
            m_prev = T.alloc_fragment((bm,), "float32")
            sc = T.alloc_fragment((bm,), "float32")
            l_sum = T.alloc_fragment((bm,), "float32")
            l = T.alloc_fragment((bm,), "float32")
            T.copy(Q[bx * bm, 0], Q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(seq, bn), num_stages=stages):
                T.copy(K[k * bn, 0], K_s)
                T.clear(acc_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(bm):
                    sc[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(bm, dim):
                    acc_o[i, j] *= sc[i]
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.copy(V[k * bn, 0], V_s)
                T.reduce_sum(acc_s, l_sum, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * sc[i] + l_sum[i]
                T.copy(acc_s, acc_c)
                T.gemm(acc_c, V_s, acc_o)
            for i, j in T.Parallel(bm, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bx * bm, 0])

    return f


def test_sm80_flash_attention_runs_on_host_and_matches_float64(host):
    k = tilelang.compile(flash(192, 64, 64, 64), target=SM80)
    src = k.get_kernel_source()
    assert "tl::gemm_ss" in src and "tl_quad_" in src
    prog = host.HostProgram({"fa": k})
    g = torch.Generator().manual_seed(3)
    q, kk, v = (torch.randn(192, 64, generator=g).half() for _ in range(3))
    o = torch.zeros(192, 64).half()
    prog.run("fa", [q, kk, v, o])
    ref = torch.softmax(q.double() @ kk.double().T / 8, dim=1) @ v.double()
    assert (o.double() - ref).abs().max().item() < 2e-3


# (A/B dtype, ptx abbreviation, C dtype, ptx abbreviation, K, target)
MMA_TYPES = {
    "f16_f32": ("float16", "fp16", "float32", "fp32", 16, SM80),
    "f16_f16": ("float16", "fp16", "float16", "fp16", 16, SM80),
    "bf16_f32": ("bfloat16", "bf16", "float32", "fp32", 16, SM80),
    "s8_s32": ("int8", "int8", "int32", "int32", 32, SM80),
    "tf32_f32": ("float32", "tf32", "float32", "fp32", 8, SM80),
    "e4m3_f32": ("float8_e4m3fn", "e4m3", "float32", "fp32", 32, "cuda -arch=sm_89"),
}


def one_mma(ab, ab_ptx, c_dt, c_ptx, K):
    """One warp, one mma.sync; each lane loads its fragment elements from global memory by the PTX
    ISA's layout (written out here, independently of the emulation): C = A (16 x K) @ B (K x 8) + C."""
    epr, kh = {1: 4, 2: 2, 4: 1}[torch.tensor([], dtype=TORCH.get(ab, torch.float8_e4m3fn)).element_size()], K // 2
    na, nb = 16 * K // 32, 8 * K // 32
    loc = "float32" if ab == "float32" else ab

    @T.prim_func
    def k(A: T.Tensor((16, K), ab), B: T.Tensor((K, 8), ab), C: T.Tensor((16, 8), c_dt)):
        with T.Kernel(1, threads=32) as _:
            a = T.alloc_local((na,), loc)
            b = T.alloc_local((nb,), loc)
            c = T.alloc_local((4,), c_dt)
            tx = T.get_thread_binding()
            g, t = tx // 4, tx % 4
            for i in T.unroll(na):
                a[i] = A[g + 8 * ((i // epr) % 2), epr * t + kh * ((i // epr) // 2) + i % epr]
            for i in T.unroll(nb):
                b[i] = B[epr * t + kh * (i // epr) + i % epr, g]
            for s in T.unroll(4):
                c[s] = C[g + 8 * (s // 2), 2 * t + s % 2]
            T.ptx_mma(c_dt, f"m16n8k{K}", "row", "col", ab_ptx, ab_ptx, c_ptx, a.data, 0, b.data, 0, c.data, 0, False)
            for s in T.unroll(4):
                C[g + 8 * (s // 2), 2 * t + s % 2] = c[s]

    return k


TORCH["float8_e4m3fn"] = torch.float8_e4m3fn


@pytest.mark.parametrize("name", list(MMA_TYPES))
def test_one_mma_sync_of_each_type_matches_float64(host, name):
    ab, ab_ptx, c_dt, c_ptx, K, target = MMA_TYPES[name]
    kern = tilelang.compile(one_mma(ab, ab_ptx, c_dt, c_ptx, K), target=target)
    assert "tl::mma_frag" in kern.get_kernel_source()
    prog = host.HostProgram({name: kern})
    g = torch.Generator().manual_seed(11)
    a, b = _operand((16, K), ab, g), _operand((K, 8), ab, g)
    c = _operand((16, 8), "int8", g).to(TORCH[c_dt])
    c0 = c.clone()
    prog.run(name, [a, b, c])
    av, bv = a.double(), b.double()
    if ab == "float32":  # tf32: the tensor core reads the top 19 bits of each operand
        av = (a.view(torch.int32) & -8192).view(torch.float32).double()
        bv = (b.view(torch.int32) & -8192).view(torch.float32).double()
    ref = av @ bv + c0.double()
    if c_dt == "int32":
        assert torch.equal(c.long(), ref.long())
    else:
        tol = (1e-3 if c_dt == "float16" else 1e-6) * ref.abs().max().item()
        assert (c.double() - ref).abs().max().item() <= tol


def ldsm(num, trans):
    """Lane l gives the address of row l % 8 of matrix l // 8 (matrix i: columns 8i..8i+7 of a
    8 x 32 tile); its registers are stored back as loaded."""
    @T.prim_func
    def k(A: T.Tensor((8, 32), "float16"), R: T.Tensor((32, 2 * num), "float16")):
        with T.Kernel(1, threads=32) as _:
            A_s = T.alloc_shared((8, 32), "float16")
            r = T.alloc_local((2 * num,), "float16")
            tx = T.get_thread_binding()
            T.copy(A, A_s)
            T.ptx_ldmatrix(trans, num, T.access_ptr(A_s[tx % 8, 8 * ((tx // 8) % num)], "r"), T.access_ptr(r[0], "w"))
            for i in T.unroll(2 * num):
                R[tx, i] = r[i]

    return k


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_gives_each_lane_its_documented_elements(host, num, trans):
    prog = host.HostProgram({"ld": tilelang.compile(ldsm(num, trans), target=SM80)})
    a = torch.randn(8, 32).half()
    r = torch.zeros(32, 2 * num).half()
    prog.run("ld", [a, r])
    ref = torch.zeros(32, 2 * num).half()
    for lane in range(32):
        for i in range(num):
            m = a[:, 8 * i:8 * i + 8]
            m = m.T if trans else m
            ref[lane, 2 * i:2 * i + 2] = m[lane // 4, 2 * (lane % 4):2 * (lane % 4) + 2]
    assert torch.equal(r, ref)
