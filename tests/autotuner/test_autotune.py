"""@tilelang.autotune above @tilelang.jit, and the AutoTuner class. CPU target, small sizes."""
import time

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.autotuner import AutoTuner
from tilelang.errors import TileLangError

CONFIGS = [{"bM": 16, "bN": 16}, {"bM": 32, "bN": 32}, {"bM": 64, "bN": 32}]
built = []


def gemm_prim(M, N, K, bM, bN, bK=16, wrong=False):
    @T.prim_func
    def mm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float32")
            B_s = T.alloc_shared((bK, bN), "float32")
            C_l = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bK) - (1 if wrong else 0), num_stages=2):
                T.copy(A[by * bM, ko * bK], A_s)
                T.copy(B[ko * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bM, bx * bN])
    return mm


@tilelang.autotune(configs=CONFIGS, warmup=1, rep=3, ref_prog=lambda A, B: A @ B)
@tilelang.jit(out_idx=[-1], target="cpu")
def tuned_mm(M, N, K, bM=32, bN=32):
    built.append((M, N, K, bM, bN))
    return gemm_prim(M, N, K, bM, bN)


def test_tuning_returns_the_fastest_correct_kernel():
    built.clear()
    k = tuned_mm(64, 96, 48)
    res = tuned_mm.get_result(64, 96, 48)
    assert [r.config for r in res.results] == CONFIGS
    assert all(r.error is None and r.latency > 0 for r in res.results)
    assert res.latency == min(r.latency for r in res.results)
    assert res.kernel is k and res.config in CONFIGS
    assert (k.config, k.latency, k.ref_latency) == (res.config, res.latency, res.ref_latency)
    assert res.ref_latency > 0
    assert "mm(" in res.libcode
    a, b = torch.randn(64, 48), torch.randn(48, 96)
    torch.testing.assert_close(k(a, b), a @ b, atol=1e-4, rtol=1e-4)
    # tuned once per argument tuple
    assert tuned_mm(64, 96, 48) is k
    assert len(built) == 3


def test_explicit_parameters_are_not_tuned():
    built.clear()
    k = tuned_mm(64, 64, 32, bM=16, bN=16)
    assert built == [(64, 64, 32, 16, 16)]
    assert tuned_mm.get_result(64, 64, 32, bM=16, bN=16).latency is None
    assert [tuple(p.shape) for p in k.params] == [(64, 32), (32, 64), (64, 64)]
    built.clear()
    tuned_mm(64, 64, 32, bM=16)  # only bN is tuned: configs collapse to the distinct bN values
    assert [r.config for r in tuned_mm.get_result(64, 64, 32, bM=16).results] == [{"bN": 16}, {"bN": 32}]
    assert built == [(64, 64, 32, 16, 32)]  # bN=16 was compiled above already (jit cache)


def test_failing_and_wrong_configs_are_skipped():
    @tilelang.autotune(configs=[{"bM": 16, "wrong": True}, {"bM": 48}, {"bM": 32}], warmup=1, rep=3,
                       ref_prog=lambda A, B: A @ B)
    @tilelang.jit(out_idx=[-1], target="cpu")
    def mm(M, bM=32, wrong=False):
        if bM == 48:
            raise ValueError("bM=48 does not divide the problem")
        return gemm_prim(M, M, M, bM, 32, wrong=wrong)

    res = mm.get_result(64)
    errors = {r.config["bM"]: r.error for r in res.results}
    assert "differ in" in errors[16]
    assert errors[48] == "ValueError: bM=48 does not divide the problem"
    assert errors[32] is None and res.config == {"bM": 32}


def test_all_configs_failing_is_an_error():
    @tilelang.autotune(configs=[{"bM": 16}, {"bM": 32}], warmup=1, rep=2, ref_prog=lambda A, B: A @ B + 1)
    @tilelang.jit(out_idx=[-1], target="cpu")
    def mm(M, bM=32):
        return gemm_prim(M, M, M, bM, 16)

    with pytest.raises(TileLangError, match="(?s)autotune: all 2 configs failed.*\\{'bM': 16\\}: AssertionError"):
        mm(32)


def test_config_forms_dict_of_lists_and_callable():
    seen = []

    @tilelang.autotune(configs={"bM": [16, 32], "bN": [16]}, warmup=1, rep=2)
    @tilelang.jit(out_idx=[-1], target="cpu")
    def mm(M, bM=32, bN=32):
        seen.append((bM, bN))
        return gemm_prim(M, M, M, bM, bN)

    mm(32)
    assert seen == [(16, 16), (32, 16)]

    def configs_for(M):
        return [{"bM": b} for b in (16, 32, 64) if b <= M]

    @tilelang.autotune(configs=configs_for, warmup=1, rep=2)
    @tilelang.jit(out_idx=[-1], target="cpu")
    def mm2(M, bM=32):
        seen.append(bM)
        return gemm_prim(M, M, M, bM, 16)

    seen.clear()
    mm2(32)
    assert seen == [16, 32]


