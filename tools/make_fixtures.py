#!/usr/bin/python3
"""Reference fixtures for vitcpp's tests, written by plain PyTorch.

Builds small Vision Transformers by hand, following timm's VisionTransformer forward
exactly (conv patch embedding, class token, position embedding, pre-norm blocks with a
fused qkv linear, exact GELU, token or mean pooling with norm / fc_norm, head), runs them
in float64 and writes, per model, one safetensors file with:

    param.<timm name>   initial weights (float32 values; the reference starts from exactly these)
    input.x             images [B, C, H, W]
    input.labels        int64 [B] (hard labels, with label smoothing), or
    input.targets       float [B, K] soft targets
    input.mask          uint8 [B, N] visible patches (optional)
    out.logits, out.loss
    grad.<timm name>    every trainable parameter's gradient of the loss
    adamw.loss          the loss before each of 10 AdamW steps on the same batch
    __metadata__        vit_config (vitcpp's config JSON), train (loss and AdamW settings)

Run with Debian's PyTorch (the python3 first on PATH may not see it):

    /usr/bin/python3 tools/make_fixtures.py [--out tests/fixtures]

The output is deterministic: the same PyTorch on the same kind of CPU gives the same bytes.
(Another CPU's kernels may round differently where a true gradient is exactly zero: the key
third of qkv.bias, whose values then differ by about 1e-18; vit_cls_learn and vit_dim_head
were written on another CPU than this script's later runs and differ from them only there.)
"""
import argparse
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


# ---------------------------------------------------------------- safetensors (by hand)

DTYPES = {torch.float32: "F32", torch.int64: "I64", torch.uint8: "U8", torch.float16: "F16", torch.bfloat16: "BF16"}


def write_safetensors(path, tensors, metadata):
    """The format: u64 little-endian header length, JSON header, raw little-endian data."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        data = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()  # numpy has no bf16
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - (8 + len(text)) % 8) % 8)  # align the data section to 8 bytes
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + b"".join(blobs))
    os.replace(tmp, path)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    rev = {v: k for k, v in DTYPES.items()}
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        buf = bytearray(raw[8 + n + b:8 + n + e])
        out[name] = torch.frombuffer(buf, dtype=rev[h["dtype"]]).reshape(h["shape"]) if e > b else \
            torch.zeros(h["shape"], dtype=rev[h["dtype"]])
    return out, meta


# ---------------------------------------------------------------- the model, as timm

def sincos_table(T, D):
    """Seeds 001/002: pe[t, 2i] = sin(t / 10000^(2i/D)), pe[t, 2i+1] = cos(t / 10000^(2i/D))."""
    pe = torch.zeros(T, D)
    for t in range(T):
        for j in range(D):
            freq = 10000 ** ((j - j % 2) / D)
            pe[t, j] = math.sin(t / freq) if j % 2 == 0 else math.cos(t / freq)
    return pe[None]


def param_shapes(c):
    """timm's names and shapes, in vitcpp's table order."""
    D, M, C = c["embed_dim"], c["mlp_dim"], c["in_chans"]
    I = c["num_heads"] * c.get("dim_head", D // c["num_heads"])  # the attention's width
    Ph, Pw = c["patch_size"]
    H, W = c["img_size"]
    N = (H // Ph) * (W // Pw)
    T = N + (1 if c["class_token"] else 0) + (1 if c.get("dist_token") else 0) + c.get("reg_tokens", 0)
    shapes = {"patch_embed.proj.weight": (D, C, Ph, Pw), "patch_embed.proj.bias": (D,)}
    if c.get("patch_norm"):  # vit-pytorch's LayerNorms before and after the projection
        shapes.update({"patch_embed.norm_in.weight": (C * Ph * Pw,), "patch_embed.norm_in.bias": (C * Ph * Pw,),
                       "patch_embed.norm.weight": (D,), "patch_embed.norm.bias": (D,)})
    if c["class_token"]:
        shapes["cls_token"] = (1, 1, D)
    if c.get("dist_token"):  # DeiT's distillation token
        shapes["dist_token"] = (1, 1, D)
    if c.get("reg_tokens"):  # register tokens, after the class token
        shapes["reg_token"] = (1, c["reg_tokens"], D)
    shapes["pos_embed"] = (1, T, D)
    for i in range(c["depth"]):
        p = f"blocks.{i}."
        shapes.update({p + "norm1.weight": (D,), p + "norm1.bias": (D,), p + "attn.qkv.weight": (3 * I, D)})
        if c["qkv_bias"]:
            shapes[p + "attn.qkv.bias"] = (3 * I,)
        shapes.update({p + "attn.proj.weight": (D, I), p + "attn.proj.bias": (D,),
                       p + "norm2.weight": (D,), p + "norm2.bias": (D,),
                       p + "mlp.fc1.weight": (M, D), p + "mlp.fc1.bias": (M,),
                       p + "mlp.fc2.weight": (D, M), p + "mlp.fc2.bias": (D,)})
    norm = "fc_norm" if fc_norm(c) else "norm"
    shapes.update({norm + ".weight": (D,), norm + ".bias": (D,)})
    if c["global_pool"] == "map":  # timm's AttentionPoolLatent
        shapes.update({"attn_pool.latent": (1, 1, D), "attn_pool.q.weight": (D, D), "attn_pool.q.bias": (D,),
                       "attn_pool.kv.weight": (2 * D, D), "attn_pool.kv.bias": (2 * D,),
                       "attn_pool.proj.weight": (D, D), "attn_pool.proj.bias": (D,),
                       "attn_pool.norm.weight": (D,), "attn_pool.norm.bias": (D,),
                       "attn_pool.mlp.fc1.weight": (M, D), "attn_pool.mlp.fc1.bias": (M,),
                       "attn_pool.mlp.fc2.weight": (D, M), "attn_pool.mlp.fc2.bias": (D,)})
    shapes.update({"head.weight": (c["num_classes"], D), "head.bias": (c["num_classes"],)})
    if c.get("head_dist"):
        shapes.update({"head_dist.weight": (c["num_classes"], D), "head_dist.bias": (c["num_classes"],)})
    return shapes


def fc_norm(c):
    """timm's default: the final norm after pooling exactly for avg pooling."""
    return c.get("fc_norm", c["global_pool"] == "avg")


