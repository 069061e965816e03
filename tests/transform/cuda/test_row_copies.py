"""A row fragment (T.reduce_* over a gemm accumulator's rows) keeps one copy of each row on
every lane of a quad (and on each warp of a column split). A T.Parallel over it that stores
to shared memory, and a tile atomic from it, run on one copy only: a read-modify-write of a
shared row (`s[i] = s[i] * 2 + r[i]`) raced between the copies (compute-sanitizer racecheck on
the peer suite's flash-decoding and attention-sink kernels), and a T.atomic_add from the row
fragment added once per copy. CPU float64 semantics, the NVRTC source, and the GPU."""
import re
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
    ("sm_90a", {}, "if (((tid % 4) == 0)) {"),  # one warpgroup: the quad's lane 0 (tid / 128 < 1 holds)
    ("sm_90a", {"tl.disable_row_store_hoist": True}, "if (((tid % 4) == 0)) {"),
    ("sm_90a", {"tl.disable_thread_range_folding": True}, "((tid % 4) == 0) && ((tid / 128) < 1)"),
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
    if "tl.disable_row_store_hoist" not in configs:  # s's loop only stores, on lane 0 each slot: one test around it
        assert guarded[0] == "#pragma unroll" and "] = ((s[" in src.split(first)[1].split("}")[0], src
    else:
        assert guarded[0].startswith("s["), guarded
    assert "atomic_add" in guarded[1], guarded


