"""timm's API as timm's users write it, beyond the forward passes (test_model.py): a name with
checkpoint_path, num_classes=0 as a feature extractor, new heads, the data config helpers,
the transform's tensors, predict's inputs, attention maps' indices and argument checks."""
import errno
import json
import os
import pathlib
import pickle
import subprocess
import warnings

import numpy as np
import pytest

import vitcpp
from conftest import PRETRAINED, read_safetensors, run_vit, vit_binary, write_safetensors

TIMM_A = os.path.join(PRETRAINED, "timm_a")


def test_a_name_with_checkpoint_path_is_that_model_or_an_error(tmp_path):
    """timm builds the name's model and loads the file into it. The name was ignored: a ViT-B
    name gave the checkpoint's 32-wide model, and a bare state dict had no heads to take."""
    with pytest.raises(vitcpp.Error, match="is not a vit_base_patch16_224: it holds a ViT of embed_dim 32"):
        vitcpp.create_model("vit_base_patch16_224", checkpoint_path=TIMM_A)
    ref = vitcpp.create_model("vit_tiny_patch16_224", seed=3)
    write_safetensors(tmp_path / "bare.safetensors", ref.state_dict())  # torch.save's tensors, no config.json
    with pytest.raises(vitcpp.Error, match="number of attention heads"):
        vitcpp.create_model(tmp_path / "bare.safetensors")
    m = vitcpp.create_model("vit_tiny_patch16_224", pretrained=True, checkpoint_path=tmp_path / "bare.safetensors")
    assert m.config["num_heads"] == 3
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    assert np.array_equal(m(x), ref(x))
    # timm's "architecture.tag" names the architecture (the tag picks hub weights); a name that
    # is none raises as timm's does (a misspelled one was dropped and the file loaded).
    tagged = vitcpp.create_model("vit_tiny_patch16_224.augreg_in21k", checkpoint_path=tmp_path / "bare.safetensors")
    assert np.array_equal(tagged(x), ref(x))
    # The tag's class count and preprocessing, as timm.create_model takes them from its
    # pretrained_cfg (the default tag's were taken): ImageNet-21k's 21843 classes here.
    in21k = vitcpp.create_model("vit_tiny_patch16_224.augreg_in21k", seed=3)
    assert in21k.config == {**ref.config, "num_classes": 21843} and in21k.num_classes == 21843
    # Another token layout in the same widths is another model too (timm's strict load finds
    # head_dist and dist_token unexpected): it loaded, with the name's preprocessing.
    distilled = vitcpp.create_model("deit_tiny_distilled_patch16_224", seed=3)
    write_safetensors(tmp_path / "distilled.safetensors", distilled.state_dict())
    with pytest.raises(vitcpp.Error, match=r"is not a vit_tiny_patch16_224: it has distillation token yes "
                                           r"\(vit_tiny_patch16_224: no\)"):
        vitcpp.create_model("vit_tiny_patch16_224", checkpoint_path=tmp_path / "distilled.safetensors")
    # One the name's layout cannot read says so too (it was "tensors that have no place in a
    # vitcpp ViT (a layer vitcpp does not support)" for an attention pool, which vitcpp has).
    pooled = vitcpp.create_model("vit_tiny_patch16_224", global_pool="map", seed=3)
    write_safetensors(tmp_path / "map.safetensors", pooled.state_dict())
    with pytest.raises(vitcpp.Error, match=r"it has attention pool yes \(vit_tiny_patch16_224: no\)"):
        vitcpp.create_model("vit_tiny_patch16_224", checkpoint_path=tmp_path / "map.safetensors")
    assert vitcpp.create_model("deit_tiny_distilled_patch16_224",
                               checkpoint_path=tmp_path / "distilled.safetensors").num_prefix_tokens == 2
    with pytest.raises(RuntimeError, match=r"Unknown model \(vit_tnyi_patch16_224\)"):
        vitcpp.create_model("vit_tnyi_patch16_224", pretrained=True, checkpoint_path=TIMM_A)
    # One of timm's that vitcpp does not build says why, by name as from its checkpoint.
    for kw in ({}, {"checkpoint_path": TIMM_A}):
        with pytest.raises(vitcpp.Error, match="timm's vit_giant_patch14_dinov2 has a gated MLP .*does not build it"):
            vitcpp.create_model("vit_giant_patch14_dinov2", **kw)
    # A bare file at another resolution than the name's _224 is read at its own grid (it was an
    # error even with img_size=384, which timm builds and loads strictly), and resampled from it.
    ref384 = vitcpp.create_model("vit_tiny_patch16_384", seed=4)
    write_safetensors(tmp_path / "bare384.safetensors", ref384.state_dict())
    x384 = np.random.default_rng(1).standard_normal((1, 3, 384, 384)).astype(np.float32)
    for kw in ({"img_size": 384}, {}):
        at384 = vitcpp.create_model("vit_tiny_patch16_224", checkpoint_path=tmp_path / "bare384.safetensors", **kw)
        assert np.array_equal(at384(x384), ref384(x384)), kw
    under384 = vitcpp.create_model("vit_tiny_patch16_384", checkpoint_path=tmp_path / "bare.safetensors")
    assert np.array_equal(under384(x), ref(x))
    # The name's pretrained_cfg too, as timm keeps it: DeiT's mean, std and crop (it was timm's
    # defaults, 0.5 and 0.9).
    deit = vitcpp.create_model("deit_tiny_patch16_224")
    write_safetensors(tmp_path / "deit.safetensors", deit.state_dict())
    loaded = vitcpp.create_model("deit_tiny_patch16_224", checkpoint_path=tmp_path / "deit.safetensors")
    for key in ("mean", "std", "crop_pct", "interpolation"):
        assert loaded.pretrained_cfg[key] == deit.pretrained_cfg[key], key
    # A tag's pretrained_cfg, as timm takes it: DINO's mean and std (the default tag's 0.5 were).
    small = vitcpp.create_model("vit_small_patch16_224", num_classes=0)
    write_safetensors(tmp_path / "small.safetensors", small.state_dict())
    for tag, mean in ((".dino", (0.485, 0.456, 0.406)), ("", (0.5, 0.5, 0.5))):
        got = vitcpp.create_model("vit_small_patch16_224" + tag, checkpoint_path=tmp_path / "small.safetensors")
        assert got.pretrained_cfg["mean"] == mean and got.num_classes == 0, tag


