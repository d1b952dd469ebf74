#!/usr/bin/python3
"""Reference fixtures for vitcpp's image decoding, by Pillow (what timm and torchvision read
images with):

    cmyk.jpg          a 13 x 19 CMYK JPEG as Pillow writes one (Adobe's inverted values)
    cmyk_as_rgb.png   Pillow's Image.open("cmyk.jpg").convert("RGB"), lossless

vitcpp must decode cmyk.jpg to exactly cmyk_as_rgb.png's pixels (tests/data/test_image.cpp,
Image.CmykJpegIsPillowsRgb).

    /usr/bin/python3 tools/make_image_fixtures.py [--out tests/fixtures]

The output is deterministic for a given Pillow and libjpeg.
"""
import argparse
import os

import numpy as np
from PIL import Image


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
    print("wrote", jpg, "and cmyk_as_rgb.png")


if __name__ == "__main__":
    main()