def init_params(c, gen):
    """Random values of a useful scale (timm's 0.02 init would make the gradients tiny)."""
    params = {}
    for name, shape in param_shapes(c).items():
        r = torch.randn(shape, generator=gen)
        if name == "pos_embed":
            v = sincos_table(shape[1], shape[2]) if c["pos_embed"] == "sincos" else r * 0.2
        elif name in ("cls_token", "dist_token", "reg_token", "attn_pool.latent"):
            v = r * 0.5
        elif name.startswith("head.weight") or name.startswith("head_dist.weight"):
            v = r * 0.3
        elif "norm" in name and name.endswith("weight"):
            v = 1 + r * 0.1
        elif name.endswith("bias"):
            v = r * 0.1
        else:
            v = r * 0.2
        # Round to float32 first, so the float64 reference starts where vitcpp starts.
        params[name] = v.float().double()
    return params


def layer_norm(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def forward(c, p, x, mask=None, distilled_training=False):
    """timm's VisionTransformer.forward with an optional patch mask [B, N] (True = visible):
    masked keys get no attention; avg pooling averages the visible patches. A distilled
    model in distilled training returns the two heads' logits apart, as timm's."""
    B = x.shape[0]
    D, nh, eps = c["embed_dim"], c["num_heads"], c["norm_eps"]
    hd = c.get("dim_head", D // nh)
    if c.get("patch_norm"):
        # Each patch as a row in (channel, row, column) order, normed, projected, normed.
        cols = F.unfold(x, kernel_size=tuple(c["patch_size"]), stride=tuple(c["patch_size"])).transpose(1, 2)
        cols = layer_norm(cols, p["patch_embed.norm_in.weight"], p["patch_embed.norm_in.bias"], eps)
        t = F.linear(cols, p["patch_embed.proj.weight"].flatten(1), p["patch_embed.proj.bias"])
        t = layer_norm(t, p["patch_embed.norm.weight"], p["patch_embed.norm.bias"], eps)
    else:
        t = F.conv2d(x, p["patch_embed.proj.weight"], p["patch_embed.proj.bias"], stride=tuple(c["patch_size"]))
        t = t.flatten(2).transpose(1, 2)  # [B, N, D], patches in row-major grid order
    if c.get("dist_token"):  # timm's VisionTransformerDistilled: class, distillation, patches
        t = torch.cat([p["cls_token"].expand(B, -1, -1), p["dist_token"].expand(B, -1, -1), t], dim=1)
    else:  # timm's _pos_embed: class token, register tokens, patches
        prefix = [p[n].expand(B, -1, -1) for n in ("cls_token", "reg_token") if n in p]
        t = torch.cat(prefix + [t], dim=1)
    t = t + p["pos_embed"]
    T = t.shape[1]
    pre = (1 if c["class_token"] else 0) + (1 if c.get("dist_token") else 0) + c.get("reg_tokens", 0)
    key_mask = None
    if mask is not None:
        key_mask = torch.cat([torch.ones(B, pre, dtype=torch.bool), mask], dim=1)  # [B, T]
    for i in range(c["depth"]):
        q = f"blocks.{i}."
        h = layer_norm(t, p[q + "norm1.weight"], p[q + "norm1.bias"], eps)
        qkv = F.linear(h, p[q + "attn.qkv.weight"], p.get(q + "attn.qkv.bias"))
        qkv = qkv.reshape(B, T, 3, nh, hd).permute(2, 0, 3, 1, 4)
        qq, kk, vv = qkv.unbind(0)
        scores = (qq * hd ** -0.5) @ kk.transpose(-2, -1)
        if key_mask is not None:
            scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
        a = scores.softmax(dim=-1) @ vv
        a = a.transpose(1, 2).reshape(B, T, nh * hd)
        t = t + F.linear(a, p[q + "attn.proj.weight"], p[q + "attn.proj.bias"])
        h = layer_norm(t, p[q + "norm2.weight"], p[q + "norm2.bias"], eps)
        h = F.gelu(F.linear(h, p[q + "mlp.fc1.weight"], p[q + "mlp.fc1.bias"]))
        t = t + F.linear(h, p[q + "mlp.fc2.weight"], p[q + "mlp.fc2.bias"])
    if c["global_pool"] == "avg":
        if not fc_norm(c):  # timm's norm on every token, then the mean
            t = layer_norm(t, p["norm.weight"], p["norm.bias"], eps)
        # The patches, or every token with pool_include_prefix (vit-pytorch's pool='mean').
        first = 0 if c.get("pool_include_prefix") else pre
        pooled_rows = t[:, first:]
        if mask is not None:
            m = (key_mask if first == 0 else mask)[:, :, None].double()
            pooled = (pooled_rows * m).sum(1) / m.sum(1).clamp(min=1)
        else:
            pooled = pooled_rows.mean(1)
        if fc_norm(c):
            pooled = layer_norm(pooled, p["fc_norm.weight"], p["fc_norm.bias"], eps)
    elif c["global_pool"] == "map":
        # timm 1.0's VisionTransformer.pool(): `norm` on every token, then the prefix tokens
        # dropped (unless pool_include_prefix) and AttentionPoolLatent on the rest: the latent's
        # query attends over the (visible) tokens; proj; y + mlp(norm(y)); its one row is the
        # pooled vector.
        t = layer_norm(t, p["norm.weight"], p["norm.bias"], eps)
        first = 0 if c.get("pool_include_prefix") else pre
        t, pool_mask = t[:, first:], None if mask is None else (key_mask if first == 0 else mask)
        hp, Tp = D // nh, t.shape[1]
        q = F.linear(p["attn_pool.latent"], p["attn_pool.q.weight"], p["attn_pool.q.bias"])
        q = q.expand(B, -1, -1).reshape(B, 1, nh, hp).transpose(1, 2)
        kv = F.linear(t, p["attn_pool.kv.weight"], p["attn_pool.kv.bias"]).reshape(B, Tp, 2, nh, hp)
        kk, vv = kv.permute(2, 0, 3, 1, 4).unbind(0)
        scores = (q * hp ** -0.5) @ kk.transpose(-2, -1)
        if pool_mask is not None:
            scores = scores.masked_fill(~pool_mask[:, None, None, :], float("-inf"))
        y = (scores.softmax(dim=-1) @ vv).transpose(1, 2).reshape(B, 1, D)
        y = F.linear(y, p["attn_pool.proj.weight"], p["attn_pool.proj.bias"])
        h = layer_norm(y, p["attn_pool.norm.weight"], p["attn_pool.norm.bias"], eps)
        h = F.gelu(F.linear(h, p["attn_pool.mlp.fc1.weight"], p["attn_pool.mlp.fc1.bias"]))
        pooled = (y + F.linear(h, p["attn_pool.mlp.fc2.weight"], p["attn_pool.mlp.fc2.bias"]))[:, 0]
    elif c.get("head_dist"):  # timm's distilled head, outside distillation training
        t = layer_norm(t, p["norm.weight"], p["norm.bias"], eps)
        x, x_dist = t[:, 0], t[:, 1]
        x, x_dist = F.linear(x, p["head.weight"], p["head.bias"]), F.linear(x_dist, p["head_dist.weight"], p["head_dist.bias"])
        return (x, x_dist) if distilled_training else (x + x_dist) / 2
    else:
        pooled = layer_norm(t, p["norm.weight"], p["norm.bias"], eps)[:, 0]
    return F.linear(pooled, p["head.weight"], p["head.bias"])


def loss_fn(logits, labels, targets, smoothing):
    if targets is not None:
        return -(targets * logits.log_softmax(-1)).sum(-1).mean()
    return F.cross_entropy(logits, labels, label_smoothing=smoothing)


# ---------------------------------------------------------------- one fixture

def make_fixture(path, c, B, labels=None, soft=False, mask=None, smoothing=0.0):
    gen = torch.Generator().manual_seed(0)
    cfg = dict(c, pos_drop_rate=0.0, attn_drop_rate=0.0, proj_drop_rate=0.0, drop_rate=0.0,
               drop_path_rate=0.0, norm_eps=c.get("norm_eps", 1e-6))
    params = init_params(cfg, gen)
    x = torch.randn(B, c["in_chans"], *c["img_size"], generator=gen).float().double()
    targets = torch.randn(B, c["num_classes"], generator=gen).softmax(-1).float().double() if soft else None
    trainable = [n for n in params if not (n == "pos_embed" and c["pos_embed"] == "sincos")]
    for n in trainable:
        params[n].requires_grad_(True)

    logits = forward(cfg, params, x, mask)
    loss = loss_fn(logits, labels, targets, smoothing)
    grads = torch.autograd.grad(loss, [params[n] for n in trainable])

    # 10 AdamW steps from the same start, in two groups as timm's param_groups_weight_decay.
    train = {"label_smoothing": smoothing, "lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
             "weight_decay": 0.05, "steps": 10}
    live = {n: params[n].detach().clone().requires_grad_(n in trainable) for n in params}
    no_wd = ("pos_embed", "cls_token", "dist_token", "reg_token")  # timm 1.0.28+ no_weight_decay()
    decay = [live[n] for n in trainable if live[n].ndim > 1 and n not in no_wd]
    no_decay = [live[n] for n in trainable if not (live[n].ndim > 1 and n not in no_wd)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": train["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=train["lr"], betas=(train["beta1"], train["beta2"]), eps=train["eps"])
    losses = []
    for _ in range(train["steps"]):
        opt.zero_grad()
        step_loss = loss_fn(forward(cfg, live, x, mask), labels, targets, smoothing)
        losses.append(step_loss.item())
        step_loss.backward()
        opt.step()

    tensors = {"param." + n: v.detach().float() for n, v in params.items()}
    tensors.update({"grad." + n: g.float() for n, g in zip(trainable, grads)})
    tensors["input.x"] = x.float()
    if labels is not None:
        tensors["input.labels"] = labels
    if targets is not None:
        tensors["input.targets"] = targets.float()
    if mask is not None:
        tensors["input.mask"] = mask.to(torch.uint8)
    tensors["out.logits"] = logits.detach().float()
    tensors["out.loss"] = loss.detach().float().reshape(1)
    tensors["adamw.loss"] = torch.tensor(losses).float()
    write_safetensors(path, tensors, {"vit_config": json.dumps(cfg), "train": json.dumps(train)})

    # The file must read back to the same tensors.
    back, meta = read_safetensors(path)
    assert set(back) == set(tensors) and json.loads(meta["vit_config"]) == cfg
    for n, t in tensors.items():
        assert torch.equal(back[n], t), n
    return losses


def distillation_loss(outputs, labels, teacher, kd, smoothing):
    """facebookresearch/deit's DistillationLoss, with the base criterion timm's label-smoothed
    cross entropy (F.cross_entropy's is the same loss)."""
    outputs, outputs_kd = outputs if isinstance(outputs, tuple) else (outputs, outputs)
    base = F.cross_entropy(outputs, labels, label_smoothing=smoothing)
    if kd["type"] == "soft":
        T = kd["tau"]
        dist = F.kl_div(F.log_softmax(outputs_kd / T, dim=1), F.log_softmax(teacher / T, dim=1),
                        reduction="sum", log_target=True) * (T * T) / outputs_kd.numel()
    else:
        dist = F.cross_entropy(outputs_kd, teacher.argmax(dim=1))
    return base * (1 - kd["alpha"]) + dist * kd["alpha"]


def make_distill_fixture(path, c, B, labels, kd, smoothing=0.0):
    """One step of DeiT's distillation: the loss and every gradient for given teacher logits."""
    gen = torch.Generator().manual_seed(1)
    cfg = dict(c, pos_drop_rate=0.0, attn_drop_rate=0.0, proj_drop_rate=0.0, drop_rate=0.0,
               drop_path_rate=0.0, norm_eps=c.get("norm_eps", 1e-6))
    params = init_params(cfg, gen)
    x = torch.randn(B, c["in_chans"], *c["img_size"], generator=gen).float().double()
    teacher = (torch.randn(B, c["num_classes"], generator=gen) * 2).float().double()
    for n in params:
        params[n].requires_grad_(True)
    loss = distillation_loss(forward(cfg, params, x, distilled_training=bool(c.get("head_dist"))), labels,
                             teacher, kd, smoothing)
    grads = torch.autograd.grad(loss, list(params.values()))
    tensors = {"param." + n: v.detach().float() for n, v in params.items()}
    tensors.update({"grad." + n: g.float() for n, g in zip(params, grads)})
    tensors.update({"input.x": x.float(), "input.labels": labels, "input.teacher_logits": teacher.float(),
                    "out.loss": loss.detach().float().reshape(1)})
    write_safetensors(path, tensors, {"vit_config": json.dumps(cfg),
                                      "train": json.dumps(dict(kd, label_smoothing=smoothing))})
    return loss.item()


def check_patch_embedding():
    """The conv patch embedding equals unfold + matmul (the im2col vitcpp does)."""
    gen = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(2, 3, 8, 12, generator=gen), torch.randn(5, 3, 4, 2, generator=gen), torch.randn(5, generator=gen)
    conv = F.conv2d(x, w, b, stride=(4, 2)).flatten(2).transpose(1, 2)
    cols = F.unfold(x, kernel_size=(4, 2), stride=(4, 2)).transpose(1, 2)
    assert torch.allclose(conv, cols @ w.reshape(5, -1).T + b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    check_patch_embedding()

    cls_learn = {"img_size": [12, 12], "in_chans": 3, "patch_size": [4, 4], "embed_dim": 16, "depth": 2,
                 "num_heads": 2, "mlp_dim": 32, "qkv_bias": True, "global_pool": "token", "class_token": True,
                 "pos_embed": "learn", "num_classes": 5, "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}
    losses = make_fixture(os.path.join(args.out, "vit_cls_learn.safetensors"), cls_learn, B=4,
                          labels=torch.tensor([0, 3, 1, 4]), smoothing=0.1)
    print(f"vit_cls_learn: AdamW loss {losses[0]:.6f} -> {losses[-1]:.6f}")

    avg_sincos = {"img_size": [8, 12], "in_chans": 2, "patch_size": [4, 2], "embed_dim": 12, "depth": 2,
                  "num_heads": 3, "mlp_dim": 24, "qkv_bias": False, "global_pool": "avg", "class_token": False,
                  "pos_embed": "sincos", "num_classes": 4, "mean": [0.5, 0.5], "std": [0.5, 0.5]}
    mask = torch.ones(3, 12, dtype=torch.bool)
    mask[1, [0, 5, 7]] = False
    mask[2, [1, 2, 3, 4, 9, 10, 11]] = False
    losses = make_fixture(os.path.join(args.out, "vit_avg_sincos_mask.safetensors"), avg_sincos, B=3,
                          soft=True, mask=mask)
    print(f"vit_avg_sincos_mask: AdamW loss {losses[0]:.6f} -> {losses[-1]:.6f}")

    # Heads wider than embed_dim / num_heads (vit-pytorch's dim_head): 3 heads of 8 on a
    # 12-wide model; class-token pooling, so vitcpp's class-token tail runs on it too.
    dim_head = dict(cls_learn, embed_dim=12, num_heads=3, dim_head=8, mlp_dim=20, num_classes=3)
    losses = make_fixture(os.path.join(args.out, "vit_dim_head.safetensors"), dim_head, B=3,
                          labels=torch.tensor([2, 0, 1]))
    print(f"vit_dim_head: AdamW loss {losses[0]:.6f} -> {losses[-1]:.6f}")

    # vit-pytorch's ViT (seed vit-pytorch-code-review.md): LayerNorms around the patch
    # projection, 2 heads of 8 on a 12-wide model, no qkv bias, the final norm on every token
    # and the mean over all of them (class token included), nn.LayerNorm's eps; with a mask.
    lucid = {"img_size": [8, 12], "in_chans": 3, "patch_size": [4, 4], "embed_dim": 12, "depth": 2,
             "num_heads": 2, "dim_head": 8, "mlp_dim": 24, "qkv_bias": False, "global_pool": "avg",
             "fc_norm": False, "pool_include_prefix": True, "patch_norm": True, "class_token": True,
             "pos_embed": "learn", "num_classes": 4, "norm_eps": 1e-5, "mean": [0.5] * 3, "std": [0.5] * 3}
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, [0, 4]] = False
    losses = make_fixture(os.path.join(args.out, "vit_pytorch_style.safetensors"), lucid, B=3,
                          labels=torch.tensor([3, 0, 2]), mask=mask)
    print(f"vit_pytorch_style: AdamW loss {losses[0]:.6f} -> {losses[-1]:.6f}")

    # DeiT's distilled ViT (timm's VisionTransformerDistilled): a distillation token after
    # the class token, a second head on it, the logits the mean of the two heads.
    deit = dict(cls_learn, dist_token=True, head_dist=True, num_classes=4)
    losses = make_fixture(os.path.join(args.out, "vit_deit_distilled.safetensors"), deit, B=3,
                          labels=torch.tensor([1, 3, 0]), smoothing=0.1)
    print(f"vit_deit_distilled: AdamW loss {losses[0]:.6f} -> {losses[-1]:.6f}")

    # SigLIP's attention pooling (timm's global_pool='map', AttentionPoolLatent) as timm 1.0's
    # pool() runs it: over the visible patches, the class token left out, with a mask.
    map_pool = dict(cls_learn, global_pool="map", num_heads=4, num_classes=3)
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[0, [2, 6]] = False
    mask[2, [0, 1, 2, 3, 4, 5, 7]] = False
    losses = make_fixture(os.path.join(args.out, "vit_map_pool.safetensors"), map_pool, B=3,
                          labels=torch.tensor([2, 0, 1]), mask=mask, smoothing=0.1)
    print(f"vit_map_pool: AdamW loss {losses[0]:.6f} -> {losses[-1]:.6f}")
    # Registers and the attention pool, no class token (vit_so150m_patch16_reg4_map_256's layout).
    map_reg = dict(cls_learn, global_pool="map", class_token=False, reg_tokens=3, num_heads=4, num_classes=3)
    losses = make_fixture(os.path.join(args.out, "vit_map_pool_reg.safetensors"), map_reg, B=3,
                          labels=torch.tensor([1, 2, 0]), smoothing=0.1)
    print(f"vit_map_pool_reg: AdamW loss {losses[0]:.6f} -> {losses[-1]:.6f}")
    # timm 1.0's pool_include_prefix: the pool reads the class and register tokens too.
    map_prefix = dict(cls_learn, global_pool="map", reg_tokens=2, pool_include_prefix=True, num_heads=4,
                      num_classes=3)
    losses = make_fixture(os.path.join(args.out, "vit_map_pool_prefix.safetensors"), map_prefix, B=3,
                          labels=torch.tensor([0, 2, 1]), mask=mask, smoothing=0.1)
    print(f"vit_map_pool_prefix: AdamW loss {losses[0]:.6f} -> {losses[-1]:.6f}")

    # DeiT's distillation loss, hard and soft, on the distilled model and (plain knowledge
    # distillation on the class head) on a model without a distillation token.
    for name, model, kd in [("hard", deit, {"type": "hard", "alpha": 0.5, "tau": 1.0}),
                            ("soft", deit, {"type": "soft", "alpha": 0.3, "tau": 3.0}),
                            ("plain_soft", dict(cls_learn, num_classes=4), {"type": "soft", "alpha": 0.7, "tau": 2.0})]:
        loss = make_distill_fixture(os.path.join(args.out, f"vit_distill_{name}.safetensors"), model, B=3,
                                    labels=torch.tensor([2, 0, 3]), kd=kd, smoothing=0.1)
        print(f"vit_distill_{name}: loss {loss:.6f}")


if __name__ == "__main__":
    main()
