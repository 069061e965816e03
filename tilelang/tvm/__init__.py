"""`tilelang.tvm`: the few TVM names TileLang programs touch, built on our own IR.

Public TileLang ships a TVM; user programs reach into it for a handful of names. This
namespace has exactly those, with the same meaning:

    from tilelang import tvm
    tvm.DataType("float16").bits          # 16: the same class as T.dtype
    tvm.tirx.const(3, T.uint16)           # a typed constant expression
    tvm.tirx.reinterpret(T.int8, x), tvm.tirx.Select(c, a, b), tvm.tirx.Cast(T.int32, x)
    isinstance(e, tvm.tirx.PrimExpr)       # every IR expression
    with tvm.target.Target("cuda -arch=sm_90a"):   # the target of compile(target="auto")
        kernel = tilelang.compile(func)

    @tvm.testing.requires_package("bitblas")   # tilelang.testing's pytest mark

`tvm.tir` is the same module as `tvm.tirx` (older TileLang spells it so).

`import tvm` / `from tvm import DataType`: after `import tilelang`, a top-level `tvm`
resolves to this namespace when no real TVM is installed (see `tilelang/tvm_finder.py`);
an installed TVM always wins there, while `from tilelang import tvm` always gives this one.
"""
from ..dtypes import DType as DataType
from . import target, testing, tirx

tir = tirx

__all__ = ["DataType", "target", "testing", "tirx", "tir"]
