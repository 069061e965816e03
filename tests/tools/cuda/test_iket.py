"""tilelang.tools.cuda.iket: the recorded events follow the program's control flow (CPU backend),
the instrumented kernel compiles with NVRTC for sm_90a, and (GPU) records per thread."""
import json
import random
from collections import Counter, defaultdict

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.engine import callback
from tilelang.errors import DSLSyntaxError, DSLTypeError
from tilelang.tools.cuda import iket

THREADS = 64


def traced_kernel(n, threads=THREADS):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx, iket.range("block_total"):
            iket.mark("block_enter", payload=iket.payload(bx, dtype="int32"))
            for i in T.Parallel(threads):
                idx = bx * threads + i
                if idx < n:
                    iket.mark("load")
                    v = A[idx] * 2.0 + B[idx]
                    iket.mark("store_index", payload=iket.payload(idx, dtype="int32"))
                    C[idx] = v
                    iket.mark("stored", payload=iket.payload(v, dtype="float32"))
            with iket.range("tail"):
                iket.mark("block_exit", payload=iket.payload(bx - 5, dtype="int32"))

    return main


def _run(tmp_path, target, n, runtime_payloads=True):
    with iket.session(output_dir=tmp_path, runtime_payloads=runtime_payloads, disable_cache=False):
        kernel = tilelang.compile(traced_kernel(n), out_idx=-1, target=target)
        table = iket.event_table()
    return kernel, table


def _trace(tmp_path):
    files = iket.trace_files(directory=tmp_path)
    assert len(files) == 1
    return json.loads(files[0].read_text())


