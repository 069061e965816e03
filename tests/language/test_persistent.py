"""T.Persistent: a loop over a tile domain in waves of `wave_size` blocks (language/loops.py, parser.persistent_for),
and on sm_90a its rewrite into a grid of tiles for the warp-specialized path (transform/cuda/persistent_grid.py)."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError


def visits(domain, wave, group):
    """Each tile records the block that ran it and adds 1 to its visit count."""
    @T.prim_func
    def k(Owner: T.Tensor(domain, T.int32), Count: T.Tensor(domain, T.int32)):
        with T.Kernel(wave, threads=32) as b:
            if len(domain) == 1:
                for (i,) in T.Persistent(list(domain), wave, b, group):
                    Owner[i] = b
                    Count[i] = Count[i] + 1
            elif len(domain) == 2:
                for i, j in T.Persistent(list(domain), wave, b, group):
                    Owner[i, j] = b
                    Count[i, j] = Count[i, j] + 1
            else:
                for i, j, l in T.Persistent(list(domain), wave, b, group):
                    Owner[i, j, l] = b
                    Count[i, j, l] = Count[i, j, l] + 1
    return k


def expected_owner(domain, wave, group):
    """Tiles are dealt row-major over the domain whose last dim is padded to whole groups of `group`
    (clamped to [1, last extent]); tile number l goes to block l % wave."""
    *outer, last = domain
    g = max(1, min(group, last))
    padded = -(-last // g) * g
    out = torch.empty(domain, dtype=torch.int32)
    for idx in torch.cartesian_prod(*[torch.arange(d) for d in domain]).reshape(-1, len(domain)).tolist():
        lin = 0
        for d, v in zip(outer + [padded], idx):
            lin = lin * d + v
        out[tuple(idx)] = lin % wave
    return out


@pytest.mark.parametrize("domain,wave,group", [((3, 5), 4, 2), ((4, 8), 5, 8), ((7,), 3, 8), ((2, 3, 5), 4, 2),
                                               ((3, 4), 12, 4), ((5, 3), 2, 1)])
def test_each_tile_once_by_its_block(domain, wave, group):
    k = tilelang.compile(visits(domain, wave, group), target="cpu")
    owner = torch.full(domain, -1, dtype=torch.int32)
    count = torch.zeros(domain, dtype=torch.int32)
    k(owner, count)
    assert torch.equal(count, torch.ones(domain, dtype=torch.int32))
    assert torch.equal(owner, expected_owner(list(domain), wave, group))


def persistent_gemm(M, N, K, bm, bn, bk, sms, reads_block=False):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(sms, threads=128) as block_id:
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            for bx, by in T.Persistent([T.ceildiv(M, bm), T.ceildiv(N, bn)], sms, block_id):
                T.clear(C_l)
                for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[bx * bm, ko * bk], A_s)
                    T.copy(B[ko * bk, by * bn], B_s)
                    T.gemm(A_s, B_s, C_l)
                if reads_block:
                    C_l[0, 0] = C_l[0, 0] + T.if_then_else(block_id < 1000000, 0.0, 1.0)
                T.copy(C_l, C[bx * bm, by * bn])
    return gemm


def inputs(M, N, K, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, K, generator=g).half(), torch.randn(K, N, generator=g).half()


def test_gemm_matches_float64_on_cpu():
    M, N, K = 200, 328, 96
    a, b = inputs(M, N, K, 1)
    c = tilelang.compile(persistent_gemm(M, N, K, 64, 64, 32, 5), target="cpu", out_idx=None)
    out = torch.full((M, N), float("nan")).half()
    c(a, b, out)
    torch.testing.assert_close(out.double(), (a.double() @ b.double()).half().double(), rtol=2e-3, atol=2e-2)


def test_num_stages_and_target_arity_are_clear_errors():
    with pytest.raises(TileLangError, match="num_stages"):
        @T.prim_func
        def staged(O: T.Tensor((8,), T.int32)):
            with T.Kernel(2, threads=32) as b:
                for (i,) in T.Persistent([8], 2, b, num_stages=2):
                    O[i] = b
        tilelang.compile(staged, target="cpu")

    with pytest.raises(TileLangError, match="binds 1 names"):
        @T.prim_func
        def arity(O: T.Tensor((4, 4), T.int32)):
            with T.Kernel(2, threads=32) as b:
                for i in T.Persistent([4, 4], 2, b):
                    O[i, 0] = b
        tilelang.compile(arity, target="cpu")


def _nvrtc():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


def build(arch, prog, configs=None):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = tilelang.compile(prog, target=f"cuda -arch={arch}", pass_configs=configs or {})
    return k, [str(x.message) for x in w]


@pytest.mark.nvrtc
def test_sm90_takes_the_warp_specialized_path():
    _nvrtc()
    k, msgs = build("sm_90a", persistent_gemm(512, 512, 256, 128, 128, 64, 132))
    src = k.get_kernel_source()
    assert "tma_load" in src and "setmaxnreg" in src, msgs
    assert not [m for m in msgs if "T.Persistent" in m], msgs
    off, msgs = build("sm_90a", persistent_gemm(512, 512, 256, 128, 128, 64, 132), {"tl.disable_persistent_grid": True})
    assert "tma_load" not in off.get_kernel_source()


@pytest.mark.nvrtc
def test_a_body_reading_the_block_index_stays_as_written_and_says_why():
    _nvrtc()
    k, msgs = build("sm_90a", persistent_gemm(256, 256, 128, 64, 64, 32, 132, reads_block=True))
    assert "tma_load" not in k.get_kernel_source()
    assert any("T.Persistent loop stays as written" in m and "block index" in m for m in msgs), msgs


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch,configs", [("sm_80", {}), ("sm_90a", {}), ("sm_90a", {"tl.disable_persistent_grid": True})])
def test_gemm_runs_right_on_host(arch, configs):
    _nvrtc()
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    M, N, K = 200, 264, 128
    a, b = inputs(M, N, K, 2)
    k, _ = build(arch, persistent_gemm(M, N, K, 64, 128, 32, 3), configs)
    out = torch.full((M, N), float("nan")).half()
    host.HostProgram({"k": k}).run("k", [a, b, out])
    torch.testing.assert_close(out.double(), (a.double() @ b.double()).half().double(), rtol=2e-3, atol=4e-2)
