#!/usr/bin/env python3
"""Writes src/io/timm_architectures.inc from a survey of timm's registry.

timm's hub checkpoints name their architecture (config.json "architecture") and rarely list
its arguments: the activation, the LayerNorm eps, the number of heads and the blocks' kind
follow from the name alone, and some of them leave no trace in the tensors (QuickGELU, the
tanh GELU, eps 1e-5). The survey is made where timm is installed:

    python3 tools/check_with_libraries.py --survey-out timm_survey.json ...
    python3 tools/timm_table.py timm_survey.json > src/io/timm_architectures.inc
    python3 tools/timm_table.py --tags timm_survey.json > src/io/timm_tags.inc
    python3 tools/timm_table.py --deprecated timm_survey.json > src/io/timm_deprecated.inc

Each row: name, embed_dim, num_heads, LayerNorm eps, the MLP's activation (timm's act_layer
name), what vitcpp cannot run ("" when it runs the architecture as timm does), and for those
it runs the whole model as a vitcpp config (JSON, ViTConfig's keys) with timm's defaults:
timm.create_model(name) without weights, its pretrained_cfg's preprocessing and class count.
With --tags: each pretrained tag of the architectures vitcpp runs, with what
timm.create_model("name.tag") takes from it where that differs from the name's row (its class
count, input size and preprocessing; "{}" where nothing does). With --deprecated: timm's
deprecated names and the current "name.tag" each maps to.
"""
import json
import sys


ACTS = {None: "gelu", "GELU": "gelu", "GELUTanh": "gelu_tanh", "QuickGELU": "quick_gelu"}


def unsupported(r):
    """What of architecture r vitcpp's ViT does not have, as a phrase after "timm's NAME"."""
    why = []
    # VisionTransformerDistilled (DeiT's): a distillation token and a second head, which
    # vitcpp's config holds (dist_token, head_dist).
    if r.get("class") not in ("VisionTransformer", "VisionTransformerDistilled"):
        return f"is a {r.get('class')}, not timm's VisionTransformer"
    if r.get("describe_error") or r.get("block") != "Block":
        why.append(f"uses {r.get('block') or 'other'} blocks")
    if r.get("attn") not in (None, "Attention"):
        why.append(f"uses {r['attn']}")
    act, mlp = r.get("act"), r.get("mlp")
    if mlp not in (None, "Mlp"):
        why.append(f"has a gated MLP ({mlp}, {act})")
    elif act not in ACTS:
        why.append(f"uses the {act} activation where vitcpp's MLP has GELU")
    if r.get("norm") not in (None, "LayerNorm") or r.get("norm_bias") is False:
        why.append(f"uses {r.get('norm')} without a bias" if r.get("norm") == "LayerNorm" else f"uses {r.get('norm')}")
    if r.get("q_norm") not in (None, "Identity") or r.get("attn_norm") not in (None, "Identity"):
        why.append("normalizes inside the attention (qk_norm or scale_attn_norm)")
    # AttentionPoolLatent (global_pool='map', SigLIP's) is vitcpp's global_pool 'map'.
    if r.get("attn_pool") not in (None, "AttentionPoolLatent"):
        why.append(f"pools with {r['attn_pool']}")
    if r.get("patch_embed") not in (None, "PatchEmbed") or r.get("patch_norm") not in (None, "Identity"):
        why.append("has another patch embedding")
    if r.get("proj_bias") is False and mlp in (None, "Mlp"):
        why.append("has no attention-projection bias")
    if r.get("pos_embed") is False:
        why.append("has no position embedding")
    if r.get("fc_norm") not in (None, "Identity", "LayerNorm") or r.get("pre_norm") not in (None, "Identity", "LayerNorm"):
        why.append("uses another norm around the blocks")
    # final_norm=False and no fc_norm (InternViT-300M's): no norm after the blocks at all,
    # where vitcpp's ViT has norm or fc_norm. Its row said it runs, and its load failed.
    if r.get("final_norm") == "Identity" and r.get("fc_norm") in (None, "Identity"):
        why.append("has no final norm (final_norm=False)")
    return ", ".join(why)


