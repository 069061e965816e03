"""C text for scalar expressions, shared by the CPU (C) and CUDA code generators.

bf16 and fp8 values are stored as bit patterns and computed in float: a load
converts to float, a store or a cast converts back with exact rounding. tfloat32
is float storage whose stores and casts (not arithmetic) round to a 10-bit mantissa.
float8_e8m0fnu (a power of two per byte) is computed in float too; its store rounds |x| up
to a power of two, and a float64 value converts from the double (tl_f64_to_fp8e8m0), not
through a float that may already have rounded it down.
float4_e2m1fn, int4 and uint4 are packed two per byte (element k in byte k >> 1, the even
element in the low nibble): loads and stores go through tl_nibble_get / tl_nibble_set (see
`is_subbyte`), whose set is an atomic read-modify-write where other threads may write
the other nibble of the byte (global and shared memory). An int4 value is computed as an
int8_t (a load sign-extends its nibble: tl_s4), a uint4 one as a uint8_t; int4 / uint4
arithmetic and casts wrap to 4 bits (`int_wrap`), a store keeps the low 4 bits.
"""
from __future__ import annotations

import math
import struct

from .. import dtypes as dt
from ..ir import expr as E

STORAGE = {"bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
           "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
           "float16": "tl_half", "bfloat16": "tl_bf16", "float32": "float", "float64": "double",
           "float8_e4m3fn": "tl_fp8e4m3", "float8_e5m2": "tl_fp8e5m2", "tfloat32": "float",
           "float4_e2m1fn": "uint8_t", "float8_e8m0fnu": "tl_fp8e8m0", "int4": "uint8_t", "uint4": "uint8_t"}
# the C type of a sub-byte integer's value (its storage is bytes of two nibbles)
_NIBBLE_INT = {"int4": "int8_t", "uint4": "uint8_t"}
EMULATED = {"bfloat16": "bf16", "float8_e4m3fn": "fp8e4m3", "float8_e5m2": "fp8e5m2", "tfloat32": "tf32",
            "float4_e2m1fn": "fp4e2m1", "float8_e8m0fnu": "fp8e8m0"}
# Rounded only where stored or cast: arithmetic on them stays float (as on GPUs, where tf32 is
# an MMA input format), so `x * x` of two tf32 values is the exact float product.
STORAGE_ONLY = frozenset({"tfloat32"})


# emulated dtypes whose store is one rounding of a float (bits of the dtype in, the same bits out)
_ROUND_ON_STORE = frozenset({"bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"})
_TF32_EXACT = frozenset({"bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "bool", "int8",
                         "uint8"})


def tf32_exact(e) -> bool:
    """e is a cast to tfloat32 of a type whose every value tf32 holds exactly (10-bit mantissa and
    float32's exponent range: bf16, fp16, fp8, 8-bit integers)."""
    return isinstance(e, E.Cast) and e.dtype.name == "tfloat32" and e.value.dtype.name in _TF32_EXACT


def is_subbyte(d: dt.DType) -> bool:
    """Packed below one byte per element (float4_e2m1fn): no C lvalue per element."""
    return d.bits < 8 and d.lanes == 1


def nibble_value(d: dt.DType, code: str) -> str:
    """The value (as computed) of a sub-byte element whose 4-bit code is the C text `code`."""
    if d.name == "int4":
        return f"tl_s4({code})"
    if d.name == "uint4":
        return code
    return f"tl_{EMULATED[d.name]}_to_f32({code})"


def storage_type(d: dt.DType) -> str:
    return STORAGE[d.name]


def compute_type(d: dt.DType) -> str:
    return "float" if d.name in EMULATED else _NIBBLE_INT.get(d.name) or STORAGE[d.name]


def int_wrap(d: dt.DType, text: str) -> str:
    """An integer value of C text converted to the 8/16-bit or 4-bit integer dtype d (wrapping, as a
    cast between C integer types does; int4 sign-extends its low 4 bits)."""
    if d.name == "int4":
        return f"tl_s4({text})"
    if d.name == "uint4":
        return f"((uint8_t)(({text}) & 0xF))"
    return f"(({storage_type(d)}){text})"


