"""Generate tilelang/include/tl/wgmma_ops.h and wgmma_ops_ext.h: one inline-PTX wrapper per wgmma shape.

Why a generator: a wgmma.mma_async instruction names every accumulator register
(N/2 of them for f32 at m64nN, up to 128), and inline asm needs one constraint
per register.  Writing hundreds of such operand lists by hand invites off-by-one errors;
the preprocessor cannot count.  This script is the single source of truth; the
headers it writes are committed so that building a kernel never runs Python.

Run:  python -m tilelang.tools.gen_wgmma        (rewrites the headers in place)
      python -m tilelang.tools.gen_wgmma --check  (exit 1 if a header is stale)

Two headers: wgmma_ops.h holds the widths most tiles use (WGMMA_COMMON_N); wgmma_ops_ext.h every other
width the instruction has (any multiple of 8 up to 256; for s8 a multiple of 16 above 32), read by
NVRTC only when a kernel defines TL_WGMMA_EXT (the CUDA codegen does where a gemm needs one:
codegen/cuda.py), since parsing all of them costs every Hopper compile about 60 ms.

Each variant becomes a full specialization of `tl::detail::WgmmaSS<A, B, C, N>`
(both operands in shared memory, given by descriptors) or
`tl::detail::WgmmaRS<A, B, C, N>` (A from 4 registers per thread), with
  using Reg = <register type of one accumulator slot>;
  static constexpr int kRegs = <accumulator registers per thread>;
  template <bool TransA, bool TransB, int ScaleA, int ScaleB>
  static void mma(<A operand>, uint64_t desc_b, Reg* d, int scale_d);
`scale_d` is a runtime value: 0 means D = A*B (accumulator ignored), nonzero
means D = A*B + D.  The public entry points live in wgmma.h.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ..layout.fragment import WGMMA_COMMON_N, WGMMA_N, WGMMA_N_S8

HEADER = Path(__file__).resolve().parents[1] / "include" / "tl" / "wgmma_ops.h"
EXT_HEADER = HEADER.with_name("wgmma_ops_ext.h")


@dataclass(frozen=True)
class Variant:
    a: str          # C++ element type of A (tl:: name)
    b: str          # C++ element type of B
    c: str          # C++ accumulator element type
    ptx: str        # ".dtype.atype.btype" part of the mnemonic
    k: int          # K of one instruction
    ns: tuple       # N values to emit
    trans: bool     # instruction takes imm-trans-a / imm-trans-b
    scale_ab: bool  # instruction takes imm-scale-a / imm-scale-b

    @property
    def reg(self) -> tuple[str, str]:
        """(register C++ type, asm constraint) of one accumulator slot."""
        return {"float": ("float", "f"), "half_t": ("uint32_t", "r"),
                "int32_t": ("int32_t", "r")}[self.c]

    def nregs(self, n: int) -> int:
        # 64 x N accumulators over 128 threads; f16 packs two per register.
        per_thread = 64 * n // 128
        return per_thread // 2 if self.c == "half_t" else per_thread


VARIANTS = (
    # the widths of wgmma.mma_async (layout/fragment.py): every multiple of 8 up to 256; s8: WGMMA_N_S8
    Variant("half_t", "half_t", "float", "f32.f16.f16", 16, WGMMA_N, True, True),
    Variant("bfloat16_t", "bfloat16_t", "float", "f32.bf16.bf16", 16, WGMMA_N, True, True),
    Variant("half_t", "half_t", "half_t", "f16.f16.f16", 16, WGMMA_N, True, True),
    Variant("float8_e4m3_t", "float8_e4m3_t", "float", "f32.e4m3.e4m3", 32, WGMMA_N, False, True),
    Variant("float8_e5m2_t", "float8_e5m2_t", "float", "f32.e5m2.e5m2", 32, WGMMA_N, False, True),
    Variant("int8_t", "int8_t", "int32_t", "s32.s8.s8", 32, WGMMA_N_S8, False, False),
)


def _wrap(items: list[str], per_line: int, indent: str) -> str:
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return (",\n" + indent).join(lines)


def _reg_list(start: int, count: int) -> str:
    """The PTX text `{%s, %s+1, ...}` as a C string split across lines."""
    names = [f"%{i}" for i in range(start, start + count)]
    chunks = [", ".join(names[i:i + 16]) for i in range(0, count, 16)]
    return '"{' + ',"\n        "'.join(chunks) + '}"'


def _imm_operands(v: Variant, form: str) -> tuple[list[str], list[str]]:
    """(names of immediates in PTX order, their constraint expressions)."""
    names, exprs = [], []
    if v.scale_ab:
        names += ["scale-a", "scale-b"]
        exprs += ['"n"(ScaleA)', '"n"(ScaleB)']
    if v.trans:
        if form == "ss":
            names.append("trans-a")
            exprs.append('"n"(int(TransA))')
        names.append("trans-b")
        exprs.append('"n"(int(TransB))')
    return names, exprs


def emit_one(v: Variant, n: int, form: str) -> str:
    reg_t, cons = v.reg
    nregs = v.nregs(n)
    outs = [f'"+{cons}"(d[{i}])' for i in range(nregs)]
    if form == "ss":
        a_param, a_ops, a_text = "uint64_t desc_a", ['"l"(desc_a)'], f"%{nregs}"
        nxt = nregs + 1
    else:
        a_param = "const uint32_t* a"
        a_ops = [f'"r"(a[{i}])' for i in range(4)]
        a_text = "{" + ", ".join(f"%{nregs + i}" for i in range(4)) + "}"
        nxt = nregs + 4
    desc_b, scale_d = nxt, nxt + 1
    imm_names, imm_exprs = _imm_operands(v, form)
    imm_text = "".join(f", %{scale_d + 1 + i}" for i in range(len(imm_names)))
    struct = "WgmmaSS" if form == "ss" else "WgmmaRS"
    mnemonic = f"wgmma.mma_async.sync.aligned.m64n{n}k{v.k}.{v.ptx}"
    ins = a_ops + ['"l"(desc_b)', '"r"(scale_d)'] + imm_exprs
    guard = ""
    if not v.trans:
        guard = ('    static_assert(!TransA && !TransB, "this wgmma type reads K-major '
                 'operands only (no transpose)");\n')
    if not v.scale_ab:
        guard += ('    static_assert(ScaleA == 1 && ScaleB == 1, "integer wgmma has no '
                  'operand negation");\n')
    return f"""template <>
