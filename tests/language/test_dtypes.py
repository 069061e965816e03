"""Every dtype through T.copy (global -> shared -> global with a cast) against torch's own
conversion, bit for bit: ints, bool, float16/32/64, bfloat16, float8 e4m3fn/e5m2. CPU target."""
import os
import pytest
import torch

import tilelang
import tilelang.language as T

FLOATS = ["float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]
N = 64


def convert_kernel(src, dsts):
    """One kernel: X (src) -> shared (src) -> one global output per dst dtype."""
    names = [f"O{i}" for i in range(len(dsts))]
    src_params = f"X: T.Tensor(({N},), '{src}')"
    out_params = ", ".join(f"{n}: T.Tensor(({N},), '{d}')" for n, d in zip(names, dsts))
    copies = "\n".join(f"            T.copy(x_shared, {n})" for n in names)
    text = f'''
@T.prim_func
def convert({src_params}, {out_params}):
    with T.Kernel(1, threads=32) as bx:
            x_shared = T.alloc_shared(({N},), "{src}")
            T.copy(X, x_shared)
{copies}
'''
    # A real source file, because kernels are parsed from their source text.
    import importlib.util
    import tempfile

    path = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, prefix="tl_dtype_")
    path.write("import tilelang.language as T\n" + text)
    path.close()
    try:
        spec = importlib.util.spec_from_file_location(path.name[:-3].split("/")[-1], path.name)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return tilelang.compile(mod.convert, target="cpu")
    finally:
        os.unlink(path.name)  # parsed and compiled: the file is not needed again


def in_range_values(src):
    """Values every destination can hold (0..100, fractions when src is a float)."""
    g = torch.Generator().manual_seed(hash(src) % 1000)
    v = torch.randint(0, 101, (N,), generator=g).double()
    if src in FLOATS:
        v = v + torch.randint(0, 4, (N,), generator=g).double() / 4
    if src == "bool":
        v = (v > 50).double()
    return v.to(getattr(torch, src))


def wild_values(src):
    """Specials and rounding cases for float -> float conversions."""
    special = [float("inf"), float("-inf"), float("nan"), -0.0, 0.0, 1e-8, -3e-6, 6e-5, 1e-40, 448.0, 449.0,
               460.0, 500.0, 57344.0, 61440.0, 65504.0, 65520.0, 70000.0, -1e30, 1.0 + 2 ** -9, 1.0 + 2 ** -8,
               3.3e38, 0.1, -0.3]
    g = torch.Generator().manual_seed(7)
    rest = (torch.randn(N - len(special), generator=g, dtype=torch.float64) *
            torch.logspace(-6, 6, N - len(special), dtype=torch.float64))
    return torch.cat([torch.tensor(special, dtype=torch.float64), rest]).to(getattr(torch, src))


def check(out, ref):
    assert out.dtype == ref.dtype
    if ref.dtype == torch.bool or not ref.dtype.is_floating_point:
        assert torch.equal(out, ref), (out, ref)
        return
    o, r = out.double(), ref.double()
    same = (o == r) | (o.isnan() & r.isnan())
    assert bool(same.all()), f"mismatch at {same.logical_not().nonzero().flatten().tolist()}: {o[~same]} vs {r[~same]}"
    # signed zeros must match too
    assert torch.equal(torch.signbit(o[o == 0]), torch.signbit(r[o == 0]))


@pytest.mark.parametrize("src", FLOATS + INTS)
def test_copy_converts_like_torch(src):
    dsts = FLOATS + INTS
    kern = convert_kernel(src, dsts)
    x = in_range_values(src)
    outs = [torch.empty(N, dtype=getattr(torch, d)) for d in dsts]
    kern(x, *outs)
    for d, o in zip(dsts, outs):
        check(o, x.to(getattr(torch, d)))
    if src in FLOATS:
        fk = convert_kernel(src, FLOATS)
        x = wild_values(src)
        outs = [torch.empty(N, dtype=getattr(torch, d)) for d in FLOATS]
        fk(x, *outs)
        for d, o in zip(FLOATS, outs):
            # e5m2 past its largest finite value saturates, as CUDA's conversion (torch overflows to inf)
            wide = d == "float8_e5m2" and x.element_size() > 1
            check(o, (x.double().clamp(-57344, 57344) if wide else x).to(getattr(torch, d)))
