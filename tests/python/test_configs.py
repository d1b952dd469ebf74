"""Random timm configurations against PyTorch: the combinations no fixture names.

Each seed draws a timm VisionTransformer (head width, heads, depth, patch and grid sizes,
non-square inputs, class token or none, registers, token / avg / map pooling, prefix tokens in
the pool, no_embed_class, pre_norm, LayerScale, qkv bias, MLP ratio, classes, batch size),
writes it as a timm checkpoint (model.safetensors + config.json) and checks vitcpp against
the float64 reference forward of tools/make_pretrained_fixtures.py:
- the logits (100 seeds), within 1e-4 of the largest (a sweep of 500 seeds here: at most 1.0e-5 on the
  AVX-512, AVX2 and generic paths);
- one SGD step (30 seeds) at lr 1 through vitcpp.train: each tensor's change is PyTorch's autograd
  gradient of the mean cross-entropy, within 2e-4 of that tensor's largest (300 seeds: at most
  1.6e-4 with widths of 2 and more; a width of 1 makes LayerNorm's gradient all rounding).
- timm 1.0's attn_mask (30 seeds): a random mask hiding patches, in one of the forms timm takes
  (bool or 0/-inf float, [B, 1, 1, T] to [B, heads, T, T], numpy or torch), for the logits
  and forward_features' tokens, within 1e-4 of the largest.
The sweep found one bug, in the reference (avg pooling with pool_include_prefix).
"""
import os
import random
import sys

import numpy as np
import pytest

import vitcpp

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import make_pretrained_fixtures as ref  # noqa: E402


def draw(seed):
    """(timm model_args, classes, batch) for one seed."""
    rng = random.Random(seed)
    hd, nh = rng.choice([2, 3, 4, 5, 8, 12, 16, 24, 32, 40, 64]), rng.choice([1, 2, 3, 4, 6])
    P = rng.choice([1, 2, 3, 4, 7, 8, 14, 16])
    cls = rng.random() < 0.7
    pool = rng.choice(["avg", "map"] + (["token"] if cls else []))
    a = {"img_size": [rng.randint(1, 7) * P, rng.randint(1, 7) * P], "patch_size": P, "embed_dim": hd * nh,
         "depth": rng.randint(1, 3), "num_heads": nh, "mlp_ratio": rng.choice([1.0, 1.5, 2.0, 4.0]),
         "qkv_bias": rng.random() < 0.7, "class_token": cls, "reg_tokens": rng.choice([0, 0, 1, 4]),
         "global_pool": pool, "no_embed_class": rng.random() < 0.3, "pre_norm": rng.random() < 0.3}
    if rng.random() < 0.3:
        a["init_values"] = 0.1
    if pool != "token" and rng.random() < 0.4:
        a["pool_include_prefix"] = True
    return a, rng.randint(1, 20), rng.choice([1, 1, 2, 3, 4, 5, 8, 9, 17])


def checkpoint(tmp_path, seed):
    """The drawn model written as timm writes it, its config and float64 parameters."""
    a, K, B = draw(seed)
    c = ref.timm_model_cfg(a, K)
    stored, params = ref.init_params(ref.timm_shapes(c), torch.float32, seed)
    ref.write_safetensors(str(tmp_path / "model.safetensors"), stored, {"format": "pt"})
    ref.write_json(str(tmp_path / "config.json"), {
        "architecture": "vit_random", "num_classes": K, "model_args": a,
        "pretrained_cfg": {"input_size": [3] + c["img_size"], "mean": [0.5] * 3, "std": [0.5] * 3, "num_classes": K}})
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, 3, *c["img_size"], generator=g).float()
    y = torch.randint(0, K, (B,), generator=g)
    return c, params, x, y