def test_cpu_events_follow_control_flow(tmp_path):
    n = random.randint(150, 300)
    blocks = -(-n // THREADS)
    kernel, table = _run(tmp_path, "cpu", n)
    assert [e["name"] for e in table] == ["block_total", "block_enter", "load", "store_index", "stored",
                                          "tail", "block_exit"]
    assert [e["event_id"] for e in table] == list(range(1, 8))
    a, b = torch.randn(n), torch.randn(n)
    c = kernel(a, b)
    torch.testing.assert_close(c.double(), a.double() * 2 + b.double(), rtol=1e-6, atol=1e-6)
    doc = _trace(tmp_path)
    assert doc["backend"] == "cpu" and len(doc["launches"]) == 1
    launch = doc["launches"][0]
    assert launch["grid"] == [blocks] and launch["dropped"] == 0
    counts = Counter(m["name"] for m in launch["markers"])
    assert counts == {"block_enter": blocks, "block_exit": blocks, "load": n, "store_index": n, "stored": n}
    by_name = defaultdict(list)
    for m in launch["markers"]:
        by_name[m["name"]].append(m)
    assert sorted(m["payload"] for m in by_name["store_index"]) == list(range(n))
    assert sorted(m["payload"] for m in by_name["block_enter"]) == list(range(blocks))
    assert sorted(m["payload"] for m in by_name["block_exit"]) == [b - 5 for b in range(blocks)]  # signed
    stored = {m["block"]: [] for m in by_name["stored"]}
    for m in by_name["stored"]:
        stored[m["block"]].append(m["payload"])
    for blk, vals in stored.items():
        want = c[blk * THREADS: (blk + 1) * THREADS].tolist()
        assert sorted(vals) == sorted(want)  # float32 bits, exactly what was stored
    assert "payload" not in by_name["load"][0]
    # per block: the outer range encloses everything; "tail" encloses block_exit; time order holds
    ranges = defaultdict(dict)
    for r in launch["ranges"]:
        assert r["name"] not in ranges[r["block"]]
        ranges[r["block"]][r["name"]] = r
        assert r["end_ns"] is not None and r["duration_ns"] == r["end_ns"] - r["start_ns"] >= 0
    assert sorted(ranges) == list(range(blocks))
    for m in launch["markers"]:
        outer = ranges[m["block"]]["block_total"]
        assert outer["start_ns"] <= m["t_ns"] <= outer["end_ns"]
        if m["name"] == "block_exit":
            tail = ranges[m["block"]]["tail"]
            assert tail["start_ns"] <= m["t_ns"] <= tail["end_ns"]
        else:
            assert m["t_ns"] <= ranges[m["block"]]["tail"]["start_ns"]
    chrome = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(chrome) == 2 * blocks


def test_cpu_every_launch_is_recorded_apart(tmp_path):
    kernel, _ = _run(tmp_path, "cpu", 100)
    kernel(torch.randn(100), torch.randn(100))
    kernel(torch.randn(100), torch.randn(100))
    launches = _trace(tmp_path)["launches"]
    assert [L["launch"] for L in launches] == [0, 1]
    assert [len(L["markers"]) for L in launches] == [2 * 2 + 3 * 100] * 2


def test_cpu_without_runtime_payloads_records_no_values(tmp_path):
    kernel, table = _run(tmp_path, "cpu", 70, runtime_payloads=False)
    assert all(e["runtime_payload_iket_id"] == 0 for e in table)
    assert {e["payload_iket_id"] for e in table if e["payload_type"] == "int32"} == {5}
    kernel(torch.randn(70), torch.randn(70))
    markers = _trace(tmp_path)["launches"][0]["markers"]
    assert len(markers) == 2 * 2 + 3 * 70 and not any("payload" in m for m in markers)


def test_outside_a_session_marks_do_nothing():
    kernel = tilelang.compile(traced_kernel(50), out_idx=-1, target="cpu")
    assert "tl_iket_record" not in kernel.get_kernel_source()
    a, b = torch.randn(50), torch.randn(50)
    torch.testing.assert_close(kernel(a, b), a * 2 + b)


def test_session_restores_state(tmp_path):
    before = callback.registered()
    with iket.session(output_dir=tmp_path / "x", runtime_payloads=True):
        assert iket.is_enabled() and iket.runtime_payloads_enabled()
        assert iket.output_dir() == (tmp_path / "x").absolute()
        assert "cuda" in callback.registered() and "c" in callback.registered()
    assert not iket.is_enabled() and not iket.runtime_payloads_enabled()
    assert callback.registered() == before
    assert "--clobber profile --postprocess all -- python x.py" in iket.profile_command("python x.py", directory="/t")


def test_misuse_raises():
    iket.reset()
    with pytest.raises(DSLTypeError, match="longer than 32"):
        @T.prim_func
        def f1(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=32):
                iket.mark("x" * 40)
    with pytest.raises(DSLSyntaxError, match="range_pop"):
        @T.prim_func
        def f2(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=32):
                iket.range_pop()
    with pytest.raises(DSLTypeError, match="int32, uint32 or float32"):
        iket.payload(1, dtype="float16")
    with pytest.raises(DSLTypeError, match="registered with payload type"):
        @T.prim_func
        def f3(A: T.Tensor((4,), T.int32)):
            with T.Kernel(1, threads=32):
                iket.mark("same")
                iket.mark("same", payload=A[0])


def test_sm90a_compile_instruments_the_kernel(tmp_path):
    kernel, _ = _run(tmp_path, "cuda -arch=sm_90a", 200)
    src = kernel.get_kernel_source()
    assert "__iket_meta_info" in src and "TL_IKET_EVENT(" in src and "TL_IKET_RANGE_END(1)" in src
    assert "TL_IKET_EVENT_PAYLOAD_F32(5, " in src
    ptx = kernel.artifact.ptx
    assert "%globaltimer" in ptx and "atom.global.add" in ptx and "tl_iket_records" in ptx
    tracer = kernel.artifact.tracer
    assert tracer is not None and sorted(tracer.events) == list(range(1, 8))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_records_every_thread(tmp_path):
    n = 333
    blocks = -(-n // THREADS)
    kernel, _ = _run(tmp_path, "cuda", n)
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = kernel(a, b)
    torch.testing.assert_close(c, a * 2 + b)
    launch = _trace(tmp_path)["launches"][0]
    counts = Counter(m["name"] for m in launch["markers"])
    per_thread = blocks * THREADS  # kernel-level statements run on every thread on CUDA
    assert counts == {"block_enter": per_thread, "block_exit": per_thread, "load": n, "store_index": n, "stored": n}
    assert sorted(m["payload"] for m in launch["markers"] if m["name"] == "store_index") == list(range(n))
    assert all(m["payload"] == m["block"] for m in launch["markers"] if m["name"] == "block_enter")
    for m in launch["markers"]:
        if m["name"] == "store_index":
            assert m["payload"] == m["block"] * THREADS + m["thread"]
    ranges = [r for r in launch["ranges"] if r["name"] == "block_total"]
    assert len(ranges) == per_thread and all(r["end_ns"] >= r["start_ns"] for r in ranges)
