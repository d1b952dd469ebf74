#!/usr/bin/python3
"""Fixtures for loading Hugging Face transformers' SigLIP vision tower, written by plain PyTorch.

transformers does not install from Debian, so these files are written here in its layout and
its forward is written out in float64 from transformers' modeling_siglip.py (SiglipVisionEmbeddings,
SiglipEncoderLayer with q_proj/k_proj/v_proj/out_proj, post_layernorm,
SiglipMultiheadAttentionPoolingHead), with PyTorch's own nn.MultiheadAttention as the head's
attention, as transformers uses it. Under tests/fixtures/pretrained/:

    hf_siglip_vision/   SiglipVisionModel (model_type siglip_vision_model): model.safetensors,
                        config.json, preprocessor_config.json (SiglipImageProcessor), and
                        expect.safetensors: input.x [2, 3, 32, 32], out.features (pooler_output,
                        the head's), out.tokens (last_hidden_state, after post_layernorm)
    hf_siglip_model/    SiglipModel (model_type siglip, vision_config): the same tower beside a
                        stand-in text tower (text_model.*), logit_scale and logit_bias
    hf_siglip_cls/      SiglipForImageClassification: the tower with its head, a classifier on
                        the mean of last_hidden_state; expect.safetensors out.logits

Run with Debian's PyTorch: /usr/bin/python3 tools/make_siglip_fixtures.py [--out DIR]
"""
import argparse
import json
import os

import torch
import torch.nn.functional as F

from make_fixtures import write_safetensors

torch.set_default_dtype(torch.float64)

