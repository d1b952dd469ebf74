#!/usr/bin/python3
"""Reference fixtures for vitcpp's color jitter (vit train --color-jitter), by torchvision, and
for the Pillow operations of timm's RandAugment (vit train --aa), by Pillow.

torchvision's ColorJitter applies brightness, contrast and saturation (and hue, which vitcpp
does not do) in a random order, each with a factor drawn from [max(0, 1 - s), 1 + s]. The
draws cannot be reproduced outside torch's generator, so the fixture fixes them: for a few
(order, factors) cases it applies torchvision.transforms.functional's adjust_brightness,
adjust_contrast and adjust_saturation to float32 images in [0, 1] and writes one
safetensors file:

    image3, image1         inputs [3, 5, 7] and [1, 5, 7] (float32 in [0, 1])
    out3.<k>, out1.<k>     case k's output for each
    __metadata__ cases     JSON [{"order": [i, j, l], "factors": [b, c, s]}], 0 brightness,
                           1 contrast, 2 saturation

RandAugment's ops are Pillow calls in timm (timm/data/auto_augment.py): ImageOps's
autocontrast, equalize, invert, posterize and solarize, a solarize-add LUT, ImageEnhance's
color, contrast, brightness and sharpness, and Image.rotate / Image.transform(AFFINE) with
bilinear sampling and a fill color. rand_augment_pil.safetensors holds, for an RGB and an L
image of random 8-bit pixels with some flat areas (so that equalize's steps and the smoothing
show), each op's output at a few arguments, as float32 pixels / 255:

    rgb, gray              the inputs [3, 9, 11] and [1, 9, 11]
    rgb.<k>, gray.<k>      op case k's output for each
    __metadata__ ops       JSON [[name, arg], ...] (names as vitcpp's PilOp), fill the fill
                           color of the geometric ops (per channel, 8-bit)

tv_blur.safetensors holds torchvision's GaussianBlur(23) (timm's --gaussian-blur-prob) at a
few sigmas: see write_tv_blur.

    /usr/bin/python3 tools/make_augment_fixtures.py [--out tests/fixtures]

The output is deterministic: the same torchvision gives the same bytes.
"""
import argparse
import json
import os

import torch
import torchvision.transforms.functional as TF

from PIL import Image, ImageEnhance, ImageFilter, ImageOps

from make_fixtures import write_safetensors

CASES = [
    {"order": [0, 1, 2], "factors": [1.3, 0.7, 1.4]},
    {"order": [2, 0, 1], "factors": [0.6, 1.35, 0.0]},
    {"order": [1, 2, 0], "factors": [1.0, 1.6, 0.65]},
    {"order": [0, 2, 1], "factors": [0.0, 0.9, 1.2]},
]


def jitter(img, order, factors):
    ops = [TF.adjust_brightness, TF.adjust_contrast, TF.adjust_saturation]
    for i in order:
        img = ops[i](img, factors[i])
    return img


FILL = (40, 128, 200)

# (vitcpp's PilOp name, argument): timm's arguments at a few magnitudes and signs.
PIL_OPS = [
    ["AutoContrast", 0], ["Equalize", 0], ["Invert", 0],
    ["Posterize", 0], ["Posterize", 1], ["Posterize", 3], ["Posterize", 8],
    ["Solarize", 0], ["Solarize", 76], ["Solarize", 230], ["Solarize", 256],
    ["SolarizeAdd", 33], ["SolarizeAdd", 99],
    ["Color", 0.1], ["Color", 0.64], ["Color", 1.72], ["Color", 1.9],
    ["Contrast", 0.1], ["Contrast", 0.73], ["Contrast", 1.27], ["Contrast", 1.9],
    ["Brightness", 0.37], ["Brightness", 1.72],
    ["Sharpness", 0.1], ["Sharpness", 1.81], ["Sharpness", 1.9],
    ["Rotate", 9.0], ["Rotate", -27.0], ["Rotate", 30.0], ["Rotate", 45.0], ["Rotate", 90.0], ["Rotate", -90.0],
    ["Rotate", 180.0],
    ["ShearX", 0.27], ["ShearX", -0.09], ["ShearY", 0.3],
    ["TranslateX", 4.455], ["TranslateX", -1.65], ["TranslateY", -3.645],
    # 3-Augment's (timm's desaturate at magnitude 10 is Color 0; its blur radius is drawn in
    # [0.1, 2]; the larger radii pass the image's sides) and --grayscale-prob's.
    ["Color", 0.0], ["Grayscale", 0],
    ["GaussianBlur", 0.1], ["GaussianBlur", 0.55], ["GaussianBlur", 1.3719], ["GaussianBlur", 2.0],
    ["GaussianBlur", 5.0], ["GaussianBlur", 9.0],
]

# torchvision's GaussianBlur(23) as timm's --gaussian-blur-prob applies it, at these sigmas.
TV_BLUR_SIGMAS = [0.1, 0.47, 1.0, 1.6180339, 2.0]


def solarize_add(img, add):
    lut = [min(255, i + add) if i < 128 else i for i in range(256)]
    return img.point(lut * len(img.getbands()))