def test_unknown_config_key():
    @tilelang.autotune(configs=[{"block_m": 16}], warmup=1, rep=2)
    @tilelang.jit(out_idx=[-1], target="cpu")
    def mm(M, bM=32):
        return gemm_prim(M, M, M, bM, 16)

    with pytest.raises(TileLangError, match="config key\\(s\\) \\['block_m'\\] are not parameters of mm\\(M, bM=32\\)"):
        mm(32)


def test_timeout_skips_a_slow_config():
    @tilelang.autotune(configs=[{"slow": True}, {"slow": False}], warmup=1, rep=2, timeout=0.3)
    @tilelang.jit(out_idx=[-1], target="cpu")
    def mm(M, slow=False):
        if slow:
            time.sleep(5)
        return gemm_prim(M, M, M, 16, 16)

    t0 = time.perf_counter()
    res = mm.get_result(32)
    assert time.perf_counter() - t0 < 4
    assert res.results[0].error == "timed out after 0.3 s"
    assert res.config == {"slow": False}


def test_autotuner_class():
    tuner = AutoTuner.from_kernel(kernel=lambda bM: gemm_prim(48, 48, 48, bM, 16), configs=[{"bM": 16}, {"bM": 48}])
    res = tuner.set_compile_args(out_idx=[-1], target="cpu").set_profile_args(
        ref_prog=lambda A, B: A @ B, supply_type=tilelang.TensorSupplyType.Integer).run(warmup=1, rep=2, timeout=60)
    assert res.config in ({"bM": 16}, {"bM": 48})
    assert res.kernel.target.kind == "cpu" and res.kernel.out_idx == [2]
    with pytest.raises(TypeError, match="set_profile_args: unknown arguments \\['rtl'\\]"):
        tuner.set_profile_args(rtl=1)


def test_eager_kernel_tunes_on_the_callers_tensors():
    @tilelang.autotune(configs=[{"block": 8}, {"block": 32}], warmup=1, rep=2, ref_prog=lambda X: X * 3)
    @tilelang.jit(target="cpu")
    def triple(X, block: int = 16):
        M, N = T.const("M, N")
        X: T.Tensor((M, N), "float32")
        Y = T.empty((M, N), "float32")
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i, j in T.Parallel(block, N):
                if bx * block + i < M:
                    Y[bx * block + i, j] = X[bx * block + i, j] * 3.0
        return Y

    x = torch.randn(50, 7)
    torch.testing.assert_close(triple(x), x * 3)
    assert triple.get_result(x).config in ({"block": 8}, {"block": 32})


def test_eager_kernel_compiled_without_tensors_tunes_on_generated_inputs():
    """`kernel.compile(M=..., N=...)` (the peer gemv example's call): no tensors to tune on, so the
    tuner makes random ones from the signature; calling the tuned kernel without them is an error."""
    @tilelang.autotune(configs=[{"block": 8}, {"block": 32}], warmup=1, rep=2, ref_prog=lambda X: X * 3)
    @tilelang.jit(target="cpu")
    def triple(X, block: int = 16):
        M, N = T.const("M, N")
        X: T.Tensor((M, N), "float32")
        Y = T.empty((M, N), "float32")
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i, j in T.Parallel(block, N):
                if bx * block + i < M:
                    Y[bx * block + i, j] = X[bx * block + i, j] * 3.0
        return Y

    kernel = triple.compile(M=50, N=7)
    assert kernel.config in ({"block": 8}, {"block": 32})
    x = torch.randn(50, 7)
    torch.testing.assert_close(kernel(x), x * 3)
    with pytest.raises(TypeError, match="needs its tensors"):
        triple(M=40, N=7)


