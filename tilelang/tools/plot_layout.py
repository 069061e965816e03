"""Draw a `Layout` or `Fragment` as a colored grid: one cell per logical element.

    from tilelang.tools import plot_layout
    from tilelang.layout.mma_layouts import mma_m16n8_c
    plot_layout(mma_m16n8_c(), save_directory="/tmp", name="mma_c")   # -> ["/tmp/mma_c.png"]

Fragment cells show `T<thread>` / `L<slot>` and take one color per thread (replica 0;
`+` marks replicated elements).  Layout cells show the physical index, colored by the
block of physical columns it lands in (so a swizzle shows as permuted color bands).

With matplotlib installed the figure has text and can be saved as png/pdf/svg.
Without it, PNG output still works: a built-in writer (zlib + struct) draws the
colored grid, without text.  `backend="matplotlib"` insists on matplotlib and raises
an ImportError naming it when it is missing.
"""
from __future__ import annotations

import colorsys
import os
import struct
import zlib

ALL_FORMATS = ("png", "pdf", "svg")


# ----------------------------------------------------------------- what to draw

def _cells(obj) -> tuple:
    """(rows, cols, key[r][c], text[r][c]) of a Layout or Fragment; >2-d shapes fold into rows."""
    from ..layout.fragment_layout import Fragment
    from ..layout.layout import Layout

    if isinstance(obj, Fragment):
        thr, idx = obj.thread_table(), obj.index_table()
        rep = "+" if obj.num_replicas > 1 else ""
        keys = thr[0].reshape(_rows(obj.shape), -1)
        slots = idx.reshape(keys.shape)
        text = [[f"T{t}{rep}\nL{s}" for t, s in zip(kr, sr)] for kr, sr in zip(keys.tolist(), slots.tolist())]
        return keys.shape[0], keys.shape[1], keys.tolist(), text
    if isinstance(obj, Layout):
        t = obj.table()
        flat = t.reshape(_rows(obj.shape), -1, t.shape[-1])
        keys = (flat[..., -1] // _run(flat[..., -1])).tolist()
        text = [[",".join(str(v) for v in cell) for cell in row] for row in flat.tolist()]
        return flat.shape[0], flat.shape[1], keys, text
    raise TypeError(f"plot_layout draws a tilelang Layout or Fragment, got {type(obj).__name__}")


def _run(last):
    """Widest power-of-two column run (at most 1/8 of a row) the layout moves as a block:
    coloring by block shows a swizzle's permutation instead of noise."""
    import numpy as np

    cols = np.arange(last.shape[1])
    k = 1
    while k * 2 <= max(1, last.shape[1] // 8) and (last % (k * 2) == cols % (k * 2)).all():
        k *= 2
    return k


def _rows(shape) -> int:
    if len(shape) == 1:
        return 1
    n = 1
    for s in shape[:-1]:
        n *= s
    return n


def color(key: int) -> tuple:
    """A distinct, stable RGB (0..255) per integer key: golden-ratio hue steps."""
    if key < 0:
        return (255, 255, 255)
    h = (key * 0.6180339887) % 1.0
    s = 0.45 + 0.25 * ((key // 7) % 2)
    v = 0.95 - 0.2 * ((key // 3) % 2)
    return tuple(int(round(255 * x)) for x in colorsys.hsv_to_rgb(h, s, v))


# ----------------------------------------------------------------- dependency-free PNG

def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def encode_png(width: int, height: int, rows) -> bytes:
    """8-bit RGB PNG from `height` rows of `3 * width` bytes each."""
    raw = b"".join(b"\x00" + bytes(r) for r in rows)  # filter type 0 (none) on every scanline
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
            + _png_chunk(b"IDAT", zlib.compress(raw, 6)) + _png_chunk(b"IEND", b""))


def grid_png(keys, cell_px: int = 16, line=(40, 40, 40)) -> tuple:
    """(png bytes, width, height): a grid of cells colored by `keys`, 1-pixel grid lines."""
    nrows, ncols = len(keys), len(keys[0])
    width, height = ncols * cell_px + 1, nrows * cell_px + 1
    line_row = bytes(line) * width
    rows = [line_row]
    for krow in keys:
        body = bytearray(bytes(line))
        for k in krow:
            body += bytes(color(k)) * (cell_px - 1) + bytes(line)
        rows.extend([bytes(body)] * (cell_px - 1))
        rows.append(line_row)
    return encode_png(width, height, rows), width, height


# ----------------------------------------------------------------- matplotlib

def _require_matplotlib():
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError("plot_layout needs matplotlib for text labels and pdf/svg output "
                          "(pip install matplotlib); png without text works without it: "
                          "plot_layout(..., backend='png')") from e
    return Figure


def _draw_matplotlib(cells, paths, colormap=None):
    Figure = _require_matplotlib()
    nrows, ncols, keys, text = cells
    scale = 0.55 if max(nrows, ncols) <= 32 else 0.3
    fig = Figure(figsize=(max(2.0, ncols * scale + 1), max(2.0, nrows * scale + 1)))
    ax = fig.add_subplot(1, 1, 1)
    cmap = None
    if colormap is not None:
        from matplotlib import colormaps

        cmap = colormaps[colormap]
    kmax = max(1, max(max(r) for r in keys))
    font = 7 if max(nrows, ncols) <= 16 else 4
    for r in range(nrows):
        for c in range(ncols):
            k = keys[r][c]
            rgb = cmap(k / kmax)[:3] if cmap is not None else tuple(x / 255 for x in color(k))
            ax.add_patch(_rect(c, r, rgb))
            if max(nrows, ncols) <= 64:
                ax.text(c + 0.5, r + 0.5, text[r][c], ha="center", va="center", fontsize=font)
    ax.set_xlim(0, ncols)
    ax.set_ylim(nrows, 0)
    ax.set_aspect("equal")
    ax.set_xticks([c + 0.5 for c in range(ncols)], [str(c) for c in range(ncols)], fontsize=font)
    ax.set_yticks([r + 0.5 for r in range(nrows)], [str(r) for r in range(nrows)], fontsize=font)
    ax.tick_params(length=0)
    for p in paths:
        fig.savefig(p, bbox_inches="tight", dpi=150)


def _rect(c, r, rgb):
    from matplotlib.patches import Rectangle

    return Rectangle((c, r), 1, 1, facecolor=rgb, edgecolor="black", linewidth=0.5)


# ----------------------------------------------------------------- entry point

def _formats(formats) -> list:
    if isinstance(formats, str):
        formats = list(ALL_FORMATS) if formats == "all" else [f.strip() for f in formats.split(",")]
    out = [f.lower().lstrip(".") for f in formats]
    bad = [f for f in out if f not in ALL_FORMATS]
    if bad:
        raise ValueError(f"plot_layout formats are {ALL_FORMATS} or 'all', got {bad}")
    return out


def plot_layout(layout, save_directory=".", name="layout", formats="png", colormap=None,
                verbose=False, backend="auto", cell_px=16) -> list:
    """Write `<save_directory>/<name>.<fmt>` for each format; returns the written paths.

    backend: "auto" (matplotlib when importable, else the built-in PNG writer),
    "matplotlib", or "png" (built-in writer: colors only, png only).
    """
    fmts = _formats(formats)
    if backend not in ("auto", "matplotlib", "png"):
        raise ValueError(f"backend is 'auto', 'matplotlib' or 'png', got {backend!r}")
    cells = _cells(layout)
    os.makedirs(save_directory, exist_ok=True)
    paths = [os.path.join(save_directory, f"{name}.{f}") for f in fmts]
    use_mpl = backend == "matplotlib"
    if backend == "auto":
        try:
            _require_matplotlib()
            use_mpl = True
        except ImportError:
            if fmts != ["png"] and fmts != ["png"] * len(fmts):
                raise
    if use_mpl:
        _draw_matplotlib(cells, paths, colormap)
    else:
        if fmts != ["png"] * len(fmts):
            raise ValueError("the built-in writer (backend='png') writes png only")
        data, _, _ = grid_png(cells[2], cell_px)
        for p in paths:
            with open(p, "wb") as f:
                f.write(data)
    if verbose:
        print("plot_layout wrote " + ", ".join(paths))
    return paths
