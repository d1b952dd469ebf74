#!/usr/bin/python3
"""Reference fixtures for vitcpp's training losses and gradient clipping, written by plain PyTorch.

tests/fixtures/train_losses.safetensors holds one group of tensors per case that its
metadata lists ("cases": name and settings):

    <case>.logits    float [B, K]
    <case>.labels    int64 [B] (one-hot targets, with the case's smoothing), or
    <case>.targets   float [B, K] soft targets (mixup's)
    <case>.loss      the loss, float [1]
    <case>.grad      d loss / d logits, float [B, K]

and one group for gradient clipping on a small ViT's parameters ("clip": its config, the
AGC factor and the value limit):

    clip.param.<name>, clip.grad.<name>   weights and gradients
    clip.agc.<name>                       the gradients after timm's adaptive_clip_grad, every
                                          tensor but the head's two (train.py's exclude_head)
    clip.value.<name>                     after torch.nn.utils.clip_grad_value_

and a group for the LAMB optimizer ("lamb": its config and settings): three steps of timm's
Lamb on the same small ViT, gradients given per step (the first two with a global norm above 1,
clipped; the third below):

    lamb.param.<name>          the weights before the first step
    lamb.grad<S>.<name>        step S's gradients (S = 0, 1, 2)
    lamb.after<S>.<name>       the weights after step S

and the same for timm's lambc (LAMB with the trust ratios held to 1; its head weights x 300, so
that their ratio is above 1) under "lambc.", and three steps of timm's Lion under "lion."
(metadata "lambc", "lion": their settings).

The binary cross-entropy is timm 1.0's BinaryCrossEntropy (timm/loss/binary_cross_entropy.py:
one-hot targets with smoothing s as off s/K, on 1 - s + s/K; a threshold makes them 0 or 1;
F.binary_cross_entropy_with_logits with pos_weight; sum_classes sums over K, then the mean) and
the clipping timm 1.0's adaptive_clip_grad (timm/utils/agc.py) and the optimizer timm's Lamb
(timm/optim/lamb.py, its defaults: bias correction, grad averaging, max_grad_norm 1, no trust
clip, the trust ratio only on tensors with weight decay; two groups as timm's
param_groups_weight_decay), written out here since timm is not installed. Computed in float64 from float32 inputs.

    /usr/bin/python3 tools/make_train_fixtures.py [--out tests/fixtures]
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from make_fixtures import init_params, read_safetensors, write_safetensors  # noqa: E402

torch.set_default_dtype(torch.float64)


def bce(x, target, smoothing=0.0, target_threshold=None, pos_weight=None, sum_classes=False):
    """timm's BinaryCrossEntropy(smoothing, target_threshold, pos_weight=..., sum_classes=...)(x, target)."""
    if target.shape != x.shape:
        K = x.shape[-1]
        off = smoothing / K
        on = 1.0 - smoothing + off
        # float32, as timm's (its x is float32; this script's float64 x would round otherwise).
        target = torch.full((x.shape[0], K), off, dtype=torch.float32).scatter_(1, target.long().view(-1, 1), on)
        target = target.double()
    if target_threshold is not None:
        # In float32 as in timm: the targets' float32 values against the threshold as float32.
        target = target.float().gt(torch.tensor(target_threshold, dtype=torch.float32)).to(dtype=target.dtype)
    pw = None if pos_weight is None else torch.tensor(pos_weight)
    loss = F.binary_cross_entropy_with_logits(x, target, pos_weight=pw, reduction="none" if sum_classes else "mean")
    return loss.sum(-1).mean() if sum_classes else loss


def unitwise_norm(x):
    """timm's unitwise_norm: a vector's norm, else each output row's (dim 0)."""
    return x.norm(2) if x.ndim <= 1 else x.norm(2, dim=tuple(range(1, x.ndim)), keepdim=True)


def adaptive_clip_grad(p, g, clip_factor, eps=1e-3):
    """timm's adaptive_clip_grad on one tensor: the clipped gradient."""
    max_norm = unitwise_norm(p).clamp(min=eps).mul(clip_factor)
    grad_norm = unitwise_norm(g)
    return torch.where(grad_norm < max_norm, g, g * (max_norm / grad_norm.clamp(min=1e-6)))


