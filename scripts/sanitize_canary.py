"""A kernel with one planted bug per compute-sanitizer tool, so a sanitizer run can show that it
would have seen a bug in our kernels (issue 12, item 4).

    python scripts/sanitize_canary.py memcheck|racecheck|synccheck

The kernel is C++ compiled with our NVRTC wrapper and launched through our driver, exactly as a
TileLang kernel is: an `extern "C"` symbol (unmangled, like every kernel we emit) in a cubin loaded
with cuModuleLoadData. `scripts/sanitize.py` runs each canary under its own tool with the same
kernel filters as the real programs; a canary the tool does not flag means the run checked nothing
and the whole run fails.

- memcheck: every thread writes through a null pointer (an invalid __global__ write).
- racecheck: 64 threads write a shared array and read a neighbour warp's slot with no barrier
  between (a read-after-write hazard across warps).
- synccheck: every lane of a warp calls __syncwarp with a mask that names only half of them.
`control` runs a correctly synchronised kernel (see CONTROL) to tell the tool's false reports apart.
Without a sanitizer the racecheck and synccheck canaries run to completion (the bugs are silent
ones); the memcheck canary fails with an illegal address, which is the point.
"""
from __future__ import annotations

import sys

SOURCE = r"""
extern "C" __global__ void tl_sanitize_canary(int *out, int *null_ptr, int mode) {
    __shared__ int s[64];
    int t = threadIdx.x;
    if (mode == 0) {                      // memcheck: invalid global write
        null_ptr[t] = t;
    } else if (mode == 1) {               // racecheck: no barrier between the write and the read
        s[t] = t * 3 + 1;
        out[t] = s[(t + 32) & 63];
    } else {                              // synccheck: lanes 16..31 are not in the mask they pass
        s[t] = t;
        __syncwarp(0x0000ffffu);
        out[t] = s[t ^ 1];
    }
}
"""
MODES = {"memcheck": 0, "racecheck": 1, "synccheck": 2}

# A control, not a canary: correctly synchronised, so any report is the tool's. 1024 threads; the
# first 256 run an inclusive suffix scan over a shared histogram ordered only by `bar.sync 3, 256`
# (the others wait at __syncthreads), then read their neighbour's slot: the shape of the peer
# example deepseek_v32/topk_selector, whose racecheck run reported hazards at that read.
CONTROL = r"""
extern "C" __global__ void tl_sanitize_control(int *out) {
    __shared__ int h[257];
    __shared__ int found;
    int t = threadIdx.x;
    if (t < 257) h[t] = t < 256 ? 1 : 0;
    if (t == 0) found = -1;
    __syncthreads();
    if (t < 256) {
        int v = 0;
        for (int i = 0; i < 8; ++i) {
            int off = 1 << i;
            asm volatile("bar.sync 3, 256;" ::: "memory");
            if (t < 256 - off) v = h[t] + h[t + off];
            asm volatile("bar.sync 3, 256;" ::: "memory");
            if (t < 256 - off) h[t] = v;
        }
        asm volatile("bar.sync 3, 256;" ::: "memory");
        if (h[t] >= 100 && h[t + 1] < 100) found = t;
    }
    __syncthreads();
    out[t] = found + h[0];
}
"""


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in (*MODES, "control"):
        print(f"usage: sanitize_canary.py {'|'.join(MODES)}|control", file=sys.stderr)
        return 2
    import torch

    from tilelang.backend.cuda import driver, nvrtc

    arch = driver.arch_of(0)
    if argv[0] == "control":
        fn = driver.load_kernel(nvrtc.compile_cuda(CONTROL, arch, name="sanitize_control.cu").cubin,
                                "tl_sanitize_control", ("ptr",))
        out = torch.zeros(1024, dtype=torch.int32, device="cuda")
        fn.launch((1, 1, 1), (1024, 1, 1), 0, (out,), stream=torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        want = 156 + 256  # the suffix count first reaches 100 at bin 156; h[0] is then 256
        got = set(out.tolist())
        print(f"control ran; out = {sorted(got)} (want [{want}])")
        return 0 if got == {want} else 1
    compiled = nvrtc.compile_cuda(SOURCE, arch, name="sanitize_canary.cu")
    fn = driver.load_kernel(compiled.cubin, "tl_sanitize_canary", ("ptr", "ptr", "i32"))
    out = torch.zeros(64, dtype=torch.int32, device="cuda")
    fn.launch((1, 1, 1), (64, 1, 1), 0, (out, None, MODES[argv[0]]),
              stream=torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    print(f"canary {argv[0]} ran; out[0..3] = {out[:4].tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