def vitcpp_config(r):
    """Architecture r as vitcpp's config JSON (ViTConfig::from_json's keys), as timm builds it by name."""
    p = r.get("pretrained_cfg", {})
    pool = r.get("global_pool") or "token"
    c = {"img_size": r["img_size"], "in_chans": r["in_chans"], "patch_size": r["patch_size"],
         "embed_dim": r["embed_dim"], "depth": r["depth"], "num_heads": r["num_heads"], "mlp_dim": r["mlp_hidden"],
         "qkv_bias": r["qkv_bias"], "global_pool": pool, "class_token": r["class_token"],
         "reg_tokens": r.get("reg_tokens") or 0, "no_embed_class": r.get("no_embed_class", False),
         "pre_norm": r.get("pre_norm") == "LayerNorm", "patch_bias": r.get("patch_bias", True),
         "fc_norm": r.get("fc_norm") == "LayerNorm", "init_values": r.get("init_values") or 0.0,
         "norm_eps": r.get("norm_eps") or 1e-6, "num_classes": r["num_classes"],
         "mean": p.get("mean", [0.485, 0.456, 0.406]), "std": p.get("std", [0.229, 0.224, 0.225]),
         "interpolation": p.get("interpolation", "bicubic"), "crop_pct": p.get("crop_pct", 0.875),
         "crop_mode": p.get("crop_mode", "center")}
    if r.get("head_dim") and r["head_dim"] * r["num_heads"] != r["embed_dim"]:
        c["dim_head"] = r["head_dim"]
    if r.get("pool_include_prefix"):
        c["pool_include_prefix"] = True
    if ACTS.get(r.get("act"), "gelu") != "gelu":
        c["act_layer"] = ACTS[r.get("act")]
    if r.get("class") == "VisionTransformerDistilled":
        c["dist_token"] = c["head_dist"] = True
    return json.dumps(c, separators=(",", ":"))


TAG_KEYS = ("img_size", "num_classes", "mean", "std", "interpolation", "crop_pct", "crop_mode")


def tags_main(survey):
    rows = []
    for name, r in sorted(survey["models"].items()):
        if name.startswith("__") or "error" in r or unsupported(r):
            continue
        named = json.loads(vitcpp_config(r))
        for tag, t in sorted(r.get("tag_cfgs", {}).items()):
            rows.append((name, tag, json.dumps({k: t[k] for k in TAG_KEYS if t[k] != named[k]}, separators=(",", ":"))))
    print(f"// Generated by tools/timm_table.py --tags from timm {survey['timm']}'s registry "
          f"({len(rows)} pretrained tags); do not edit.")
    print("// architecture, tag, what timm.create_model(\"architecture.tag\") takes from the tag where it differs")
    print("// from the architecture's row in timm_architectures.inc (config JSON keys)")
    for name, tag, diff in rows:
        print(f'{{"{name}", "{tag}", R"({diff})"}},')


def deprecated_main(survey):
    rows = sorted(survey.get("deprecated", {}).items())
    print(f"// Generated by tools/timm_table.py --deprecated from timm {survey['timm']}'s registry "
          f"({len(rows)} names); do not edit.")
    print("// a deprecated name, the current name.tag timm.create_model builds for it (with a warning)")
    for old, new in rows:
        print(f'{{"{old}", "{new}"}},')


def main():
    if sys.argv[1] == "--tags":
        return tags_main(json.load(open(sys.argv[2])))
    if sys.argv[1] == "--deprecated":
        return deprecated_main(json.load(open(sys.argv[2])))
    survey = json.load(open(sys.argv[1]))
    rows = []
    for name, r in sorted(survey["models"].items()):
        if name.startswith("__") or "error" in r:
            continue
        eps = r.get("norm_eps") or 1e-6
        act = ACTS.get(r.get("act"), "gelu")
        why = unsupported(r)
        rows.append((name, int(r.get("embed_dim") or 0), int(r.get("num_heads") or 0), eps, act, why,
                     "" if why else vitcpp_config(r)))
    print(f"// Generated by tools/timm_table.py from timm {survey['timm']}'s registry "
          f"({len(rows)} architectures); do not edit.")
    print("// name, embed_dim, num_heads, LayerNorm eps, activation, what vitcpp cannot run (\"\" = runs as timm does),")
    print("// the model as vitcpp's config JSON (\"\" for those it cannot run)")
    for name, dim, heads, eps, act, why, config in rows:
        print(f'{{"{name}", {dim}, {heads}, {eps!r}f, "{act}", "{why}",\n R"({config})"}},')


if __name__ == "__main__":
    main()