def test_set_autotune_inputs_feeds_the_captured_tensors():
    from tilelang.autotuner import get_autotune_inputs, set_autotune_inputs

    a, b = torch.randn(32, 16), torch.randn(16, 32)
    expected = a.double() @ b.double()
    # a reference that is right only for (a, b): tuning on generated inputs fails every config
    fixed_ref = lambda A, B: expected.float()
    tuner = AutoTuner(lambda bM, bN: gemm_prim(32, 32, 16, bM, bN), [{"bM": 16, "bN": 16}, {"bM": 32, "bN": 32}])
    tuner.set_compile_args(out_idx=[-1], target="cpu").set_profile_args(ref_prog=fixed_ref, atol=1e-4, rtol=1e-4)
    with pytest.raises(TileLangError, match="all 2 configs failed"):
        tuner.run(warmup=1, rep=2)
    assert get_autotune_inputs() is None
    with set_autotune_inputs([a, b]):
        assert get_autotune_inputs() == [a, b]
        with set_autotune_inputs(b, a):  # nested: innermost wins
            assert get_autotune_inputs()[0] is b
        res = tuner.run(warmup=1, rep=2)
    assert get_autotune_inputs() is None
    assert all(r.error is None for r in res.results)
    torch.testing.assert_close(res.kernel(a, b).double(), expected, atol=1e-4, rtol=1e-4)


def test_star_import_gives_the_public_names():
    ns = {}
    exec("from tilelang.autotuner import *", ns)  # noqa: S102
    assert {"autotune", "AutoTuner", "set_autotune_inputs", "get_autotune_inputs"} <= set(ns)


def test_configs_compile_on_several_threads_then_time_in_order(monkeypatch):
    """As the public TileLang's tuner: the configs compile on a thread pool (its
    TILELANG_AUTO_TUNING_* variables size it), then each is checked and timed; a config that
    fails to compile is recorded, not fatal."""
    import threading

    threads = set()

    def make(bM=16, bN=16):
        threads.add(threading.get_ident())
        time.sleep(0.05)  # long enough that a pool of 3 runs them side by side
        if bM == 64:
            raise TileLangError("this config does not build")
        return tilelang.compile(gemm_prim(64, 64, 32, bM, bN), out_idx=[-1], target="cpu")

    monkeypatch.setenv("TILELANG_AUTO_TUNING_CPU_COUNTS", "3")
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    res = AutoTuner(make, CONFIGS).set_profile_args(ref_prog=lambda A, B: A @ B).run(warmup=1, rep=3)
    assert len(threads) >= 2
    assert [r.config for r in res.results] == CONFIGS
    assert res.results[2].error is not None and "does not build" in res.results[2].error
    assert all(r.error is None and r.compile_seconds > 0 for r in res.results[:2])
    a, b = torch.randn(64, 32), torch.randn(32, 64)
    torch.testing.assert_close(res.kernel(a, b), a @ b, atol=1e-4, rtol=1e-4)


def test_compile_workers_follow_the_public_variables(monkeypatch):
    from tilelang import env

    monkeypatch.setattr("os.cpu_count", lambda: 16)
    for var in ("TILELANG_AUTO_TUNING_CPU_COUNTS", "TILELANG_AUTO_TUNING_CPU_UTILITIES",
                "TILELANG_AUTO_TUNING_MAX_CPU_COUNT"):
        monkeypatch.delenv(var, raising=False)
    assert env.autotune_compile_workers() == 14  # 0.9 of 16
    monkeypatch.setenv("TILELANG_AUTO_TUNING_MAX_CPU_COUNT", "4")
    assert env.autotune_compile_workers() == 4
    monkeypatch.setenv("TILELANG_AUTO_TUNING_CPU_COUNTS", "2")
    assert env.autotune_compile_workers() == 2
    monkeypatch.setenv("TILELANG_AUTO_TUNING_CPU_COUNTS", "x")
    with pytest.raises(TileLangError, match="TILELANG_AUTO_TUNING_CPU_COUNTS"):
        env.autotune_compile_workers()


def _spy_builds(monkeypatch):
    """Record the pass_configs of every kernel build (with the disk caches off: a kernel an earlier
    test or run built would load from them without a build)."""
    from tilelang.jit import kernel as jk

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    seen, orig = [], jk.build

    def spy(func, target, pass_configs, *rest):
        seen.append(dict(pass_configs or {}))
        return orig(func, target, pass_configs, *rest)

    monkeypatch.setattr(jk, "build", spy)
    return seen


PC_CONFIGS = [{"bM": 16, "bN": 16, "pass_configs": {"tl.disable_tma_lower": True}},
              {"bM": 32, "bN": 32, "pass_configs": {"tl.disable_tma_lower": False}}]


