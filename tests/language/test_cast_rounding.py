"""T.cast(x, dtype, round="rz" / "rp" / "rm"): float32 -> float16 / bfloat16, float64 -> float32 and
float32 / float16 -> float8_e4m3fn / float8_e5m2 (sat=True and False) rounded toward zero, +inf and
-inf, on the CPU backend and (compiled by NVRTC for sm_80 / sm_90a, run on the host emulator) the
CUDA backend. The 16/32-bit reference works in float64 from the format's definition: the unit in
the last place at x, floor / ceil of x in those units, then the overflow rule (past the largest
finite value only a rounding away from zero reaches inf). The float8 one searches the 256 codes
for the nearest value on the asked side. Results are compared bit for bit, signed zeros included."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang import dtypes as dt
from tilelang.errors import DSLTypeError
from tilelang.ir import expr as E

N = 512
# target -> (mantissa bits, smallest normal exponent, largest finite value, torch dtype, bits view)
FMT = {"float16": (10, -14, 65504.0, torch.float16, torch.int16),
       "bfloat16": (7, -126, float.fromhex("0x1.fep127"), torch.bfloat16, torch.int16),
       "float32": (23, -126, float.fromhex("0x1.fffffep127"), torch.float32, torch.int32)}
FP8 = {"float8_e4m3fn": (3, -6, 448.0, torch.float8_e4m3fn, torch.int8),
       "float8_e5m2": (2, -14, 57344.0, torch.float8_e5m2, torch.int8)}
FMT.update(FP8)
SRC = {"float16": "float32", "bfloat16": "float32", "float32": "float64", "float8_e4m3fn": "float32",
       "float8_e5m2": "float32"}


def _reference(x: np.ndarray, dst: str, mode: str) -> torch.Tensor:
    """x (float64 values) rounded to dst in the direction `mode`, as a tensor of dst."""
    p, emin, big, tdt, _ = FMT[dst]
    out = np.empty_like(x)
    for i, v in enumerate(x):
        if np.isnan(v) or np.isinf(v) or v == 0:
            out[i] = v
            continue
        e = max(int(np.frexp(abs(v))[1]) - 1, emin)  # |v| in [2^e, 2^(e+1)), or a subnormal
        ulp = 2.0 ** (e - p)
        with np.errstate(over="ignore"):  # (near DBL_MAX a bound may be 2^1024: inf, past `big` anyway)
            lo, hi = np.floor(v / ulp) * ulp, np.ceil(v / ulp) * ulp  # exact: scaling by powers of two
        r = {"rz": lo if v > 0 else hi, "rp": hi, "rm": lo}[mode]
        if abs(r) > big:  # past the largest finite value: inf away from zero, else the largest finite
            r = np.copysign(np.inf if abs(r) >= abs(v) else big, v)
        out[i] = r if r != 0 else np.copysign(0.0, v)
    return torch.from_numpy(out).to(tdt)


def _inputs(dst: str, seed: int) -> torch.Tensor:
    """Random values at every scale, values exactly halfway between two dst neighbours and one
    source ulp either side of them, exact dst values, subnormals, overflow and specials."""
    p, emin, big, tdt, _ = FMT[dst]
    src = getattr(torch, SRC[dst])
    g = torch.Generator().manual_seed(seed)
    n = N // 8
    rnd = torch.randn(n, generator=g, dtype=torch.float64) * torch.exp2(
        torch.randint(emin - p - 4, 16 if dst != "float32" else 130, (n,), generator=g).double())
    exact = rnd.to(tdt).double()  # dst values
    e = torch.floor(torch.log2(exact.abs().clamp_min(2.0 ** emin)))
    half = torch.exp2(e - p - 1)  # half an ulp of dst at each exact value
    ties = (exact + half).to(src)  # exact in src (which has more than p + 1 bits)
    near = torch.cat([torch.nextafter(ties, torch.full_like(ties, np.inf)),
                      torch.nextafter(ties, torch.full_like(ties, -np.inf))])
    special = torch.tensor([0.0, -0.0, np.inf, -np.inf, np.nan, big, -big, big * 1.0001, -big * 1.0001,
                            big + 2.0 ** (np.log2(big) - p - 1) if dst != "float32" else 3.5e38, 1e300 if dst == "float32"
                            else 3e38, 2.0 ** (emin - p), -(2.0 ** (emin - p)), 2.0 ** (emin - p - 1),
                            -(2.0 ** (emin - p - 3)), 1.5 * 2.0 ** (emin - p), 2.0 ** emin * 0.75, 1.0, -1.0])
    x = torch.cat([rnd.to(src), exact.to(src), ties, near, special.to(src)])
    x = torch.cat([x, torch.randn(N - len(x), generator=g, dtype=torch.float64).to(src)])
    return x[torch.randperm(N, generator=g)]


def kernel(dst: str):
    src = SRC[dst]
    back = "float64" if dst == "float32" else "float32"

    @T.prim_func
    def k(X: T.Tensor((N,), src), Y: T.Tensor((3, N), dst), V: T.Tensor((3, N), back)):
        with T.Kernel(4, threads=64) as bx:
            for i in T.Parallel(N // 4):
                g = bx * (N // 4) + i
                Y[0, g] = T.cast(X[g], dst, round="rz")
                Y[1, g] = T.cast(X[g], dst, round="rp")
                Y[2, g] = T.Cast(dst, X[g], annotations={"round": "rm"})
                # the value as an operand (not a store): converted to a wider type, exactly
                V[0, g] = T.cast(T.cast(X[g], dst, round="rz"), back)
                V[1, g] = T.cast(T.cast(X[g], dst, round="rp"), back) * 1.0
                V[2, g] = T.cast(T.cast(X[g], dst, round="rm"), back)
    return k


def _args(dst, seed):
    x = _inputs(dst, seed)
    tdt = FMT[dst][3]
    back = torch.float64 if dst == "float32" else torch.float32
    return [x, torch.full((3, N), 3.0, dtype=tdt), torch.full((3, N), 5.0, dtype=back)]


def _check(dst, args):
    x, y, v = args
    view = FMT[dst][4]
    for r, mode in enumerate(("rz", "rp", "rm")):
        want = _reference(x.double().numpy(), dst, mode)
        nan = torch.isnan(want)
        assert torch.isnan(y[r][nan]).all() and torch.isnan(v[r][nan]).all(), mode
        bad = (y[r].view(view) != want.view(view)) & ~nan
        assert not bad.any(), (mode, x[bad][:8].tolist(), y[r][bad][:8].tolist(), want[bad][:8].tolist())
        wv = want.to(v.dtype)
        bad = (v[r].view(torch.int64 if v.dtype == torch.float64 else torch.int32)
               != wv.view(torch.int64 if v.dtype == torch.float64 else torch.int32)) & ~nan
        assert not bad.any(), (mode, "value", x[bad][:8].tolist(), v[r][bad][:8].tolist())


def _seed():
    return int(torch.randint(0, 2**31, (1,)).item())


@pytest.mark.parametrize("dst", ["float16", "bfloat16", "float32"])
def test_directed_rounding_cpu(dst):
    args = _args(dst, _seed())
    tilelang.compile(kernel(dst), target="cpu")(*args)
    _check(dst, args)


def test_reference_against_nextafter():
    """The reference's float16 results are the nearest value or its numpy nextafter neighbour,
    on the side the mode asks for."""
    x = _inputs("float16", _seed()).double().numpy()
    x = x[np.isfinite(x) & (np.abs(x) < 65504)]
    rn = x.astype(np.float16)
    up = np.where(rn.astype(np.float64) < x, np.nextafter(rn, np.float16(np.inf)), rn)
    down = np.where(rn.astype(np.float64) > x, np.nextafter(rn, np.float16(-np.inf)), rn)
    assert np.array_equal(_reference(x, "float16", "rp").numpy(), up)
    assert np.array_equal(_reference(x, "float16", "rm").numpy(), down)
    assert np.array_equal(np.abs(_reference(x, "float16", "rz").numpy()), np.where(x > 0, down, -up))


def _fp8_reference(x: torch.Tensor, dst: str, mode: str, sat: bool) -> torch.Tensor:
    """x (float64) rounded to a float8 dst in the direction `mode`, by search among all 256 codes:
    rp the least value >= x, rm the greatest <= x; past them +-max (sat) or inf / NaN."""
    tdt = FP8[dst][3]
    vals = torch.arange(256, dtype=torch.int16).to(torch.uint8).view(tdt).double()
    vals = torch.unique(vals[torch.isfinite(vals)])  # sorted; -0.0 and 0.0 are one
    big = vals[-1].item()
    over = big if sat else (np.inf if dst == "float8_e5m2" else np.nan)
    out = []
    for v in x.tolist():
        if np.isnan(v):
            out.append(np.nan)
            continue
        ge, le = vals[vals >= v], vals[vals <= v]
        up = ge[0].item() if len(ge) else over
        down = le[-1].item() if len(le) else -over
        r = {"rz": down if v > 0 else up, "rp": up, "rm": down}[mode]
        if np.isinf(v):
            r = np.copysign(over, v)
        out.append(np.copysign(0.0, v) if r == 0 else r)
    return torch.tensor(out, dtype=torch.float64).to(tdt)


def kernel_fp8(dst: str):
    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), H: T.Tensor((N,), "float16"), Y: T.Tensor((3, N), dst),
          Z: T.Tensor((3, N), dst), V: T.Tensor((4, N), "float32")):
        with T.Kernel(4, threads=64) as bx:
            for i in T.Parallel(N // 4):
                g = bx * (N // 4) + i
                Y[0, g] = T.cast(X[g], dst, round="rz")
                Y[1, g] = T.cast(X[g], dst, round="rp")
                Y[2, g] = T.cast(X[g], dst, round="rm")
                Z[0, g] = T.cast(X[g], dst, round="rz", sat=False)
                Z[1, g] = T.cast(X[g], dst, round="rp", sat=False)
                Z[2, g] = T.Cast(dst, X[g], annotations={"round": "rm", "sat": False})
                V[0, g] = T.cast(T.cast(X[g], dst, round="rz", sat=False), "float32")
                V[1, g] = T.cast(X[g], dst, round="rp", sat=False) * 1.0
                V[2, g] = T.cast(T.cast(X[g], dst, round="rm"), "float32")
                V[3, g] = T.cast(T.cast(H[g], dst, round="rp"), "float32")  # from a float16 value
    return k


def _fp8_args(dst, seed):
    x = _inputs(dst, seed).float()
    y, z = (torch.full((3, N), 3.0).to(FP8[dst][3]) for _ in range(2))
    return [x, x.half(), y, z, torch.full((4, N), 5.0)]


def _fp8_check(dst, args):
    x, h, y, z, v = args
    rows = [(y[0], "rz", True), (y[1], "rp", True), (y[2], "rm", True), (z[0], "rz", False), (z[1], "rp", False),
            (z[2], "rm", False), (v[0], "rz", False), (v[1], "rp", False), (v[2], "rm", True)]
    for r, (got, mode, sat) in enumerate(rows):
        want = _fp8_reference(x.double(), dst, mode, sat)
        if got.dtype == torch.float32:
            want = want.float()
        nan = torch.isnan(want.double())
        assert torch.isnan(got.double()[nan]).all(), (r, mode)
        view = torch.int8 if got.dtype != torch.float32 else torch.int32
        bad = (got.view(view) != want.view(view)) & ~nan
        assert not bad.any(), (r, mode, sat, x[bad][:8].tolist(), got[bad][:8].double().tolist(),
                               want[bad][:8].double().tolist())
    want = _fp8_reference(h.double(), dst, "rp", True).float()
    nan = torch.isnan(want)
    assert torch.isnan(v[3][nan]).all() and torch.equal(v[3][~nan].view(torch.int32), want[~nan].view(torch.int32))


@pytest.mark.parametrize("dst", list(FP8))
def test_directed_rounding_fp8_cpu(dst):
    args = _fp8_args(dst, _seed())
    tilelang.compile(kernel_fp8(dst), target="cpu")(*args)
    _fp8_check(dst, args)


def _needs_nvrtc():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dst", ["float16", "bfloat16", "float32"])
def test_directed_rounding_cuda(arch, dst):
    """NVRTC compiles it with CUDA's conversion intrinsics; the host emulator runs it bit for bit."""
    _needs_nvrtc()
    jk = tilelang.compile(kernel(dst), target=f"cuda -arch={arch}")
    src = jk.get_kernel_source()
    stem = {"float16": "__float2half", "bfloat16": "__float2bfloat16", "float32": "__double2float"}[dst]
    missing = [f"{stem}_{m}(" for m in ("rz", "ru", "rd") if f"{stem}_{m}(" not in src]
    assert not missing, (missing, src)
    args = _args(dst, _seed())
    _run_on_host(jk, args)
    _check(dst, args)


