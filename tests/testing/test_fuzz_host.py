"""The fuzzer's --host-cuda execution: the sm_80/sm_90a CUDA source run on the host
(testing.host_cuda) against float64, refusals counted by reason and never as passes, the
multi-kernel workspaces launched in order, and a host failure shrunk and replayed as such."""
import re
import shutil

import pytest
import torch

from tilelang.testing.fuzz import check, generate, to_source
from tilelang.testing.fuzz import host_exec
from tilelang.testing.fuzz.cli import main

pytestmark = pytest.mark.skipif(not host_exec.available(), reason="host_cuda needs g++")


def _host_line(out: str) -> str:
    return next(ln for ln in out.splitlines() if ln.startswith("host-cuda: "))


def test_host_cuda_slice_runs_and_passes(capsys):
    # seeds 103-107: four tile / thread programs host_cuda runs (g++ costs ~2 s each), one gemm it refuses
    rc = main(["--seed", "103", "--n", "5", "--jobs", "2", "--no-shrink", "--host-cuda", "--progress", "0"])
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == "5 passed, 0 failed", out[-4000:]
    line = _host_line(out)
    ran, refused, failed = (int(x) for x in re.search(r"(\d+) ran .* (\d+) refused .* (\d+) failed", line).groups())
    assert ran >= 4 and failed == 0 and ran + refused == 5, line
    assert re.search(r"sm_80 \d+, sm_90a \d+", line), line
    assert rc == 0


def test_multi_kernel_host_run_uses_its_workspace_in_order():
    """Seed 80: two kernels sharing a T.alloc_global workspace, launched in order on the host;
    the outputs are the kernels' own (they start random, the reference differs from them), and
    the second kernel alone reads the NaN-poisoned workspace."""
    import tilelang

    from tilelang.testing.fuzz.reference import TORCH_DTYPES, run_reference
    from tilelang.testing.fuzz.runner import load_kernel, make_inputs

    p = generate(80)
    assert p.family == "multi" and p.kernels and p.workspaces
    res = check(p, host_cuda=True, nvrtc=False)
    assert res.status == "pass", (res.step, res.message[:2000])
    assert res.host["sm_80"] == "ran" and res.host["sm_90a"].startswith("ran"), res.host
    func, _ = load_kernel(p)
    ck = tilelang.compile(func, target="cuda -arch=sm_80")
    ins = make_inputs(p)
    ref = run_reference(p, ins)
    out = host_exec.run_on_host(ck, ins, [t.name for t in p.tensors])
    for name, r in ref.items():
        assert not torch.equal(ins[name].double(), r)
        torch.testing.assert_close(out[name].double(), r, rtol=1e-2, atol=1e-2)
    plan = ck.artifact.plan
    ws = [torch.full(tuple(int(d) for d in b.shape), float("nan"), dtype=TORCH_DTYPES[b.dtype.name])
          for b in plan.workspaces]
    args = {k: v.clone() for k, v in ins.items()}
    hp = host_exec.build(ck)
    try:
        hp.run(plan.kernels[-1].name, [args[t.name] for t in p.tensors] + ws)
    finally:
        shutil.rmtree(hp.dir, ignore_errors=True)
    assert any(bool(torch.isnan(args[name].double()).any()) for name in ref)


def test_tma_pipeline_runs_on_the_host_for_both_archs(capsys):
    """Seed 6 (pipe: TMA, mbarriers and wgmma on sm_90a): both sources run on the host."""
    main(["--seed", "6", "--n", "1", "--jobs", "0", "--host-cuda", "--progress", "0"])
    line = _host_line(capsys.readouterr().out)
    assert "1 ran (sm_80 1, sm_90a 1)" in line and "0 failed" in line, line


def test_refused_kernels_are_counted_by_reason_not_passed(capsys, monkeypatch):
    """Seed 6 with TMA put back on host_cuda's refused list: whatever host_cuda refuses is
    reported, never a pass."""
    from tilelang.testing import host_cuda

    monkeypatch.setattr(host_cuda, "UNSUPPORTED", host_cuda.UNSUPPORTED + ("tl::tma",))
    res = check(generate(6), host_cuda=True)
    assert res.status == "pass"  # the program stands on its CPU run and NVRTC compiles
    assert res.host["sm_90a"].startswith("refused: ") and "tma" in res.host["sm_90a"], res.host
    main(["--seed", "6", "--n", "1", "--jobs", "0", "--host-cuda", "--progress", "0"])
    line = _host_line(capsys.readouterr().out)
    # sm_80 runs on the host (mma.sync is emulated); the sm_90a source is refused, and the line says so
    assert "1 ran (sm_80 1)" in line and "sources refused: sm_90a 1" in line and "tma" in line, line


def test_host_mismatch_fails_shrinks_and_replays_on_the_host(monkeypatch, tmp_path, capsys):
    """A wrong host result is a failure at host-mismatch-<arch>; the shrinker keeps the host
    step on, and the printed file replays it (HOST_CUDA)."""
    real = host_exec.run_on_host

    def wrong(kernel, tensors, order, program=None):
        out = real(kernel, tensors, order, program)
        for t in out.values():
            t.view(-1)[0] += 1
        return out

    monkeypatch.setattr(host_exec, "run_on_host", wrong)
    p = generate(15)
    res = check(p, host_cuda=True, nvrtc=False)
    assert res.status == "fail" and res.step == "host-mismatch-sm_80", (res.step, res.message[:500])
    from tilelang.testing.fuzz.shrinker import shrink

    small, sres = shrink(p, res, budget=1, host_cuda=True)
    assert sres.step == "host-mismatch-sm_80"
    src = to_source(small, host_cuda=True)
    assert "HOST_CUDA = True" in src
    path = tmp_path / "replay.py"
    path.write_text(src)
    from tilelang.testing.fuzz import replay_file

    assert replay_file(str(path), device="cpu").step == "host-mismatch-sm_80"
    monkeypatch.setattr(host_exec, "run_on_host", real)
    assert replay_file(str(path), device="cpu").status == "pass"


def test_stream_k_partials_run_on_the_host():
    """Seed 6064 (a persistent gemm whose last wave takes stream-K on sm_90a: partial sums read
    back with __ldcg): its sm_90a source runs on the host, not refused, and matches."""
    res = check(generate(6064), host_cuda=True)
    assert res.status == "pass", res
    assert not res.host["sm_90a"].startswith("refused"), res.host


def test_attention_base2_softmax_with_exp2_poly_runs_on_the_host():
    """families_attn.py: the first seed whose attention program takes 2^-|.| under
    tl.enable_exp2_poly; its sm_80 (mma.sync) and sm_90a (wgmma) sources carry tl_exp2_poly, run on
    the host and match float64 and the CPU backend."""
    import tilelang

    from tilelang.testing.fuzz.runner import load_kernel

    p = next(q for q in (generate(s) for s in range(400))
             if q.family == "attn" and "tl.enable_exp2_poly" in q.pass_configs)
    assert "T.exp2(" in to_source(p)
    func, _ = load_kernel(p)
    for arch in ("sm_80", "sm_90a"):
        src = tilelang.compile(func, target=f"cuda -arch={arch}", pass_configs=dict(p.pass_configs)).get_kernel_source()
        assert "tl_exp2_poly(" in src, (arch, src[-3000:])
    res = check(p, host_cuda=True)
    assert res.status == "pass", (p.seed, res.step, res.message[:2000])
    assert res.host["sm_80"] == "ran" and res.host["sm_90a"].startswith("ran"), res.host

