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
from collections import Counter
from itertools import accumulate
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
        if step == 3:
            rows.append(bytes(row))
        else:   # RGBA: the alpha bytes dropped
            rgb = bytearray(width * 3)
            for channel in range(3):
                rgb[channel::3] = row[channel::4]
            rows.append(bytes(rgb))
        previous = row
    return width, height, rows


def _unfilter(kind: int, row: bytearray, up: bytearray, step: int) -> None:
    """Undo the row's PNG filter in place. Up and Sub, most of a screenshot's rows, go a row or a
    channel at a time (a screenshot has millions of bytes: a Python loop over each takes seconds)."""
    if kind == 0:
        return
    n = len(row)
    if kind == 2:   # Up: byte-wise sums mod 256 of two rows as big integers (no carry leaves a byte)
        x, u = int.from_bytes(row, "big"), int.from_bytes(up, "big")
        low, high = int.from_bytes(b"\x7f" * n, "big"), int.from_bytes(b"\x80" * n, "big")
        row[:] = (((x & low) + (u & low)) ^ ((x ^ u) & high)).to_bytes(n, "big")
        return
    if kind == 1:   # Sub: each channel a running sum mod 256
        for channel in range(step):
            row[channel::step] = bytes(map((0xFF).__and__, accumulate(row[channel::step])))
        return
    if kind not in (3, 4):
        raise ValueError(f"unknown PNG filter {kind}")
    for channel in range(step):   # Average and Paeth: a loop over each channel's bytes, left to right
        filtered, above, out = row[channel::step], up[channel::step], bytearray(n // step)
        left = upper_left = 0
        for i, (x, b) in enumerate(zip(filtered, above)):
            if kind == 3:
                left = (x + ((left + b) >> 1)) & 0xFF
            else:   # the nearest of left, up and upper left to left + up - upper left
                pa, pb = b - upper_left, left - upper_left
                pc = abs(pa + pb)
                pa, pb = abs(pa), abs(pb)
                left = (x + (left if pa <= pb and pa <= pc else b if pb <= pc else upper_left)) & 0xFF
            out[i], upper_left = left, b
        row[channel::step] = out


def colour_counts(rows: list[bytes]) -> dict[tuple[int, int, int], int]:
    """How many pixels have each RGB colour."""
    counts: Counter[tuple[int, int, int]] = Counter()
    for row, times in Counter(rows).items():   # a page repeats rows: each distinct one is read once
        for pixel, n in Counter(zip(row[0::3], row[1::3], row[2::3])).items():
            counts[pixel] += n * times
    return dict(counts)


def run_in_page(page: Path, script: str, *, width: int = 1000, height: int = 800, timeout: float = 120) -> str:
    """Load a copy of `page` in headless Chromium at width x height with `script` run after the page's own
    scripts, and return what the script left in `document.body.dataset.result` (a JSON text, say).

    The script is appended before `</body>`, so it sees the page as loaded; Chromium's `--dump-dom` prints
    the DOM once the page settles (`--virtual-time-budget` lets its timers run), and the result is read back
    from the dumped `<body data-result="...">`."""
    import html
    import re

    text = Path(page).read_text(encoding="utf-8")
    harness = f"<script>\n(function () {{\n{script}\n}})();\n</script>\n</body>"
    with tempfile.TemporaryDirectory(prefix="meshbot-chromium-") as profile:
        copy = Path(profile) / "harness.html"
        copy.write_text(text.replace("</body>", harness, 1), encoding="utf-8")
        result = subprocess.run(
            [chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
             "--force-device-scale-factor=1", "--no-first-run", "--disable-extensions",
             f"--user-data-dir={profile}/profile", f"--window-size={width},{height}",
             "--virtual-time-budget=5000", "--run-all-compositor-stages-before-draw", "--dump-dom",
             copy.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    found = re.search(r'<body[^>]*\sdata-result="([^"]*)"', result.stdout)
    if result.returncode != 0 or found is None:
        raise RuntimeError(f"chromium exited {result.returncode} without a result:\n"
                           f"{result.stdout[-1000:]}\n{result.stderr[-2000:]}")
    return html.unescape(found.group(1))