D, HEADS, DEPTH, M, IMG, PATCH, EPS, CHANS = 32, 4, 2, 64, 32, 8, 1e-6, 3
N = (IMG // PATCH) ** 2
VISION = {"hidden_size": D, "intermediate_size": M, "num_hidden_layers": DEPTH, "num_attention_heads": HEADS,
          "num_channels": CHANS, "image_size": IMG, "patch_size": PATCH, "hidden_act": "gelu_pytorch_tanh",
          "layer_norm_eps": EPS, "attention_dropout": 0.0}
PREPROCESSOR = {"do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
                "image_std": [0.5, 0.5, 0.5], "image_processor_type": "SiglipImageProcessor", "processor_class":
                "SiglipProcessor", "resample": 3, "rescale_factor": 1 / 255, "size": {"height": IMG, "width": IMG}}
LABELS = ["tabby", "teapot", "rocket"]


def tower_shapes():
    p = "vision_model."
    s = {p + "embeddings.patch_embedding.weight": (D, CHANS, PATCH, PATCH), p + "embeddings.patch_embedding.bias": (D,),
         p + "embeddings.position_embedding.weight": (N, D)}
    for i in range(DEPTH):
        l = f"{p}encoder.layers.{i}."
        for n in ("layer_norm1", "layer_norm2"):
            s.update({l + n + ".weight": (D,), l + n + ".bias": (D,)})
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            s.update({l + "self_attn." + n + ".weight": (D, D), l + "self_attn." + n + ".bias": (D,)})
        s.update({l + "mlp.fc1.weight": (M, D), l + "mlp.fc1.bias": (M,), l + "mlp.fc2.weight": (D, M),
                  l + "mlp.fc2.bias": (D,)})
    s.update({p + "post_layernorm.weight": (D,), p + "post_layernorm.bias": (D,), p + "head.probe": (1, 1, D),
              p + "head.attention.in_proj_weight": (3 * D, D), p + "head.attention.in_proj_bias": (3 * D,),
              p + "head.attention.out_proj.weight": (D, D), p + "head.attention.out_proj.bias": (D,),
              p + "head.layernorm.weight": (D,), p + "head.layernorm.bias": (D,),
              p + "head.mlp.fc1.weight": (M, D), p + "head.mlp.fc1.bias": (M,), p + "head.mlp.fc2.weight": (D, M),
              p + "head.mlp.fc2.bias": (D,)})
    return s


def random_params(shapes, gen):
    """Values of a useful scale, rounded to float32 (what the file stores) before the forward."""
    out = {}
    for name, shape in shapes.items():
        r = torch.randn(shape, generator=gen)
        if "norm" in name and name.endswith("weight"):
            v = 1 + 0.1 * r
        elif name.endswith("bias"):
            v = 0.1 * r
        elif "position_embedding" in name or "probe" in name:
            v = 0.5 * r
        else:
            v = 0.2 * r
        out[name] = v.float().double()
    return out


def mlp(p, pre, x):
    h = F.linear(x, p[pre + "fc1.weight"], p[pre + "fc1.bias"])
    return F.linear(F.gelu(h, approximate="tanh"), p[pre + "fc2.weight"], p[pre + "fc2.bias"])


def tower(p, x):
    """SiglipVisionTransformer: (last_hidden_state after post_layernorm, the head's pooler_output)."""
    v = "vision_model."
    B = x.shape[0]
    t = F.conv2d(x, p[v + "embeddings.patch_embedding.weight"], p[v + "embeddings.patch_embedding.bias"],
                 stride=PATCH).flatten(2).transpose(1, 2)
    t = t + p[v + "embeddings.position_embedding.weight"][None]
    hd = D // HEADS
    for i in range(DEPTH):
        l = f"{v}encoder.layers.{i}."
        h = F.layer_norm(t, (D,), p[l + "layer_norm1.weight"], p[l + "layer_norm1.bias"], EPS)
        q, k, w = (F.linear(h, p[l + f"self_attn.{n}.weight"], p[l + f"self_attn.{n}.bias"]).reshape(B, N, HEADS, hd)
                   .transpose(1, 2) for n in ("q_proj", "k_proj", "v_proj"))
        a = ((q @ k.transpose(-2, -1)) * hd ** -0.5).softmax(-1) @ w
        a = a.transpose(1, 2).reshape(B, N, D)
        t = t + F.linear(a, p[l + "self_attn.out_proj.weight"], p[l + "self_attn.out_proj.bias"])
        h = F.layer_norm(t, (D,), p[l + "layer_norm2.weight"], p[l + "layer_norm2.bias"], EPS)
        t = t + mlp(p, l + "mlp.", h)
    last = F.layer_norm(t, (D,), p[v + "post_layernorm.weight"], p[v + "post_layernorm.bias"], EPS)
    # SiglipMultiheadAttentionPoolingHead, with PyTorch's MultiheadAttention.
    h = v + "head."
    mha = torch.nn.MultiheadAttention(D, HEADS, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(p[h + "attention.in_proj_weight"])
        mha.in_proj_bias.copy_(p[h + "attention.in_proj_bias"])
        mha.out_proj.weight.copy_(p[h + "attention.out_proj.weight"])
        mha.out_proj.bias.copy_(p[h + "attention.out_proj.bias"])
        y = mha(p[h + "probe"].repeat(B, 1, 1), last, last)[0]
    y = y + mlp(p, h + "mlp.", F.layer_norm(y, (D,), p[h + "layernorm.weight"], p[h + "layernorm.bias"], EPS))
    return last, y[:, 0]


def write_dir(d, tensors, config, expect):
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "model.safetensors"), {n: t.float() for n, t in tensors.items()},
                      {"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump(PREPROCESSOR, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(d, "expect.safetensors"), {n: t.float() for n, t in expect.items()}, {})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "pretrained"))
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(11)
    p = random_params(tower_shapes(), gen)
    x = torch.randn(2, CHANS, IMG, IMG, generator=gen).float().double()
    last, pooled = tower(p, x)

    write_dir(os.path.join(args.out, "hf_siglip_vision"), p,
              {"architectures": ["SiglipVisionModel"], "model_type": "siglip_vision_model", **VISION},
              {"input.x": x, "out.features": pooled, "out.tokens": last})

    # SiglipModel: a stand-in text tower (its names; vitcpp leaves it out), logit_scale, logit_bias.
    text = {"text_model.embeddings.token_embedding.weight": torch.randn(10, D, generator=gen),
            "text_model.final_layer_norm.weight": torch.ones(D), "text_model.head.weight": torch.randn(D, D, generator=gen),
            "logit_scale": torch.tensor([2.3]), "logit_bias": torch.tensor([-10.0])}
    write_dir(os.path.join(args.out, "hf_siglip_model"), {**p, **text},
              {"architectures": ["SiglipModel"], "model_type": "siglip",
               "text_config": {"hidden_size": D, "vocab_size": 10}, "vision_config": VISION},
              {"input.x": x, "out.features": pooled})

    # SiglipForImageClassification: the classifier reads the mean of last_hidden_state.
    cls = {"classifier.weight": (0.3 * torch.randn(3, D, generator=gen)).float().double(),
           "classifier.bias": (0.1 * torch.randn(3, generator=gen)).float().double()}
    logits = F.linear(last.mean(1), cls["classifier.weight"], cls["classifier.bias"])
    write_dir(os.path.join(args.out, "hf_siglip_cls"), {**p, **cls},
              {"architectures": ["SiglipForImageClassification"], "model_type": "siglip",
               "id2label": {str(i): n for i, n in enumerate(LABELS)},
               "label2id": {n: i for i, n in enumerate(LABELS)}, "vision_config": VISION},
              {"input.x": x, "out.logits": logits})
    print("pooled", pooled[0, :4].tolist(), "logits", logits.tolist())


if __name__ == "__main__":
    main()
