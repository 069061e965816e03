"""plot_layout: the built-in PNG writer (no matplotlib), errors naming matplotlib, and matplotlib."""
import struct
import sys
import zlib

import pytest

import tilelang
from tilelang.layout import make_swizzled_layout
from tilelang.layout.mma_layouts import mma_m16n8_c, mma_m16n8k16_a
from tilelang.tools import plot_layout
from tilelang.tools.plot_layout import color

SIG = b"\x89PNG\r\n\x1a\n"


def read_png(path):
    """(width, height, rows of RGB bytes), checking signature, chunk CRCs and scanline filters."""
    data = open(path, "rb").read()
    assert data[:8] == SIG
    pos, chunks = 8, {}
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        tag, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0] == zlib.crc32(tag + body) & 0xFFFFFFFF
        chunks[tag] = chunks.get(tag, b"") + body
        pos += 12 + n
    assert set(chunks) == {b"IHDR", b"IDAT", b"IEND"}
    w, h, depth, ctype = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, ctype) == (8, 2)
    raw = zlib.decompress(chunks[b"IDAT"])
    assert len(raw) == h * (1 + 3 * w)
    rows = [raw[r * (1 + 3 * w):(r + 1) * (1 + 3 * w)] for r in range(h)]
    assert all(r[0] == 0 for r in rows)
    return w, h, [r[1:] for r in rows]


def pixel(rows, x, y):
    return tuple(rows[y][3 * x:3 * x + 3])


def test_builtin_png_colors_cells_by_thread(tmp_path):
    frag = mma_m16n8k16_a()
    (path,) = plot_layout(frag, save_directory=str(tmp_path), name="a", backend="png", cell_px=10)
    assert path == str(tmp_path / "a.png")
    w, h, rows = read_png(path)
    assert (w, h) == (16 * 10 + 1, 16 * 10 + 1)
    for i in range(16):
        for j in range(16):
            assert pixel(rows, j * 10 + 5, i * 10 + 5) == color(frag.thread(i, j)), (i, j)
    assert pixel(rows, 0, 0) == (40, 40, 40)                      # grid line
    assert color(0) != color(1) and len({color(t) for t in range(32)}) == 32


def test_auto_falls_back_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    (path,) = plot_layout(make_swizzled_layout(8, 64, 2), save_directory=str(tmp_path), name="sw", cell_px=4)
    w, h, _ = read_png(path)
    assert (w, h) == (64 * 4 + 1, 8 * 4 + 1)
    with pytest.raises(ImportError, match="matplotlib"):
        plot_layout(mma_m16n8_c(), save_directory=str(tmp_path), formats="pdf")
    with pytest.raises(ImportError, match="matplotlib"):
        plot_layout(mma_m16n8_c(), save_directory=str(tmp_path), backend="matplotlib")


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="formats"):
        plot_layout(mma_m16n8_c(), save_directory=str(tmp_path), formats="jpeg")
    with pytest.raises(ValueError, match="png only"):
        plot_layout(mma_m16n8_c(), save_directory=str(tmp_path), formats="svg", backend="png")
    with pytest.raises(TypeError, match="Layout or Fragment"):
        plot_layout([[0]], save_directory=str(tmp_path))


def test_exported_as_tilelang_tools_plot_layout():
    assert tilelang.tools.plot_layout is plot_layout and callable(plot_layout)


def test_matplotlib_backend_when_installed(tmp_path):
    pytest.importorskip("matplotlib")
    paths = plot_layout(mma_m16n8_c().replicate(2), save_directory=str(tmp_path), name="c",
                        formats=["png", "svg"], backend="matplotlib")
    assert open(paths[0], "rb").read(8) == SIG
    svg = open(paths[1]).read()
    assert "<svg" in svg
