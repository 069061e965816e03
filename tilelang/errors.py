"""One error hierarchy for everything the compiler raises at the user.

Messages say what was expected, what was found and the likely fix; errors raised
while compiling user code carry a `Span` and show a caret excerpt of that line.
"""
from __future__ import annotations

import functools
import linecache
import os
import types
from dataclasses import dataclass

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass(frozen=True)
class Span:
    """A position in the user's source: file, 1-based line, 0-based column."""

    file: str
    line: int
    col: int = 0
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def excerpt(self) -> str:
        text = linecache.getline(self.file, self.line).rstrip("\n")
        if not text:
            return ""
        width = max(1, (self.end_col or self.col + 1) - self.col)
        return f"    {text}\n    {' ' * self.col}{'^' * width}"


class TileLangError(Exception):
    """Base of every error the compiler raises on purpose."""

    def __init__(self, message: str, span: Span | None = None):
        self.message = message
        self.span = span
        super().__init__(self._format())

    def _format(self) -> str:
        if self.span is None:
            return self.message
        excerpt = self.span.excerpt()
        tail = f"\n{excerpt}" if excerpt else ""
        return f"{self.span}: {self.message}{tail}"

    def with_span(self, span: Span | None) -> "TileLangError":
        """Return the same error located at `span` unless it already has a location."""
        if self.span is not None or span is None:
            return self
        err = type(self).__new__(type(self))
        TileLangError.__init__(err, self.message, span)
        return err


class DSLSyntaxError(TileLangError):
    """The kernel uses Python syntax the DSL does not support."""


class DSLNameError(TileLangError, NameError):
    """A name in the kernel is not defined (a NameError too, as Python raises for it)."""


class DSLTypeError(TileLangError, TypeError):
    """A DSL call got an argument of the wrong kind (a TypeError too: `except TypeError` around a kernel's
    construction catches it, as it catches the public TileLang's)."""


class DSLValueError(DSLTypeError, ValueError):
    """A DSL call got an argument of the right kind but a value it refuses (a ValueError too, as the
    public TileLang raises; a DSLTypeError for the code that catches those)."""


class DSLCheckError(DSLValueError, AssertionError):
    """A DSL argument the public TileLang refuses with an assertion (so an AssertionError too)."""


class ShapeMismatchError(TileLangError, AssertionError):
    """Tile shapes of a copy, gemm, reduce, reshape, view ... do not agree (an AssertionError too, as
    the public TileLang's shape checks are assertions; code that catches those catches this)."""


class NonConstantShapeError(TileLangError):
    """A shape that must be known at compile time is not a constant."""


class LayoutConflictError(TileLangError):
    """Two tile ops require different layouts for one buffer."""


class CompileError(TileLangError):
    """The generated C/CUDA did not compile (a compiler bug: please report)."""


class NoDeviceError(TileLangError, RuntimeError):
    """A kernel was called for CUDA where no usable CUDA device exists."""


def empty_grid_error(kernel: str, grid) -> ValueError:
    """The error for a launch whose grid has an extent of 0 or less (the public TileLang raises there
    too, where a launch would otherwise run no block or a spurious one)."""
    return ValueError(f"kernel {kernel}: T.Kernel's grid is {tuple(grid)} for these arguments; a launch needs at "
                      "least one block along each grid dimension (guard the call for empty inputs)")


class LoweringError(TileLangError):
    """The compiler cannot lower a construct for the chosen target."""


def hide_internal_frames(exc: BaseException) -> BaseException:
    """Drop the compiler's own frames from `exc`'s traceback (user frames stay), and return it.

    Why: an error in the user's kernel already names the user's line; twenty parser frames
    under it only hide that. Used at public entry points for errors raised on purpose
    (TileLangError, call-time TypeError/ValueError), never for internal bugs. Set
    TILELANG_SHOW_INTERNAL_FRAMES=1 to keep every frame.
    """
    from . import env

    try:
        if env.show_internal_frames():
            return exc
    except TileLangError:  # an unreadable flag must not replace the user's error
        pass
    kept = []
    tb = exc.__traceback__
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PKG_DIR):
            kept.append(tb)
        tb = tb.tb_next
    new = None
    for t in reversed(kept):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return exc.with_traceback(new)


def user_facing(*also):
    """Decorate a public entry point: errors raised on purpose leave it without internal frames.

    `also` adds exception types this entry point raises on purpose besides TileLangError
    (JITKernel.__call__ raises TypeError/ValueError for bad arguments).
    """
    kinds = (TileLangError, *also)

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except kinds as e:
                raise hide_internal_frames(e) from e.__cause__

        return wrapper

    return deco
