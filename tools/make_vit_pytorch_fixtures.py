#!/usr/bin/python3
"""Writes tests/fixtures/pretrained/vit_pytorch*: lucidrains/vit-pytorch's ViT checkpoints.

The model is vit-pytorch's ViT as seed vit-pytorch-code-review.md shows it (nn.Modules with the
same structure and so the same state_dict names; einops' rearrange written as reshape and
permute), saved as `safetensors.torch.save_file(model.state_dict())` would, with the
constructor's arguments in config.json, and float64 reference logits for a random batch:

  vit_pytorch/                   model.safetensors, config.json, expect.safetensors: 16x24
                                 images in 4x8 patches, 4 heads of 16 on a 32-wide model
                                 (dim_head), pool='mean' (today's vit-pytorch: no class token)
  vit_pytorch_seed/              the same as the seed's vit-pytorch has it: a class token, in
                                 the mean too
  vit_pytorch_simple/            its SimpleViT (12x16 images, 3 heads of 12 on 24 dims): the fixed
                                 2-D sin-cos table, no class token, linear_head = LayerNorm + Linear
  vit_pytorch_simple_norm/       the same with transformer.norm and linear_head = Linear
  vit_pytorch_noconfig.*         no config.json: vit-pytorch's defaults (pool='cls', dim_head
                                 64), one head as wide as the model (to_out is the identity),
                                 and the older head (mlp_head = LayerNorm + Linear, no
                                 transformer.norm)

Run with Debian's PyTorch: /usr/bin/python3 tools/make_vit_pytorch_fixtures.py
"""
import argparse
import json
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(__file__))
from make_fixtures import read_safetensors, write_safetensors  # noqa: E402


def pair(t):
    return t if isinstance(t, tuple) else (t, t)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden_dim), nn.GELU(), nn.Dropout(0.0),
                                 nn.Linear(hidden_dim, dim), nn.Dropout(0.0))

    def forward(self, x):
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, dim, heads, dim_head):
        super().__init__()
        inner_dim = dim_head * heads
        project_out = not (heads == 1 and dim_head == dim)
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.attend = nn.Softmax(dim=-1)
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, dim), nn.Dropout(0.0)) if project_out else nn.Identity()

    def forward(self, x):
        x = self.norm(x)
        b, n, _ = x.shape
        # rearrange 'b n (h d) -> b h n d'
        q, k, v = (t.reshape(b, n, self.heads, -1).transpose(1, 2) for t in self.to_qkv(x).chunk(3, dim=-1))
        attn = self.attend(torch.matmul(q, k.transpose(-1, -2)) * self.scale)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, n, -1)  # 'b h n d -> b n (h d)'
        return self.to_out(out)


class Transformer(nn.Module):
    def __init__(self, dim, depth, heads, dim_head, mlp_dim, final_norm):
        super().__init__()
        self.norm = nn.LayerNorm(dim) if final_norm else nn.Identity()
        self.layers = nn.ModuleList([nn.ModuleList([Attention(dim, heads, dim_head), FeedForward(dim, mlp_dim)])
                                     for _ in range(depth)])

    def forward(self, x):
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return self.norm(x)


