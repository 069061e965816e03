"""CUDA-specific building blocks for expert kernels: `tilelang.cuda.intrinsics` (tensor-core
lane maps and the per-warp mma.sync emitter, 2:4 sparse metadata layout)."""
