"""A non-warp-specialized two-stage dequant GEMM (dequantize_gemm's bf16 fp4 hopper example): each
k-step waits for the packed B tile, unpacks it with plain shared loads into a bf16 tile, waits for
A and runs a shared x shared wgmma. The output tile C_s shares bytes with both the bf16 tile and
the packed-B ring.

proxy_fences (`tl.disable_proxy_fence_bytewise_reach`): only the barrier after the bf16 tile's
stores needs fence.proxy.async; the packed ring lies under C_s only where no wgmma operand does,
and C_s is stored out by copy_vec16 (generic proxy), so the first wait's barrier is not fenced.
shared_load_batch (`tl.disable_shared_load_batch`): the unpacking loop's eight 4-byte loads of the
packed tile go out together ahead of it (ptxas cannot tell the packed and the bf16 tile apart, so
each load would wait behind the previous iteration's store). A loop that writes the tile it loads,
or holds a barrier, keeps its loads in place.
Numbers: the generated CUDA run on the host against float64 torch on random inputs."""
import re

import pytest
import torch

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"
NOWS = {"tl.disable_warp_specialized": True}
OFF = {**NOWS, "tl.disable_proxy_fence_bytewise_reach": True}
NOBATCH = {**NOWS, "tl.disable_shared_load_batch": True}
M, N, K, BM, BN, BK, THREADS = 256, 128, 512, 256, 128, 128, 256


def _fp4_bf16(byte, pos):
    code = ((byte >> (pos.astype("uint8") * T.uint8(4))) & T.uint8(15)).astype("uint16")
    s, e, m = code >> T.uint16(3), ((code & T.uint16(6)) >> T.uint16(1)) + T.uint16(126), code & T.uint16(1)
    return T.reinterpret((((s << T.uint16(8)) | e) << T.uint16(7)) | (m << T.uint16(6)), "bfloat16")