class ViT(nn.Module):
    """vit_pytorch.ViT in three generations: "current" (a class token only with pool='cls':
    cls_token is [1, 0, dim] with pool='mean'), "seed" (seed vit-pytorch-code-review.md's: a class
    token always, in the mean too) and "old" (a class token, no transformer.norm, mlp_head =
    LayerNorm + Linear)."""

    def __init__(self, *, image_size, patch_size, num_classes, dim, depth, heads, mlp_dim, pool="cls",
                 channels=3, dim_head=64, version="current"):
        super().__init__()
        old_head = version == "old"
        ih, iw = pair(image_size)
        self.ph, self.pw = pair(patch_size)
        num_patches = (ih // self.ph) * (iw // self.pw)
        patch_dim = channels * self.ph * self.pw
        num_cls_tokens = 1 if pool == "cls" or version != "current" else 0
        self.to_patch_embedding = nn.Sequential(nn.Identity(), nn.LayerNorm(patch_dim), nn.Linear(patch_dim, dim),
                                                nn.LayerNorm(dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + num_cls_tokens, dim))
        self.cls_token = nn.Parameter(torch.randn(1, num_cls_tokens, dim))
        self.transformer = Transformer(dim, depth, heads, dim_head, mlp_dim, final_norm=not old_head)
        self.pool = pool
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes)) if old_head \
            else nn.Linear(dim, num_classes)

    def forward(self, img):
        b, c, h, w = img.shape
        # Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)')
        x = img.reshape(b, c, h // self.ph, self.ph, w // self.pw, self.pw).permute(0, 2, 4, 3, 5, 1)
        x = x.reshape(b, (h // self.ph) * (w // self.pw), -1)
        x = self.to_patch_embedding(x)
        x = torch.cat((self.cls_token.expand(b, -1, -1), x), dim=1)
        x = x + self.pos_embedding[:, :x.shape[1]]
        x = self.transformer(x)
        x = x.mean(dim=1) if self.pool == "mean" else x[:, 0]
        return self.mlp_head(x)


def posemb_sincos_2d(h, w, dim, temperature=10000):
    """big_vision's 2-D sin-cos table, as vit-pytorch's simple_vit.py computes it (float32)."""
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    omega = torch.arange(dim // 4, dtype=torch.float32) / (dim // 4 - 1)
    omega = 1.0 / (temperature ** omega)
    y = y.flatten()[:, None].float() * omega[None, :]
    x = x.flatten()[:, None].float() * omega[None, :]
    return torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1)


class SimpleAttention(Attention):
    """SimpleViT's attention: to_out is one Linear without a bias."""

    def __init__(self, dim, heads, dim_head):
        super().__init__(dim, heads, dim_head)
        self.to_out = nn.Linear(dim_head * heads, dim, bias=False)


class SimpleFeedForward(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, dim))

    def forward(self, x):
        return self.net(x)


class SimpleViT(nn.Module):
    """vit_pytorch.SimpleViT: no class token, the fixed 2-D table (not in the state dict), the mean
    over the patches; head_norm: linear_head = LayerNorm + Linear and no transformer.norm (as one
    version has it), else transformer.norm and linear_head = Linear."""

    def __init__(self, *, image_size, patch_size, num_classes, dim, depth, heads, mlp_dim, channels=3, dim_head=64,
                 head_norm=True):
        super().__init__()
        ih, iw = pair(image_size)
        self.ph, self.pw = pair(patch_size)
        patch_dim = channels * self.ph * self.pw
        self.to_patch_embedding = nn.Sequential(nn.Identity(), nn.LayerNorm(patch_dim), nn.Linear(patch_dim, dim),
                                                nn.LayerNorm(dim))
        self.pos_embedding = posemb_sincos_2d(ih // self.ph, iw // self.pw, dim)  # a plain tensor
        self.transformer = Transformer(dim, depth, heads, dim_head, mlp_dim, final_norm=not head_norm)
        for layer in self.transformer.layers:
            layer[0] = SimpleAttention(dim, heads, dim_head)
            layer[1] = SimpleFeedForward(dim, mlp_dim)
        self.linear_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes)) if head_norm \
            else nn.Linear(dim, num_classes)

    def forward(self, img):
        b, c, h, w = img.shape
        x = img.reshape(b, c, h // self.ph, self.ph, w // self.pw, self.pw).permute(0, 2, 4, 3, 5, 1)
        x = self.to_patch_embedding(x.reshape(b, (h // self.ph) * (w // self.pw), -1))
        x = x + self.pos_embedding.to(x.dtype)
        return self.linear_head(self.transformer(x).mean(dim=1))


def randomize(model, seed):
    """Every parameter away from its init, so that a misplaced one shows in the logits."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if p.ndim == 1 and name.endswith("weight"):  # LayerNorm scales
                v = 1 + 0.2 * r
            elif name.endswith("bias"):
                v = 0.1 * r
            elif name in ("pos_embedding", "cls_token"):
                v = 0.5 * r
            else:
                v = r / p.shape[-1] ** 0.5
            p.copy_(v.float())


def write(out_dir, stem, kwargs, seed, with_config, version="current"):
    torch.manual_seed(seed)
    # make_fixtures sets float64 as the default dtype
    if version.startswith("simple"):
        model = SimpleViT(**kwargs, head_norm=version == "simple_head_norm").float()
    else:
        model = ViT(**kwargs, version=version).float()
    randomize(model, seed)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    ih, iw = pair(kwargs["image_size"])
    x = torch.rand(2, kwargs.get("channels", 3), ih, iw, generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        logits = model.double()(x.double()).float()
    if with_config:
        d = os.path.join(out_dir, stem)
        os.makedirs(d, exist_ok=True)
        model_path, expect_path = os.path.join(d, "model.safetensors"), os.path.join(d, "expect.safetensors")
        cfg = {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write(json.dumps(cfg, indent=2) + "\n")
    else:
        model_path = os.path.join(out_dir, stem + ".safetensors")
        expect_path = os.path.join(out_dir, stem + ".expect.safetensors")
    write_safetensors(model_path, state, {"format": "pt"})
    write_safetensors(expect_path, {"input.x": x.float(), "out.logits": logits}, {})
    back, _ = read_safetensors(model_path)
    assert set(back) == set(state) and all(torch.equal(back[k], state[k]) for k in state)
    print(f"{stem}: {len(state)} tensors, logits {logits[0].tolist()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "pretrained"))
    out = os.path.normpath(ap.parse_args().out)
    wide_heads = dict(image_size=(16, 24), patch_size=(4, 8), num_classes=5, dim=32, depth=2, heads=4, dim_head=16,
                      mlp_dim=48, pool="mean", channels=3)
    write(out, "vit_pytorch", wide_heads, 50, with_config=True)
    write(out, "vit_pytorch_seed", wide_heads, 70, with_config=True, version="seed")
    simple = dict(image_size=(12, 16), patch_size=4, num_classes=4, dim=24, depth=2, heads=3, dim_head=12,
                  mlp_dim=40)
    write(out, "vit_pytorch_simple", simple, 80, with_config=True, version="simple_head_norm")
    write(out, "vit_pytorch_simple_norm", simple, 90, with_config=True, version="simple")
    write(out, "vit_pytorch_noconfig", dict(image_size=16, patch_size=4, num_classes=3, dim=64, depth=2, heads=1,
                                            dim_head=64, mlp_dim=40), 60, with_config=False, version="old")


if __name__ == "__main__":
    main()
