#!/usr/bin/python3
"""Reference fixtures for loading pretrained timm / Hugging Face ViTs and for their preprocessing.

Builds tiny random models in the exact tensor layout of timm's VisionTransformer and of Hugging
Face transformers' ViTForImageClassification, writes them as checkpoints the way the hubs ship
them (model.safetensors + config.json), and runs reference forwards in float64 that follow
timm's VisionTransformer.forward and HF's ViTForImageClassification.forward (written out here,
since neither library is installable). Every parameter is rounded to the dtype it is stored in
(F32 / F16 / BF16) before the reference forward, so the reference starts exactly where a loader
starts. Outputs, under tests/fixtures/pretrained/:

    timm_a/model.safetensors        timm names, stored BF16: 2 register tokens, no_embed_class,
                                    pre_norm (norm_pre, no patch_embed.proj.bias), no qkv bias,
                                    LayerScale (ls1/ls2.gamma), token pooling with `norm`
    timm_a/config.json              timm hub config (architecture, model_args, pretrained_cfg, labels)
    timm_b/model.safetensors        stored F16: non-square 24x40 input, qkv bias, no LayerScale,
                                    avg pooling with `fc_norm`
    timm_b/config.json
    timm_reg_map/, timm_cls_map/,   stored F32: timm 1.0's attention pool (global_pool 'map') with
    timm_prefix_map/                prefix tokens: 4 registers and no class token; a class token;
                                    a class token, 2 registers and model_args.pool_include_prefix
    timm_noconfig.safetensors       stored F32, no config.json beside it (shapes say everything
                                    but num_heads = 4)
    hf/model.safetensors            HF ViTForImageClassification names, F32
    hf_nonsquare/                   the same with image_size [48, 80], ViTImageProcessor at 48x80
    hf/config.json, hf/preprocessor_config.json
    <model>/expect.safetensors      (timm_noconfig.expect.safetensors for the third model)
        input.x     float32 [2, C, H, W]   random images
        out.logits  float32 [2, K]         reference forward (float64) of input.x
    posembed.safetensors            timm's resample_abs_pos_embed (bicubic, antialias=True)
        in.prefix1        [1, 1+4*4, 16]  1 prefix token, 4x4 grid
        out.prefix1.6x8   4x4 -> 6x8 (upsampling, non-square)
        out.prefix1.3x3   4x4 -> 3x3 (downsampling)
        in.prefix0        [1, 5*3, 8]     no prefix token, 5x3 grid
        out.prefix0.2x7   5x3 -> 2x7 (one axis down, one up)
        hf.prefix1.HxW, hf_scale.prefix1.HxW   transformers' interpolate_pos_encoding of in.prefix1
                          to 6x8 and 3x3: since 4.45.0 (size) and before (scale_factor + 0.1)
    images/                         real photos from scikit-image's data (see images/README.md)
        cat.jpg (173x131, JPEG q90 4:2:0), coffee.png (151x97 RGB),
        astronaut_gray.png (77x121, mode L), cat_rgba.png (61x45 RGBA, radial alpha),
        coffee_32.png (32x32: timm_a's and hf's input size), cat_40x24.png (40x24: timm_b's)
    preprocess.safetensors          per image stem S (decoded by PIL, .convert("RGB")):
        timm_a.S          float32 [3, 32, 32]  timm eval transform of timm_a's pretrained_cfg
        timm_b.S          float32 [3, 24, 40]  timm eval transform of timm_b's (ResizeKeepRatio)
        hf.S              float32 [3, 32, 32]  HF ViTImageProcessor of hf/preprocessor_config.json
        logits.timm_a.S   float32 [1, 5]       reference forward of timm_a on timm_a.S
        logits.hf.S       float32 [1, 3]       reference forward of hf on hf.S
        hf_nonsquare.S, logits.hf_nonsquare.S  the same for hf_nonsquare (48x80)
        pil.<f>.down.S    uint8 [37, 45, 3]    PIL Image.resize((45, 37), f), S in cat, coffee
        pil.<f>.up.cat_rgba uint8 [67, 91, 3]  PIL Image.resize((91, 67), f) of the 61x45 image
                          for f in nearest, box, bilinear, hamming, bicubic, lanczos
        __metadata__ images: {stem: file name under images/}

The photos are made from scikit-image's sample data (Debian package python3-skimage). The script
looks for it in --skimage-data, /usr/lib/python3/dist-packages/skimage/data and
/tmp/skimg/usr/lib/python3/dist-packages/skimage/data (`cd /tmp && apt-get download
python3-skimage && dpkg-deb -x python3-skimage_*.deb skimg`); without it, it reuses the
committed images/ and rebuilds everything else from them.

Run with Debian's PyTorch (the python3 first on PATH may not see it):

    /usr/bin/python3 tools/make_pretrained_fixtures.py [--out tests/fixtures/pretrained]

Before writing, the script checks its attention against nn.MultiheadAttention and its timm /
HF forwards (blocks without LayerScale) against the same models built from torch's
nn.TransformerEncoderLayer(norm_first=True); after writing, that every file reads back.

The output is deterministic: the same PyTorch, torchvision and Pillow give the same bytes.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torchvision import transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures  # noqa: E402  (safetensors reader, layer_norm)
from make_fixtures import layer_norm, read_safetensors  # noqa: E402

# make_fixtures sets float64 as the default dtype at import; the preprocessing must run in
# float32 as it does in timm / torchvision (ToTensor makes the default dtype), so set it back
# and write every float64 computation explicitly.
torch.set_default_dtype(torch.float32)
F64 = torch.float64

DTYPES = make_fixtures.DTYPES
write_safetensors = make_fixtures.write_safetensors


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


WRITTEN = {}  # path -> tensors (or None for non-safetensors files), checked at the end


def save(path, tensors, metadata=None):
    write_safetensors(path, tensors, metadata or {})
    WRITTEN[path] = tensors


# ---------------------------------------------------------------- parameters

def rand_value(name, shape, gen):
    """Random values of a useful scale (timm's 0.02 init would make every block negligible)."""
    r = torch.randn(shape, generator=gen, dtype=F64)
    if name.endswith("gamma"):  # LayerScale: far from 1 so that a dropped gamma shows
        return 0.5 + 0.2 * r
    if "cls_token" in name or "reg_token" in name or "latent" in name:
        return 0.5 * r
    if "pos_embed" in name or "position_embeddings" in name:
        return 0.2 * r
    if len(shape) == 4:  # patch embedding conv: unit-scale tokens
        return r / math.sqrt(shape[1] * shape[2] * shape[3])
    if name.startswith(("head.weight", "classifier.weight")):
        return 0.3 * r
    if ("norm" in name or "layernorm" in name) and name.endswith("weight"):
        return 1 + 0.1 * r
    if name.endswith("bias"):
        return 0.1 * r
    return 0.2 * r


def init_params(shapes, dtype, seed):
    """(stored tensors in `dtype`, float64 copies of exactly those values)."""
    gen = torch.Generator().manual_seed(seed)
    stored, ref = {}, {}
    for name, shape in shapes.items():
        stored[name] = rand_value(name, shape, gen).to(dtype)
        ref[name] = stored[name].to(F64)
    return stored, ref


# ---------------------------------------------------------------- timm VisionTransformer

def timm_shapes(c):
    """timm's parameter names and shapes for VisionTransformer(**c)."""
    D, C, P, K = c["embed_dim"], 3, c["patch_size"], c["num_classes"]
    M = int(D * c["mlp_ratio"])
    H, W = c["img_size"]
    N = (H // P) * (W // P)
    R = c.get("reg_tokens", 0)
    npre = (1 if c["class_token"] else 0) + R
    s = {"patch_embed.proj.weight": (D, C, P, P)}
    if not c.get("pre_norm", False):  # timm: PatchEmbed(bias=not pre_norm)
        s["patch_embed.proj.bias"] = (D,)
    if c["class_token"]:
        s["cls_token"] = (1, 1, D)
    if R:
        s["reg_token"] = (1, R, D)
    s["pos_embed"] = (1, N if c.get("no_embed_class", False) else N + npre, D)
    if c.get("pre_norm", False):
        s.update({"norm_pre.weight": (D,), "norm_pre.bias": (D,)})
    for i in range(c["depth"]):
        b = f"blocks.{i}."
        s.update({b + "norm1.weight": (D,), b + "norm1.bias": (D,), b + "attn.qkv.weight": (3 * D, D)})
        if c["qkv_bias"]:
            s[b + "attn.qkv.bias"] = (3 * D,)
        s.update({b + "attn.proj.weight": (D, D), b + "attn.proj.bias": (D,)})
        if c.get("init_values"):
            s[b + "ls1.gamma"] = (D,)
        s.update({b + "norm2.weight": (D,), b + "norm2.bias": (D,),
                  b + "mlp.fc1.weight": (M, D), b + "mlp.fc1.bias": (M,),
                  b + "mlp.fc2.weight": (D, M), b + "mlp.fc2.bias": (D,)})
        if c.get("init_values"):
            s[b + "ls2.gamma"] = (D,)
    # use_fc_norm = global_pool in ('avg', 'avgmax', 'max') when fc_norm is None (the default)
    norm = "fc_norm" if c["global_pool"] == "avg" else "norm"
    s.update({norm + ".weight": (D,), norm + ".bias": (D,)})
    if c["global_pool"] == "map":  # AttentionPoolLatent(D, num_heads, mlp_ratio): one latent, qkv bias
        s.update({"attn_pool.latent": (1, 1, D), "attn_pool.q.weight": (D, D), "attn_pool.q.bias": (D,),
                  "attn_pool.kv.weight": (2 * D, D), "attn_pool.kv.bias": (2 * D,),
                  "attn_pool.proj.weight": (D, D), "attn_pool.proj.bias": (D,),
                  "attn_pool.norm.weight": (D,), "attn_pool.norm.bias": (D,),
                  "attn_pool.mlp.fc1.weight": (M, D), "attn_pool.mlp.fc1.bias": (M,),
                  "attn_pool.mlp.fc2.weight": (D, M), "attn_pool.mlp.fc2.bias": (D,)})
    s.update({"head.weight": (K, D), "head.bias": (K,)})
    return s


def timm_forward(c, p, x, attn_mask=None):
    """VisionTransformer.forward: forward_features (patch_embed, _pos_embed, norm_pre, blocks,
    norm) then forward_head (pool, fc_norm, head). LayerNorm eps 1e-6, exact GELU. attn_mask:
    timm 1.0's, added to every block's attention scores (bool: False is -inf); the pooling
    reads every token as without it."""
    eps = 1e-6
    t, npre = timm_forward_features(c, p, x, attn_mask)
    if c["global_pool"] == "map":
        pooled = timm_attn_pool(p, t if c.get("pool_include_prefix") else t[:, npre:], c["num_heads"], eps)
    else:
        kept = t if c.get("pool_include_prefix") else t[:, npre:]  # timm 1.0's global_pool_nlc
        pooled = kept.mean(dim=1) if c["global_pool"] == "avg" else t[:, 0]
    if "fc_norm.weight" in p:
        pooled = layer_norm(pooled, p["fc_norm.weight"], p["fc_norm.bias"], eps)
    return F.linear(pooled, p["head.weight"], p["head.bias"])


def timm_forward_features(c, p, x, attn_mask=None):
    """forward_features' tokens [B, T, D] and the number of prefix tokens."""
    eps, B = 1e-6, x.shape[0]
    D, nh = c["embed_dim"], c["num_heads"]
    hd = D // nh
    t = F.conv2d(x, p["patch_embed.proj.weight"], p.get("patch_embed.proj.bias"), stride=c["patch_size"])
    t = t.flatten(2).transpose(1, 2)  # [B, N, D], row-major grid
    prefix = [p[n].expand(B, -1, -1) for n in ("cls_token", "reg_token") if n in p]  # cls first, then reg
    if c.get("no_embed_class", False):
        t = torch.cat(prefix + [t + p["pos_embed"]], dim=1)  # pos_embed covers the patches only
    else:
        t = torch.cat(prefix + [t], dim=1) + p["pos_embed"]
    npre = sum(v.shape[1] for v in prefix)
    if "norm_pre.weight" in p:
        t = layer_norm(t, p["norm_pre.weight"], p["norm_pre.bias"], eps)
    T = t.shape[1]
    for i in range(c["depth"]):
        b = f"blocks.{i}."
        h = layer_norm(t, p[b + "norm1.weight"], p[b + "norm1.bias"], eps)
        qkv = F.linear(h, p[b + "attn.qkv.weight"], p.get(b + "attn.qkv.bias"))
        q, k, v = qkv.reshape(B, T, 3, nh, hd).permute(2, 0, 3, 1, 4).unbind(0)
        scores = (q * hd ** -0.5) @ k.transpose(-2, -1)
        if attn_mask is not None:  # timm's resolve_self_attn_mask
            bias = attn_mask if attn_mask.dtype != torch.bool else torch.zeros(
                attn_mask.shape, dtype=scores.dtype).masked_fill(~attn_mask, float("-inf"))
            scores = scores + bias
        a = scores.softmax(dim=-1) @ v
        a = F.linear(a.transpose(1, 2).reshape(B, T, D), p[b + "attn.proj.weight"], p[b + "attn.proj.bias"])
        t = t + (a * p[b + "ls1.gamma"] if b + "ls1.gamma" in p else a)
        h = layer_norm(t, p[b + "norm2.weight"], p[b + "norm2.bias"], eps)
        h = F.linear(F.gelu(F.linear(h, p[b + "mlp.fc1.weight"], p[b + "mlp.fc1.bias"])),
                     p[b + "mlp.fc2.weight"], p[b + "mlp.fc2.bias"])
        t = t + (h * p[b + "ls2.gamma"] if b + "ls2.gamma" in p else h)
    if "norm.weight" in p:
        t = layer_norm(t, p["norm.weight"], p["norm.bias"], eps)
    return t, npre


def timm_attn_pool(p, t, nh, eps):
    """timm 1.0's VisionTransformer.pool() with an attention pool: t holds the tokens it reads
    (the patches; every token with pool_include_prefix), AttentionPoolLatent's forward on them."""
    B, N, D = t.shape
    hd = D // nh
    q = F.linear(p["attn_pool.latent"], p["attn_pool.q.weight"], p["attn_pool.q.bias"])
    q = q.expand(B, -1, -1).reshape(B, 1, nh, hd).transpose(1, 2)
    k, v = F.linear(t, p["attn_pool.kv.weight"], p["attn_pool.kv.bias"]).reshape(B, N, 2, nh, hd).permute(
        2, 0, 3, 1, 4).unbind(0)
    y = (((q * hd ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1) @ v).transpose(1, 2).reshape(B, 1, D)
    y = F.linear(y, p["attn_pool.proj.weight"], p["attn_pool.proj.bias"])
    h = layer_norm(y, p["attn_pool.norm.weight"], p["attn_pool.norm.bias"], eps)
    h = F.linear(F.gelu(F.linear(h, p["attn_pool.mlp.fc1.weight"], p["attn_pool.mlp.fc1.bias"])),
                 p["attn_pool.mlp.fc2.weight"], p["attn_pool.mlp.fc2.bias"])
    return (y + h)[:, 0]


# ---------------------------------------------------------------- HF ViTForImageClassification

def hf_pair(v):
    """transformers' image_size / patch_size: a number or [height, width]."""
    return (v, v) if isinstance(v, int) else tuple(v)


def hf_shapes(c):
    D, I, C = c["hidden_size"], c["intermediate_size"], c["num_channels"]
    (H, W), (ph, pw) = hf_pair(c["image_size"]), hf_pair(c["patch_size"])
    N = (H // ph) * (W // pw)
    e = "vit.embeddings."
    s = {e + "cls_token": (1, 1, D), e + "position_embeddings": (1, 1 + N, D),
         e + "patch_embeddings.projection.weight": (D, C, ph, pw), e + "patch_embeddings.projection.bias": (D,)}
    for i in range(c["num_hidden_layers"]):
        L = f"vit.encoder.layer.{i}."
        s.update({L + "layernorm_before.weight": (D,), L + "layernorm_before.bias": (D,)})
        for n in ("query", "key", "value"):
            s[L + f"attention.attention.{n}.weight"] = (D, D)
            if c["qkv_bias"]:
                s[L + f"attention.attention.{n}.bias"] = (D,)
        s.update({L + "attention.output.dense.weight": (D, D), L + "attention.output.dense.bias": (D,),
                  L + "layernorm_after.weight": (D,), L + "layernorm_after.bias": (D,),
                  L + "intermediate.dense.weight": (I, D), L + "intermediate.dense.bias": (I,),
                  L + "output.dense.weight": (D, I), L + "output.dense.bias": (D,)})
    K = len(c["id2label"])
    s.update({"vit.layernorm.weight": (D,), "vit.layernorm.bias": (D,), "classifier.weight": (K, D),
              "classifier.bias": (K,)})
    return s


def hf_forward(c, p, x):
    """ViTForImageClassification.forward: ViTEmbeddings (cat(cls, patches) + position_embeddings),
    ViTLayer x L (layernorm_before -> self-attention -> output.dense, + residual; layernorm_after ->
    intermediate.dense -> gelu -> output.dense, + residual), vit.layernorm, classifier on token 0."""
    eps, B = c["layer_norm_eps"], x.shape[0]
    D, nh = c["hidden_size"], c["num_attention_heads"]
    hd = D // nh
    e = "vit.embeddings."
    t = F.conv2d(x, p[e + "patch_embeddings.projection.weight"], p[e + "patch_embeddings.projection.bias"],
                 stride=hf_pair(c["patch_size"])).flatten(2).transpose(1, 2)
    t = torch.cat([p[e + "cls_token"].expand(B, -1, -1), t], dim=1) + p[e + "position_embeddings"]
    T = t.shape[1]

    def heads(y):  # transpose_for_scores: [B, T, D] -> [B, nh, T, hd]
        return y.view(B, T, nh, hd).permute(0, 2, 1, 3)

    for i in range(c["num_hidden_layers"]):
        L = f"vit.encoder.layer.{i}."
        a = L + "attention.attention."
        h = layer_norm(t, p[L + "layernorm_before.weight"], p[L + "layernorm_before.bias"], eps)
        q, k, v = (heads(F.linear(h, p[a + n + ".weight"], p.get(a + n + ".bias"))) for n in ("query", "key", "value"))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        ctx = (scores.softmax(dim=-1) @ v).permute(0, 2, 1, 3).reshape(B, T, D)
        t = t + F.linear(ctx, p[L + "attention.output.dense.weight"], p[L + "attention.output.dense.bias"])
        h = layer_norm(t, p[L + "layernorm_after.weight"], p[L + "layernorm_after.bias"], eps)
        h = F.gelu(F.linear(h, p[L + "intermediate.dense.weight"], p[L + "intermediate.dense.bias"]))
        t = t + F.linear(h, p[L + "output.dense.weight"], p[L + "output.dense.bias"])
    t = layer_norm(t, p["vit.layernorm.weight"], p["vit.layernorm.bias"], eps)
    return F.linear(t[:, 0], p["classifier.weight"], p["classifier.bias"])


# ---------------------------------------------------------------- the four models

TIMM_A = {"img_size": 32, "patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 2, "mlp_ratio": 2.0,
          "qkv_bias": False, "init_values": 1e-5, "reg_tokens": 2, "no_embed_class": True, "pre_norm": True,
          "class_token": True, "global_pool": "token"}
TIMM_A_CFG = {
    "architecture": "vit_test_patch8_32", "num_classes": 5, "num_features": 32, "global_pool": "token",
    "model_args": TIMM_A,  # global_pool also here: timm builds the model from model_args
    "pretrained_cfg": {"tag": "test", "input_size": [3, 32, 32], "interpolation": "bicubic", "crop_pct": 0.875,
                       "crop_mode": "center", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225],
                       "num_classes": 5, "first_conv": "patch_embed.proj", "classifier": "head"},
    "label_names": ["apple", "bus", "cat", "dog", "eel"]}

TIMM_B = {"img_size": [24, 40], "patch_size": 8, "embed_dim": 24, "depth": 2, "num_heads": 3, "mlp_ratio": 2.0,
          "qkv_bias": True, "class_token": True, "global_pool": "avg"}
TIMM_B_CFG = {
    "architecture": "vit_test_patch8_24x40", "num_classes": 4, "num_features": 24, "global_pool": "avg",
    "model_args": TIMM_B,
    "pretrained_cfg": {"tag": "test", "input_size": [3, 24, 40], "interpolation": "bilinear", "crop_pct": 1.0,
                       "crop_mode": "center", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5],
                       "num_classes": 4, "first_conv": "patch_embed.proj", "classifier": "head"},
    "label_names": ["north", "east", "south", "west"]}

# timm 1.0's attention pool with prefix tokens: the pool reads the patches alone, unless
# pool_include_prefix. Registers without a class token (vit_so150m_patch16_reg4_map_256's
# layout), a class token, and both with pool_include_prefix.
def timm_map_cfg(name, num_classes, **args):
    model_args = dict({"img_size": 24, "patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 4,
                       "mlp_ratio": 2.0, "qkv_bias": True, "global_pool": "map"}, **args)
    return {"architecture": name, "num_classes": num_classes, "num_features": 32, "global_pool": "map",
            "model_args": model_args,
            "pretrained_cfg": {"tag": "test", "input_size": [3, 24, 24], "interpolation": "bicubic",
                               "crop_pct": 1.0, "crop_mode": "center", "mean": [0.5] * 3, "std": [0.5] * 3,
                               "num_classes": num_classes, "first_conv": "patch_embed.proj",
                               "classifier": "head"}}


TIMM_MAP_CFGS = {
    "timm_reg_map": timm_map_cfg("vit_test_patch8_reg4_map_24", 4, class_token=False, reg_tokens=4),
    "timm_cls_map": timm_map_cfg("vit_test_patch8_map_24", 3, class_token=True),
    "timm_prefix_map": timm_map_cfg("vit_test_patch8_reg2_map_24", 3, class_token=True, reg_tokens=2,
                                    pool_include_prefix=True),
}

TIMM_NOCONFIG = {"img_size": 16, "patch_size": 4, "embed_dim": 16, "depth": 1, "num_heads": 4, "mlp_ratio": 2.0,
                 "qkv_bias": True, "class_token": True, "global_pool": "token", "num_classes": 3}

HF_LABELS = ["tabby", "teapot", "rocket"]
HF_CFG = {
    "architectures": ["ViTForImageClassification"], "model_type": "vit", "hidden_size": 32,
    "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64, "hidden_act": "gelu",
    "layer_norm_eps": 1e-12, "image_size": 32, "patch_size": 8, "num_channels": 3, "qkv_bias": True,
    "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "initializer_range": 0.02,
    "encoder_stride": 8, "id2label": {str(i): n for i, n in enumerate(HF_LABELS)},
    "label2id": {n: i for i, n in enumerate(HF_LABELS)}, "torch_dtype": "float32",
    "transformers_version": "4.40.0"}
HF_PREPROCESSOR = {
    "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5], "image_processor_type": "ViTImageProcessor", "resample": 2,
    "rescale_factor": 0.00392156862745098, "size": {"height": 32, "width": 32}}


# transformers' ViTConfig with image_size and patch_size as [height, width] pairs (ViTPose's
# backbone is 256x192): a 48x80 input in 16x16 patches, ViTImageProcessor at that size.
HF_NONSQUARE_CFG = dict(HF_CFG, image_size=[48, 80], patch_size=16, encoder_stride=16)
HF_NONSQUARE_PREPROCESSOR = dict(HF_PREPROCESSOR, resample=3, size={"height": 48, "width": 80})


def timm_model_cfg(model_args, num_classes):
    c = dict(model_args, num_classes=num_classes)
    if isinstance(c["img_size"], int):
        c["img_size"] = [c["img_size"], c["img_size"]]
    return c


def make_expect(path, forward, cfg, params, shape, seed):
    """input.x [2, C, H, W] float32 and the float64 reference logits of exactly those values."""
    x = torch.randn(2, *shape, generator=torch.Generator().manual_seed(seed)).float()
    logits = forward(cfg, params, x.to(F64))
    save(path, {"input.x": x, "out.logits": logits.float()})
    return logits


def model_dir(out, name, forward, c, shapes, dtype, seed, jsons, input_shape, input_seed):
    """out/name: model.safetensors (stored in dtype), the json files {file name: object},
    expect.safetensors; returns (forward, c, the float64 parameters)."""
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    stored, ref = init_params(shapes, dtype, seed)
    save(os.path.join(d, "model.safetensors"), stored, {"format": "pt"})
    for fname, obj in jsons.items():
        write_json(os.path.join(d, fname), obj)
        WRITTEN[os.path.join(d, fname)] = None
    make_expect(os.path.join(d, "expect.safetensors"), forward, c, ref, input_shape, input_seed)
    return forward, c, ref


def make_models(out):
    models = {}
    for name, cfg_json, dtype, seed in (("timm_a", TIMM_A_CFG, torch.bfloat16, 10),
                                        ("timm_b", TIMM_B_CFG, torch.float16, 20)):
        c = timm_model_cfg(cfg_json["model_args"], cfg_json["num_classes"])
        models[name] = model_dir(out, name, timm_forward, c, timm_shapes(c), dtype, seed,
                                 {"config.json": cfg_json}, [3] + c["img_size"], seed + 1)
    for seed, (name, cfg_json) in enumerate(TIMM_MAP_CFGS.items(), start=50):
        c = timm_model_cfg(cfg_json["model_args"], cfg_json["num_classes"])
        model_dir(out, name, timm_forward, c, timm_shapes(c), torch.float32, seed, {"config.json": cfg_json},
                  [3] + c["img_size"], seed + 100)

    c = timm_model_cfg(TIMM_NOCONFIG, TIMM_NOCONFIG["num_classes"])
    stored, ref = init_params(timm_shapes(c), torch.float32, 30)
    save(os.path.join(out, "timm_noconfig.safetensors"), stored, {"format": "pt"})
    make_expect(os.path.join(out, "timm_noconfig.expect.safetensors"), timm_forward, c, ref, [3] + c["img_size"], 31)

    for name, cfg, pre, seed in (("hf", HF_CFG, HF_PREPROCESSOR, 40),
                                 ("hf_nonsquare", HF_NONSQUARE_CFG, HF_NONSQUARE_PREPROCESSOR, 42)):
        models[name] = model_dir(out, name, hf_forward, cfg, hf_shapes(cfg), torch.float32, seed,
                                 {"config.json": cfg, "preprocessor_config.json": pre},
                                 [3, *hf_pair(cfg["image_size"])], seed + 1)
    return models


# ---------------------------------------------------------------- position-embedding resampling

def resample_abs_pos_embed(posemb, new_size, old_size, num_prefix_tokens, interpolation="bicubic", antialias=True):
    """timm.layers.resample_abs_pos_embed (interpolation='bicubic', antialias=True by default;
    timm's loader takes bilinear without antialiasing for flexivit_*). timm casts to float32
    around F.interpolate; torch 1.13 does antialiased bicubic in float64 too, so this reference
    stays in float64 (the two differ by ~1e-6)."""
    prefix, grid = posemb[:, :num_prefix_tokens], posemb[:, num_prefix_tokens:]
    D = grid.shape[-1]
    grid = grid.reshape(1, old_size[0], old_size[1], D).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=new_size, mode=interpolation, antialias=antialias, align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, D)
    return torch.cat([prefix, grid], dim=1)


def hf_interpolate_pos_encoding(pos, new_h, new_w, scale_factor=False, prefix=1):
    """transformers' ViTEmbeddings.interpolate_pos_encoding on position_embeddings [1, prefix
    + n*n, D] for a new_h x new_w patch grid (no antialias, align_corners=False). From 4.45.0
    (PR 33226): F.interpolate(size=(new_h, new_w)); before: scale_factor=((new_h + 0.1) / n,
    (new_w + 0.1) / n), the +0.1 "to avoid floating point error" (dino issue 8)."""
    num_positions, dim = pos.shape[1] - prefix, pos.shape[-1]
    n = int(math.sqrt(num_positions))
    grid = pos[:, prefix:].reshape(1, n, n, dim).permute(0, 3, 1, 2)
    if scale_factor:
        h0, w0 = new_h + 0.1, new_w + 0.1
        grid = F.interpolate(grid, scale_factor=(h0 / math.sqrt(num_positions), w0 / math.sqrt(num_positions)),
                             mode="bicubic", align_corners=False)
        assert int(h0) == grid.shape[-2] and int(w0) == grid.shape[-1]
    else:
        grid = F.interpolate(grid, size=(new_h, new_w), mode="bicubic", align_corners=False)
    return torch.cat([pos[:, :prefix], grid.permute(0, 2, 3, 1).reshape(1, -1, dim)], dim=1)


def make_posembed(out):
    gen = torch.Generator().manual_seed(50)
    p1 = torch.randn(1, 1 + 4 * 4, 16, generator=gen).float()
    p0 = torch.randn(1, 5 * 3, 8, generator=gen).float()
    t = {"in.prefix1": p1, "in.prefix0": p0,
         "out.prefix1.6x8": resample_abs_pos_embed(p1.to(F64), (6, 8), (4, 4), 1).float(),
         "out.prefix1.3x3": resample_abs_pos_embed(p1.to(F64), (3, 3), (4, 4), 1).float(),
         "out.prefix0.2x7": resample_abs_pos_embed(p0.to(F64), (2, 7), (5, 3), 0).float()}
    for h, w in ((6, 8), (3, 3)):  # timm's loader for flexivit_*: up and down
        t[f"bilinear.prefix1.{h}x{w}"] = resample_abs_pos_embed(p1.to(F64), (h, w), (4, 4), 1, "bilinear",
                                                                 False).float()
    for h, w in ((6, 8), (3, 3)):  # transformers' two forms, one target non-square
        t[f"hf.prefix1.{h}x{w}"] = hf_interpolate_pos_encoding(p1.to(F64), h, w).float()
        t[f"hf_scale.prefix1.{h}x{w}"] = hf_interpolate_pos_encoding(p1.to(F64), h, w, scale_factor=True).float()
    save(os.path.join(out, "posembed.safetensors"), t)


# ---------------------------------------------------------------- images

# scikit-image's sample photos (skimage/data/_fetchers.py docstrings):
#   chelsea.png   "Chelsea the cat", CC0 by the photographer (Stefan van der Walt)
#   coffee.png    "Coffee cup", courtesy of Pikolo Espresso Bar, CC0 by the photographer (Rachel Michetti)
#   astronaut.png Eileen Collins, NASA Great Images database, public domain
# The package itself is BSD-3-Clause (debian/copyright).
IMAGES = {"cat": "cat.jpg", "coffee": "coffee.png", "astronaut_gray": "astronaut_gray.png", "cat_rgba": "cat_rgba.png",
          # Images already at a model's input size: timm still resizes them to size / crop_pct and
          # crops (timm_a: 32x32 -> 36x36 -> 32x32); at crop_pct 1 (timm_b: 40x24) that is the identity.
          "coffee_32": "coffee_32.png", "cat_40x24": "cat_40x24.png"}
SKIMAGE_DIRS = ["/usr/lib/python3/dist-packages/skimage/data", "/tmp/skimg/usr/lib/python3/dist-packages/skimage/data"]

IMAGES_README = """\
# Test images

Small crops of scikit-image's sample photos (Debian package python3-skimage 0.19, directory
skimage/data), resized to odd sizes by tools/make_pretrained_fixtures.py:

| file | source | licence |
|---|---|---|
| cat.jpg (173x131, JPEG quality 90, 4:2:0) | chelsea.png, "Chelsea the cat" | CC0, photographer Stefan van der Walt |
| cat_rgba.png (61x45, RGBA, radial alpha) | chelsea.png | CC0, photographer Stefan van der Walt |
| coffee.png (151x97, RGB) | coffee.png, "Coffee cup", courtesy of Pikolo Espresso Bar | CC0, photographer Rachel Michetti |
| astronaut_gray.png (77x121, mode L) | astronaut.png, Eileen Collins, NASA Great Images database | public domain |
| coffee_32.png (32x32, RGB: timm_a's and hf's input size) | coffee.png | CC0, photographer Rachel Michetti |
| cat_40x24.png (40x24, RGB: timm_b's input size) | chelsea.png | CC0, photographer Stefan van der Walt |

The licences are as stated in scikit-image's skimage/data/_fetchers.py; the package's code is
BSD-3-Clause (/usr/share/doc/python3-skimage/copyright).
"""


def find_skimage(arg):
    for d in ([arg] if arg else []) + SKIMAGE_DIRS:
        if d and all(os.path.exists(os.path.join(d, f)) for f in ("chelsea.png", "coffee.png", "astronaut.png")):
            return d
    if arg:
        sys.exit(f"{arg}: no chelsea.png, coffee.png, astronaut.png there")
    return None


def make_images(img_dir, src):
    """Crop / resize the photos to odd sizes with fixed encoder settings (same bytes on rerun)."""
    os.makedirs(img_dir, exist_ok=True)
    chelsea = Image.open(os.path.join(src, "chelsea.png")).convert("RGB")  # 451x300
    coffee = Image.open(os.path.join(src, "coffee.png")).convert("RGB")  # 600x400
    astronaut = Image.open(os.path.join(src, "astronaut.png")).convert("RGB")  # 512x512

    cat = chelsea.crop((30, 0, 426, 300)).resize((173, 131), Image.LANCZOS)
    cat.save(os.path.join(img_dir, "cat.jpg"), quality=90, subsampling=2, optimize=False, progressive=False)
    coffee.crop((0, 8, 600, 393)).resize((151, 97), Image.LANCZOS).save(
        os.path.join(img_dir, "coffee.png"), compress_level=9)
    astronaut.crop((110, 0, 410, 471)).resize((77, 121), Image.LANCZOS).convert("L").save(
        os.path.join(img_dir, "astronaut_gray.png"), compress_level=9, icc_profile=None)  # drop the source's ICC

    # RGBA: the cat's face with a radial alpha (255 in the middle, 0 in the corners).
    face = chelsea.crop((60, 30, 360, 251)).resize((61, 45), Image.LANCZOS)
    yy, xx = np.mgrid[0:45, 0:61]
    r = np.sqrt(((xx - 30) / 30.0) ** 2 + ((yy - 22) / 22.0) ** 2)
    alpha = np.clip(np.round(255 * (1.3 - r) / 0.8), 0, 255).astype(np.uint8)
    rgba = np.dstack([np.asarray(face), alpha])
    Image.fromarray(rgba, "RGBA").save(os.path.join(img_dir, "cat_rgba.png"), compress_level=9)
    coffee.crop((100, 0, 500, 393)).resize((32, 32), Image.LANCZOS).save(
        os.path.join(img_dir, "coffee_32.png"), compress_level=9)
    chelsea.crop((30, 30, 430, 270)).resize((40, 24), Image.LANCZOS).save(
        os.path.join(img_dir, "cat_40x24.png"), compress_level=9)

    with open(os.path.join(img_dir, "README.md"), "w") as f:
        f.write(IMAGES_README)


# ---------------------------------------------------------------- preprocessing references

def timm_eval_transform(pcfg):
    """timm.data.transforms_factory.transforms_imagenet_eval for crop_mode 'center'."""
    img_size = tuple(pcfg["input_size"][-2:])
    crop_pct, interp = pcfg["crop_pct"], pcfg["interpolation"]
    assert pcfg["crop_mode"] == "center"
    scale_size = tuple(math.floor(x / crop_pct) for x in img_size)
    interp_mode = {"bilinear": transforms.InterpolationMode.BILINEAR,
                   "bicubic": transforms.InterpolationMode.BICUBIC}[interp]
    if scale_size[0] == scale_size[1]:
        # torchvision Resize with an int: the shorter side -> scale_size, the longer int(s * long / short)
        resize = transforms.Resize(scale_size[0], interpolation=interp_mode)
    else:
        # timm calls ResizeKeepRatio(scale_size) here WITHOUT the config's interpolation, so it
        # is always ResizeKeepRatio's default, bilinear.
        resize = resize_keep_ratio(scale_size)
    return transforms.Compose([resize, transforms.CenterCrop(img_size), transforms.ToTensor(),
                               transforms.Normalize(mean=torch.tensor(pcfg["mean"]), std=torch.tensor(pcfg["std"]))])


def resize_keep_ratio(target_size, longest=0.0):
    """timm.data.transforms.ResizeKeepRatio (no random scale / aspect), interpolation bilinear."""
    def apply(img):
        w, h = img.size
        ratio_h, ratio_w = h / target_size[0], w / target_size[1]
        ratio = max(ratio_h, ratio_w) * longest + min(ratio_h, ratio_w) * (1.0 - longest)
        size = [round(x / ratio) for x in (h, w)]  # Python round: half to even
        return transforms.functional.resize(img, size, transforms.InterpolationMode.BILINEAR)
    return apply


def hf_vit_processor(img, pp):
    """transformers' ViTImageProcessor.preprocess on a PIL RGB image: to numpy uint8, resize via
    PIL (image.resize((width, height), resample)), rescale (uint8 -> float64 * factor -> float32),
    normalize in float32 ((x - mean) / std), channels first."""
    size = pp["size"]
    arr = np.asarray(img.resize((size["width"], size["height"]), resample=pp["resample"]))
    arr = (arr.astype(np.float64) * pp["rescale_factor"]).astype(np.float32)
    arr = (arr - np.array(pp["image_mean"], dtype=np.float32)) / np.array(pp["image_std"], dtype=np.float32)
    return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


PIL_FILTERS = {"nearest": Image.NEAREST, "box": Image.BOX, "bilinear": Image.BILINEAR,
               "hamming": Image.HAMMING, "bicubic": Image.BICUBIC, "lanczos": Image.LANCZOS}


def make_preprocess(out, img_dir, models):
    t = {}
    for stem, fname in IMAGES.items():
        img = Image.open(os.path.join(img_dir, fname)).convert("RGB")  # RGBA: alpha dropped; L: replicated
        t[f"timm_a.{stem}"] = timm_eval_transform(TIMM_A_CFG["pretrained_cfg"])(img)
        t[f"timm_b.{stem}"] = timm_eval_transform(TIMM_B_CFG["pretrained_cfg"])(img)
        t[f"hf.{stem}"] = hf_vit_processor(img, HF_PREPROCESSOR)
        t[f"hf_nonsquare.{stem}"] = hf_vit_processor(img, HF_NONSQUARE_PREPROCESSOR)
        for m in ("timm_a", "hf", "hf_nonsquare"):
            fwd, c, p = models[m]
            t[f"logits.{m}.{stem}"] = fwd(c, p, t[f"{m}.{stem}"][None].to(F64)).float()
        for f, flt in PIL_FILTERS.items():
            if stem in ("cat", "coffee"):
                t[f"pil.{f}.down.{stem}"] = torch.from_numpy(np.asarray(img.resize((45, 37), flt)).copy())
            if stem == "cat_rgba":  # 61x45 -> 91x67 (the photos' enlargements would be ~100 KB each)
                t[f"pil.{f}.up.{stem}"] = torch.from_numpy(np.asarray(img.resize((91, 67), flt)).copy())
    for n, v in t.items():
        assert v.dtype in (torch.float32, torch.uint8), n
    save(os.path.join(out, "preprocess.safetensors"), t, {"images": json.dumps(IMAGES)})


# ---------------------------------------------------------------- checks

def check_written(out):
    """Every file reads back; safetensors to the same tensors (bit for bit)."""
    assert not os.path.exists(os.path.join(out, "config.json")), "timm_noconfig needs a folder without config.json"
    for path, tensors in WRITTEN.items():
        if tensors is None:
            with open(path) as f:
                json.load(f)
            continue
        back, _ = read_safetensors(path)
        assert set(back) == set(tensors), path
        for n, v in tensors.items():
            assert back[n].dtype == v.dtype and torch.equal(back[n], v), (path, n)


def check_reference_math():
    """Self-checks of the references against torch's own modules (cheap; catches typos)."""
    gen = torch.Generator().manual_seed(60)
    # timm's fused qkv attention == nn.MultiheadAttention with the same packed weights
    x = torch.randn(2, 5, 12, generator=gen, dtype=F64)
    w, b = torch.randn(36, 12, generator=gen, dtype=F64), torch.randn(36, generator=gen, dtype=F64)
    pw, pb = torch.randn(12, 12, generator=gen, dtype=F64), torch.randn(12, generator=gen, dtype=F64)
    mha = torch.nn.MultiheadAttention(12, 3, batch_first=True, dtype=F64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(w), mha.in_proj_bias.copy_(b)
        mha.out_proj.weight.copy_(pw), mha.out_proj.bias.copy_(pb)
    q, k, v = F.linear(x, w, b).reshape(2, 5, 3, 3, 4).permute(2, 0, 3, 1, 4).unbind(0)
    mine = F.linear((((q * 4 ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v).transpose(1, 2).reshape(2, 5, 12), pw, pb)
    assert torch.allclose(mine, mha(x, x, x, need_weights=False)[0], atol=1e-12), "attention"


def encoder_layer(D, nh, M, eps, qkv_w, qkv_b, p, names):
    """torch's own pre-norm nn.TransformerEncoderLayer loaded with one block's weights."""
    layer = torch.nn.TransformerEncoderLayer(D, nh, M, dropout=0.0, activation="gelu", layer_norm_eps=eps,
                                             batch_first=True, norm_first=True, dtype=F64).eval()
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(qkv_w)
        layer.self_attn.in_proj_bias.copy_(qkv_b if qkv_b is not None else torch.zeros(3 * D, dtype=F64))
        for mod, n in zip((layer.self_attn.out_proj, layer.norm1, layer.norm2, layer.linear1, layer.linear2), names):
            mod.weight.copy_(p[n + ".weight"]), mod.bias.copy_(p[n + ".bias"])
    return layer


def check_forwards_against_torch(models):
    """timm_forward / hf_forward (blocks without LayerScale) == the same models built from
    torch.nn.TransformerEncoderLayer, an independent statement of the pre-norm block."""
    x = torch.randn(2, 3, 24, 40, generator=torch.Generator().manual_seed(61), dtype=F64)
    _, c, p = models["timm_b"]
    D, nh = c["embed_dim"], c["num_heads"]
    t = F.conv2d(x, p["patch_embed.proj.weight"], p["patch_embed.proj.bias"], stride=8).flatten(2).transpose(1, 2)
    t = torch.cat([p["cls_token"].expand(2, -1, -1), t], dim=1) + p["pos_embed"]
    for i in range(c["depth"]):
        b = f"blocks.{i}."
        t = encoder_layer(D, nh, 2 * D, 1e-6, p[b + "attn.qkv.weight"], p[b + "attn.qkv.bias"], p,
                          [b + n for n in ("attn.proj", "norm1", "norm2", "mlp.fc1", "mlp.fc2")])(t)
    pooled = layer_norm(t[:, 1:].mean(1), p["fc_norm.weight"], p["fc_norm.bias"], 1e-6)
    want = F.linear(pooled, p["head.weight"], p["head.bias"])
    assert torch.allclose(timm_forward(c, p, x), want, atol=1e-10), "timm_forward"

    _, c, p = models["hf"]
    x = x[:, :, :, :24].repeat(1, 1, 2, 2)[:, :, :32, :32].contiguous()
    D, nh, e = c["hidden_size"], c["num_attention_heads"], "vit.embeddings."
    t = F.conv2d(x, p[e + "patch_embeddings.projection.weight"], p[e + "patch_embeddings.projection.bias"], stride=8)
    t = torch.cat([p[e + "cls_token"].expand(2, -1, -1), t.flatten(2).transpose(1, 2)], dim=1)
    t = t + p[e + "position_embeddings"]
    for i in range(c["num_hidden_layers"]):
        a = f"vit.encoder.layer.{i}.attention.attention."
        L = f"vit.encoder.layer.{i}."
        w = torch.cat([p[a + n + ".weight"] for n in ("query", "key", "value")])
        bias = torch.cat([p[a + n + ".bias"] for n in ("query", "key", "value")])
        t = encoder_layer(D, nh, c["intermediate_size"], c["layer_norm_eps"], w, bias, p,
                          [L + n for n in ("attention.output.dense", "layernorm_before", "layernorm_after",
                                           "intermediate.dense", "output.dense")])(t)
    t = layer_norm(t, p["vit.layernorm.weight"], p["vit.layernorm.bias"], c["layer_norm_eps"])
    want = F.linear(t[:, 0], p["classifier.weight"], p["classifier.bias"])
    assert torch.allclose(hf_forward(c, p, x), want, atol=1e-10), "hf_forward"

    # timm_attn_pool == nn.MultiheadAttention with the latent as its query (in_proj: q, then kv's
    # k and v rows; out_proj: proj), then y + mlp(norm(y)).
    c = timm_model_cfg(TIMM_MAP_CFGS["timm_cls_map"]["model_args"], 3)
    _, p = init_params(timm_shapes(c), torch.float32, 62)
    D, nh = c["embed_dim"], c["num_heads"]
    t = torch.randn(2, 7, D, generator=torch.Generator().manual_seed(63), dtype=F64)
    mha = torch.nn.MultiheadAttention(D, nh, batch_first=True, dtype=F64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([p["attn_pool.q.weight"], p["attn_pool.kv.weight"]]))
        mha.in_proj_bias.copy_(torch.cat([p["attn_pool.q.bias"], p["attn_pool.kv.bias"]]))
        mha.out_proj.weight.copy_(p["attn_pool.proj.weight"])
        mha.out_proj.bias.copy_(p["attn_pool.proj.bias"])
        y = mha(p["attn_pool.latent"].expand(2, -1, -1), t, t, need_weights=False)[0][:, 0]
    h = layer_norm(y, p["attn_pool.norm.weight"], p["attn_pool.norm.bias"], 1e-6)
    want = y + F.linear(F.gelu(F.linear(h, p["attn_pool.mlp.fc1.weight"], p["attn_pool.mlp.fc1.bias"])),
                        p["attn_pool.mlp.fc2.weight"], p["attn_pool.mlp.fc2.bias"])
    assert torch.allclose(timm_attn_pool(p, t, nh, 1e-6), want, atol=1e-10), "timm_attn_pool"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "pretrained"))
    ap.add_argument("--skimage-data", default=None, help="scikit-image's data folder (chelsea.png, coffee.png, ...)")
    args = ap.parse_args()
    out = os.path.normpath(args.out)
    os.makedirs(out, exist_ok=True)
    check_reference_math()

    models = make_models(out)
    check_forwards_against_torch(models)
    make_posembed(out)
    img_dir = os.path.join(out, "images")
    src = find_skimage(args.skimage_data)
    if src:
        make_images(img_dir, src)
    elif all(os.path.exists(os.path.join(img_dir, f)) for f in IMAGES.values()):
        print("scikit-image data not found: reusing the images in", img_dir)
    else:
        sys.exit("scikit-image data not found (see --help) and no images to reuse in " + img_dir)
    make_preprocess(out, img_dir, models)
    check_written(out)

    pre = WRITTEN[os.path.join(out, "preprocess.safetensors")]
    for name, (_, _, p) in models.items():
        logits = pre.get(f"logits.{name}.cat")
        print(f"{name}: {len(p)} tensors" + (f", logits of cat.jpg {logits.tolist()}" if logits is not None else ""))
    total = 0
    for root, _, files in os.walk(out):
        for f in sorted(files):
            total += os.path.getsize(os.path.join(root, f))
    print(f"wrote {len(WRITTEN)} files (+ {len(IMAGES)} images) to {out}: {total / 1024:.1f} KiB in all")


if __name__ == "__main__":
    main()
