#!/usr/bin/env python3
"""vitcpp's pretrained formats against the real timm, transformers and onnxruntime.

tools/make_pretrained_fixtures.py writes timm and Hugging Face checkpoints in their layouts and
follows their forwards in plain PyTorch, because neither library installs from Debian. This
script runs where they are installed (pip's timm, transformers, onnxruntime, safetensors) and
checks four things:

  A. the committed fixtures (tests/fixtures/pretrained) against the libraries themselves: timm's
     VisionTransformer and transformers' ViTForImageClassification load them strictly and give
     the stored logits; timm's eval transform, transformers' ViTImageProcessor and timm's
     resample_abs_pos_embed give the stored tensors;
  B. new fixtures written by the libraries' own savers (timm's save_for_hf, transformers'
     save_pretrained) for real architecture names, with reference logits: --fixtures-out;
  C. a survey of every VisionTransformer architecture timm registers (built on the meta device):
     what each one is made of, including what its tensors do not show (activation, LayerNorm
     eps, attention pooling): --survey-out;
  D. vitcpp's own exports (made beforehand with `vit export`, see --exports) loaded by
     timm.create_model, AutoModelForImageClassification and onnxruntime, against the logits
     `vit predict --tensor ... --json --logits` printed for the same inputs.

Writes a JSON report (--report) and prints one line per check. Exits 0 even when checks
disagree: the report is the result.

    python3 tools/check_with_libraries.py --fixtures tests/fixtures/pretrained \\
        --exports build-libcheck/exp --fixtures-out OUT/fixtures --survey-out OUT/timm_survey.json \\
        --report OUT/report.json
"""
import argparse
import glob
import json
import math
import os
import sys
import time
import traceback

import numpy as np
import torch

RESULTS = []


def record(section, name, ok, **detail):
    RESULTS.append(dict(section=section, name=name, ok=ok, **detail))
    extra = " ".join(f"{k}={v}" for k, v in detail.items() if k != "trace")
    print(f"[{section}] {'ok  ' if ok else 'FAIL' if ok is False else 'info'} {name} {extra}", flush=True)


def guarded(section, name):
    """Decorator-free try block: `with guarded(...)` records an exception as a failed check."""
    class G:
        def __enter__(self):
            return self

        def __exit__(self, et, ev, tb):
            if et is not None:
                record(section, name, False, error=f"{et.__name__}: {ev}",
                       trace="".join(traceback.format_exception(et, ev, tb))[-2000:])
            return True
    return G()


def diff(a, b):
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    if a.shape != b.shape:
        return {"shape_a": list(a.shape), "shape_b": list(b.shape), "max_abs": float("inf"), "rel": float("inf")}
    m = (a - b).abs().max().item()
    return {"max_abs": m, "rel": m / max(b.abs().max().item(), 1e-30)}


def load_st(path):
    from safetensors.torch import load_file
    return load_file(path)


# ---------------------------------------------------------------- A: committed fixtures

def timm_vit(model_args, num_classes):
    from timm.models.vision_transformer import VisionTransformer
    args = dict(model_args)
    args["num_classes"] = num_classes
    return VisionTransformer(**args)


def check_timm_fixture(fx, name, cfg, weights, expect):
    with guarded("A", f"timm {name} logits"):
        m = timm_vit(cfg["model_args"], cfg["num_classes"]).double().eval()
        sd = {k: v.double() for k, v in load_st(weights).items()}
        m.load_state_dict(sd, strict=True)
        e = load_st(expect)
        with torch.no_grad():
            y = m(e["input.x"].double())
        d = diff(y, e["out.logits"])
        record("A", f"timm {name} logits", d["rel"] < 1e-5, **d)


