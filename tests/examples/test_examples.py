"""Every example's main() on the CPU target, at small ragged sizes (each checks itself vs float64 torch)."""
import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"tl_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CASES = [
    ("quickstart", dict(M=130, N=70, K=50, block_M=64, block_N=32, block_K=16)),
    ("quickstart", dict(M=64, N=64, K=64, block_M=32, block_N=32, block_K=32)),  # exact tiles
    ("elementwise_add", dict(M=37, N=300)),
    ("elementwise_add", dict(M=33, N=129, dtype="float16")),
    ("elementwise_add", dict(M=20, N=20, dtype="bfloat16")),
    ("softmax", dict(M=37, N=100)),
    ("softmax", dict(M=9, N=64, dtype="float32")),
    ("rmsnorm", dict(M=21, N=300, block_N=128)),
    ("rmsnorm", dict(M=8, N=256, block_N=64, dtype="float32")),
    ("flash_attention", dict(batch=2, heads=2, seq_len=100, dim=32, is_causal=False, block_M=32, block_N=32)),
    ("flash_attention", dict(batch=1, heads=3, seq_len=77, dim=16, is_causal=True, block_M=32, block_N=32)),
    ("flash_attention", dict(batch=1, heads=1, seq_len=50, dim=16, is_causal=True, block_M=16, block_N=32)),
    ("gemm_splitk", dict(M=70, N=50, K=300, block_M=32, block_N=32, block_K=32, split_k=3)),
    ("gemm_splitk", dict(M=64, N=64, K=256, block_M=32, block_N=32, block_K=32, split_k=4)),
    ("dequant_gemm_int4", dict(M=40, N=70, K=100, block_M=32, block_N=32, block_K=32)),
]


@pytest.mark.parametrize("name,sizes", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_example(name, sizes):
    assert load(name).main(target="cpu", **sizes)


def test_every_example_is_tested():
    tested = {n for n, _ in CASES}
    present = {p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_")}
    assert present <= tested, f"examples without a test: {sorted(present - tested)}"
