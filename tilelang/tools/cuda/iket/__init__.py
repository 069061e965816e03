"""In-kernel event tracing ("IKET"): markers and ranges written in a TileLang kernel, recorded
per thread with the GPU's globaltimer (the CPU backend: the host clock) at every launch.

    from tilelang.tools.cuda import iket

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx, iket.range("block"):
            for i in T.Parallel(128):
                iket.mark("store", payload=iket.payload(bx * 128 + i, dtype="int32"))
                C[bx * 128 + i] = A[bx * 128 + i]

    with iket.session(output_dir="/tmp/traces", runtime_payloads=True):
        kernel = tilelang.compile(main, out_idx=-1)
    kernel(a)
    iket.trace_files()     # [/tmp/traces/iket_<kernel>_<pid>_<n>.trace.json]: launches, markers,
                           # ranges, and Chrome/Perfetto traceEvents (format: runtime.py)

frontend.py: the kernel-side calls; codegen.py: the record buffer and macros put into the
source; session.py: enabling; runtime.py: reading records back, trace files; cli.py: paths.
"""
from .cli import output_dir, output_path, profile_command, set_output_dir, trace_files
from .frontend import PayloadSpec, event_table, mark, payload, range, range_end, range_pop, range_push, range_start, reset
from .session import (disable, disable_runtime_payloads, enable, enable_runtime_payloads, is_enabled,
                      runtime_payloads_enabled, session)

__all__ = ["PayloadSpec", "disable", "disable_runtime_payloads", "enable", "enable_runtime_payloads", "event_table",
           "is_enabled", "mark", "output_dir", "output_path", "payload", "profile_command", "range", "range_end",
           "range_pop", "range_push", "range_start", "reset", "runtime_payloads_enabled", "session",
           "set_output_dir", "trace_files"]
