"""C text of the elementwise math calls of language/math.py and math_ieee.py, per target.

The CPU (C) and CUDA printers share this: libm names exist on both (`acosf`, `hypotf`, ...),
and the helpers without one spelling (tl_clamp_f32, tl_popc32, tl_ffs32, tl_fns, tl_f32_to_fp8e4m3_nosat ...)
have one definition per target header with the same results (include/cpu/tl_math.h,
include/tl/math_ops.h). Only the rounding-mode arithmetic prints differently: CUDA's own
intrinsics there, FPU-mode helpers on the CPU.

    Call(ieee_fadd_rd, a, b): float32   ->  cuda: __fadd_rd(a, b)
                                            c:    tl_ieee_add_f32(a, b, 3)
"""
from __future__ import annotations

from ..ir import expr as E
from .c_expr import EMULATED, storage_type

# op -> libm name (f-suffixed below float64); the operands are already of the call's dtype
_LIBM = {n: n for n in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh", "tan", "atan2",
                        "hypot", "copysign", "nextafter", "nearbyint", "fmod", "fma")}
_LIBM["round_away"] = "round"

_RM_INDEX = {"rn": 0, "rz": 1, "ru": 2, "rd": 3}
# ieee op -> (CUDA float32 name, CUDA float64 name, CPU helper stem, C text of the rn form)
_IEEE = {"fadd": ("__fadd", "__dadd", "add", "({0} + {1})"), "fsub": ("__fsub", "__dsub", "sub", "({0} - {1})"),
         "fmul": ("__fmul", "__dmul", "mul", "({0} * {1})"), "fdiv": ("__fdiv", "__ddiv", "div", "({0} / {1})"),
         "fmaf": ("__fmaf", "__fma", "fma", "fma{f}({0}, {1}, {2})"), "frcp": ("__frcp", "__drcp", "rcp", "({one} / {0})"),
         "fsqrt": ("__fsqrt", "__dsqrt", "sqrt", "sqrt{f}({0})")}


def print_math(cx, e, args: list) -> str | None:
    """C text for `e` (a Call) with printed `args`, or None when `e.op` is none of these."""
    op, d = e.op, e.dtype
    if op in _LIBM:
        return cx.math(d, _LIBM[op], args)
    if op == "ldexp":
        n = f"(int)({args[1]})"
        if d.name == "float64":
            return f"ldexp((double)({args[0]}), {n})"
        return cx.from_float(d, f"ldexpf((float)({args[0]}), {n})")
    if op in ("isnan", "isinf", "isfinite"):
        v = args[0] if e.args[0].dtype.name == "float64" else f"(float)({args[0]})"
        return f"({op}({v}) != 0)"
    if op in ("popcount", "clz"):
        return _bits(op, e.args[0].dtype, args[0], d)
    if op == "ffs":
        src = e.args[0].dtype
        return f"tl_ffs64((uint64_t)({args[0]}))" if src.bits == 64 else f"tl_ffs32((uint32_t)({args[0]}))"
    if op == "fns":
        return f"tl_fns((uint32_t)({args[0]}), (uint32_t)({args[1]}), (int32_t)({args[2]}))"
    if op == "clamp":
        if d.name == "float64":
            return f"tl_clamp_f64({', '.join(args)})"
        return cx.from_float(d, f"tl_clamp_f32({', '.join(f'(float)({a})' for a in args)})")
    if op in ("cast_rz", "cast_rp", "cast_rm"):
        return _directed_cast(cx, e, args[0])
    if op == "cast_nosat":
        k = EMULATED[d.name]
        return f"tl_{k}_to_f32({nosat_bits(d, args[0])})"
    if op == "fmul":
        return _fmul(cx, d, args)
    if op == "fast_rcp":
        if d.name == "float64":
            return f"(1.0 / (double)({args[0]}))"
        text = f"tl_fast_rcp((float)({args[0]}))" if cx.target == "cuda" else f"(1.0f / (float)({args[0]}))"
        return cx.from_float(d, text)
    if op.startswith("ieee_"):
        return _ieee(cx, op, d, args)
    return None


# T.cast(x, d, round=): the public mode -> CUDA's intrinsic suffix, the CPU helpers' mode argument
_DIRECTED = {"rz": ("rz", 1), "rp": ("ru", 2), "rm": ("rd", 3)}


# float8 target -> (mantissa bits, smallest normal exponent, largest finite value, C text of an
# overflow without saturation)
_FP8_DIRECTED = {"float8_e4m3fn": (3, -6, "448.0f", "NAN"), "float8_e5m2": (2, -14, "57344.0f", "INFINITY")}


