"""timm's forward_head in numpy, on the tokens forward_features gives: pooling (the class
token, the mean of the patches, or the attention pool), fc_norm, the head. The engine does
the same in one pass (model(x), model.forward_pooled(x)); this serves timm's two-step form."""
import math

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def _layer_norm(x, w, b, eps):
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _act(x, name):
    if name == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "quick_gelu":
        return x / (1 + np.exp(-1.702 * x))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)).astype(np.float64))


def _attn_pool(c, p, x):
    """timm's AttentionPoolLatent on x [N, T, D]: the latent's query over kv(x), proj, then
    y + mlp(norm(y))."""
    N, T, D = x.shape
    H = c["num_heads"]
    d = D // H
    q = (p["attn_pool.latent"].reshape(1, D) @ p["attn_pool.q.weight"].T + p["attn_pool.q.bias"]).reshape(H, d)
    kv = (x @ p["attn_pool.kv.weight"].T + p["attn_pool.kv.bias"]).reshape(N, T, 2, H, d)
    k, v = kv[:, :, 0].transpose(0, 2, 1, 3), kv[:, :, 1].transpose(0, 2, 1, 3)  # [N, H, T, d]
    s = np.einsum("hd,nhtd->nht", q, k) / math.sqrt(d)
    s = np.exp(s - s.max(-1, keepdims=True))
    y = np.einsum("nht,nhtd->nhd", s / s.sum(-1, keepdims=True), v).reshape(N, D)
    y = y @ p["attn_pool.proj.weight"].T + p["attn_pool.proj.bias"]
    h = _layer_norm(y, p["attn_pool.norm.weight"], p["attn_pool.norm.bias"], c["norm_eps"])
    h = _act(h @ p["attn_pool.mlp.fc1.weight"].T + p["attn_pool.mlp.fc1.bias"], c.get("act_layer", "gelu"))
    return y + h @ p["attn_pool.mlp.fc2.weight"].T + p["attn_pool.mlp.fc2.bias"]


def final_norm(model, x):
    """timm's `norm` on tokens [N, T, D] (the identity for a model with fc_norm)."""
    c = model.config
    if c["fc_norm"]:
        return x
    p = model._engine.params(["norm."])
    return _layer_norm(x, p["norm.weight"], p["norm.bias"], c["norm_eps"]).astype(np.float32)


def forward_head(model, x, pre_logits):
    c, D = model.config, model.num_features
    if x.ndim != 3 or x.shape[2] != D or x.shape[1] < 1:
        raise ValueError(f"forward_head takes forward_features' tokens [N, T, {D}], got shape {tuple(x.shape)}")
    # The head's tensors alone (not a copy of every weight per call).
    p = {k: v.astype(np.float64) for k, v in model._engine.params(["head", "fc_norm.", "attn_pool."]).items()}
    x = x.astype(np.float64)
    first = 0 if c.get("pool_include_prefix") else model.num_prefix_tokens
    heads = [("head", x[:, 0])]
    if c["global_pool"] == "avg":
        heads = [("head", x[:, first:].mean(1))]
        if c["fc_norm"]:
            heads = [("head", _layer_norm(heads[0][1], p["fc_norm.weight"], p["fc_norm.bias"], c["norm_eps"]))]
    elif c["global_pool"] == "map":
        heads = [("head", _attn_pool(c, p, x[:, first:]))]
    elif c.get("head_dist"):  # DeiT's distilled head: the mean of its two heads
        heads.append(("head_dist", x[:, 1]))
    if pre_logits or model.num_classes == 0:
        out = sum(h for _, h in heads) / len(heads)
    else:
        out = sum(h @ p[n + ".weight"].T + p[n + ".bias"] for n, h in heads) / len(heads)
    return out.astype(np.float32)
