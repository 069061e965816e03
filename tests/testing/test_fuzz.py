"""The differential fuzzer: a fixed-seed slice runs clean (CPU backend against the float64
oracle, plus sm_80/sm_90a NVRTC compiles), descriptions round-trip, and the oracle catches
a wrong kernel."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing.fuzz import check, from_json, generate, to_json, to_source
from tilelang.testing.fuzz.cli import main
from tilelang.testing.fuzz.reference import round_to, run_reference
from tilelang.testing.fuzz.runner import make_inputs
from tilelang.testing.fuzz.spec import Ew


def test_fixed_seed_slice(capsys):
    # seeds 0-19 cover tile, gemm, thread, atomic, pipe and trans (multi has its own test below);
    # each failure would be printed shrunk, with its seed
    rc = main(["--seed", "0", "--n", "20", "--jobs", "2", "--no-shrink"])
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == "20 passed, 0 failed", out[-4000:]
    assert rc == 0


def test_descriptions_round_trip_and_are_deterministic():
    for seed in range(30):
        p = generate(seed)
        assert from_json(to_json(p)) == p
        assert generate(seed) == p
        assert "import tilelang.language as T" in to_source(p)


def test_oracle_catches_a_changed_program():
    """The reference follows the description: a changed expression changes the outputs."""
    p = next(generate(s) for s in range(50) if generate(s).family == "tile"
             and any(isinstance(x, Ew) and x.dst.startswith("O") for x in generate(s).body))
    ins = make_inputs(p)
    ref = run_reference(p, ins)
    body = tuple(Ew(s.dst, s.idx, ("bin", "+", s.expr, ("c", 1.0)), s.extents) if isinstance(s, Ew)
                 and s.dst.startswith("O") else s for s in p.body)
    ref2 = run_reference(p.with_(body=body), ins)
    name = next(s.dst for s in p.body if isinstance(s, Ew) and s.dst.startswith("O"))
    assert not torch.equal(ref[name], ref2[name])
    assert check(p, nvrtc=False).status == "pass"


def test_round_to_matches_torch_and_c_integer_wrap():
    x = torch.tensor([1.0 / 3, 300.7, -129.5], dtype=torch.float64)
    assert torch.equal(round_to(x, "float16"), x.half().double())
    assert round_to(x, "int8").tolist() == [0.0, 44.0, 127.0]


def test_bad_inputs_call_cases_are_clear():
    from tilelang.testing.fuzz.bad_inputs import CALL_CASES, run_case

    for case in CALL_CASES:
        assert run_case(("call", case, 0))["verdict"] == "clear", case


@pytest.mark.parametrize("case", ["copy_shape", "gemm_k", "reduce_shape", "nonconst_shape", "bad_dtype",
                                  "copy_slice_oob", "parallel_rank"])
def test_bad_programs_get_clear_errors(case):
    from tilelang.testing.fuzz.bad_inputs import run_case

    assert run_case(("prog", case, 0))["verdict"] == "clear"



def test_time_budget_stops_generating_and_prints_the_summary(capsys):
    rc = main(["--seed", "0", "--n", "50", "--jobs", "0", "--time-budget", "1e-9"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "0 passed, 0 failed" and "stopped by --time-budget after 0 of 50" in lines[-2]
    assert rc == 0


def test_family_option_draws_every_seed_from_that_family(capsys):
    rc = main(["--seed", "0", "--n", "2", "--jobs", "0", "--family", "attn", "--no-nvrtc", "--no-shrink",
               "--progress", "0"])
    out = capsys.readouterr().out
    assert "by family: attn:pass 2" in out and out.strip().splitlines()[-1] == "2 passed, 0 failed", out[-3000:]
    assert rc == 0 and generate(0, "attn").family == "attn" != generate(0).family


def test_no_thread_family_runs_thread_programs_with_one_thread():
    seed = next(s for s in range(100) if generate(s).family == "thread")
    p = generate(seed, single_thread=True)
    assert p.family == "thread" and p.threads == 1 and generate(seed).threads >= 32
    assert "T.get_thread_binding()" in to_source(p)
    assert check(p, nvrtc=False).status == "pass"


def test_pool_reports_crashes_and_hangs_and_keeps_going():
    from tilelang.testing.fuzz.pool import Pool

    args = ["a", "segv", "b", "abort", "hang", "exit", "c"]
    with Pool(2, threads=0) as p:
        got = dict(p.map_unordered("tilelang.testing.fuzz.pool:selftest_task", args, timeout=5))
    assert got["a"] == ("ok", "a") and got["b"] == ("ok", "b") and got["c"] == ("ok", "c")
    assert got["segv"] == ("crash", "SIGSEGV") and got["abort"] == ("crash", "SIGABRT")
    assert got["exit"] == ("crash", "exit code 3") and got["hang"][0] == "hang"


def test_pool_hard_deadline_cuts_running_tasks():
    import time

    from tilelang.testing.fuzz.pool import Pool

    with Pool(1, threads=0) as p:
        assert list(p.map_unordered("tilelang.testing.fuzz.pool:selftest_task", ["up"], 60)) == [("up", ("ok", "up"))]
        t0 = time.monotonic()
        got = list(p.map_unordered("tilelang.testing.fuzz.pool:selftest_task", ["hang", "x"], timeout=60,
                                   deadline=t0 + 1, hard_deadline=t0 + 2))
    assert [g[0] for g in got] == ["hang"] and got[0][1][0] == "cut" and time.monotonic() - t0 < 20


def test_a_crashing_program_is_a_failure_with_its_seed_and_the_run_goes_on(capsys):
    rc = main(["--seed", "0", "--n", "3", "--jobs", "1", "--no-nvrtc", "--no-shrink", "--inject-crash", "1:segv",
               "--progress", "0"])
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[-1] == "2 passed, 1 failed", out[-3000:]
    assert "FAIL seed 1 " in out and "died (SIGSEGV) on seed 1" in out and "@T.prim_func" in out
    assert rc == 1


def test_gpu_tier_dry_run_compiles_the_device_kernel(capsys):
    rc = main(["--seed", "0", "--n", "2", "--jobs", "0", "--device", "cuda", "--dry-run", "--no-shrink",
               "--nvrtc-archs", "sm_80", "--progress", "0"])
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == "2 passed, 0 failed", out[-3000:]
    assert "cuda-sm_90a" in out and "sm_80" in out  # both compiles ran (mean-seconds line)
    assert rc == 0


def _first_seeds(family, n, pred=lambda p: True):
    out, s = [], 0
    while len(out) < n:
        p = generate(s, family=family)
        if pred(p):
            out.append(p)
        s += 1
    return out


def test_multi_kernel_family_runs_against_float64():
    """Two or three kernels sharing T.alloc_global workspaces; the reference runs them in order."""
    progs = _first_seeds("multi", 3, lambda p: p.kernels and p.workspaces)
    assert any(len(p.kernels) == 2 for p in _first_seeds("multi", 12))  # the three-kernel chain occurs
    for p in progs:
        src = to_source(p)
        assert src.count("with T.Kernel(") == 1 + len(p.kernels) and "T.alloc_global(" in src
        assert from_json(to_json(p)) == p
        res = check(p, archs=("sm_80",))
        assert res.status == "pass", (p.seed, res.step, res.message[:2000])


def test_multi_kernel_reference_needs_the_first_kernel():
    """Without the kernel that writes the workspace the reference reads NaN: an invalid program."""
    p = _first_seeds("multi", 1, lambda p: p.kernels)[0]
    first_writes = p.kernels[0]
    q = p.with_(grid=first_writes.grid, threads=first_writes.threads, allocs=first_writes.allocs,
                body=first_writes.body, kernels=p.kernels[1:])
    assert check(q, nvrtc=False).status == "invalid"


@pytest.mark.parametrize("path", ["ws", "cp_async"])
def test_pipe_family_takes_its_intended_path_on_sm90a(path):
    from tilelang.testing.fuzz.spec import Pipelined

    p = _first_seeds("pipe", 1, lambda p: p.path == path)[0]
    loop = next(s for s in p.body if isinstance(s, Pipelined))
    assert 1 <= loop.stages <= 4
    res = check(p, archs=("sm_90a",))
    assert res.status == "pass", (p.seed, res.step, res.message[:2000])
    # the check notices a program whose lowering is not the one it names
    other = "cp_async" if path == "ws" else "ws"
    res = check(p.with_(path=other), archs=("sm_90a",))
    assert res.status == "fail" and res.step == "path-sm_90a", res


def test_trans_family_and_local_rows_run_against_float64():
    from tilelang.testing.fuzz.spec import Ew, Gemm, walk

    tiles = _first_seeds("trans", 1, lambda p: not any(isinstance(s, Gemm) for s in walk(p.body)))
    gemms = _first_seeds("trans", 1, lambda p: any(isinstance(s, Gemm) and (s.ta or s.tb) and isinstance(
        next(iter(walk(p.body[1].body))), Ew) for s in walk(p.body)))
    local = _first_seeds("tile", 1, lambda p: any(a.scope == "local" for a in p.allocs))
    for p in tiles + gemms + local:
        res = check(p, archs=("sm_90a",))
        assert res.status == "pass", (p.seed, p.family, res.step, res.message[:2000])


def test_family_mix_keeps_the_later_families_to_about_a_quarter():
    fams = [generate(s).family for s in range(400)]
    share = sum(f in ("multi", "pipe", "trans") for f in fams) / len(fams)
    assert 0.15 < share < 0.35 and all(f in fams for f in ("multi", "pipe", "trans"))


def test_attention_family_runs_against_float64():
    """Two chained gemms with an online softmax between them (families_attn.py): a ragged KV length
    (masked scores) and a whole one; CPU against float64, NVRTC for sm_80 and sm_90a, where the
    program is the warp-specialized two-gemm consumer (wgmma SS, then RS with P in registers)."""
    import tilelang

    from tilelang.testing.fuzz.runner import load_kernel
    from tilelang.testing.fuzz.spec import Ew, Pipelined

    def masked(p):
        return any(isinstance(s, Ew) for s in next(s for s in p.body if isinstance(s, Pipelined)).body[:3])

    progs = _first_seeds("attn", 1, masked) + _first_seeds("attn", 1, lambda p: not masked(p))
    for p in progs:
        assert from_json(to_json(p)) == p
        res = check(p)
        assert res.status == "pass", (p.seed, res.step, res.message[:2000])
    ws = _first_seeds("attn", 1, lambda p: p.threads == 256 and p.tensors[0].shape[1] >= 64)[0]  # N-major V: 64 columns
    src = tilelang.compile(load_kernel(ws)[0], target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl_full" in src and "gemm_ss_sm90<" in src and "gemm_rs_sm90<" in src, src[:3000]


def test_attention_family_leaves_the_other_seeds_alone():
    """Attention seeds are drawn apart from the family mix: every other seed's family is the mix's."""
    import random

    from tilelang.testing.fuzz.gen_base import FAMILIES
    from tilelang.testing.fuzz.generator import _WEIGHTS

    fams = [generate(s).family for s in range(400)]
    assert 0.02 < fams.count("attn") / 400 < 0.12
    assert 0.02 < fams.count("epi") / 400 < 0.12
    assert 0.01 < fams.count("branch") / 400 < 0.08
    for s, f in enumerate(fams):
        if f not in ("attn", "epi", "branch"):
            assert f == random.Random(s * 7919 + 1).choices(FAMILIES[:len(_WEIGHTS)], weights=_WEIGHTS)[0]


def test_gemm_epilogue_family_runs_against_float64():
    """families_epi.py: reductions of the accumulator along either dim, broadcasts over it, and a
    large tile at 384 / 512 threads, which sm_90a splits over 3 / 4 consumer warpgroups (wgmma)."""
    import re

    import tilelang

    from tilelang.testing.fuzz.runner import load_kernel
    from tilelang.testing.fuzz.spec import Reduce, walk

    def big(p):
        return p.threads in (384, 512) and p.arch_min == 80 and any(
            isinstance(s, Reduce) and s.dim == 0 for s in walk(p.body))

    cols = _first_seeds("epi", 1, lambda p: any(isinstance(s, Reduce) and s.dim == 0 and not s.clear
                                                 for s in walk(p.body)))
    wide = _first_seeds("epi", 1, big)
    for p in cols + wide:
        assert from_json(to_json(p)) == p
        res = check(p)
        assert res.status == "pass", (p.seed, res.step, res.message[:2000])
    src = tilelang.compile(load_kernel(wide[0])[0], target="cuda -arch=sm_90a").get_kernel_source()
    assert re.search(r"gemm_ss_sm90<", src), src[:3000]


def _copy_through_shared(n):
    @T.prim_func
    def k(A: T.Tensor((n, n), "float32"), B: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((n, n), "float32")
            T.copy(A, s)
            T.copy(s, B)
    return k


@pytest.mark.nvrtc
def test_a_build_over_the_block_shared_memory_is_a_failure():
    """A kernel that could not launch for its shared memory fails the NVRTC step (seed 30058's
    reduction scratch once took 287880 bytes on sm_90a and was only counted as host-refused)."""
    from tilelang.testing.fuzz.runner import smem_error

    small = tilelang.compile(_copy_through_shared(128), target="cuda -arch=sm_80")
    assert smem_error(small, 80) == ""
    big = tilelang.compile(_copy_through_shared(256), target="cuda -arch=sm_80")
    assert smem_error(big, 80) == "kernel k needs 262144 bytes of shared memory, over sm_80's 166912 a block"
    big90 = tilelang.compile(_copy_through_shared(256), target="cuda -arch=sm_90a")
    assert "over sm_90's 232448 a block" in smem_error(big90, 90)


def test_branch_family_runs_against_float64():
    """families.gen_branch: block-level ops in `if tx < s` / `if tx >= s` branches, among them a branch
    holding only a T.Parallel loop into its output (the shape that wrote nothing on CUDA before
    transform/thread_scopes.py counted T.Parallel loops); CPU against float64, NVRTC sm_80 and sm_90a."""
    from tilelang.testing.fuzz.spec import Copy, If

    def parallel_only(p):
        return any(isinstance(s, If) and not any(isinstance(x, Copy) for x in s.body) for s in p.body)

    progs = _first_seeds("branch", 2, parallel_only)
    assert progs
    for p in progs:
        assert from_json(to_json(p)) == p
        res = check(p)
        assert res.status == "pass", (p.seed, res.step, res.message[:2000])