@pytest.mark.parametrize("seed", range(100))
def test_logits_are_pytorchs(tmp_path, seed):
    c, params, x, _ = checkpoint(tmp_path, seed)
    want = ref.timm_forward(c, params, x.double()).numpy()
    got = vitcpp.create_model("local-dir:" + str(tmp_path))(x.numpy())
    err = np.abs(got - want)
    worst = np.unravel_index(err.argmax(), err.shape)
    assert err.max() <= 1e-4 * np.abs(want).max(), (
        f"{draw(seed)}: worst logit {worst} {got[worst]} against {want[worst]} (largest {np.abs(want).max()})")


@pytest.mark.parametrize("seed", range(100, 130))
def test_one_sgd_step_follows_pytorchs_gradient(tmp_path, seed):
    c, params, x, y = checkpoint(tmp_path, seed)
    p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    torch.nn.functional.cross_entropy(ref.timm_forward(c, p, x.double()), y).backward()
    m = vitcpp.create_model("local-dir:" + str(tmp_path))
    before = m.state_dict()
    vitcpp.train(m, train=(x.numpy(), y.numpy()), output=str(tmp_path / "run"), epochs=1, batch_size=len(x),
                 opt="momentum", momentum=0.0, lr=1.0, sched="none", weight_decay=0.0,
                 progress="log")
    after = m.state_dict()
    assert sorted(after) == sorted(p)
    for name, t in p.items():
        want = t.grad.numpy()
        got = before[name].astype(np.float64) - after[name]
        err = np.abs(got - want)
        scale = max(np.abs(want).max(), 1e-3)
        assert err.max() <= 2e-4 * scale, (
            f"{draw(seed)}: {name} worst {np.unravel_index(err.argmax(), err.shape)} by {err.max():.3g} "
            f"(largest gradient {np.abs(want).max():.3g})")


def key_mask(seed, B, T, npre, heads):
    """A random timm attn_mask hiding patches (never a prefix token, never every key), as bool
    [B, T] and in one of the forms timm takes (drawn by seed)."""
    rng = np.random.default_rng(seed)
    seen = rng.random((B, T)) < 0.6
    seen[:, :npre] = True
    seen[np.arange(B), npre + rng.integers(0, T - npre, B)] = True  # one patch at least
    form = seed % 5
    if form == 0:
        m = seen[:, None, None, :]
    elif form == 1:
        m = np.where(seen, 0.0, -np.inf)[:, None, None, :].astype(np.float32)
    elif form == 2:
        m = np.broadcast_to(seen[:, None, None, :], (B, 1, T, T)).copy()
    elif form == 3:
        m = np.broadcast_to(np.where(seen, 0.0, -np.inf)[:, None, None, :], (B, heads, T, T)).astype(np.float32)
    else:
        m = torch.from_numpy(seen[:, None, None, :].copy())
    return m


@pytest.mark.parametrize("seed", range(200, 230))
def test_attn_mask_is_timms(tmp_path, seed):
    c, params, x, _ = checkpoint(tmp_path, seed)
    m = vitcpp.create_model("local-dir:" + str(tmp_path))
    npre = m.num_prefix_tokens
    T = m.forward_features(x.numpy()[:1]).shape[1]
    mask = key_mask(seed, x.shape[0], T, npre, c["num_heads"])
    tm = mask if torch.is_tensor(mask) else torch.from_numpy(np.ascontiguousarray(mask))
    tm = tm if tm.dtype == torch.bool else tm.double()
    want_tokens = ref.timm_forward_features(c, params, x.double(), tm)[0].numpy()
    want = ref.timm_forward(c, params, x.double(), tm).numpy()
    for got, want, what in ((m.forward_features(x.numpy(), attn_mask=mask), want_tokens, "tokens"),
                            (m(x.numpy(), attn_mask=mask), want, "logits")):
        err = np.abs(got - want)
        worst = np.unravel_index(err.argmax(), err.shape)
        assert err.max() <= 1e-4 * np.abs(want).max(), (
            f"{draw(seed)} mask form {seed % 5}: worst {what} {worst} {got[worst]} against {want[worst]}")