@tilelang.testing.requires_cuda
@pytest.mark.parametrize("configs", [{}, {"tl.disable_wgmma": True}])
def test_rows_gpu(configs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(rows_kernel(), target="cuda", pass_configs=configs)
    for _ in range(3):
        check(kern, "cuda")


# A row-fragment loop that stores a buffer other threads see and reads it back in the same body
# (the peer attention_sink forward's check_inf: scores_max[i] = T.if_then_else(scores_max[i] == -inf,
# 0, scores_max[i]); scores_scale[i] = T.exp2(... - scores_max[i] ...), with scores_max kept in shared
# memory) kept the store on every copy: a copy in another warp could store before this one read
# (racecheck), and a non-idempotent update (s[i] = s[i] * 2 + r[i]) was applied twice. The body now
# reads and writes a register; the first copy stores it, after a barrier when the body read the old value.
def read_back_kernel(variant, policy=T.GemmWarpPolicy.Square, demoted=False):
    """t[i] and s[i] from the row sums r of A @ B^T and s0; s is a shared tile, or (demoted) a
    fragment kept in shared memory (a T.copy of a slice of it)."""

    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), S0: T.Tensor((M,), "float32"),
          S: T.Tensor((M,), "float32"), Tt: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((N, K), "float16")
            s = T.alloc_fragment((M,), "float32") if demoted else T.alloc_shared((M,), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            t = T.alloc_fragment((M,), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(S0, s)
            T.gemm(a_s, b_s, acc, transpose_B=True, clear_accum=True, policy=policy)
            T.reduce_sum(acc, r, dim=1)
            if variant == "old":  # reads the old value, then its own store
                for i in T.Parallel(M):
                    s[i] = T.if_then_else(s[i] < 0, s[i] * 2, s[i]) + r[i]
                    t[i] = s[i] + 1
            elif variant == "new":  # reads only what it stored
                for i in T.Parallel(M):
                    s[i] = r[i] * 2
                    t[i] = s[i] + 1
            else:  # stores on some rows only
                for i in T.Parallel(M):
                    if r[i] > 0:
                        s[i] = r[i]
                    t[i] = s[i] + 1
            T.copy(s[0:M // 2], S[0:M // 2])  # (copies of slices: a fragment s is kept in shared memory)
            T.copy(s[M // 2:M], S[M // 2:M])
            T.copy(t, Tt)

    return k


def read_back_want(variant, s0, rows):
    if variant == "old":
        s = torch.where(s0 < 0, s0 * 2, s0) + rows
    elif variant == "new":
        s = rows * 2
    else:
        s = torch.where(rows > 0, rows, s0)
    return s, s + 1


def read_back_check(kern, variant, device):
    a, b, s0 = torch.randn(M, K).half(), torch.randn(N, K).half(), torch.randn(M)
    want_s, want_t = read_back_want(variant, s0.double(), (a.double() @ b.double().T).sum(1))
    out_s, out_t = torch.full((M,), float("nan")), torch.full((M,), float("nan"))
    args = [x.to(device) for x in (a, b, s0, out_s, out_t)]
    kern(*args)
    torch.testing.assert_close(args[3].cpu().double(), want_s, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(args[4].cpu().double(), want_t, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("variant", ["old", "new", "cond"])
@pytest.mark.parametrize("demoted", [False, True])
def test_read_back_cpu(variant, demoted):
    read_back_check(tilelang.compile(read_back_kernel(variant, demoted=demoted), target="cpu"), variant, "cpu")


def _loops(src):
    """The text of every `for (...) { ... }` in src, outermost first (braces matched)."""
    out = []
    for m in re.finditer(r"for \(", src):
        start = src.index("{", m.end())
        depth, n = 0, start
        while True:
            depth += {"{": 1, "}": -1}.get(src[n], 0)
            if depth == 0:
                break
            n += 1
        out.append((m.start(), src[m.start():n + 1]))
    return out


def read_back_source(variant, arch, policy, demoted, configs=None):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        src = tilelang.compile(read_back_kernel(variant, policy, demoted), target=f"cuda -arch={arch}",
                               pass_configs=configs or {}).get_kernel_source()
    assert not [x for x in w if "reads it back" in str(x.message)], [str(x.message) for x in w]
    return src


@pytest.mark.parametrize("variant", ["old", "new", "cond"])
@pytest.mark.parametrize("arch, policy, demoted, first", [
    ("sm_80", T.GemmWarpPolicy.Square, False, "((tid % 4) == 0) && ((tid / 32) < 2)"),  # 2 x 2 warps
    ("sm_80", T.GemmWarpPolicy.Square, True, "((tid % 4) == 0) && ((tid / 32) < 2)"),
    ("sm_80", T.GemmWarpPolicy.FullRow, True, "((tid % 4) == 0) && ((tid / 32) < 4)"),  # the quad only
    ("sm_90a", T.GemmWarpPolicy.Square, False, "if (((tid % 4) == 0)) {"),  # one warpgroup: tid / 128 < 1 holds
])
def test_read_back_not_racing(variant, arch, policy, demoted, first):
    """No row loop loads s on every copy while the first copy stores it: a loop that loads s stores
    it on no copy (its later reads use the register), and the loop that stores it reads it nowhere
    but in the first copy's store; when both exist, a barrier separates them."""
    src = read_back_source(variant, arch, policy, demoted)
    loops = [(at, text) for at, text in _loops(src) if re.search(r"\bs\[", text) and "S[" not in text
             and "S0[" not in text]  # the row loops, not the copies in and out
    stores = [(at, text) for at, text in loops if re.search(r"\bs\[[^\]]*\] = ", text)]
    loads = [(at, text) for at, text in loops if re.search(r"\bs\[[^\]]*\](?! = )", text.split("{", 1)[1])]
    assert len(stores) == 1, src
    st_at, st_text = stores[0]
    body = [ln.strip() for ln in st_text.splitlines()[1:-1]]
    n = next(k for k, ln in enumerate(body) if re.match(r"s\[", ln))
    assert first in body[n - 1] and re.fullmatch(r"s\[i_\d+\] = s_row\d+\[(l(_\d+)?|0)\];", body[n]), st_text
    assert sum(1 for ln in body if re.search(r"\bs\[", ln)) == 1, st_text  # no load of s beside it
    assert re.search(r"t\[l(_\d+)?\] = \(s_row\d+\[(l(_\d+)?|0)\] \+ 1\.0f\);", src), src  # t reads the register
    if variant == "new":
        assert loads == [], src  # nothing reads the old value: one loop, no extra barrier
        return
    (ld_at, ld_text), = [x for x in loads if x is not stores[0]]
    assert re.search(r"s_row\d+\[l(_\d+)?\] = s\[i_\d+\];", ld_text), ld_text  # every copy loads the old value
    assert ld_at < st_at and re.search(r"__syncthreads\(\)|barrier_sync", src[ld_at + len(ld_text):st_at]), src


def test_read_back_other_element_warns():
    """A body reading the stored buffer at another row's element cannot forward it: every copy still
    stores, and the compile says so."""
    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), Tt: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((N, K), "float16")
            s = T.alloc_shared((M,), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            t = T.alloc_fragment((M,), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, acc, transpose_B=True, clear_accum=True)
            T.reduce_sum(acc, r, dim=1)
            for i in T.Parallel(M):
                s[i] = r[i]
                t[i] = s[M - 1 - i]
            T.copy(t, Tt)

    with pytest.warns(Warning, match=r"every thread holding a row stores s and reads it back \(the body reads or "
                                     r"writes it at another element\)"):
        tilelang.compile(k, target="cuda -arch=sm_80").get_kernel_source()


@tilelang.testing.requires_cuda
@pytest.mark.parametrize("variant", ["old", "new", "cond"])
@pytest.mark.parametrize("policy, demoted", [(T.GemmWarpPolicy.Square, False), (T.GemmWarpPolicy.Square, True),
                                             (T.GemmWarpPolicy.FullRow, True)])
def test_read_back_gpu(variant, policy, demoted):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(read_back_kernel(variant, policy, demoted), target="cuda")
    for _ in range(3):
        read_back_check(kern, variant, "cuda")