def _fp8_directed(e, a: str, mode: int) -> str:
    """tl_f32_to_fp8_dir: the float8 value (exact in float) of float32 `a` rounded in `mode`."""
    m, emin, big, over = _FP8_DIRECTED[e.dtype.name]
    sat = e.args[1]
    if not (isinstance(sat, E.Const) and isinstance(sat.value, (bool, int))):
        raise NotImplementedError(f"{e.op}: sat must be a constant")
    return f"tl_f32_to_fp8_dir((float)({a}), {mode}, {m}, {emin}, {big}, {big if sat.value else over})"


def _directed_cast(cx, e, a: str) -> str:
    """The value of a directed-rounding cast of the printed operand `a`."""
    if e.dtype.name in _FP8_DIRECTED:
        return _fp8_directed(e, a, _DIRECTED[e.op[5:]][1])
    text = directed_bits(cx, e, a)
    return f"tl_bf16_to_f32({text})" if e.dtype.name == "bfloat16" else text


def directed_bits(cx, e, a: str) -> str:
    """float32 -> float16 / bfloat16 and float64 -> float32 rounded toward zero / +inf / -inf
    (language/math.py refuses other pairs), in the target's storage type: CUDA's conversion
    intrinsics; on the CPU helpers that step the nearest value by one unit in the last place
    where it lies on the wrong side."""
    suffix, mode = _DIRECTED[e.op[5:]]
    if e.dtype.name in _FP8_DIRECTED:  # (value, sat): the float8 value, its bits by the nosat conversion
        return nosat_bits(e.dtype, _fp8_directed(e, a, mode))
    if cx.target == "cuda":
        fmt = {"float16": "__float2half_{}((float)({}))", "bfloat16": "__float2bfloat16_{}((float)({}))",
               "float32": "__double2float_{}((double)({}))"}
        return fmt[e.dtype.name].format(suffix, a)
    fmt = {"float16": "tl_f32_to_f16_dir((float)({1}), {0})", "bfloat16": "tl_f32_to_bf16_dir((float)({1}), {0})",
           "float32": "tl_f64_to_f32_dir((double)({1}), {0})"}
    return fmt[e.dtype.name].format(mode, a)


def nosat_bits(d, text: str) -> str:
    """The `d` (float8) storage of float `text` converted without saturation."""
    return f"tl_f32_to_{EMULATED[d.name]}_nosat((float)({text}))"


def _bits(op, src, a, d) -> str:
    """popcount / clz over the bits of the operand's own width."""
    if src.bits == 64:
        text = f"tl_{'popc' if op == 'popcount' else 'clz'}64((uint64_t)({a}))"
    else:
        u = f"(uint32_t)({a})" if src.bits == 32 else f"(uint32_t)(uint{src.bits}_t)({a})"
        text = f"tl_popc32({u})" if op == "popcount" else f"tl_clz32({u})"
        if op == "clz" and src.bits < 32:
            text = f"({text} - {32 - src.bits})"
    return f"(({storage_type(d)}){text})"


def _fmul(cx, d, args) -> str:
    """CUDA: __fmul_rn / __dmul_rn, which ptxas never contracts with an add; C compiles with
    -ffp-contract=off, so `*` is already one rounded product there."""
    if d.name == "float64":
        a, b = (f"(double)({x})" for x in args)
        return f"__dmul_rn({a}, {b})" if cx.target == "cuda" else f"({a} * {b})"
    a, b = (f"(float)({x})" for x in args)
    return cx.from_float(d, f"__fmul_rn({a}, {b})" if cx.target == "cuda" else f"({a} * {b})")


def _ieee(cx, op, d, args) -> str:
    """ieee_<name>_<rm>: float16 / bfloat16 (rn only) compute in float and round once."""
    _, name, rm = op.split("_")
    f64 = d.name == "float64"
    ctype = "double" if f64 else "float"
    xs = [f"({ctype})({a})" for a in args]
    if name == "frsqrt":
        text = f"__frsqrt_rn({xs[0]})" if cx.target == "cuda" else f"tl_ieee_rsqrt_f32({xs[0]})"
        return cx.from_float(d, text)
    cuda32, cuda64, stem, rn_text = _IEEE[name]
    if cx.target == "cuda":
        text = f"{cuda64 if f64 else cuda32}_{rm}({', '.join(xs)})"
    elif rm == "rn":
        text = rn_text.format(*xs, f="" if f64 else "f", one="1.0" if f64 else "1.0f")
    else:
        text = f"tl_ieee_{stem}_{'f64' if f64 else 'f32'}({', '.join(xs)}, {_RM_INDEX[rm]})"
    return text if f64 else cx.from_float(d, text)