struct {struct}<{v.a}, {v.b}, {v.c}, {n}> {{
  static constexpr bool kSupported = true;
  static constexpr int kRegs = {nregs};
  using Reg = {reg_t};
  template <bool TransA, bool TransB, int ScaleA, int ScaleB>
  static TL_DEVICE void mma({a_param}, uint64_t desc_b, Reg* d, int scale_d) {{
{guard}#if TL_ARCH_SM90A
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale_d}, 0;\\n"
        "{mnemonic} "
        {_reg_list(0, nregs)}
        ", {a_text}, %{desc_b}, p{imm_text};\\n}}\\n"
        : {_wrap(outs, 8, "          ")}
        : {_wrap(ins, 6, "          ")});
#endif
  }}
}};
"""


def generate(ext: bool = False) -> str:
    """wgmma_ops.h (the primary templates and the WGMMA_COMMON_N widths), or with ext wgmma_ops_ext.h (the rest)."""
    if ext:
        parts = ["// tl/wgmma_ops_ext.h -- GENERATED by tilelang/tools/gen_wgmma.py; do not edit.\n"
                 "// The wgmma.mma_async widths outside wgmma_ops.h's common set, included by wgmma.h\n"
                 "// where the kernel defines TL_WGMMA_EXT.\n"
                 "#pragma once\n\n#include \"wgmma_ops.h\"\n\nnamespace tl {\nnamespace detail {\n\n"]
    else:
        parts = [
            "// tl/wgmma_ops.h -- GENERATED by tilelang/tools/gen_wgmma.py; do not edit.\n"
            "// One specialization per (A, B, C, N) wgmma.mma_async shape of the common widths (the\n"
            "// others: wgmma_ops_ext.h); use the entry points tl::wgmma_ss / tl::wgmma_rs from wgmma.h.\n"
            "#pragma once\n\n#include \"common.h\"\n\nnamespace tl {\nnamespace detail {\n\n"
            "template <class A, class B, class C, int N>\nstruct WgmmaSS {\n"
            "  static constexpr bool kSupported = false;\n  static constexpr int kRegs = 0;\n"
            "  using Reg = C;\n  template <bool, bool, int, int>\n"
            "  static TL_DEVICE void mma(uint64_t, uint64_t, Reg*, int) {}\n};\n\n"
            "template <class A, class B, class C, int N>\nstruct WgmmaRS {\n"
            "  static constexpr bool kSupported = false;\n  static constexpr int kRegs = 0;\n"
            "  using Reg = C;\n  template <bool, bool, int, int>\n"
            "  static TL_DEVICE void mma(const uint32_t*, uint64_t, Reg*, int) {}\n};\n\n"
        ]
    for v in VARIANTS:
        for n in v.ns:
            if (n in WGMMA_COMMON_N) == ext:
                continue
            for form in ("ss", "rs"):
                parts.append(emit_one(v, n, form))
                parts.append("\n")
    parts.append("}  // namespace detail\n}  // namespace tl\n")
    return "".join(parts)


def supported_shapes() -> list[tuple[str, str, str, int, int]]:
    """(A, B, C, N, K) for every generated shape (both headers); the codegen checks against this."""
    return [(v.a, v.b, v.c, n, v.k) for v in VARIANTS for n in v.ns]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if the header is out of date")
    args = ap.parse_args(argv)
    for path, text in ((HEADER, generate()), (EXT_HEADER, generate(ext=True))):
        if args.check:
            if (path.read_text() if path.exists() else "") != text:
                print(f"{path} is stale: run python -m tilelang.tools.gen_wgmma", file=sys.stderr)
                return 1
            continue
        path.write_text(text)
        print(f"wrote {path} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