def check_fixtures(fx):
    for name in ("timm_a", "timm_b", "timm_reg_map", "timm_cls_map", "timm_prefix_map"):
        d = os.path.join(fx, name)
        cfg = json.load(open(os.path.join(d, "config.json")))
        check_timm_fixture(fx, name, cfg, os.path.join(d, "model.safetensors"), os.path.join(d, "expect.safetensors"))
    noconfig = {"model_args": {"img_size": 16, "patch_size": 4, "embed_dim": 16, "depth": 1, "num_heads": 4,
                               "mlp_ratio": 2.0, "qkv_bias": True, "class_token": True, "global_pool": "token"},
                "num_classes": 3}
    check_timm_fixture(fx, "timm_noconfig", noconfig, os.path.join(fx, "timm_noconfig.safetensors"),
                       os.path.join(fx, "timm_noconfig.expect.safetensors"))

    for name in ("hf", "hf_nonsquare"):  # hf_nonsquare: image_size [48, 80]
        with guarded("A", f"{name} logits"):
            from transformers import ViTForImageClassification
            d = os.path.join(fx, name)
            m = ViTForImageClassification.from_pretrained(d, attn_implementation="eager").double().eval()
            e = load_st(os.path.join(d, "expect.safetensors"))
            with torch.no_grad():
                y = m(pixel_values=e["input.x"].double()).logits
            dd = diff(y, e["out.logits"])
            record("A", f"{name} logits", dd["rel"] < 1e-5, **dd)

    pre = load_st(os.path.join(fx, "preprocess.safetensors"))
    from PIL import Image
    from safetensors import safe_open
    with safe_open(os.path.join(fx, "preprocess.safetensors"), "pt") as f:
        images = json.loads(f.metadata()["images"])
    for name in ("timm_a", "timm_b"):  # the fixtures preprocess.safetensors holds tensors for
        with guarded("A", f"timm {name} eval transform"):
            from timm.data import create_transform, resolve_data_config
            pcfg = json.load(open(os.path.join(fx, name, "config.json")))["pretrained_cfg"]
            dcfg = resolve_data_config(pretrained_cfg=pcfg)
            tf = create_transform(**dcfg, is_training=False)
            worst = {"max_abs": 0.0}
            for stem, fname in images.items():
                x = tf(Image.open(os.path.join(fx, "images", fname)).convert("RGB"))
                dd = diff(x, pre[f"{name}.{stem}"])
                if dd["max_abs"] >= worst["max_abs"]:
                    worst = dict(dd, image=stem)
            record("A", f"timm {name} eval transform", worst["max_abs"] < 1e-5, transform=str(tf).replace("\n", " "),
                   data_config={k: (list(v) if isinstance(v, tuple) else v) for k, v in dcfg.items()}, **worst)
    with guarded("A", "timm non-square transform with bicubic"):
        # timm_b's input is 24x40 (ResizeKeepRatio path); does timm pass the configured
        # interpolation to ResizeKeepRatio? Saved for a comparison with vitcpp's.
        from timm.data import create_transform, resolve_data_config
        pcfg = dict(json.load(open(os.path.join(fx, "timm_b", "config.json")))["pretrained_cfg"],
                    interpolation="bicubic", crop_pct=0.875)
        tf = create_transform(**resolve_data_config(pretrained_cfg=pcfg), is_training=False)
        EXTRA["timm_b_bicubic_0.875"] = {stem: tf(Image.open(os.path.join(fx, "images", f)).convert("RGB"))
                                         for stem, f in images.items()}
        record("A", "timm non-square transform with bicubic", None, transform=str(tf).replace("\n", " "))
    for name, label, use_fast in (("hf", "slow", False), ("hf", "default", None), ("hf_nonsquare", "slow", False)):
        with guarded("A", f"{name} image processor ({label})"):
            from transformers import AutoImageProcessor
            kw = {} if use_fast is None else {"use_fast": use_fast}
            proc = AutoImageProcessor.from_pretrained(os.path.join(fx, name), **kw)
            worst = {"max_abs": 0.0}
            for stem, fname in images.items():
                x = proc(images=Image.open(os.path.join(fx, "images", fname)).convert("RGB"),
                         return_tensors="pt")["pixel_values"][0]
                dd = diff(x, pre[f"{name}.{stem}"])
                if dd["max_abs"] >= worst["max_abs"]:
                    worst = dict(dd, image=stem)
            # transformers 5's default is the torchvision backend, which differs from Pillow's by
            # an 8-bit level here and there: reported, not a failure (vitcpp follows Pillow's).
            ok = worst["max_abs"] < 1e-5 if use_fast is False else None
            record("A", f"{name} image processor ({label})", ok, cls=type(proc).__name__, **worst)

    with guarded("A", "timm resample_abs_pos_embed"):
        from timm.layers import resample_abs_pos_embed
        p = load_st(os.path.join(fx, "posembed.safetensors"))
        worst = 0.0
        for key, src, size, old, npre in (("out.prefix1.6x8", "in.prefix1", [6, 8], [4, 4], 1),
                                          ("out.prefix1.3x3", "in.prefix1", [3, 3], [4, 4], 1),
                                          ("out.prefix0.2x7", "in.prefix0", [2, 7], [5, 3], 0)):
            y = resample_abs_pos_embed(p[src], new_size=size, old_size=old, num_prefix_tokens=npre)
            worst = max(worst, diff(y, p[key])["max_abs"])
        record("A", "timm resample_abs_pos_embed", worst < 1e-5, max_abs=worst)
    with guarded("A", "transformers interpolate_pos_encoding"):
        # ViTEmbeddings' own method on the fixture's 4x4 table (patch 1, so pixels = patches);
        # the embeddings argument only tells it how many patches there are.
        from transformers import ViTConfig
        from transformers.models.vit.modeling_vit import ViTEmbeddings
        p = load_st(os.path.join(fx, "posembed.safetensors"))
        src = p["in.prefix1"].double()
        emb = ViTEmbeddings(ViTConfig(hidden_size=src.shape[-1], image_size=4, patch_size=1)).double()
        emb.position_embeddings.data.copy_(src)
        worst = {"max_abs": 0.0}
        for h, w in ((6, 8), (3, 3)):
            with torch.no_grad():
                y = emb.interpolate_pos_encoding(torch.zeros(1, 1 + h * w, src.shape[-1], dtype=torch.float64), h, w)
            dd = diff(y, p[f"hf.prefix1.{h}x{w}"])
            if dd["max_abs"] >= worst["max_abs"]:
                worst = dict(dd, size=f"{h}x{w}")
        record("A", "transformers interpolate_pos_encoding", worst["max_abs"] < 1e-5, **worst)