def clip_cases(tensors):
    """A small ViT's weights and gradients of many scales (some rows clipped, some not; one bias
    at zero, whose bound is eps x factor), clipped by AGC and by value."""
    gen = torch.Generator().manual_seed(4)
    cfg = {"img_size": [12, 12], "in_chans": 3, "patch_size": [4, 4], "embed_dim": 16, "depth": 2,
           "num_heads": 2, "mlp_dim": 32, "qkv_bias": True, "global_pool": "token", "class_token": True,
           "pos_embed": "learn", "num_classes": 5, "norm_eps": 1e-6}
    params = init_params(cfg, gen)
    params["blocks.0.attn.proj.bias"].zero_()
    settings = {"vit_config": cfg, "agc_factor": 0.05, "value": 0.02}
    clipped_rows = rows = 0
    for name, p in params.items():
        units = 1 if p.ndim <= 1 else p.shape[0]
        row_scale = (torch.randn(units, generator=gen) * 1.5).exp() * 0.01
        g = (torch.randn(p.shape, generator=gen) * row_scale.view(-1, *[1] * (p.ndim - 1))).float().double()
        head = name.startswith("head.")
        agc = g if head else adaptive_clip_grad(p, g, settings["agc_factor"])
        value = g.clamp(-settings["value"], settings["value"])
        if not head:
            clipped_rows += int((unitwise_norm(agc) != unitwise_norm(g)).sum())
            rows += units
        tensors["clip.param." + name] = p.float()
        tensors["clip.grad." + name] = g.float()
        tensors["clip.agc." + name] = agc.float()
        tensors["clip.value." + name] = value.float()
    print(f"clip: AGC clips {clipped_rows} of {rows} rows")
    return settings


def lamb_steps(tensors, name="lamb", trust_clip=False):
    """Three steps of timm's Lamb (its single-tensor code, in float64) on a small ViT; with
    trust_clip (timm's lambc) the ratios held to 1, and the head's weights made large enough
    (x 300) that theirs is above 1."""
    gen = torch.Generator().manual_seed(5)
    cfg = {"img_size": [8, 8], "in_chans": 3, "patch_size": [4, 4], "embed_dim": 8, "depth": 1,
           "num_heads": 2, "mlp_dim": 16, "qkv_bias": True, "global_pool": "token", "class_token": True,
           "pos_embed": "learn", "num_classes": 3, "norm_eps": 1e-6}
    settings = {"vit_config": cfg, "lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-6, "weight_decay": 0.05}
    params = init_params(cfg, gen)
    params["blocks.0.attn.proj.weight"].zero_()  # weights of norm 0: a trust ratio of 1
    if trust_clip:
        params["head.weight"] *= 300
    for n, p in params.items():
        tensors[f"{name}.param." + n] = p.float()
    no_wd = ("pos_embed", "cls_token")
    decay = {n: (p.ndim > 1 and n not in no_wd) for n, p in params.items()}
    m = {n: torch.zeros_like(p) for n, p in params.items()}
    v = {n: torch.zeros_like(p) for n, p in params.items()}
    clipped = 0
    b1, b2, eps, lr = settings["beta1"], settings["beta2"], settings["eps"], settings["lr"]
    for step, scale in enumerate([0.2, 0.1, 0.002]):
        grads = {n: (torch.randn(p.shape, generator=gen) * scale).float().double() for n, p in params.items()}
        for n, g in grads.items():
            tensors[f"{name}.grad{step}.{n}"] = g.float()
        global_norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads.values()]))
        clip = (global_norm / 1.0).clamp(min=1.0)
        t = step + 1
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        for n, p in params.items():
            g = grads[n] / clip
            m[n].lerp_(g, 1 - b1)
            v[n].mul_(b2).addcmul_(g, g, value=1 - b2)
            update = (m[n] / bc1) / ((v[n].sqrt() / bc2 ** 0.5) + eps)
            wd = settings["weight_decay"] if decay[n] else 0.0
            if wd != 0:
                update.add_(p, alpha=wd)
                w_norm, u_norm = p.norm(2.0), update.norm(2.0)
                ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
                if trust_clip:
                    clipped += ratio > 1
                    ratio = min(ratio, 1.0)
                update.mul_(ratio)
            p.add_(update, alpha=-lr)
            tensors[f"{name}.after{step}.{n}"] = p.float()
        print(f"{name}: step {step} global grad norm {global_norm.item():.4f}")
    if trust_clip:
        print(f"{name}: {int(clipped)} trust ratios above 1, held to 1")
        assert clipped > 0
    return settings


