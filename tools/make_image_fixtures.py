#!/usr/bin/python3
"""Reference fixtures for vitcpp's image decoding, by Pillow (what timm and torchvision read
images with):

    cmyk.jpg          a 13 x 19 CMYK JPEG as Pillow writes one (Adobe's inverted values)
    cmyk_as_rgb.png   Pillow's Image.open("cmyk.jpg").convert("RGB"), lossless
    png_<case>.png    PNGs written here byte by byte, each a way a file could be read two
                      ways: 16-bit RGB, 16-bit gray (values above and below 255), 16-bit
                      gray + alpha, 8-bit RGB with a gAMA chunk of 1.0, a palette with
                      transparency, 2-bit gray
    png_<case>.pillow.png  Pillow's reading of it: convert("RGB"), or convert("L") for gray

vitcpp must decode cmyk.jpg to exactly cmyk_as_rgb.png's pixels, and each png_<case>.png to
its .pillow.png's (tests/data/test_image.cpp, Image.CmykJpegIsPillowsRgb and
Image.PngIsReadAsPillowReadsIt).

    /usr/bin/python3 tools/make_image_fixtures.py [--out tests/fixtures]

The output is deterministic for a given Pillow and libjpeg.
"""
import argparse
import os
import struct
import zlib

import numpy as np
from PIL import Image


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def write_png(path, rows, width, depth, color_type, extra=b"", interlace=0):
    """rows: the filtered scanlines' bytes (filter 0), already packed at `depth`."""
    ihdr = struct.pack(">IIBBBBB", width, len(rows), depth, color_type, 0, 0, interlace)
    raw = b"".join(b"\x00" + r for r in rows)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra + chunk(b"IDAT", zlib.compress(raw)) +
                chunk(b"IEND", b""))


def png_cases(out):
    h, w = 5, 9
    y, x = np.mgrid[0:h, 0:w]
    v16 = ((x * 7919 + y * 104729) % 65536).astype(">u2")
    v16[0, :4] = [0, 100, 255, 256]  # 16-bit gray: below 255 kept, above clipped
    rgb16 = np.stack([v16, v16[::-1], (v16 // 3)], axis=-1).astype(">u2")
    rgb8 = np.stack([(x * 29) % 256, (y * 53) % 256, ((x + y) * 17) % 256], axis=-1).astype(np.uint8)
    cases = {
        "rgb16": ([r.tobytes() for r in rgb16], 16, 2, b"", 0, "RGB"),
        "gray16": ([r.tobytes() for r in v16], 16, 0, b"", 0, "L"),
        "gray_alpha16": ([np.stack([v16[i], v16[i][::-1]], -1).astype(">u2").tobytes() for i in range(h)], 16, 4,
                         b"", 0, "L"),
        "gamma": ([r.tobytes() for r in rgb8], 8, 2, chunk(b"gAMA", struct.pack(">I", 100000)), 0, "RGB"),
        "palette_trns": ([((x[i] + y[i]) % 4).astype(np.uint8).tobytes() for i in range(h)], 8, 3,
                         chunk(b"PLTE", bytes([10, 20, 30, 200, 100, 50, 0, 255, 0, 90, 90, 250])) +
                         chunk(b"tRNS", bytes([0, 128])), 0, "RGB"),
        "gray2": ([np.packbits(np.unpackbits(((x[i] + y[i]) % 4).astype(np.uint8)[:, None], axis=1)[:, 6:]
                               .reshape(-1)).tobytes() for i in range(h)], 2, 0, b"", 0, "L"),
    }
    for name, (rows, depth, color_type, extra, interlace, mode) in cases.items():
        path = os.path.join(out, "png_" + name + ".png")
        write_png(path, rows, w, depth, color_type, extra, interlace)
        Image.open(path).convert(mode).save(os.path.join(out, "png_" + name + ".pillow.png"))
    return sorted(cases)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
    args = ap.parse_args()
    h, w = 13, 19
    y, x = np.mgrid[0:h, 0:w]
    # Every channel varies, black (K) too: R = (255 - K)(255 - C) / 255 must use all four.
    cmyk = np.stack([(x * 13) % 256, (y * 19) % 256, ((x + y) * 7 + 40) % 256, (x * y * 3) % 200],
                    axis=-1).astype(np.uint8)
    jpg = os.path.join(args.out, "cmyk.jpg")
    Image.fromarray(cmyk, "CMYK").save(jpg, quality=90)
    back = Image.open(jpg)
    assert back.mode == "CMYK", back.mode
    back.convert("RGB").save(os.path.join(args.out, "cmyk_as_rgb.png"))
    print("wrote", jpg, "and cmyk_as_rgb.png;", "png_" + ", png_".join(png_cases(args.out)))


if __name__ == "__main__":
    main()