def pil_op(img, name, arg):
    """timm's op functions (auto_augment.py), bilinear, with FILL (its first value for L)."""
    fill = FILL if img.mode == "RGB" else FILL[0]
    affine = lambda m: img.transform(img.size, Image.AFFINE, m, resample=Image.BILINEAR, fillcolor=fill)
    return {
        "AutoContrast": lambda: ImageOps.autocontrast(img),
        "Equalize": lambda: ImageOps.equalize(img),
        "Invert": lambda: ImageOps.invert(img),
        "Posterize": lambda: img if arg >= 8 else ImageOps.posterize(img, arg),
        "Solarize": lambda: ImageOps.solarize(img, arg),
        "SolarizeAdd": lambda: solarize_add(img, arg),
        "Color": lambda: ImageEnhance.Color(img).enhance(arg),
        "Contrast": lambda: ImageEnhance.Contrast(img).enhance(arg),
        "Brightness": lambda: ImageEnhance.Brightness(img).enhance(arg),
        "Sharpness": lambda: ImageEnhance.Sharpness(img).enhance(arg),
        "Rotate": lambda: img.rotate(arg, resample=Image.BILINEAR, fillcolor=fill),
        "ShearX": lambda: affine((1, arg, 0, 0, 1, 0)),
        "ShearY": lambda: affine((1, 0, 0, arg, 1, 0)),
        "TranslateX": lambda: affine((1, 0, arg, 0, 1, 0)),
        "TranslateY": lambda: affine((1, 0, 0, 0, 1, arg)),
        # torchvision's RandomGrayscale on a PIL image: convert("L"), as many channels as before.
        "Grayscale": lambda: TF.rgb_to_grayscale(img, num_output_channels=len(img.getbands())),
        "GaussianBlur": lambda: img.filter(ImageFilter.GaussianBlur(radius=arg)),
    }[name]()


def chw(img):
    """A PIL image as float32 [C, H, W] pixels / 255."""
    t = torch.tensor(list(img.getdata()), dtype=torch.float32) / 255
    return (t.view(img.size[1], img.size[0], -1)).permute(2, 0, 1).contiguous()


def write_pil_ops(out):
    g = torch.Generator().manual_seed(11)
    px = torch.randint(0, 256, (9, 11, 3), generator=g, dtype=torch.uint8)
    px[2:5, 3:8] = torch.tensor([30, 200, 90], dtype=torch.uint8)  # a flat patch
    rgb = Image.fromarray(px.numpy(), "RGB")
    gray = Image.fromarray(px[:, :, 1].contiguous().numpy(), "L")
    tensors = {"rgb": chw(rgb), "gray": chw(gray)}
    for k, (name, arg) in enumerate(PIL_OPS):
        tensors[f"rgb.{k}"] = chw(pil_op(rgb, name, arg))
        tensors[f"gray.{k}"] = chw(pil_op(gray, name, arg))
    path = os.path.join(out, "rand_augment_pil.safetensors")
    import PIL
    write_safetensors(path, tensors, {"ops": json.dumps(PIL_OPS), "fill": json.dumps(FILL), "pillow": PIL.__version__})
    print("wrote", path)


def write_tv_blur(out):
    """torchvision's GaussianBlur(23, sigma) on 8-bit PIL images of 14 x 17 (over 11 pixels a
    side, as its reflection padding needs): tv_blur.safetensors holds rgb, gray and, for each
    sigma k, rgb.<k> and gray.<k>, as float32 pixels / 255."""
    g = torch.Generator().manual_seed(13)
    px = torch.randint(0, 256, (14, 17, 3), generator=g, dtype=torch.uint8)
    px[3:9, 4:12] = torch.tensor([250, 12, 128], dtype=torch.uint8)  # a flat patch with edges
    rgb = Image.fromarray(px.numpy(), "RGB")
    gray = Image.fromarray(px[:, :, 0].contiguous().numpy(), "L")
    tensors = {"rgb": chw(rgb), "gray": chw(gray)}
    for k, sigma in enumerate(TV_BLUR_SIGMAS):
        tensors[f"rgb.{k}"] = chw(TF.gaussian_blur(rgb, 23, [sigma, sigma]))
        tensors[f"gray.{k}"] = chw(TF.gaussian_blur(gray, 23, [sigma, sigma]))
    path = os.path.join(out, "tv_blur.safetensors")
    write_safetensors(path, tensors, {"sigmas": json.dumps(TV_BLUR_SIGMAS), "kernel": "23",
                                      "torchvision": __import__("torchvision").__version__})
    print("wrote", path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
    args = ap.parse_args()
    g = torch.Generator().manual_seed(7)
    image3 = torch.rand(3, 5, 7, generator=g, dtype=torch.float32)
    image1 = torch.rand(1, 5, 7, generator=g, dtype=torch.float32)
    tensors = {"image3": image3, "image1": image1}
    for k, c in enumerate(CASES):
        tensors[f"out3.{k}"] = jitter(image3, c["order"], c["factors"])
        tensors[f"out1.{k}"] = jitter(image1, c["order"], c["factors"])
    path = os.path.join(args.out, "color_jitter.safetensors")
    write_safetensors(path, tensors, {"cases": json.dumps(CASES), "torchvision": __import__("torchvision").__version__})
    print("wrote", path)
    write_pil_ops(args.out)
    write_tv_blur(args.out)


if __name__ == "__main__":
    main()
