"""A row fragment (T.reduce_* over a gemm accumulator's rows) keeps one copy of each row on
every lane of a quad (and on each warp of a column split). A T.Parallel over it that stores
to shared memory, and a tile atomic from it, run on one copy only: a read-modify-write of a
shared row (`s[i] = s[i] * 2 + r[i]`) raced between the copies (compute-sanitizer racecheck on
the peer suite's flash-decoding and attention-sink kernels), and a T.atomic_add from the row
fragment added once per copy. CPU float64 semantics, the NVRTC source, and the GPU."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.testing

M, N, K = 64, 64, 32


def rows_kernel():
    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), S0: T.Tensor((M,), "float32"),
          S: T.Tensor((M,), "float32"), G: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((N, K), "float16")
            s = T.alloc_shared((M,), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(S0, s)
            T.gemm(a_s, b_s, acc, transpose_B=True, clear_accum=True)
            T.reduce_sum(acc, r, dim=1)
            for i in T.Parallel(M):
                s[i] = s[i] * 2 + r[i]
            T.atomic_add(G[0:M], r)
            T.copy(s, S)

    return k


def inputs(device):
    a = torch.randn(M, K).half()
    b = torch.randn(N, K).half()
    s0 = torch.randn(M)
    g0 = torch.randn(M)
    rows = (a.double() @ b.double().T).sum(1)
    want_s, want_g = s0.double() * 2 + rows, g0.double() + rows
    args = [t.to(device) for t in (a, b, s0, torch.zeros(M), g0.clone())]
    return args, want_s, want_g


def check(kern, device):
    args, want_s, want_g = inputs(device)
    kern(*args)
    s, g = args[3].cpu().double(), args[4].cpu().double()
    torch.testing.assert_close(s, want_s, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(g, want_g, rtol=1e-4, atol=1e-3)


def test_rows_cpu():
    check(tilelang.compile(rows_kernel(), target="cpu"), "cpu")


@pytest.mark.parametrize("arch, configs, first", [
    ("sm_90a", {}, "((tid % 4) == 0) && ((tid / 128) < 1)"),  # one warpgroup: the quad's lane 0
    ("sm_90a", {"tl.disable_wgmma": True}, "((tid % 4) == 0) && ((tid / 32) < 2)"),  # 2 x 2 warps
    ("sm_80", {}, "((tid % 4) == 0) && ((tid / 32) < 2)"),
])
def test_rows_store_from_one_copy(arch, configs, first):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = tilelang.compile(rows_kernel(), target=f"cuda -arch={arch}", pass_configs=configs).get_kernel_source()
    lines = src.splitlines()
    guarded = [lines[n + 1].strip() for n, ln in enumerate(lines) if first in ln]
    assert len(guarded) == 2, src  # the read-modify-write of s, the atomic
    assert guarded[0].startswith("s[") and "atomic_add" in guarded[1], guarded


@tilelang.testing.requires_cuda
@pytest.mark.parametrize("configs", [{}, {"tl.disable_wgmma": True}])
def test_rows_gpu(configs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(rows_kernel(), target="cuda", pass_configs=configs)
    for _ in range(3):
        check(kern, "cuda")