def lion_steps(tensors):
    """Three steps of timm's Lion (its foreach code, the default, in float64) on a small ViT:
    decoupled decay on the decay group, then p -= lr sign(b1 m + (1 - b1) g), then
    m = b2 m + (1 - b2) g. Betas timm's defaults, 0.9 and 0.99."""
    gen = torch.Generator().manual_seed(6)
    cfg = {"img_size": [8, 8], "in_chans": 3, "patch_size": [4, 4], "embed_dim": 8, "depth": 1,
           "num_heads": 2, "mlp_dim": 16, "qkv_bias": True, "global_pool": "token", "class_token": True,
           "pos_embed": "learn", "num_classes": 3, "norm_eps": 1e-6}
    settings = {"vit_config": cfg, "lr": 0.003, "beta1": 0.9, "beta2": 0.99, "weight_decay": 0.5}
    params = init_params(cfg, gen)
    for n, p in params.items():
        tensors["lion.param." + n] = p.float()
    no_wd = ("pos_embed", "cls_token")
    decay = {n: (p.ndim > 1 and n not in no_wd) for n, p in params.items()}
    m = {n: torch.zeros_like(p) for n, p in params.items()}
    b1, b2, lr = settings["beta1"], settings["beta2"], settings["lr"]
    for step in range(3):
        grads = {n: (torch.randn(p.shape, generator=gen) * 0.1).float().double() for n, p in params.items()}
        for n, g in grads.items():
            tensors[f"lion.grad{step}.{n}"] = g.float()
        for n, p in params.items():
            wd = settings["weight_decay"] if decay[n] else 0.0
            p.mul_(1 - lr * wd)
            update = (m[n] * b1 + grads[n] * (1 - b1)).sign()
            p.add_(update, alpha=-lr)
            m[n].mul_(b2).add_(grads[n], alpha=1 - b2)
            tensors[f"lion.after{step}.{n}"] = p.float()
    return settings


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(3)
    B, K = 4, 5
    logits = (torch.randn(B, K, generator=gen) * 3).float().double()
    logits[3] = torch.tensor([40.0, -40.0, 0.5, -0.25, 17.0])  # saturated sigmoids stay finite
    labels = torch.tensor([0, 3, 1, 4])
    # Mixup's targets: lam 0.7 of each row's label and 0.3 of its partner's (row B-1-b), smoothed 0.1.
    off, on = 0.1 / K, 0.9 + 0.1 / K
    onehot = torch.full((B, K), off).scatter_(1, labels.view(-1, 1), on)
    soft = (0.7 * onehot + 0.3 * onehot.flip(0)).float().double()
    cases = [
        {"name": "bce_plain", "targets": "labels", "smoothing": 0.0},
        {"name": "bce_smoothed", "targets": "labels", "smoothing": 0.1},
        {"name": "bce_smoothed_thresh", "targets": "labels", "smoothing": 0.1, "target_threshold": 0.2},
        # A threshold at the smoothed off value itself: float32's 0.02 is not above it (timm builds
        # the targets in float32), so the off targets stay 0.
        {"name": "bce_thresh_at_off", "targets": "labels", "smoothing": 0.1, "target_threshold": 0.02},
        {"name": "bce_soft", "targets": "soft", "smoothing": 0.0},
        {"name": "bce_soft_thresh", "targets": "soft", "smoothing": 0.0, "target_threshold": 0.25},
        {"name": "bce_soft_sum_posweight", "targets": "soft", "smoothing": 0.0, "pos_weight": 2.5,
         "sum_classes": True},
    ]
    tensors = {}
    for c in cases:
        x = logits.clone().requires_grad_(True)
        t = labels if c["targets"] == "labels" else soft
        loss = bce(x, t, c["smoothing"], c.get("target_threshold"), c.get("pos_weight"), c.get("sum_classes", False))
        (grad,) = torch.autograd.grad(loss, [x])
        n = c["name"]
        tensors[n + ".logits"] = logits.float()
        if c["targets"] == "labels":
            tensors[n + ".labels"] = labels
        else:
            tensors[n + ".targets"] = soft.float()
        tensors[n + ".loss"] = loss.detach().float().reshape(1)
        tensors[n + ".grad"] = grad.float()
        print(f"{n}: loss {loss.item():.6f}")
    clip = clip_cases(tensors)
    lamb = lamb_steps(tensors)
    lambc = lamb_steps(tensors, "lambc", trust_clip=True)
    lion = lion_steps(tensors)
    path = os.path.join(args.out, "train_losses.safetensors")
    write_safetensors(path, tensors, {"cases": json.dumps(cases), "clip": json.dumps(clip), "lamb": json.dumps(lamb),
                                      "lambc": json.dumps(lambc), "lion": json.dumps(lion)})
    back, meta = read_safetensors(path)
    assert set(back) == set(tensors) and json.loads(meta["cases"]) == cases
    for n, t in tensors.items():
        assert torch.equal(back[n], t), n


if __name__ == "__main__":
    main()