EXTRA = {}  # tensors for the fixtures folder: name -> tensor or {stem: tensor}


# ---------------------------------------------------------------- B: libraries' own savers

def randomize(model, seed):
    """Values of a useful scale (timm's 0.02 init would make every block negligible), the same
    rules as make_pretrained_fixtures.rand_value."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if name.endswith("gamma") or name.endswith("lambda1") or name.endswith("lambda2"):
                v = 0.5 + 0.2 * r
            elif "cls_token" in name or "reg_token" in name or "register" in name or "latent" in name:
                v = 0.5 * r
            elif "pos_embed" in name or "position_embeddings" in name:
                v = 0.2 * r
            elif p.dim() == 4:
                v = r / math.sqrt(p.shape[1] * p.shape[2] * p.shape[3])
            elif name.startswith(("head.weight", "classifier.weight")):
                v = 0.3 * r
            elif ("norm" in name or "layernorm" in name) and name.endswith("weight"):
                v = 1 + 0.1 * r
            elif name.endswith("bias"):
                v = 0.1 * r
            else:
                v = 0.2 * r
            p.copy_(v.to(p.dtype))


TIMM_SMALL = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4)
TIMM_SPECS = [  # (folder, architecture, overrides of the architecture's arguments)
    ("timm_vit_tiny", "vit_tiny_patch16_224", dict(TIMM_SMALL, num_classes=5)),
    ("timm_deit3", "deit3_small_patch16_224", dict(TIMM_SMALL, num_classes=3)),
    ("timm_clip", "vit_base_patch16_clip_224", dict(TIMM_SMALL, num_classes=4)),
    ("timm_clip_quickgelu", "vit_base_patch16_clip_quickgelu_224", dict(TIMM_SMALL, num_classes=4)),
    ("timm_dinov2_reg", "vit_small_patch14_reg4_dinov2", dict(TIMM_SMALL, patch_size=14, img_size=28, num_classes=3)),
    ("timm_gap", "vit_medium_patch16_gap_256", dict(TIMM_SMALL, num_classes=3)),
    ("timm_reg_gap", "vit_base_patch16_reg4_gap_256", dict(TIMM_SMALL, num_classes=3)),
    ("timm_siglip_map", "vit_base_patch16_siglip_224", dict(TIMM_SMALL, num_classes=3)),
    ("timm_siglip_gap", "vit_base_patch16_siglip_gap_224", dict(TIMM_SMALL, num_classes=3)),
    ("timm_deit_distilled", "deit_tiny_distilled_patch16_224", dict(TIMM_SMALL, num_classes=3)),
    ("timm_siglip_gap_tanh", "vit_base_patch32_siglip_gap_256", dict(TIMM_SMALL, num_classes=3)),
    # timm 1.0's attention pool over the patches alone: 4 registers, no class token.
    ("timm_so150m_reg4_map", "vit_so150m_patch16_reg4_map_256", dict(TIMM_SMALL, num_classes=3)),
    # ... and with a class token: ViT-B/16's layout with global_pool='map'.
    ("timm_cls_map_lib", "vit_base_patch16_224", dict(TIMM_SMALL, num_classes=3, global_pool="map")),
]


def make_timm_fixture(out, folder, arch, overrides, seed):
    import timm
    from timm.models import save_for_hf
    H = overrides["img_size"]
    m = timm.create_model(arch, pretrained=False, pretrained_cfg_overlay=dict(input_size=(3, H, H)), **overrides)
    randomize(m, seed)
    m.eval()
    d = os.path.join(out, folder)
    os.makedirs(d, exist_ok=True)
    save_for_hf(m, d, model_args=overrides, safe_serialization=True)
    x = torch.randn(2, 3, H, H, generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        y = m.double()(x.double()).float()
    from safetensors.torch import save_file
    save_file({"input.x": x.contiguous(), "out.logits": y.contiguous()}, os.path.join(d, "expect.safetensors"))
    blk = m.blocks[0]
    return {"architecture": arch, "class": type(m).__name__, "act": type(blk.mlp.act).__name__ if hasattr(blk.mlp, "act") else None,
            "norm_eps": getattr(blk.norm1, "eps", None), "files": sorted(os.listdir(d))}


def make_hf_fixtures(out, seed):
    from transformers import (DeiTConfig, DeiTForImageClassification, DeiTForImageClassificationWithTeacher, ViTConfig, ViTForImageClassification,
                              ViTImageProcessor, ViTModel)
    from safetensors.torch import save_file
    labels = ["tabby", "teapot", "rocket"]
    common = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32,
                  patch_size=8, id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)})
    done = {}
    # New folders go last: each takes the next seed, so the committed ones stay byte for byte.
    for folder, make in (("hf_vit", lambda: ViTForImageClassification(ViTConfig(**common))),
                         ("hf_vit_model", lambda: ViTModel(ViTConfig(**common))),
                         ("hf_deit", lambda: DeiTForImageClassification(DeiTConfig(**common))),
                         ("hf_deit_teacher", lambda: DeiTForImageClassificationWithTeacher(DeiTConfig(**common))),
                         ("hf_vit_quickgelu",
                          lambda: ViTForImageClassification(ViTConfig(**common, hidden_act="quick_gelu"))),
                         ("hf_vit_tanh",
                          lambda: ViTForImageClassification(ViTConfig(**common, hidden_act="gelu_pytorch_tanh")))):
        with guarded("B", f"{folder} written by transformers"):
            torch.manual_seed(seed)
            m = make()
            randomize(m, seed)
            m.eval()
            d = os.path.join(out, folder)
            m.save_pretrained(d, safe_serialization=True)
            ViTImageProcessor(size={"height": 32, "width": 32}, image_mean=[0.5, 0.4, 0.3],
                              image_std=[0.2, 0.25, 0.3]).save_pretrained(d)
            x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(seed + 1))
            m = m.double()
            with torch.no_grad():
                o = m(pixel_values=x.double())
            t = {"input.x": x.contiguous()}
            if hasattr(o, "logits"):
                t["out.logits"] = o.logits.float().contiguous()
            else:
                t["out.features"] = o.last_hidden_state[:, 0].float().contiguous()  # timm's pre_logits
            save_file(t, os.path.join(d, "expect.safetensors"))
            done[folder] = sorted(os.listdir(d))
            record("B", f"{folder} written by transformers", None, files=done[folder])
        seed += 10
    return done


def make_library_fixtures(out):
    os.makedirs(out, exist_ok=True)
    for i, (folder, arch, overrides) in enumerate(TIMM_SPECS):  # new specs go last (seeds by position)
        with guarded("B", f"{folder} written by timm"):
            info = make_timm_fixture(out, folder, arch, overrides, 100 + 10 * i)
            record("B", f"{folder} written by timm", None, **info)
    make_hf_fixtures(out, 200)
    if EXTRA:
        from safetensors.torch import save_file
        flat = {}
        for k, v in EXTRA.items():
            for stem, t in v.items():
                flat[f"{k}.{stem}"] = t.contiguous()
        save_file(flat, os.path.join(out, "timm_transforms.safetensors"))


# ---------------------------------------------------------------- C: timm's architectures

def describe_vit(m, r, vt):
    """What a VisionTransformer is made of, including what its tensors do not show."""
    if not isinstance(m, vt.VisionTransformer):
        return
    b = m.blocks[0]
    pe = m.patch_embed
    r["block"] = type(b).__name__

    def kind(mod):
        return None if mod is None else type(mod).__name__
    r.update({
        "embed_dim": m.embed_dim, "depth": len(m.blocks), "num_heads": b.attn.num_heads,
        "head_dim": getattr(b.attn, "head_dim", None),
        "mlp": kind(b.mlp), "mlp_hidden": b.mlp.fc1.out_features if hasattr(b.mlp, "fc1") and hasattr(b.mlp.fc1, "out_features") else None,
        "act": kind(getattr(b.mlp, "act", None)), "norm": kind(b.norm1), "norm_eps": getattr(b.norm1, "eps", None),
        "norm_bias": getattr(b.norm1, "bias", None) is not None, "attn": kind(b.attn),
        "qkv_bias": getattr(getattr(b.attn, "qkv", None), "bias", None) is not None,
        "q_norm": kind(getattr(b.attn, "q_norm", None)), "attn_norm": kind(getattr(b.attn, "norm", None)),
        "proj_bias": getattr(getattr(b.attn, "proj", None), "bias", None) is not None,
        "layer_scale": kind(b.ls1), "init_values": getattr(b.ls1, "init_values", None), "block": kind(b),
        "class_token": m.cls_token is not None, "reg_tokens": getattr(m, "num_reg_tokens", 0),
        "no_embed_class": getattr(m, "no_embed_class", False), "pos_embed": m.pos_embed is not None,
        "dynamic_img_size": getattr(m, "dynamic_img_size", False),
        "pre_norm": kind(m.norm_pre), "final_norm": kind(m.norm), "fc_norm": kind(m.fc_norm),
        "global_pool": m.global_pool, "attn_pool": kind(getattr(m, "attn_pool", None)),
        "pool_include_prefix": getattr(m, "pool_include_prefix", False),
        "patch_embed": kind(pe), "patch_norm": kind(getattr(pe, "norm", None)),
        "patch_bias": getattr(getattr(pe, "proj", None), "bias", None) is not None,
        "img_size": list(getattr(pe, "img_size", None) or []), "patch_size": list(getattr(pe, "patch_size", None) or []),
        "in_chans": getattr(getattr(pe, "proj", None), "in_channels", None), "num_classes": m.num_classes,
        "head": kind(m.head), "head_drop": kind(getattr(m, "head_drop", None)),
    })


def tag_configs(timm, vt, name, tags):
    """What timm.create_model(f"{name}.{tag}") takes from each pretrained tag: the img_size and
    num_classes it passes the model (caught at VisionTransformer.__init__, nothing is built) and
    the tag's pretrained_cfg preprocessing. `.dino` has no head and ImageNet's mean,
    `deit3_*.fb_in22k_ft_in1k` crop 1.0, `*.augreg_in21k` 21843 classes."""
    from timm.models import get_pretrained_cfg

    class Captured(Exception):
        pass

    def capture(self, *args, **kwargs):
        raise Captured(kwargs)

    out, init = {}, vt.VisionTransformer.__init__
    vt.VisionTransformer.__init__ = capture  # DeiT's distilled subclass calls it too
    try:
        for tag in tags:
            try:
                timm.create_model(f"{name}.{tag}", pretrained=False)
                continue  # not a VisionTransformer
            except Captured as e:
                kw = e.args[0]
            size = kw.get("img_size", 224)
            c = get_pretrained_cfg(f"{name}.{tag}")
            out[tag] = {"img_size": [size, size] if isinstance(size, int) else list(size),
                        "num_classes": kw.get("num_classes", 1000), "mean": list(c.mean), "std": list(c.std),
                        "interpolation": c.interpolation, "crop_pct": c.crop_pct, "crop_mode": c.crop_mode}
    finally:
        vt.VisionTransformer.__init__ = init
    return out


def deprecated_names(rows):
    """timm's deprecated names that map to a surveyed architecture and tag (create_model warns and
    builds the current one): vit_base_patch16_224_in21k -> vit_base_patch16_224.augreg_in21k."""
    from timm.models._registry import get_deprecated_models
    return {old: new for old, new in get_deprecated_models().items()
            if new and new.split(".", 1)[0] in rows}


def survey(path, budget_s):
    import timm
    import timm.models.vision_transformer as vt
    names = sorted(set(timm.list_models(module="vision_transformer")) | set(timm.list_models("deit*")))
    rows, t0 = {}, time.time()
    for name in names:
        if time.time() - t0 > budget_s:
            rows["__truncated__"] = {"after_s": budget_s}
            break
        built = "meta"
        try:
            with torch.device("meta"):  # no memory, no init cost
                m = timm.create_model(name, pretrained=False)
        except Exception:  # noqa: BLE001  (an init that needs real values)
            try:
                built = "cpu"
                m = timm.create_model(name, pretrained=False)
            except Exception as e:  # noqa: BLE001
                rows[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
                continue
        r = {"class": type(m).__name__, "built_on": built}
        try:
            describe_vit(m, r, vt)
        except Exception as e:  # noqa: BLE001  (a block of another kind)
            r["describe_error"] = f"{type(e).__name__}: {e}"[:300]
        cfg = getattr(m, "pretrained_cfg", {}) or {}
        r["pretrained_cfg"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()
                               if k in ("input_size", "interpolation", "crop_pct", "crop_mode", "mean", "std",
                                        "num_classes", "tag", "hf_hub_id")}
        try:
            # Every tag create_model takes: list_pretrained leaves out those without hub weights
            # (".untrained", vit_base_patch32_clip_224.openai_ft_in12k_in1k).
            r["tags"] = [t.split(".", 1)[1] for t in timm.list_models(name, include_tags=True)
                         if t.split(".", 1)[0] == name]
            r["tag_cfgs"] = tag_configs(timm, vt, name, r["tags"])
        except Exception:  # noqa: BLE001
            pass
        rows[name] = r
    with open(path, "w") as f:
        json.dump({"timm": timm.__version__, "torch": torch.__version__, "models": rows,
                   "deprecated": deprecated_names(rows)}, f, indent=1, sort_keys=True)
    n_vt = sum(1 for r in rows.values() if r.get("class") == "VisionTransformer")
    record("C", "timm architectures", None, names=len(names), surveyed=len(rows), vision_transformer=n_vt,
           seconds=round(time.time() - t0, 1))


# ---------------------------------------------------------------- D: vitcpp's exports

def vitcpp_logits(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    rows.sort(key=lambda r: r["row"])
    return torch.tensor([r["logits"] for r in rows])


def check_exports(exp):
    import timm
    for jl in sorted(glob.glob(os.path.join(exp, "*.vitcpp.jsonl"))):
        m = os.path.basename(jl).split(".")[0]
        want = vitcpp_logits(jl)
        x = load_st(os.path.join(exp, f"{m}.input.safetensors"))["x"]
        d = os.path.join(exp, f"{m}.timm")
        if os.path.isdir(d):
            with guarded("D", f"{m} timm local-dir"):
                model = timm.create_model("local-dir:" + os.path.abspath(d), pretrained=True).eval()
                with torch.no_grad():
                    y = model(x)
                dd = diff(y, want)
                record("D", f"{m} timm local-dir", dd["rel"] < 1e-4, **dd)
            with guarded("D", f"{m} timm create_model(arch, file=...)"):
                # num_classes in the overlay too: without it timm compares the model's classes
                # with the name's default pretrained_cfg (ImageNet's 1000) and drops the head.
                cfg = json.load(open(os.path.join(d, "config.json")))
                overlay = dict(file=os.path.join(d, "model.safetensors"), num_classes=cfg["num_classes"])
                model = timm.create_model(cfg["architecture"], pretrained=True, pretrained_cfg_overlay=overlay,
                                          **cfg["model_args"]).eval()
                with torch.no_grad():
                    y = model(x)
                dd = diff(y, want)
                record("D", f"{m} timm create_model(arch, file=...)", dd["rel"] < 1e-4, **dd)
        d = os.path.join(exp, f"{m}.hf")
        if os.path.isdir(d):
            with guarded("D", f"{m} transformers Auto*"):
                from transformers import AutoModelForImageClassification
                model = AutoModelForImageClassification.from_pretrained(d).eval()
                with torch.no_grad():
                    y = model(pixel_values=x).logits
                dd = diff(y, want)
                record("D", f"{m} transformers Auto*", dd["rel"] < 1e-4, cls=type(model).__name__, **dd)
        f = os.path.join(exp, f"{m}.onnx.onnx")
        if os.path.isfile(f):
            with guarded("D", f"{m} onnxruntime"):
                import onnxruntime as ort
                s = ort.InferenceSession(f, providers=["CPUExecutionProvider"])
                y = s.run(None, {s.get_inputs()[0].name: x.numpy()})[0]
                dd = diff(torch.from_numpy(np.asarray(y)), want)
                record("D", f"{m} onnxruntime", dd["rel"] < 1e-4, **dd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", default="tests/fixtures/pretrained")
    ap.add_argument("--exports", default="")
    ap.add_argument("--fixtures-out", default="")
    ap.add_argument("--survey-out", default="")
    ap.add_argument("--survey-seconds", type=float, default=150)
    ap.add_argument("--report", default="library_check.json")
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    versions = {"python": sys.version.split()[0], "torch": torch.__version__}
    for mod in ("timm", "transformers", "onnxruntime", "safetensors", "torchvision", "PIL"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001
            versions[mod] = f"missing: {e}"
    print(json.dumps(versions), flush=True)
    t0 = time.time()
    for section, fn in (("A", lambda: check_fixtures(a.fixtures)),
                        ("B", lambda: a.fixtures_out and make_library_fixtures(a.fixtures_out)),
                        ("D", lambda: a.exports and check_exports(a.exports)),
                        ("C", lambda: a.survey_out and survey(a.survey_out, a.survey_seconds))):
        with guarded(section, "section"):
            fn()
        print(f"-- section {section} done at {time.time() - t0:.1f} s", flush=True)
    with open(a.report, "w") as f:
        json.dump({"versions": versions, "results": RESULTS}, f, indent=1)
    bad = [r for r in RESULTS if r["ok"] is False]
    print(f"{len(RESULTS)} results, {len(bad)} failed", flush=True)


if __name__ == "__main__":
    main()
