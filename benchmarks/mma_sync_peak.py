"""Ceiling for the mma.sync path: register-only m16n8k16 f16->f32 throughput (8 independent chains per
warp, no memory traffic), for judging the portable GEMM path against what the tensor cores can do
with mma.sync at all. Uses cupy (present on the GPU machine; not a project dependency).

    python benchmarks/mma_sync_peak.py
"""
import cupy as cp
src = r'''
extern "C" __global__ void peak(float* out, int iters) {
  unsigned a[4] = {threadIdx.x, threadIdx.x + 1, threadIdx.x + 2, threadIdx.x + 3};
  unsigned b[2] = {threadIdx.x * 3u, threadIdx.x * 5u};
  float c[8][4] = {};
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                   : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  }
  float s = 0; for (int j = 0; j < 8; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (s == 12345.f) out[0] = s;
}'''
k = cp.RawKernel(src, "peak", options=("-arch=sm_90a",))
out = cp.zeros(1, cp.float32)
for threads, blocks_per_sm in ((256, 1), (256, 2), (128, 4), (512, 2)):
    blocks = 132 * blocks_per_sm
    iters = 4096
    k((blocks,), (threads,), (out, cp.int32(iters)))
    s, e = cp.cuda.Event(), cp.cuda.Event()
    best = 0
    for _ in range(5):
        s.record(); k((blocks,), (threads,), (out, cp.int32(iters))); e.record(); e.synchronize()
        ms = cp.cuda.get_elapsed_time(s, e)
        tf = blocks * threads / 32 * iters * 8 * 2 * 16 * 8 * 16 / (ms * 1e-3) / 1e12
        best = max(best, tf)
    print(f"mma.sync peak threads={threads} blocks/SM={blocks_per_sm}: {best:.0f} TFLOP/s")
