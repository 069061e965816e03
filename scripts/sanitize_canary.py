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


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in MODES:
        print(f"usage: sanitize_canary.py {'|'.join(MODES)}", file=sys.stderr)
        return 2
    import torch

    from tilelang.backend.cuda import driver, nvrtc

    arch = driver.arch_of(0)
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