def test_config_pass_configs_api_mode(monkeypatch):
    """A config's "pass_configs" (the public gemm/example_gemm_autotune_pass_configs.py) is laid over
    the compile args' for that config and is not a kernel parameter; extra run() arguments of the
    public signature are accepted."""
    seen = _spy_builds(monkeypatch)
    tuner = AutoTuner.from_kernel(lambda bM, bN: gemm_prim(40, 48, 32, bM, bN), PC_CONFIGS)
    tuner.set_compile_args(out_idx=[-1], target="cpu", pass_configs={"tl.disable_warp_specialized": True})
    tuner.set_profile_args(ref_prog=lambda A, B: A @ B)
    res = tuner.run(warmup=1, rep=2, enable_grouped_compile=True, group_compile_size=4, use_pipeline=False)
    assert {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True} in seen
    assert {"tl.disable_tma_lower": False, "tl.disable_warp_specialized": True} in seen
    assert all(r.error is None for r in res.results)
    a, b = torch.randn(40, 32), torch.randn(32, 48)
    torch.testing.assert_close(res.kernel(a, b).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-4)


def test_config_pass_configs_decorator_mode(monkeypatch):
    seen = _spy_builds(monkeypatch)

    @tilelang.autotune(configs=PC_CONFIGS, warmup=1, rep=2, ref_prog=lambda A, B: A @ B)
    @tilelang.jit(out_idx=[-1], target="cpu", pass_configs={"tl.disable_warp_specialized": True})
    def mm(M, N, K, bM=32, bN=32):
        return gemm_prim(M, N, K, bM, bN)

    k = mm(40, 48, 32)
    assert {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True} in seen
    assert {"tl.disable_tma_lower": False, "tl.disable_warp_specialized": True} in seen
    a, b = torch.randn(40, 32), torch.randn(32, 48)
    torch.testing.assert_close(k(a, b).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-4)


def test_early_stop_passes_the_baseline(monkeypatch):
    """early_stop: every config after the first is timed against early_stop_factor x the best so far."""
    from tilelang.profiler import Profiler

    baselines, orig = [], Profiler.do_bench

    def spy(self, *a, early_stop_baseline=None, **k):
        baselines.append(early_stop_baseline)
        return orig(self, *a, early_stop_baseline=early_stop_baseline, **k)

    monkeypatch.setattr(Profiler, "do_bench", spy)

    @tilelang.autotune(configs=CONFIGS, warmup=1, rep=2, early_stop=True, early_stop_factor=1.5)
    @tilelang.jit(out_idx=[-1], target="cpu")
    def mm(M, N, K, bM=32, bN=32):
        return gemm_prim(M, N, K, bM, bN)

    res = mm.get_result(40, 48, 32)
    lat = [r.latency for r in res.results]
    assert baselines[0] is None
    assert baselines[1] == pytest.approx(lat[0] * 1.5)
    assert baselines[2] == pytest.approx(min(lat[:2]) * 1.5)
    a, b = torch.randn(40, 32), torch.randn(32, 48)
    torch.testing.assert_close(res.kernel(a, b).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="early_stop_factor"):
        tilelang.autotune(configs=CONFIGS, early_stop=True, early_stop_factor=0.5)


def test_do_not_specialize_shares_one_tuning():
    calls = []

    @tilelang.autotune(configs=CONFIGS[:2], warmup=1, rep=2, do_not_specialize=["tag"])
    @tilelang.jit(out_idx=[-1], target="cpu")
    def mm(M, N, K, tag=0, bM=32, bN=32):
        calls.append(tag)
        return gemm_prim(M, N, K, bM, bN)

    k0 = mm(40, 48, 32, tag=1)
    n = len(calls)
    assert mm(40, 48, 32, tag=2) is k0 and len(calls) == n


def test_return_kernel_keyword_gives_the_tuned_kernel():
    """`f(..., __return_kernel=True)`: the tuned kernel (the same object as f.compile(...)); an eager
    function given its tensors then returns the kernel instead of running it."""
    k = tuned_mm(64, 32, 32, __return_kernel=True)
    assert k is tuned_mm.compile(64, 32, 32) and k.config in CONFIGS
    a, b = torch.randn(64, 32), torch.randn(32, 32)
    torch.testing.assert_close(k(a, b).double(), a.double() @ b.double(), atol=1e-4, rtol=1e-4)

    @tilelang.autotune(configs=[{"block": 8}, {"block": 16}], warmup=1, rep=2, ref_prog=lambda X: X + 1)
    @tilelang.jit(target="cpu")
    def inc(X, block: int = 4):
        M, N = T.const("M, N")
        X: T.Tensor((M, N), "float32")
        Y = T.empty((M, N), "float32")
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i, j in T.Parallel(block, N):
                if bx * block + i < M:
                    Y[bx * block + i, j] = X[bx * block + i, j] + 1.0
        return Y

    x = torch.randn(20, 5)
    kern = inc(x, __return_kernel=True)
    assert kern.config in ({"block": 8}, {"block": 16})
    torch.testing.assert_close(kern(x).double(), x.double() + 1)