_FLOAT_FN = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10", "sqrt": "sqrt",
             "tanh": "tanh", "sin": "sin", "cos": "cos", "erf": "erf", "floor": "floor", "ceil": "ceil",
             "round": "nearbyint", "trunc": "trunc", "log1p": "log1p", "expm1": "expm1", "pow": "pow",
             "exp10": "exp10"}


_WRAPPING = ("+", "-", "*", "/", "//", "%", "<<")

# CUDA: + - * of two bf16 values as one bf16 instruction (sm_80+). Bit-identical to rounding the
# float result (float's 24 bits >= 2 * 8 + 2: double rounding is innocuous for + - *); the `_rn`
# intrinsics keep ptxas from contracting a mul and an add into an fma, which would round once.
_BF16_NATIVE = {"+": "__hadd_rn", "-": "__hsub_rn", "*": "__hmul_rn"}


def _bf16_bits(v: float) -> int:
    """v rounded to bfloat16 (nearest, ties to even; NaN quiet), as its 16 bits."""
    try:
        u = struct.unpack("<I", struct.pack("<f", v))[0]
    except OverflowError:  # past float's range: the float literal is +-inf
        u = struct.unpack("<I", struct.pack("<f", math.copysign(math.inf, v)))[0]
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return (u >> 16) | 0x40
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def c_string(text: str) -> str:
    """`text` as a C string literal (octal escapes for anything but printable ASCII)."""
    out = []
    for b in text.encode():
        c = chr(b)
        out.append("\\" + c if c in '"\\?' else c if 32 <= b < 127 else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


class CExpr:
    """Prints expressions; `nonneg` holds variables known to be >= 0 (loop/block indices, dims)."""

    target = "c"  # "cuda" in the CUDA code generator: intrinsics.print_call differs per target

    def __init__(self, index_fn, nonneg=frozenset(), nibble_fn=None):
        self.index_fn = index_fn  # (Buffer, indices) -> C lvalue text
        self.nibble_fn = nibble_fn  # (Buffer, indices) -> (base pointer, element offset) of a sub-byte buffer
        self.nonneg = set(nonneg)
        # nonneg variables whose sign the C compiler cannot see (`tid - 128` of a warp group, an
        # opaque tl_fresh_index copy): their power-of-two divisions print as shifts and masks too
        self.opaque = set()
        self.tf32_exact: set = set()  # uids of tfloat32 buffers whose loads need no rounding
        # floor division / remainder by a power of two of a value of unknown sign as `>>` / `&` (the
        # target's signed shift is arithmetic; tl.disable_pow2_floor_shift)
        self.shift_pow2_floor = False
        # CUDA: int32 dims the kernel takes as int64_t -> (name of min(dim - 1, INT32_MAX), name of
        # min(dim, INT32_MAX)), int32 constants set once at entry (narrow_bound)
        self.narrow: dict = {}

    def __call__(self, e) -> str:
        fn = getattr(self, "e_" + type(e).__name__)
        return fn(e)

    def e_Var(self, e):
        return e.name

    def e_Const(self, e):
        if isinstance(e.value, str):  # T.StringImm: a C string literal (an extern call's argument)
            return c_string(e.value)
        d = e.dtype
        if d.is_bool:
            return "1" if e.value else "0"
        if d.is_int:
            v = int(e.value)
            suffix = "LL" if d.bits == 64 or not -(2**31) <= v < 2**31 else ""
            if d.kind == "uint":
                suffix = "ULL" if d.bits == 64 else "u"
            return int_wrap(d, f"{v}{suffix}") if d.bits < 32 else f"{v}{suffix}"
        v = float(e.value)
        if math.isinf(v):
            lit = "INFINITY" if v > 0 else "(-INFINITY)"
        elif math.isnan(v):
            lit = "NAN"
        else:
            lit = repr(v)
        if d.name == "float64":
            return lit if lit[0] != "(" and "INF" not in lit and "NAN" not in lit else f"((double){lit})"
        if d.name == "float16":
            return f"((tl_half){lit}f)" if "INF" not in lit and "NAN" not in lit else f"((tl_half){lit})"
        if d.name in EMULATED:
            if ("INF" in lit and d.name not in ("float8_e4m3fn", "float8_e8m0fnu")) or "NAN" in lit:
                # a d value already (e5m2's inf); e4m3fn and e8m0 have no inf: theirs saturates
                return lit
            return self.round_to(d, f"{lit}f" if "INF" not in lit else lit)
        return f"{lit}f" if "INF" not in lit and "NAN" not in lit else lit

    def round_to(self, d: dt.DType, text: str) -> str:
        """Round a float value to an emulated dtype and back (its value as computed)."""
        k = EMULATED[d.name]
        return f"tl_{k}_to_f32(tl_f32_to_{k}({text}))"

    def nonnegative(self, e) -> bool:
        if isinstance(e, E.Const):
            return e.value >= 0
        if isinstance(e, E.Var):
            return e in self.nonneg
        if isinstance(e, E.Binary) and e.op in ("+", "*", "//", "%", "min", "max"):
            return self.nonnegative(e.a) and self.nonnegative(e.b)
        if isinstance(e, E.Binary) and e.op == "|":
            return self.nonnegative(e.a) and self.nonnegative(e.b)
        if isinstance(e, E.Binary) and e.op == ">>":
            return self.nonnegative(e.a)
        if isinstance(e, E.Binary) and e.op == "&":  # a mask >= 0 clears the sign
            return self.nonnegative(e.a) or self.nonnegative(e.b)
        if isinstance(e, E.Call) and e.op in ("max", "min", "tl_fresh_index"):  # (the last: its argument)
            return all(self.nonnegative(a) for a in e.args)
        return False

    def e_Binary(self, e):
        text = self._binary(e)
        if e.dtype.is_int and e.dtype.bits < 32 and e.op in _WRAPPING:
            # C computes int8/int16 in int; wrap so the value is the IR's declared dtype
            return int_wrap(e.dtype, text)
        return text

    def bf16_native(self, e) -> str | None:
        """CUDA: the tl_bf16 text of a bf16 + - * computed by bf16 instructions, when both operands
        are bf16 values without float arithmetic (loads, constants, casts, nested native ops)."""
        if self.target != "cuda" or not isinstance(e, E.Binary) or e.op not in _BF16_NATIVE:
            return None
        if not e.dtype.name == e.a.dtype.name == e.b.dtype.name == "bfloat16" or e.dtype.lanes != 1:
            return None
        a, b = self.bf16_operand(e.a), self.bf16_operand(e.b)
        if a is None or b is None:
            return None
        return f"{_BF16_NATIVE[e.op]}({a}, {b})"

    def bf16_operand(self, e) -> str | None:
        """The tl_bf16 text of a bf16 value with no conversion back and forth, or None."""
        if isinstance(e, E.BufferLoad) and not is_subbyte(e.buffer.dtype) and e.buffer.dtype == e.dtype:
            return self.index_fn(e.buffer, e.indices)
        if isinstance(e, E.Const) and e.dtype.name == "bfloat16":
            return f"__ushort_as_bfloat16((unsigned short){_bf16_bits(float(e.value)):#06x}u)"
        if isinstance(e, E.Cast) or (isinstance(e, E.Call) and e.op == "reinterpret"):
            return self.store_expr(e.dtype, e)
        return self.bf16_native(e)

    def converted(self, e, d: dt.DType) -> str:
        """Text of e where its value becomes a `d` (a cast, a store, an operand of a `d` op). An 8/16-bit
        `<<` converted to another type is C's: the operand is promoted to int and the shift does not
        wrap (`(bfloat16)((uint8)1 << s)` is 2^s, as the public TileLang's C output computes it);
        a shift by 32 or more is 0, on every target. Used as its own type it wraps."""
        if (d != e.dtype and isinstance(e, E.Binary) and e.op == "<<" and e.dtype.is_int
                and e.dtype.bits < 32 and not d.is_bool):
            a, b = self(e.a), self(e.b)
            return f"tl_shl_i32((uint32_t)({a}), (uint32_t)({b}))"
        return self(e)

    def int32_text(self, e) -> bool:
        """e's C text has C type int (32 bits): an int32 value of int32 variables other than the
        `narrow` dims (which C holds as int64_t), constants, loads of int32 buffers and casts to int32."""
        d = e.dtype
        if not (d.is_int and d.kind == "int" and d.bits == 32 and d.lanes == 1):
            return False
        if isinstance(e, E.Var):
            return e not in self.narrow
        if isinstance(e, E.Const):
            return -(2**31) <= int(e.value) < 2**31
        if isinstance(e, (E.Cast, E.BufferLoad)):
            return True
        if isinstance(e, E.Binary) and e.op in _WRAPPING + ("&", "|", "^", ">>", "min", "max"):
            return self.int32_text(e.a) and self.int32_text(e.b)
        if isinstance(e, E.Call) and e.op in ("min", "max"):
            return all(self.int32_text(a) for a in e.args)
        if isinstance(e, E.Select):
            return self.int32_text(e.a) and self.int32_text(e.b)
        return False

    def narrow_bound(self, e) -> str | None:
        """`x < n`, `x <= n`, `x > n`, `x >= n` (either side) and `min(x, n)` of an int32 x and an int32 dim n
        that C holds as int64_t, in 32 bits against n's entry constants (exact: n >= 0 and every x fits
        int32): x < n is x <= min(n - 1, INT32_MAX), x <= n is x <= min(n, INT32_MAX), min(x, n) is
        min(x, min(n, INT32_MAX)). Else None (C compares in 64 bits: a sign extension a side, 3 SASS)."""
        op, a, b = e.op, e.a, e.b
        if op not in ("<", "<=", ">", ">=", "min"):
            return None
        if isinstance(a, E.Var) and a in self.narrow and not (isinstance(b, E.Var) and b in self.narrow):
            a, b = b, a
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "min": "min"}[op]
        if not (isinstance(b, E.Var) and b in self.narrow) or not self.int32_text(a):
            return None
        below, upto = self.narrow[b]
        x = self(a)
        if op == "min":
            return f"(({x}) < ({upto}) ? ({x}) : ({upto}))"
        bound = below if op in ("<", ">=") else upto
        return f"({x} {'<=' if op in ('<', '<=') else '>'} {bound})"

    def _binary(self, e):
        if self.narrow:
            text = self.narrow_bound(e)
            if text is not None:
                return text
        native = self.bf16_native(e)
        if native is not None:
            return f"tl_bf16_to_f32({native})"
        a, b = self.converted(e.a, e.dtype), self.converted(e.b, e.dtype)
        op = e.op
        if op in ("//", "%"):
            if e.dtype.is_float:
                fl = "floorf" if e.dtype.name != "float64" else "floor"
                return f"{fl}({a} / {b})" if op == "//" else f"({a} - {fl}({a} / {b}) * {b})"
            c = e.b.value if isinstance(e.b, E.Const) and not isinstance(e.b.value, bool) else None
            if e.dtype.kind == "uint" or (self.nonnegative(e.a) and self.nonnegative(e.b)):
                if isinstance(c, int) and c > 1 and c & (c - 1) == 0 and (
                        not isinstance(e.a, (E.Var, E.Const)) or e.a in self.opaque):
                    # the compiler cannot see that a compound a is >= 0: a signed `/ 8` costs a sign fix-up
                    # (3 more instructions an index, in k-loops); a thread index it bounds itself
                    return f"({a} >> {c.bit_length() - 1})" if op == "//" else f"({a} & {c - 1})"
                return f"({a} {'/' if op == '//' else '%'} {b})"
            if self.shift_pow2_floor and isinstance(c, int) and c > 1 and c & (c - 1) == 0:
                # of any sign: an arithmetic shift rounds toward -inf and the mask is the floor remainder
                # (tl_floordiv_i32's divide and sign fix-up: ~10 instructions an index)
                return f"({a} >> {c.bit_length() - 1})" if op == "//" else f"({a} & {c - 1})"
            w = "i64" if e.dtype.bits == 64 else "i32"
            return f"tl_{'floordiv' if op == '//' else 'floormod'}_{w}({a}, {b})"
        if op == "/" and e.dtype.is_float and e.a.dtype.is_int and e.b.dtype.is_int:
            a = f"(({compute_type(e.dtype)}){a})"
        if e.a.dtype != e.b.dtype and (e.a.dtype.name == "float16" or e.b.dtype.name == "float16"):
            # mixed half/float: compute in the wider type (C++ half operators are ambiguous there)
            wide = "double" if "float64" in (e.a.dtype.name, e.b.dtype.name) else "float"
            a, b = f"(({wide}){a})", f"(({wide}){b})"
        if op in ("min", "max") and e.dtype.name in ("float32", "float64") and e.a.dtype == e.b.dtype == e.dtype:
            # FMNMX, one instruction (a compare and a select as `a > b ? a : b`: twice the row-max chain)
            return f"{'f' + op}{'f' if e.dtype.name == 'float32' else ''}({a}, {b})"
        if op in ("min", "max"):
            cmp = "<" if op == "min" else ">"
            return f"(({a}) {cmp} ({b}) ? ({a}) : ({b}))"
        text = f"({a} {op} {b})"
        if e.dtype.name in EMULATED and e.dtype.name not in STORAGE_ONLY and op in ("+", "-", "*", "/"):
            return self.round_to(e.dtype, text)
        if e.dtype.name == "float16" and op in ("+", "-", "*", "/"):
            return f"((tl_half){text})"
        return text

    def e_Unary(self, e):
        text = f"({e.op}{self(e.a)})"
        if e.dtype.is_int and e.dtype.bits < 32 and e.op in ("-", "~"):
            return int_wrap(e.dtype, text)
        return text

    def e_Select(self, e):
        return f"({self(e.cond)} ? {self(e.a)} : {self(e.b)})"

    def e_Cast(self, e):
        src, d = e.value.dtype, e.dtype
        v = self.converted(e.value, d)
        if d.is_bool:
            return f"({v} != 0)"
        if tf32_exact(e):  # every bf16 / fp16 / fp8 value is a tf32 value: nothing to round
            return f"((float)({v}))"
        if d.name == "float8_e8m0fnu" and src.name == "float64":  # rounded once, from the double
            return f"tl_fp8e8m0_to_f32(tl_f64_to_fp8e8m0({v}))"
        if d.name in EMULATED:
            return self.round_to(d, f"(float)({v})")
        if d.name in _NIBBLE_INT:
            return int_wrap(d, f"(int)({v})")
        if src.name in EMULATED and d.is_int:
            return f"(({storage_type(d)})({v}))"
        return f"(({compute_type(d)})({v}))"

    def e_Call(self, e):
        op, d = e.op, e.dtype
        args = [self(a) for a in e.args]
        if op in ("max", "min"):
            return self.e_Binary(E.Binary(op, e.args[0], e.args[1], d))
        if op == "abs":
            if d.is_float:
                return self.math(d, "fabs", args)
            return f"(({args[0]}) < 0 ? -({args[0]}) : ({args[0]}))"
        if op == "rsqrt":
            one = "1.0" if d.name == "float64" else "1.0f"
            return self.from_float(d, f"({one} / {self.math(d, 'sqrt', args, wrap=False)})")
        if op == "sigmoid":
            one = "1.0" if d.name == "float64" else "1.0f"
            neg = [f"-({args[0]})"]
            return self.from_float(d, f"({one} / ({one} + {self.math(d, 'exp', neg, wrap=False)}))")
        if op == "reinterpret":
            return self.bitcast(e.args[0].dtype, d, args[0])
        if op in _FLOAT_FN:
            return self.math(d, _FLOAT_FN[op], args)
        if op.startswith("atomic_"):
            return self.atomic(e)
        from .math_calls import print_math

        text = print_math(self, e, args)
        if text is not None:
            return text
        from .intrinsics import print_call

        text = print_call(self, e, args)
        if text is not None:
            return text
        if op.startswith("tl_"):  # a helper of the target's header (e.g. tl_quad_max on CUDA)
            return f"{op}({', '.join(args)})"
        raise NotImplementedError(f"no C lowering for intrinsic {op!r}")

    def bitcast(self, src: dt.DType, d: dt.DType, text: str) -> str:
        """The bits of `text` (a `src` value as computed) read as `d`; emulated dtypes go through
        their storage bits. TL_BITCAST is a union on C and a memcpy template on CUDA C++."""
        bits = f"TL_BITCAST({storage_type(src)}, {storage_type(d)}, {self.store_value(src, text)})"
        k = EMULATED.get(d.name)
        return f"tl_{k}_to_f32({bits})" if k else bits

    def math(self, d, name, args, wrap=True):
        """libm call in double for float64, else in float (f-suffixed), converted back to d."""
        if d.name == "float64":
            return f"{name}({', '.join(f'(double)({a})' for a in args)})"
        text = f"{name}f({', '.join(f'(float)({a})' for a in args)})"
        return self.from_float(d, text) if wrap else text

    def from_float(self, d, text):
        if d.name in ("float32", "float64"):
            return text
        if d.name == "float16":
            return f"((tl_half){text})"
        if d.name in EMULATED and d.name not in STORAGE_ONLY:
            return self.round_to(d, text)
        return f"(({compute_type(d)}){text})"

    def e_BufferLoad(self, e):
        if is_subbyte(e.buffer.dtype):
            base, off = self.nibble_fn(e.buffer, e.indices)
            return nibble_value(e.buffer.dtype, f"tl_nibble_get({base}, {off})")
        ref = self.index_fn(e.buffer, e.indices)
        k = EMULATED.get(e.buffer.dtype.name)
        if k == "tf32" and e.buffer.uid in self.tf32_exact:  # holds tf32 values only (tf32_loads.py)
            return ref
        return f"tl_{k}_to_f32({ref})" if k else ref

    def store_expr(self, d: dt.DType, e) -> str:
        """The C value stored for expression e into a `d` element (rounded to d where it may not be a d value)."""
        if tf32_exact(e) and d.name == "tfloat32":
            return self(e)
        if d.name in _ROUND_ON_STORE:
            # the store rounds to d: a cast to d just before it rounds the same value twice, and a d
            # value stored as d is its bits (an fp8 copy was f32_to_fp8(fp8_to_f32(f32_to_fp8(x))))
            while isinstance(e, E.Cast) and e.dtype == d and (e.value.dtype.is_float or e.value.dtype.is_int):
                e = e.value
            if isinstance(e, E.BufferLoad) and e.buffer.dtype == d and e.dtype == d:
                return self.index_fn(e.buffer, e.indices)
            if e.dtype == d and (native := self.bf16_native(e)) is not None:
                return native
            if isinstance(e, E.Const) and e.dtype == d and d.name == "float8_e5m2" and isinstance(e.value, float) \
                    and not math.isfinite(e.value):
                # T.infinity(e5m2) is e5m2's inf, not its largest finite value: no saturation (e4m3fn has
                # no inf: its constant saturates to 448, as torch converts it)
                from .math_calls import nosat_bits

                return nosat_bits(d, self(e))
            if isinstance(e, E.Call) and e.op == "cast_nosat" and e.dtype == d:
                # its own bits: converting the value back would saturate an e5m2 inf on CUDA
                from .math_calls import nosat_bits

                return nosat_bits(d, self(e.args[0]))
            if isinstance(e, E.Call) and e.op in ("cast_rz", "cast_rp", "cast_rm") and e.dtype == d:
                # its own bits, not rounded again to nearest
                from .math_calls import directed_bits

                return directed_bits(self, e, self(e.args[0]))
            if d.name == "float8_e8m0fnu" and e.dtype.name == "float64":  # rounded once, from the double
                return f"tl_f64_to_fp8e8m0({self(e)})"
        return self.store_value(d, self.converted(e, d))

    def store_value(self, d: dt.DType, text: str) -> str:
        if d.name in _NIBBLE_INT:  # tl_nibble_set keeps the low 4 bits
            return f"((uint8_t)({text}))"
        k = EMULATED.get(d.name)
        return f"tl_f32_to_{k}({text})" if k else text

    def atomic(self, e):
        target, val = e.args
        d = target.dtype
        suffix = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "float16": "f16",
                  "bfloat16": "bf16", "uint32": "u32", "uint64": "u64"}.get(d.name)
        if suffix is None:
            raise NotImplementedError(f"atomics on {d} are not supported")
        kind = e.op.split("_", 1)[1]
        # the value in the destination's storage type (a bf16 / fp16 element takes its bits, not a float);
        # the previous value it returns is read back as any element of that dtype is
        call = f"tl_atomic_{kind}_{suffix}(&{self.index_fn(target.buffer, target.indices)}, {self.store_expr(d, val)})"
        k = EMULATED.get(d.name)
        return f"tl_{k}_to_f32({call})" if k else call