def dequant_gemm_ss():
    """C (M, N) = A @ dequant(B)^T, B (N, K / 2) fp4 codes two a byte (low nibble first)."""
    QK, BQK = K // 2, BK // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, QK), "uint8"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // BN, M // BM, threads=THREADS) as (bx, by):
            A_s = T.alloc_shared((BM, BK), "bfloat16")
            B_s = T.alloc_shared((BN, BQK), "uint8")
            B_dq = T.alloc_shared((BN, BK), "bfloat16")
            C_l = T.alloc_fragment((BM, BN), "float32")
            C_s = T.alloc_shared((BM, BN), "bfloat16")
            tx = T.get_thread_binding()
            b4 = T.alloc_local((4,), "uint8")
            d8 = T.alloc_local((8,), "bfloat16")
            T.clear(C_l)
            for k in T.Pipelined(K // BK, num_stages=2):
                T.copy(A[by * BM, k * BK], A_s)
                T.copy(B[bx * BN, k * BQK], B_s)
                for i in T.serial(BN * BK // THREADS // 8):
                    for v in T.vectorized(4):
                        idx = i * THREADS * 4 + tx * 4 + v
                        b4[v] = B_s[idx // BQK, idx % BQK]
                    for v in T.serial(8):
                        d8[v] = _fp4_bf16(b4[v // 2], v % 2)
                    for v in T.vectorized(8):
                        idx = i * THREADS * 8 + tx * 8 + v
                        B_dq[idx // BK, idx % BK] = d8[v]
                T.gemm(A_s, B_dq, C_l, transpose_B=True)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * BM, bx * BN])

    return main


def _ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    codes = torch.stack([(b.long() >> (4 * p)) & 15 for p in range(2)], -1).flatten(-2)
    sign, exp, man = codes >> 3, (codes & 6) >> 1, codes & 1
    val = torch.pow(2.0, exp.double() - 1) * (1 + 0.5 * man.double())
    return a.double() @ torch.where(sign == 1, -val, val).T


def _waits(src):
    """Per cp.async wait of the k-loop: is its barrier fenced?"""
    loop = src[src.index("for (int k = 0;"):]
    return [bool(f) for f in re.findall(r"cp_async_wait<\d+>\(\); (tl::fence_proxy_async\(\); )?__syncthreads", loop)]


def test_only_the_barrier_before_the_wgmma_is_fenced():
    src = tilelang.compile(dequant_gemm_ss(), target=SM90, pass_configs=NOWS).get_kernel_source()
    assert _waits(src)[:2] == [False, True]
    off = tilelang.compile(dequant_gemm_ss(), target=SM90, pass_configs=OFF).get_kernel_source()
    assert _waits(off)[:2] == [True, True]


def test_the_packed_loads_go_out_ahead_of_the_unpacking_loop():
    src = tilelang.compile(dequant_gemm_ss(), target=SM90, pass_configs=NOWS).get_kernel_source()
    loop = src[src.index("for (int k = 0;"):]
    assert "uint8_t B_s_v0_b[32];" in loop
    batch = loop.index("B_s_v0_b[32]")
    first_load, first_store = loop.index("tl::load_vec<4>(&B_s_v0_b["), loop.index("tl::store_vec<8>(&B_dq[")
    assert batch < first_load < first_store and loop.count("tl::load_vec<4>(") == 1  # one load loop
    off = tilelang.compile(dequant_gemm_ss(), target=SM90, pass_configs=NOBATCH).get_kernel_source()
    assert "B_s_v0_b" not in off


def _unpack_loop(store_into_source=False, barrier=False):
    from tilelang import dtypes as dt
    from tilelang.ir import expr as E
    from tilelang.ir import stmt as S
    from tilelang.ir.buffer import Buffer
    from tilelang.transform.cuda.raw import Raw

    i, tid = E.Var("i", dt.int32), E.Var("tid", dt.int32)
    src = Buffer("P_s", (2048,), "uint8", "shared.dyn")
    dst = Buffer("D_s", (4096,), "bfloat16", "shared.dyn")
    x = Buffer("P_v0", (4,), "uint8", "local")
    at = E.Binary("+", E.Binary("*", i, E.as_expr(1024), dt.int32), E.Binary("*", tid, E.as_expr(4), dt.int32), dt.int32)
    load = Raw("tl::load_vec<4>({0}, {1}, {2});", (E.Call("address_of", (E.BufferLoad(x, (E.as_expr(0),), x.dtype),), dt.uint64),
                                                   E.Call("address_of", (E.BufferLoad(src, (at,), src.dtype),), dt.uint64),
                                                   E.as_expr(True)), reads=(src,))
    out = src if store_into_source else dst
    val = E.BufferLoad(x, (E.as_expr(0),), x.dtype) if store_into_source else E.as_expr(1.0, dst.dtype)
    body = [S.Allocate(x), load, S.BufferStore(out, (at,), val)]
    if barrier:
        body.append(Raw("__syncthreads();"))
    return S.For(i, E.as_expr(0), E.as_expr(8), "serial", S.seq(*body))


def test_a_loop_writing_its_source_or_holding_a_barrier_keeps_its_loads():
    from tilelang.ir import stmt as S
    from tilelang.transform.cuda.shared_load_batch import batch_shared_loads

    batched = batch_shared_loads(_unpack_loop())
    assert isinstance(batched, S.SeqStmt) and [type(s).__name__ for s in batched.stmts] == ["Allocate", "For", "For"]
    assert batched.stmts[0].buffer.shape[0] == 32
    for loop in (_unpack_loop(store_into_source=True), _unpack_loop(barrier=True)):
        assert batch_shared_loads(loop) == loop


@pytest.fixture(scope="module")
def host():
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    return host_cuda.HostProgram({n: tilelang.compile(dequant_gemm_ss(), target=SM90, pass_configs=c)
                                  for n, c in (("on", NOWS), ("off", OFF), ("nobatch", NOBATCH))})


@pytest.mark.parametrize("name,seed", [("on", 11), ("on", 12), ("off", 13), ("nobatch", 14)])
def test_matches_float64_on_host(host, name, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).bfloat16()
    b = torch.randint(0, 256, (N, K // 2), generator=g, dtype=torch.int32).to(torch.uint8)
    c = torch.full((M, N), 7.0).bfloat16()
    host.run(name, [a, b, c])
    ref = _ref(a, b)
    assert torch.allclose(c.double(), ref, rtol=1e-2, atol=2e-2), (c.double() - ref).abs().max()