def _run_on_host(jk, args):
    """One launch of kernel `jk` on the host emulator (skipped without g++)."""
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    host.HostProgram({"k": jk}).run("k", args)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dst", list(FP8))
def test_directed_rounding_fp8_cuda(arch, dst):
    """NVRTC compiles the float8 helper; the host emulator runs it bit for bit."""
    _needs_nvrtc()
    jk = tilelang.compile(kernel_fp8(dst), target=f"cuda -arch={arch}")
    assert "tl_f32_to_fp8_dir(" in jk.get_kernel_source()
    args = _fp8_args(dst, _seed())
    _run_on_host(jk, args)
    _fp8_check(dst, args)


def test_unsupported_pairs_name_the_pair():
    x32, x64, h = E.Var("x", dt.float32), E.Var("d", dt.float64), E.Var("h", dt.float16)
    for v, d in ((x64, "float8_e4m3fn"), (x64, "float16"), (h, "bfloat16"), (E.Var("i", dt.int32), "float16"),
                 (x32, "float4_e2m1fn"), (x32, "float8_e8m0fnu"), (x32, "float32")):
        with pytest.raises(DSLTypeError, match=f"{v.dtype.name} -> {d} is not supported"):
            T.cast(v, d, round="rz")
    with pytest.raises(ValueError, match="Invalid round"):
        T.cast(x32, "float16", round="ru")  # the public spelling is "rp"