def test_a_checkpoints_own_global_pool_is_taken_and_another_refused():
    """timm takes global_pool on a checkpoint; vitcpp refused it whatever its value."""
    own = vitcpp.create_model(TIMM_A).global_pool
    assert vitcpp.create_model(TIMM_A, global_pool=own).global_pool == own
    other = "avg" if own != "avg" else "token"
    with pytest.raises(ValueError, match=f"global_pool='{other}': the checkpoint pools '{own}'"):
        vitcpp.create_model(TIMM_A, global_pool=other)


def test_the_cli_reads_a_bare_state_dict_as_the_model_named_beside_it(tmp_path):
    """timm's validate.py and inference.py take --model NAME --checkpoint FILE. The CLI could not
    name a bare file's model: it needed --num-heads, and got timm's default preprocessing (0.5
    mean), not DeiT's; vit train --model NAME --pretrained FILE was refused."""
    ref = vitcpp.create_model("deit_tiny_patch16_224", seed=3)
    bare = tmp_path / "bare.safetensors"
    write_safetensors(bare, ref.state_dict())
    x = np.random.default_rng(0).standard_normal((2, 3, 224, 224)).astype(np.float32)
    write_safetensors(tmp_path / "x.safetensors", {"x": x})
    tensor = f"{tmp_path}/x.safetensors:x"
    # Without a name: the error names the timm models with these tensors, those of its size
    # first (it named vit_small_patch16_224 whatever the width, then models with LayerScale).
    r = subprocess.run([vit_binary(), "predict", "--checkpoint", bare, "--tensor", tensor], capture_output=True,
                       text=True)
    assert r.returncode != 0
    assert "--model NAME with --checkpoint or --pretrained" in r.stderr, r.stderr
    assert ("timm's models with these tensors: deit_tiny_patch16_224, vit_tiny_patch16_224, "
            "vit_tiny_patch16_384") in r.stderr, r.stderr
    out = run_vit("predict", "--model", "deit_tiny_patch16_224", "--checkpoint", bare, "--tensor", tensor, "--json",
                  "--logits", "--topk", "1")
    logits = np.array([json.loads(line)["logits"] for line in out.splitlines()], dtype=np.float32)
    want = ref(x)
    assert np.abs(logits - want).max() <= 1e-5 * np.abs(want).max(), np.abs(logits - want).max()
    info = run_vit("info", "--model", "deit_tiny_patch16_224", "--checkpoint", bare)
    config = json.loads(info[:info.index("\nparameters:")])
    assert config["mean"] == pytest.approx(ref.pretrained_cfg["mean"]) and config["num_heads"] == 3, config
    # Another model is refused, naming what differs.
    r = subprocess.run([vit_binary(), "export", "--model", "deit_tiny_distilled_patch16_224", "--checkpoint", bare,
                        "--out", tmp_path / "exported"], capture_output=True, text=True)
    assert r.returncode != 0 and not (tmp_path / "exported").exists()
    assert ("is not a deit_tiny_distilled_patch16_224: it has distillation token no "
            "(deit_tiny_distilled_patch16_224: yes) (give the checkpoint alone, without --model") in r.stderr, r.stderr
    # Of other widths and heads that do not divide them: said as such, the file's heads left
    # out where it does not say them (it was "num_heads 5 does not divide embed_dim 192").
    with pytest.raises(vitcpp.Error, match=r"is not a vit_little_patch16_reg4_gap_256: it holds a ViT of embed_dim "
                                           r"192, depth 12, mlp_dim 768, patch 16x16, in_chans 3; "):
        vitcpp.create_model("vit_little_patch16_reg4_gap_256", checkpoint_path=bare)
    # A config beside the file decides what the tensors do not say; where it is not the name's,
    # a note says so (timm's validate.py would build the name's).
    ref.save_pretrained(tmp_path / "deit_dir")
    r = subprocess.run([vit_binary(), "info", "--model", "vit_tiny_patch16_224", "--checkpoint", tmp_path / "deit_dir"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "its config gives mean 0.485 0.456 0.406 (vit_tiny_patch16_224: 0.5 0.5 0.5)" in r.stderr, r.stderr
    # Fine-tuned from it, at 32 pixels with 4 classes: DeiT's heads and preprocessing.
    run_vit("train", "--model", "deit_tiny_patch16_224", "--pretrained", bare, "--num-classes", 4, "--img-size", 32,
            "--synthetic", 16, "-b", 8, "--epochs", 1, "--threads", 1, "--output", tmp_path / "run")
    with open(tmp_path / "run" / "config.json") as f:
        tuned = json.load(f)
    assert tuned["num_heads"] == 3 and tuned["mean"] == pytest.approx(ref.pretrained_cfg["mean"]), tuned


def test_a_model_name_is_a_name_where_a_folder_of_that_name_is(tmp_path, monkeypatch):
    """As timm: a folder "mnist-seed" in the working directory (the quick start's runs/ holds
    one) made create_model("mnist-seed") read it as a checkpoint, and vitcpp.train fine-tune
    it. A path is a path where it says so (a separator, .safetensors, local-dir:)."""
    monkeypatch.chdir(tmp_path)
    os.mkdir("mnist-seed")
    assert vitcpp.create_model("mnist-seed", seed=1).config == vitcpp.create_model("mnist-seed", seed=2).config
    with pytest.raises(vitcpp.Error, match="mnist-seed"):
        vitcpp.create_model("./mnist-seed")


def test_num_classes_zero_is_a_feature_extractor():
    """timm's head becomes the identity: model(x) gives the pooled features. It raised."""
    x = read_safetensors(os.path.join(TIMM_A, "expect.safetensors"))["input.x"]
    m = vitcpp.create_model("local-dir:" + TIMM_A, num_classes=0)
    assert m.num_classes == 0
    assert np.array_equal(m(x), vitcpp.create_model("local-dir:" + TIMM_A).forward_pooled(x))
    with pytest.raises(ValueError, match="needs a classifier head"):
        m.predict(x)


def test_a_new_head_is_the_same_whichever_way_it_is_made():
    """create_model(ck, num_classes=K) gave a head of zeros, reset_classifier(K) a random one."""
    x = read_safetensors(os.path.join(TIMM_A, "expect.safetensors"))["input.x"]
    a = vitcpp.create_model("local-dir:" + TIMM_A, num_classes=3)
    b = vitcpp.create_model("local-dir:" + TIMM_A)
    b.reset_classifier(3)
    assert np.array_equal(a(x), b(x)) and not a(x).any()  # zeros: every class equal before fine-tuning
    assert np.array_equal(a.state_dict()["head.weight"], b.state_dict()["head.weight"])


def test_a_quantized_checkpoint_runs_in_int8_as_vit_predict_runs_it(tmp_path):
    run_vit("quantize", "--checkpoint", TIMM_A, "--out", tmp_path / "q8")
    m = vitcpp.create_model(tmp_path / "q8")
    assert m.dtype == "int8"
    assert vitcpp.create_model(tmp_path / "q8", dtype="float32").dtype == "float32"
    x = read_safetensors(os.path.join(TIMM_A, "expect.safetensors"))["input.x"]
    write_safetensors(tmp_path / "x.safetensors", {"x": x})
    lines = run_vit("predict", "--checkpoint", tmp_path / "q8", "--tensor", f"{tmp_path / 'x.safetensors'}:x",
                    "-b", len(x), "--json", "--logits").splitlines()
    assert np.array_equal(np.array([json.loads(line)["logits"] for line in lines], np.float32), m(x))
    # Saved as vitcpp, an int8 model stays one, with the same bits (it was written in float32 and
    # reloaded in float32); timm's layout has no int8, which its note says.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert m.save_pretrained(tmp_path / "again", format="vitcpp") == []
    again = vitcpp.create_model(tmp_path / "again")
    assert again.dtype == "int8" and np.array_equal(again(x), m(x))
    with pytest.warns(UserWarning, match="written in float32 .* timm has no int8 checkpoint layout"):
        m.save_pretrained(tmp_path / "timm", format="timm")
    assert vitcpp.create_model(tmp_path / "timm").dtype == "float32"


def test_data_config_helpers_take_timms_arguments():
    m = vitcpp.create_model("local-dir:" + TIMM_A)
    cfg = vitcpp.data.resolve_model_data_config(m)
    assert vitcpp.data.resolve_data_config({}, model=m) == cfg
    assert vitcpp.data.resolve_data_config(pretrained_cfg=m.pretrained_cfg) == cfg
    assert vitcpp.data.resolve_data_config({"crop_pct": 0.5}, model=m)["crop_pct"] == 0.5
    t = vitcpp.data.create_transform(**cfg)
    back = pickle.loads(pickle.dumps(t))  # DataLoader workers started by spawn pickle it
    path = os.path.join(PRETRAINED, "images", "cat.jpg")
    assert np.array_equal(back.numpy(path), t.numpy(path))


def test_data_config_defaults_and_rules_are_timms():
    """create_transform(224) took mean/std 0.5 and crop_pct 1 (timm: ImageNet's and 0.875),
    refused crop_pct=None, ignored crop_border_pixels and use_prefetcher; resolve_data_config
    ignored img_size and kept a one-value mean."""
    D = vitcpp.data
    t = D.create_transform(32)
    assert t.cfg == {"input_size": (3, 32, 32), "interpolation": "bilinear", "mean": D.IMAGENET_DEFAULT_MEAN,
                     "std": D.IMAGENET_DEFAULT_STD, "crop_pct": 0.875, "crop_mode": "center"}
    assert D.create_transform(32, crop_pct=None, crop_mode=None, hflip=0.5, re_prob=0.25).cfg == t.cfg
    for bad in ({"crop_border_pixels": 2}, {"use_prefetcher": True}, {"normalize": False}, {"naflex": True}):
        with pytest.raises(ValueError, match=list(bad)[0]):
            D.create_transform(32, **bad)
    assert D.create_transform(32, crop_border_pixels=0, normalize=True).cfg == t.cfg
    assert D.resolve_data_config({}) == {"input_size": (3, 224, 224), "interpolation": "bicubic",
                                         "mean": D.IMAGENET_DEFAULT_MEAN, "std": D.IMAGENET_DEFAULT_STD,
                                         "crop_pct": 0.875, "crop_mode": "center"}
    m = vitcpp.create_model("local-dir:" + TIMM_A)
    got = D.resolve_data_config({"img_size": 48, "mean": [0.5], "std": (0.25,)}, model=m)
    assert got["input_size"] == (3, 48, 48) and got["mean"] == (0.5,) * 3 and got["std"] == (0.25,) * 3
    assert got["crop_pct"] == m.pretrained_cfg["crop_pct"]
    assert D.resolve_model_data_config(m, {"input_size": (3, 40, 40)})["input_size"] == (3, 40, 40)
    with pytest.raises(ValueError, match="not both"):
        D.resolve_data_config(model=m, pretrained_cfg=m.pretrained_cfg)
    # The defaults' pixels: torchvision's Resize(36, bilinear) + CenterCrop(32) + Normalize.
    tv = pytest.importorskip("torchvision.transforms")
    from PIL import Image
    img = Image.open(os.path.join(PRETRAINED, "images", "cat.jpg")).convert("RGB")
    ref = tv.Compose([tv.Resize(36, interpolation=tv.InterpolationMode.BILINEAR), tv.CenterCrop(32), tv.ToTensor(),
                      tv.Normalize(D.IMAGENET_DEFAULT_MEAN, D.IMAGENET_DEFAULT_STD)])(img).numpy()
    assert np.abs(t.numpy(img) - ref).max() <= 1e-5


def test_the_transform_gives_tensors_once_torch_is_imported():
    torch = pytest.importorskip("torch")
    t = vitcpp.data.create_transform(**vitcpp.data.resolve_model_data_config(vitcpp.create_model("local-dir:" + TIMM_A)))
    path = os.path.join(PRETRAINED, "images", "cat.jpg")
    x = t(path)
    assert isinstance(x, torch.Tensor) and x.dtype == torch.float32
    assert np.array_equal(x.numpy(), t.numpy(path))


def test_predict_takes_what_timm_users_pass():
    m = vitcpp.create_model("mnist-seed")  # no class names
    x = np.random.default_rng(1).standard_normal((2, 1, 28, 28)).astype(np.float32)
    got = m.predict(x, topk=2)
    # Without class names a label is the index's number, as `vit predict --json` prints it.
    assert all(label == str(i) for row in got for i, _, label in row) and len(got) == 2
    torch = pytest.importorskip("torch")
    assert m.predict(torch.from_numpy(x), topk=2) == got
    assert m.predict([]) == [] and m.predict(x[:0]) == []
    with pytest.raises(ValueError, match="topk"):
        m.predict(x, topk=0)


def test_attention_maps_index_layers_and_heads_as_python_does():
    """layer=-2 was the last block, and any negative head the heads' mean."""
    m = vitcpp.create_model("local-dir:" + TIMM_A)  # 2 blocks
    x = read_safetensors(os.path.join(TIMM_A, "expect.safetensors"))["input.x"]
    heads = m.config["num_heads"]
    assert np.array_equal(m.attention_maps(x, layer=-2), m.attention_maps(x, layer=0))
    assert not np.array_equal(m.attention_maps(x, layer=-2), m.attention_maps(x, layer=-1))
    assert np.array_equal(m.attention_maps(x, head=-1), m.attention_maps(x, head=heads - 1))
    for bad in ({"layer": 2}, {"layer": -3}, {"head": heads}, {"head": -heads - 1}):
        with pytest.raises(ValueError, match="out of range|the model has"):
            m.attention_maps(x, **bad)
    # Methods the model lacks, in Python's words (they were vitcpp.Error, "--method pool: ...").
    for method, says in (("pool", "no attention pool"), ("dist", "no distillation token"), ("xx", "one of 'cls'")):
        with pytest.raises(ValueError, match=f"method='{method}': .*{says}"):
            m.attention_maps(x, method=method)
    with pytest.raises(TypeError, match="layer is an int"):
        m.attention_maps(x, layer="all")
    with pytest.raises(TypeError, match="head is an int, or None"):
        m.attention_maps(x, head="mean")
    with pytest.raises(TypeError, match="layer and head are ints, got layer=0.5"):
        m.attention_maps(x, layer=0.5)
    # A torch tensor in, a torch tensor out, as forward (it gave numpy).
    torch = pytest.importorskip("torch")
    t = m.attention_maps(torch.from_numpy(x), method="rollout")
    assert isinstance(t, torch.Tensor) and np.array_equal(t.numpy(), m.attention_maps(x, method="rollout"))


def test_arguments_timm_would_refuse_are_refused():
    ck = "local-dir:" + TIMM_A
    for kwargs in ({"num_classes": -5}, {"img_size": 0}, {"img_size": (-8, 32)}):
        with pytest.raises(ValueError):
            vitcpp.create_model(ck, **kwargs)
    # A path object names a checkpoint as a string does.
    assert vitcpp.create_model(pathlib.Path(TIMM_A)).num_features == 32


def test_a_file_system_error_is_an_oserror(tmp_path):
    """It was a bare RuntimeError: "filesystem error: cannot create directories: ...", then a
    bare OSError without errno or filename, which `except NotADirectoryError` missed."""
    (tmp_path / "a_file").write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="a_file") as e:
        vitcpp.create_model("mnist-seed").save_pretrained(tmp_path / "a_file" / "model")
    assert e.value.errno == errno.ENOTDIR and "a_file" in e.value.filename
    # Missing files as open() raises them: errno and filename, for code that reads them.
    for call in (lambda: vitcpp.create_model(tmp_path / "none.safetensors"),
                 lambda: vitcpp.create_model("mnist-seed", labels_file=tmp_path / "none.txt")):
        with pytest.raises(FileNotFoundError) as e:
            call()
        assert e.value.errno == errno.ENOENT and e.value.filename.startswith(str(tmp_path)), e.value


def test_errors_and_names_read_as_timms(tmp_path):
    """An unknown name with checkpoint_path was a plain RuntimeError, not vitcpp.Error;
    list_models took a `pattern` ("" listed nothing; a list of filters was "unhashable");
    the model's constructor took any object and failed later in its own words."""
    with pytest.raises(vitcpp.Error, match="Unknown model"):
        vitcpp.create_model("vit_tinyy_patch16_224", checkpoint_path=TIMM_A)
    assert vitcpp.Error.__module__ == "vitcpp" and vitcpp.Error.__doc__
    every = vitcpp.list_models()
    assert vitcpp.list_models("") == every and "mnist-seed" in every and len(every) > 10
    tiny = vitcpp.list_models(filter=["vit_tiny*", "deit_tiny*"], exclude_filters="*_384")
    assert "vit_tiny_patch16_224" in tiny and "deit_tiny_patch16_224" in tiny
    assert not [n for n in tiny if n.endswith("_384") or not n.startswith(("vit_tiny", "deit_tiny"))]
    assert vitcpp.list_models("vit_*", pretrained=True) == []  # no hub: no pretrained tags
    # Every architecture vitcpp runs builds by name as timm's (27 did): SigLIP's, CLIP's, ...
    assert len([n for n in every if "_" in n and "-" not in n]) == 142
    siglip = vitcpp.create_model("test_vit3")  # timm's small test model: map pool over the register too
    assert (siglip.global_pool, siglip.num_prefix_tokens, siglip.embed_dim) == ("map", 1, 96)
    assert "vit_so400m_patch14_siglip_384" in vitcpp.list_models("*siglip*")
    dino = vitcpp.create_model("vit_small_patch8_224.dino")  # timm's default tag: DINO's
    assert dino.num_classes == 0 and dino.pretrained_cfg["mean"] == (0.485, 0.456, 0.406)
    # Another tag than the default is the tag's (it was the default's: a head, mean 0.5).
    assert vitcpp.create_model("vit_small_patch16_224").pretrained_cfg["mean"] == (0.5, 0.5, 0.5)
    dino16 = vitcpp.create_model("vit_small_patch16_224.dino")
    assert dino16.num_classes == 0 and dino16.pretrained_cfg["mean"] == (0.485, 0.456, 0.406)
    with pytest.raises(vitcpp.Error, match=r"Invalid pretrained tag \(dinov2\) for vit_small_patch16_224: its tags "
                                           r"are augreg_in1k, .*dino"):
        vitcpp.create_model("vit_small_patch16_224.dinov2")
    # timm 0.6's names map to the current ones with timm's warning (they were unknown).
    with pytest.warns(UserWarning, match="Mapping deprecated model name vit_small_patch16_224_dino to current "
                                         "vit_small_patch16_224.dino"):
        old = vitcpp.create_model("vit_small_patch16_224_dino")
    assert old.num_classes == 0 and old.pretrained_cfg["mean"] == (0.485, 0.456, 0.406)
    assert not vitcpp.list_models("*_dino")  # as timm's: deprecated names are not listed
    # include_tags, as timm's list_models: a filter without a tag matches every tag.
    assert vitcpp.list_models("vit_small_patch16_224", include_tags=True) == [
        "vit_small_patch16_224.augreg_in1k", "vit_small_patch16_224.augreg_in21k",
        "vit_small_patch16_224.augreg_in21k_ft_in1k", "vit_small_patch16_224.dino"]
    assert vitcpp.list_models("vit_base_patch16_gap_224", include_tags=True) == ["vit_base_patch16_gap_224.untrained"]
    assert vitcpp.list_models("*.dino", include_tags=True, exclude_filters="vit_base*") == [
        "vit_small_patch8_224.dino", "vit_small_patch16_224.dino"]  # timm's natural order
    assert "mnist-seed" in vitcpp.list_models(include_tags=True)
    for name in vitcpp.list_models("vit_tiny*", include_tags=True):
        assert vitcpp.create_model(name).embed_dim == 192, name
    with pytest.raises(TypeError, match="filter"):
        vitcpp.list_models(3)
    with pytest.raises(TypeError, match="create_model"):
        vitcpp.VisionTransformer("mnist-seed")
    m = vitcpp.create_model("vit_tiny_patch16_224", dynamic_img_size=True)
    assert "in_chans=3" in repr(m) and "dynamic_img_size=True" in repr(m), repr(m)
    # Tab completion lists the public names, not the modules the package imports.
    assert "os" not in dir(vitcpp) and "np" not in dir(vitcpp) and "create_model" in dir(vitcpp)
    assert "sys" not in dir(vitcpp.data) and "create_transform" in dir(vitcpp.data)


def test_a_timm_config_without_pretrained_cfg_gets_timms_defaults(tmp_path):
    """They applied only without any config.json: one without pretrained_cfg was read bilinear,
    squashed, uncropped."""
    import json as _json
    import shutil
    shutil.copytree(TIMM_A, tmp_path / "m")
    cfg = _json.loads((tmp_path / "m" / "config.json").read_text())
    cfg.pop("pretrained_cfg", None)
    (tmp_path / "m" / "config.json").write_text(_json.dumps(cfg))
    m = vitcpp.create_model(tmp_path / "m")
    p = m.pretrained_cfg
    assert (p["interpolation"], p["crop_pct"], p["crop_mode"]) == ("bicubic", 0.9, "center"), p
    assert any("no pretrained_cfg" in n for n in m.notes), m.notes


def test_predict_reads_a_uint8_image_tensor_as_its_array():
    """A torch uint8 [H, W, C] image was iterated as 28 rows, giving 28 predictions."""
    torch = pytest.importorskip("torch")
    m = vitcpp.create_model("mnist-seed")
    img = np.random.default_rng(4).integers(0, 255, (28, 28, 3), dtype=np.uint8)
    assert m.predict(torch.from_numpy(img), topk=3) == m.predict(img, topk=3)
    assert len(m.predict(torch.from_numpy(img[:, :, 0]))) == 1


def test_load_state_dict_is_torchs():
    """There was none: a state dict from torch came back only by writing safetensors by hand."""
    torch = pytest.importorskip("torch")
    a = vitcpp.create_model("mnist-seed", seed=1)
    b = vitcpp.create_model("mnist-seed", seed=2)
    x = np.random.default_rng(5).standard_normal((2, 1, 28, 28)).astype(np.float32)
    assert not np.array_equal(a(x), b(x))
    sd = {"module." + k: torch.from_numpy(v).requires_grad_() for k, v in a.state_dict().items()}
    assert b.load_state_dict(sd) == ([], [])
    assert np.array_equal(a(x), b(x))
    partial = {k: v for k, v in vitcpp.create_model("mnist-seed", seed=3).state_dict().items() if k != "head.bias"}
    partial["extra"] = np.zeros(3, np.float32)
    with pytest.raises(RuntimeError, match='Unexpected key.*"extra"(.|\n)*Missing key.*"head.bias"'):
        b.load_state_dict(partial)
    assert np.array_equal(a(x), b(x))  # a refused load changes nothing
    missing, unexpected = b.load_state_dict(partial, strict=False)
    assert missing == ["head.bias"] and unexpected == ["extra"]
    assert np.array_equal(b.state_dict()["head.bias"], a.state_dict()["head.bias"])
    wrong = dict(a.state_dict(), **{"head.weight": np.zeros((3, 3), np.float32)})
    with pytest.raises(RuntimeError, match="size mismatch for head.weight"):
        b.load_state_dict(wrong, strict=False)


def test_load_state_dict_writes_in_place_and_keeps_dtype_and_sizes_current():
    """The weights are copied into the model, as torch's (a temporary checkpoint and a second
    model held 4 more copies: ViT-L +4.5 GB); an int8 model quantizes the new weights, and the
    sizes dynamic_img_size made before serve them too."""
    a = vitcpp.create_model("mnist-seed", seed=1)
    b = vitcpp.create_model("mnist-seed", seed=2, dtype="int8", dynamic_img_size=True)
    x, x2 = (np.random.default_rng(6).standard_normal((2, 1, s, s)).astype(np.float32) for s in (28, 56))
    b(x), b(x2)  # the model's size and a resampled one, in int8
    engine = b._engine
    assert b.load_state_dict(a.state_dict()) == ([], [])
    assert b._engine is engine and b.dtype == "int8"
    want = vitcpp.create_model("mnist-seed", seed=1, dtype="int8", dynamic_img_size=True)
    assert np.array_equal(b(x), want(x)) and np.array_equal(b(x2), want(x2))
    assert all(np.array_equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())
    # A value finite in float64 but not as the model's float32 is refused, the model untouched
    # (1e300 went in as inf, and an int8 model was left in float32).
    huge = dict(a.state_dict(), **{"head.bias": np.full(10, 1e300)})
    with pytest.raises(ValueError, match="head.bias: parameters must be finite floats"):
        b.load_state_dict(huge)
    assert b.dtype == "int8" and np.array_equal(b(x), want(x))


def test_torch_module_calls_say_what_they_do():
    """cuda(), half() and float() were AttributeErrors with no hint."""
    m = vitcpp.create_model("mnist-seed")
    assert m.float() is m
    with pytest.raises(RuntimeError, match="runs on the CPU"):
        m.cuda()
    with pytest.raises(RuntimeError, match="no float16 products"):
        m.half()


def test_no_pooling_is_refused_rather_than_read_as_token():
    with pytest.raises(ValueError, match="no pooling"):
        vitcpp.create_model("mnist-seed", global_pool="")


def test_dynamic_img_size_keeps_a_few_sizes_not_every_one():
    """Every size kept a copy of the weights: 40 sizes of ViT-Ti held 900 MB."""
    m = vitcpp.create_model("mnist-seed", dynamic_img_size=True)
    for h in range(8, 8 + 4 * 10, 4):
        m(np.zeros((1, 1, h, 28), np.float32))
    assert len(m._resized) == m._RESIZED_KEPT
    assert list(m._resized)[-1] == (44, 28)  # the most recent last
