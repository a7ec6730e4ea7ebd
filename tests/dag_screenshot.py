"""Test helper: a headless Chromium screenshot of a page, and the PNG's pixels read with zlib alone.

Chromium is Debian's package (`apt-get install -y chromium`, /usr/bin/chromium). Without it `screenshot`
raises, so a test that needs it fails instead of being skipped.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path


def chromium() -> str:
    """The Chromium binary, or an error saying how to install it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise RuntimeError("chromium is not installed (apt-get install -y chromium): "
                           "the DAG screenshot test needs it")
    return found


def screenshot(page: Path, png: Path, *, width: int = 1200, height: int = 800, timeout: float = 120) -> Path:
    """Render `page` in headless Chromium at width x height CSS pixels (device scale 1) into `png`."""
    with tempfile.TemporaryDirectory(prefix="meshbot-chromium-") as profile:
        result = subprocess.run(
            [chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
             "--force-device-scale-factor=1", "--no-first-run", "--disable-extensions",
             f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={width},{height}",
             Path(page).resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if result.returncode != 0 or not Path(png).is_file():
        raise RuntimeError(f"chromium exited {result.returncode} without {png}:\n{result.stderr[-2000:]}")
    return Path(png)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    offset, idat, header = 8, [], None
    while offset < len(data):
        (length,), kind = struct.unpack(">I", data[offset:offset + 4]), data[offset + 4:offset + 8]
        body = data[offset + 8:offset + 8 + length]
        offset += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    step = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), width * step
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, row = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        _unfilter(kind, row, previous, step)
        rows.append(bytes(row) if step == 3 else bytes(b for i, b in enumerate(row) if i % 4 != 3))
        previous = row
    return width, height, rows


def _unfilter(kind: int, row: bytearray, up: bytearray, step: int) -> None:
    if kind == 0:
        return
    if kind == 2:
        row[:] = bytes((a + b) & 0xFF for a, b in zip(row, up))
        return
    for i in range(len(row)):
        left = row[i - step] if i >= step else 0
        if kind == 1:
            row[i] = (row[i] + left) & 0xFF
        elif kind == 3:
            row[i] = (row[i] + ((left + up[i]) >> 1)) & 0xFF
        elif kind == 4:
            upper_left = up[i - step] if i >= step else 0
            estimate = left + up[i] - upper_left
            da, db, dc = abs(estimate - left), abs(estimate - up[i]), abs(estimate - upper_left)
            row[i] = (row[i] + (left if da <= db and da <= dc else up[i] if db <= dc else upper_left)) & 0xFF
        else:
            raise ValueError(f"unknown PNG filter {kind}")


def colour_counts(rows: list[bytes]) -> dict[tuple[int, int, int], int]:
    """How many pixels have each RGB colour."""
    counts: dict[tuple[int, int, int], int] = {}
    for row in rows:
        for i in range(0, len(row), 3):
            pixel = (row[i], row[i + 1], row[i + 2])
            counts[pixel] = counts.get(pixel, 0) + 1
    return counts
