"""T.tma_copy(shared_tile, global_box): a TMA store the program waits for itself (T.tma_store_wait).

On sm_90a the store is one thread's cp.async.bulk.tensor ... global.shared::cta after a barrier
that orders the threads' writes of the tile (with fence.proxy.async before it), committed as a
bulk group; the kernel ends with a wait for every group still in flight. Checked on the emitted
CUDA and PTX (NVRTC), run on the host emulator (whose TMA stores land only at their thread's
wait) and on the CPU backend, each against float64 torch on fresh random inputs.
"""
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import LoweringError


def gemm_tma_store(M, N, K, bm=128, bn=128, bk=32, stages=2, wait_read=True):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_s = T.alloc_shared((bm, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.tma_copy(C_s, C[by * bm, bx * bn])
            T.tma_store_wait(read=wait_read)

    return main


def scale_rows(M, N, bm=64):
    """TMA load -> threads scale the tile in place -> TMA store, the tile reused every iteration."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            X_s = T.alloc_shared((bm, N), T.float32)
            bar = T.alloc_barrier(128)
            for i in T.serial(M // bm):
                T.tma_copy(X[i * bm, 0], X_s, barrier=bar)
                T.barrier_arrive(bar)
                T.barrier_wait(bar, i % 2)
                for r, c in T.Parallel(bm, N):
                    X_s[r, c] = X_s[r, c] * (r + 1) + i
                T.tma_copy(X_s, Y[i * bm, 0])
                T.tma_store_wait()  # X_s is read before the next load overwrites it

    return main


def _gemm_ref(a, b):
    return a.double() @ b.double()


def _scale_ref(x, bm=64):
    M, N = x.shape
    r = torch.arange(bm, dtype=torch.float64).repeat(M // bm)[:, None] + 1
    i = torch.arange(M // bm, dtype=torch.float64).repeat_interleave(bm)[:, None]
    return x.double() * r + i


def test_cpu_backend_runs_the_store_as_a_copy():
    M, N, K = 256, 384, 96
    f = gemm_tma_store(M, N, K)
    k = tilelang.compile(f, out_idx=[2], target="cpu")
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    torch.testing.assert_close(k(a, b).double(), _gemm_ref(a, b), rtol=1e-2, atol=2e-2)
    x = torch.randn(256, 32)
    y = torch.full_like(x, 7.0)
    tilelang.compile(scale_rows(256, 32), target="cpu")(x, y)
    torch.testing.assert_close(y.double(), _scale_ref(x), rtol=1e-6, atol=1e-5)


nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
needs_nvrtc = pytest.mark.skipif(not nvrtc.nvrtc_available(), reason="NVRTC from the pip wheels is not installed")


@needs_nvrtc
@pytest.mark.nvrtc
@pytest.mark.parametrize("wait_read", [True, False])
def test_sm90a_source_and_ptx_hold_the_store(wait_read):
    k = tilelang.compile(gemm_tma_store(256, 256, 64, wait_read=wait_read), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    tail = src[src.rindex("stmatrix_pack") if "stmatrix_pack" in src else src.index("C_s["):]
    # the threads' writes of C_s, a fenced barrier, one thread's stores (two 64-column panels) and commit
    m = re.search(r"tl::fence_proxy_async\(\); __syncthreads\(\);\s*if \(tl::tl_shuffle_elect<128>\(\)\) \{ "
                  r"tl::tma_store\(&(tmap_\d+), C_s \+ 0, \(bx \* 128\), \(by \* 128\)\); "
                  r"tl::tma_store\(&\1, C_s \+ 8192, \(\(bx \* 128\) \+ 64\), \(by \* 128\)\); "
                  r"tl::tma_store_arrive\(\); \}", tail)
    assert m, tail
    after = tail[m.end():]
    wait = f"tl::tma_store_wait<0, {str(wait_read).lower()}>();"
    assert after.index(wait) < after.index("tl::tma_store_wait_all();")  # the user's wait, then the exit's
    ptx = k.artifact.ptx
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group", ptx)
    assert "fence.proxy.async.shared::cta" in ptx
    assert "cp.async.bulk.commit_group" in ptx
    assert ("cp.async.bulk.wait_group.read 0" in ptx) == wait_read
    assert "cp.async.bulk.wait_group 0" in ptx


@pytest.fixture(scope="module")
def host_emu():
    from tilelang.testing import host_cuda_or_skip

    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    return host_cuda_or_skip()


@pytest.mark.nvrtc
def test_sm90a_gemm_store_on_the_host_emulator(host_emu):
    M, N, K = 256, 384, 96
    k = tilelang.compile(gemm_tma_store(M, N, K, stages=3), target="cuda -arch=sm_90a")
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = torch.full((M, N), 7.0).half()
    host_emu.HostProgram({"f": k}).run("f", [a, b, c])
    torch.testing.assert_close(c.double(), _gemm_ref(a, b), rtol=1e-2, atol=2e-2)


@pytest.mark.nvrtc
def test_sm90a_load_compute_store_reusing_the_tile(host_emu):
    """The tile is reloaded after each store: the user's T.tma_store_wait() is what keeps the store
    reading the right bytes (the emulator reads a store's tile at its thread's wait)."""
    k = tilelang.compile(scale_rows(256, 32), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert src.count("tl::tma_store(") == 1 and "tl::tma_load(" in src
    x = torch.randn(256, 32)
    y = torch.full_like(x, 7.0)
    host_emu.HostProgram({"f": k}).run("f", [x, y])
    torch.testing.assert_close(y.double(), _scale_ref(x), rtol=1e-6, atol=1e-5)


def test_store_needs_hopper():
    with pytest.raises(LoweringError, match=r"T\.tma_copy \(a TMA store\).*sm_90a"):
        tilelang.compile(gemm_tma_store(256, 256, 64), target="cuda -arch=sm_80")


def test_store_of_a_tile_tma_cannot_move_names_why():
    @T.prim_func
    def f(C: T.Tensor((128, 96), T.float16)):
        with T.Kernel(1, threads=128):
            C_s = T.alloc_shared((64, 48), T.float16)
            T.fill(C_s, 1)
            T.tma_copy(C_s, C[64, 48])  # 96-byte rows, not one contiguous run of C either

    with pytest.raises(LoweringError, match=r"T\.tma_copy C_s -> C: .*rows are 96 bytes"):
        tilelang.compile(f, target="cuda -arch=sm_90a")


def strided_pointer_view(rows, cols, row_stride, tma):
    @T.prim_func
    def main(ptrs: T.Tensor((1,), T.ptr), out: T.Tensor((rows, cols), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.make_tensor(ptrs[0], (rows, cols), T.float32, strides=(row_stride, 1))
            s = T.alloc_shared((rows, cols), T.float32)
            if tma:
                bar = T.alloc_barrier(128)
                T.tma_copy(src, s, barrier=bar)
                T.barrier_arrive(bar)
                T.barrier_wait(bar, 0)
            else:
                T.copy(src, s)
            for i, j in T.Parallel(rows, cols):
                out[i, j] = s[i, j] * 3

    return main


def test_make_tensor_with_strides_reads_a_padded_tensor():
    rows, cols, stride = 16, 32, 40
    pad = torch.randn(rows, stride)
    out = torch.full((rows, cols), 7.0)
    tilelang.compile(strided_pointer_view(rows, cols, stride, False), target="cpu")(
        torch.tensor([pad.data_ptr()], dtype=torch.int64), out)
    torch.testing.assert_close(out.double(), pad[:, :cols].double() * 3)
    if nvrtc.nvrtc_available():
        src = tilelang.compile(strided_pointer_view(rows, cols, stride, False),
                               target="cuda -arch=sm_90a").get_kernel_source()
        assert re.search(r"&src\[\(int64_t\)i\w* \* 40 \+ j\w*\]", src), src


def test_make_tensor_strides_are_checked():
    with pytest.raises(tilelang.errors.TileLangError, match="2 strides for a 1-d shape"):
        @T.prim_func
        def f(ptrs: T.Tensor((1,), T.ptr)):
            with T.Kernel(1, threads=32):
                T.make_tensor(ptrs[0], (8,), T.float32, strides=(8, 1))


@needs_nvrtc
def test_tma_of_a_view_bound_in_the_kernel_is_refused():
    with pytest.raises(LoweringError, match=r"T\.tma_copy src -> s: src is a view bound inside the kernel"):
        tilelang.compile(strided_pointer_view(16, 32, 40, True), target="cuda -arch=sm_90a")


def per_warp_rows(M, K, warps=8):
    """leader_scope_threads=32: each warp loads, updates and stores its own row (one contiguous run: a
    plain bulk copy, no tensor map), on its own barrier."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float32), B: T.Tensor((M, K), T.float32)):
        with T.Kernel(T.ceildiv(M, warps), threads=warps * 32) as pid:
            tid = T.get_thread_binding()
            w = tid // 32
            row = pid * warps + w
            a_s = T.alloc_shared((warps, K), T.float32)
            mbars = T.alloc_barrier([32] * warps)
            T.tma_copy(A[row, 0:K], a_s[w, 0:K], barrier=mbars[w], leader_scope_threads=32)
            T.mbarrier_arrive(mbarrier=mbars[w])
            T.mbarrier_wait_parity(mbarrier=mbars[w], parity=0)
            for j in T.serial(K // 32):
                a_s[w, j * 32 + tid % 32] = a_s[w, j * 32 + tid % 32] * 2 + w
            T.tma_copy(a_s[w, 0:K], B[row, 0:K], leader_scope_threads=32)
            T.tma_store_wait()

    return main


def _per_warp_ref(a, warps=8):
    return a.double() * 2 + (torch.arange(a.shape[0]) % warps)[:, None].double()


def test_per_warp_leaders_on_the_cpu_backend():
    a = torch.randn(32, 1024)
    b = torch.full_like(a, 7.0)
    tilelang.compile(per_warp_rows(32, 1024), target="cpu")(a, b)
    torch.testing.assert_close(b.double(), _per_warp_ref(a))


@pytest.mark.nvrtc
def test_per_warp_leaders_sm90a(host_emu):
    k = tilelang.compile(per_warp_rows(32, 1024), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert re.search(r"if \(tl::tl_shuffle_elect<32>\(\)\) \{ tl::mbarrier_expect_tx\(&mbars?\w*\[w\], 4096\); "
                     r"tl::bulk_copy_g2s\(a_s \+ \(w \* 1024\), &A\[\(int64_t\)row \* 1024\], 4096", src), src
    assert re.search(r"if \(tl::tl_shuffle_elect<32>\(\)\) \{ tl::bulk_copy_s2g\(&B\[\(int64_t\)row \* 1024\], "
                     r"a_s \+ \(w \* 1024\), 4096\); tl::tma_store_arrive\(\); \}", src), src
    assert "CUtensorMap" not in src and "tmap_" not in src
    ptx = k.artifact.ptx
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.global.shared::cta.bulk_group" in ptx
    a = torch.randn(32, 1024)
    b = torch.full_like(a, 7.0)
    host_emu.HostProgram({"f": k}).run("f", [a, b])
    torch.testing.assert_close(b.double(), _per_warp_ref(a))


@needs_nvrtc
def test_copies_of_a_pointer_view_take_no_tensor_map():
    """A T.make_tensor view's address is read in the kernel: the automatic warp-specialized pipeline
    loads it without a tensor map (none can be encoded on the host for it)."""
    M = N = K = 256

    @T.prim_func
    def f(ptrs: T.Tensor((1,), T.ptr), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A = T.make_tensor(ptrs[0], (M, K), T.float16, strides=(K + 8, 1))
            A_s = T.alloc_shared((128, 32), T.float16)
            B_s = T.alloc_shared((32, 128), T.float16)
            C_l = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // 32, num_stages=2):
                T.copy(A[by * 128, k * 32], A_s)
                T.copy(B[k * 32, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = tilelang.compile(f, target="cuda -arch=sm_90a").get_kernel_source()
    assert not [ln for ln in src.splitlines() if "tl::tma_load" in ln and "A_s" in ln]
    assert "* 264" in src  # A's rows are 264 elements apart
    pad = torch.randn(M, K + 8).half()
    b = torch.randn(K, N).half()
    c = torch.full((M, N), 7.0)
    tilelang.compile(f, target="cpu")(torch.tensor([pad.data_ptr()]), b, c)
    torch.testing.assert_close(c.double(), pad[:, :K].double() @ b.double(), rtol=1e-4, atol=1e-3)
