"""scripts/sanitize.py without a GPU: report classification, and the commands a run would issue."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import sanitize  # noqa: E402

OURS = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at tl_sanitize_canary+0x70
=========     by thread (0,0,0) in block (0,0,0)
=========
========= Error: process didn't terminate successfully
========= ERROR SUMMARY: 1 error
"""
LIBRARY = """========= Error: Race reported between Write access at nvjet_sm90_tst_128x256_64x4+0x1a0
=========     and Read access at nvjet_sm90_tst_128x256_64x4+0x2b0 [12 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def test_classify_ours_and_library():
    assert sanitize.count_errors(OURS) == 1
    k = sanitize.classify(OURS)
    assert (k["ours"], k["library"]) == (1, 0)
    k = sanitize.classify(LIBRARY)
    assert (k["ours"], k["library"]) == (0, 1)


def test_exclusion_spares_our_kernel_names():
    import re
    rx = re.compile(sanitize.LIBRARY_EXCLUDE)
    for ours in ("main_kernel", "tl_sanitize_canary", "gemm", "flash_fwd", "tl_kernel_main"):
        assert not rx.search(ours), ours
    for lib in ("_ZN2at6native18elementwise_kernelILi128ELi2EEEviT1_", "nvjet_sm90_tst_128x256",
                "sm90_xmma_gemm_f16f16", "void at::native::vectorized_elementwise_kernel<4>"):
        assert rx.search(lib), lib


def test_dry_run_commands(tmp_path):
    rc = sanitize.main([str(tmp_path), "--dry-run", "--peer-folders", "none", "--only", "canary,elementwise"])
    assert rc == 0
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert "canary_racecheck.racecheck.log" in logs and "example_elementwise_add.memcheck.log" in logs
    cmd = (tmp_path / "logs" / "canary_synccheck.synccheck.log").read_text()
    assert "--kernel-name-exclude" in cmd and "sanitize_canary.py synccheck" in cmd
    # racecheck instruments every kernel: excluding some made it fail with internal errors
    assert "--kernel-name-exclude" not in (tmp_path / "logs" / "canary_racecheck.racecheck.log").read_text()
    rows = json.loads((tmp_path / "sanitize.json").read_text())
    assert {r["status"] for r in rows} == {"dry-run"}
    sanitize.main([str(tmp_path / "lib"), "--dry-run", "--peer-folders", "none", "--only", "elementwise",
                   "--check-library", "--no-canary"])
    cmd = (tmp_path / "lib" / "logs" / "example_elementwise_add.memcheck.log").read_text()
    assert "--kernel-name-exclude" not in cmd


def test_a_timeout_kills_the_program_under_the_tool(tmp_path, monkeypatch):
    """The stand-in 'sanitizer' starts a grandchild that would outlive it; a timeout ends both."""
    fake = tmp_path / "fake-sanitizer"
    marker = tmp_path / "grandchild.pid"
    fake.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {marker}\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sanitize, "SAN", str(fake))
    (tmp_path / "logs").mkdir()
    import os
    import time
    t0 = time.monotonic()
    row = sanitize.run_one(("prog", ["true"], str(tmp_path), "memcheck"), tmp_path, tmp_path, 2.0,
                           time.monotonic() + 60, False, dict(os.environ), False)
    assert row["status"] == "timeout"
    assert time.monotonic() - t0 < 30  # not held until the grandchild's sleep ends
    pid = int(marker.read_text())
    time.sleep(0.2)
    alive = True
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            alive = f.read().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        alive = False
    assert not alive
