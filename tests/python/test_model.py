"""vitcpp.create_model and the model's forward passes against PyTorch's logits and `vit predict`.
Tolerances: logits against the float64 PyTorch references 1e-5 of the largest logit for
float32-stored weights (1e-4 for bf16-stored ones, as the C++ tests); against `vit predict`
(the same engine, another process) exactly."""
import json
import os

import numpy as np
import pytest

import vitcpp
from conftest import PRETRAINED, read_safetensors, run_vit, worst_rel, write_safetensors


def expect(name):
    e = read_safetensors(os.path.join(PRETRAINED, name, "expect.safetensors"))
    return e["input.x"], e["out.logits"]


def test_a_timm_name_builds_the_architecture_with_random_weights():
    m = vitcpp.create_model("vit_tiny_patch16_224")
    assert m(np.zeros((1, 3, 224, 224), np.float32)).shape == (1, 1000)
    assert (m.num_classes, m.num_features, m.num_params()) == (1000, 192, 5717416)  # timm's count
    assert m.pretrained_cfg["input_size"] == (3, 224, 224)
    assert "vit_tiny_patch16_224" in vitcpp.list_models("vit_tiny*")


@pytest.mark.parametrize("name,tol", [("timm_a", 1e-4), ("timm_b", 1e-4), ("timm_cls_map", 1e-5),
                                      ("timm_reg_map", 1e-5), ("timm_prefix_map", 1e-5), ("hf", 1e-5),
                                      ("hf_nonsquare", 1e-5)])
def test_checkpoints_give_pytorchs_logits(name, tol):
    x, want = expect(name)
    m = vitcpp.create_model("local-dir:" + os.path.join(PRETRAINED, name))
    got = m(x)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert worst_rel(got, want) <= tol
    # A plain path and checkpoint_path name the same checkpoint.
    assert np.array_equal(vitcpp.create_model(os.path.join(PRETRAINED, name))(x), got)


def test_int8_gives_vit_predicts_int8_logits_near_fp32(tmp_path):
    ck = os.path.join(PRETRAINED, "timm_a")
    x, want = expect("timm_a")
    m = vitcpp.create_model("local-dir:" + ck, dtype="int8")
    assert m.dtype == "int8"
    got = m(x)
    assert 0 < worst_rel(got, want) <= 0.05  # int8's rounding, not fp32's
    write_safetensors(tmp_path / "x.safetensors", {"x": x})
    lines = run_vit("predict", "--checkpoint", ck, "--tensor", f"{tmp_path / 'x.safetensors'}:x", "-b", len(x),
                    "--dtype", "int8", "--json", "--logits").splitlines()
    assert np.array_equal(np.array([json.loads(line)["logits"] for line in lines], np.float32), got)
    with pytest.raises(ValueError, match="'int8'"):
        vitcpp.create_model("vit_tiny_patch16_224", dtype="int4")


def test_logits_and_features_are_vit_predicts(tmp_path):
    ck = os.path.join(PRETRAINED, "timm_a")
    x, _ = expect("timm_a")
    write_safetensors(tmp_path / "x.safetensors", {"x": x})
    # vit predict -b 2 lays the weights out for batches of 2, as a call with 2 images does.
    lines = run_vit("predict", "--checkpoint", ck, "--tensor", f"{tmp_path / 'x.safetensors'}:x", "-b", 2,
                    "--json", "--logits").splitlines()
    cli = np.array([json.loads(line)["logits"] for line in lines], np.float32)
    m = vitcpp.create_model("local-dir:" + ck)
    assert np.array_equal(m(x), cli)
    run_vit("predict", "--checkpoint", ck, "--tensor", f"{tmp_path / 'x.safetensors'}:x", "-b", 2, "--features",
            "tokens", "-o", tmp_path / "tokens.npy")
    assert np.array_equal(m.forward_features(x), np.load(tmp_path / "tokens.npy"))


@pytest.mark.parametrize("name", ["timm_a", "timm_b", "timm_reg_map", "timm_prefix_map"])
def test_forward_head_of_forward_features_is_the_forward(name):
    x, _ = expect(name)
    m = vitcpp.create_model("local-dir:" + os.path.join(PRETRAINED, name))
    feats = m.forward_features(x)
    assert feats.shape[0] == 2 and feats.shape[2] == m.num_features
    assert worst_rel(m.forward_head(feats), m(x)) <= 1e-5
    assert worst_rel(m.forward_head(feats, pre_logits=True), m.forward_pooled(x)) <= 1e-5


def test_a_cpu_torch_tensor_is_read_as_an_array_and_gives_tensors():
    torch = pytest.importorskip("torch")
    x, want = expect("timm_cls_map")
    m = vitcpp.create_model("local-dir:" + os.path.join(PRETRAINED, "timm_cls_map"))
    got = m(torch.from_numpy(x.copy()))
    assert isinstance(got, torch.Tensor) and np.array_equal(got.numpy(), m(x))
    assert isinstance(m(x), np.ndarray)  # numpy in, numpy out
    assert np.array_equal(m(x.astype(np.float64)), m(x))  # converted to float32
    t = torch.from_numpy(x.copy())
    for out in (m.forward_features(t), m.forward_pooled(t), m.forward_head(m.forward_features(t))):
        assert isinstance(out, torch.Tensor)
    final, blocks = m.forward_intermediates(t, return_prefix_tokens=True)
    assert isinstance(final, torch.Tensor) and all(isinstance(a, torch.Tensor) for pair in blocks for a in pair)
    # A tensor that requires grad is read detached (vitcpp computes no gradients), bfloat16 as
    # float32: both were refused in torch's words (forward_head with another exception type).
    grad = t.clone().requires_grad_(True)
    assert np.array_equal(m(grad).numpy(), m(x))
    feats = m.forward_features(t).requires_grad_(True)
    assert np.array_equal(m.forward_head(feats).numpy(), m.forward_head(feats.detach()).numpy())
    assert np.array_equal(m(t.bfloat16()).numpy(), m(t.bfloat16().float()).numpy())


def test_timms_inference_code_runs_unchanged():
    """timm's README usage, with vitcpp.create_model for timm.create_model and
    vitcpp.data for timm.data. Before: model.eval() was an AttributeError."""
    torch = pytest.importorskip("torch")
    from PIL import Image
    model = vitcpp.create_model("local-dir:" + os.path.join(PRETRAINED, "timm_a"))
    model = model.eval().to("cpu").to(torch.device("cpu:0")).to(torch.float32).cpu().requires_grad_(False)
    config = vitcpp.data.resolve_model_data_config(model)
    transforms = vitcpp.data.create_transform(**config, is_training=False)
    img = Image.open(os.path.join(PRETRAINED, "images", "cat.jpg"))
    with torch.no_grad():
        output = model(transforms(img).unsqueeze(0))
    top5_probabilities, top5_class_indices = torch.topk(output.softmax(dim=1) * 100, k=5)
    want = model.predict(img, topk=5)[0]
    assert top5_class_indices[0].tolist() == [i for i, _, _ in want]
    assert np.allclose(top5_probabilities[0].numpy() / 100, [p for _, p, _ in want], rtol=1e-5)
    with pytest.raises(ValueError, match="CPU"):
        model.to("cuda")
    with pytest.raises(RuntimeError, match="vitcpp.train"):
        model.train()
    assert model.train(False) is model


def test_a_pytorch_model_with_the_same_weights_agrees():
    """The model's state_dict through timm's forward written in PyTorch (the fixtures' reference,
    tools/make_pretrained_fixtures.py), float64, on new random inputs."""
    torch = pytest.importorskip("torch")
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
    from make_pretrained_fixtures import TIMM_MAP_CFGS, timm_forward, timm_model_cfg
    cfg = TIMM_MAP_CFGS["timm_reg_map"]
    m = vitcpp.create_model("local-dir:" + os.path.join(PRETRAINED, "timm_reg_map"))
    p = {k: torch.from_numpy(v).double() for k, v in m.state_dict().items()}
    x = np.random.default_rng(3).standard_normal((3, 3, 24, 24)).astype(np.float32)
    want = timm_forward(timm_model_cfg(cfg["model_args"], cfg["num_classes"]), p, torch.from_numpy(x).double())
    assert worst_rel(m(x), want.numpy()) <= 1e-5


def test_new_head_new_size_and_dynamic_size():
    ck = "local-dir:" + os.path.join(PRETRAINED, "timm_cls_map")
    m = vitcpp.create_model(ck)
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 40)).astype(np.float32)
    resized = vitcpp.create_model(ck, img_size=(32, 40))
    assert resized(x).shape == (2, 3)
    m.set_input_size((32, 40))  # timm's set_input_size: the same resampling as loading at that size
    assert np.array_equal(m(x), resized(x))
    dyn = vitcpp.create_model(ck, dynamic_img_size=True)
    assert np.array_equal(dyn(x), resized(x))
    # timm's PatchEmbed with dynamic_img_size asserts the patch divides the input (a fixed
    # img_size is floored, as its Conv2d: create_model(img_size=30) reads 24 rows).
    with pytest.raises(ValueError, match="not divisible"):
        dyn(np.zeros((1, 3, 30, 40), np.float32))
    x30 = np.random.default_rng(0).standard_normal((1, 3, 30, 40)).astype(np.float32)
    at30 = vitcpp.create_model(ck, img_size=(30, 40))
    assert np.array_equal(at30(x30), dyn(np.ascontiguousarray(x30[:, :, :24])))
    m.reset_classifier(7)
    assert m(x).shape == (2, 7) and m.num_classes == 7
    m.reset_classifier(0)
    assert m.forward_pooled(x).shape == (2, 32)
    headless = vitcpp.create_model(ck, num_classes=0)  # timm's feature extractor: the pooled features
    assert headless(np.zeros((1, 3, 24, 24), np.float32)).shape == (1, 32)


def test_predict_gives_vit_predicts_top5_on_image_files():
    ck = os.path.join(PRETRAINED, "timm_a")
    images = [os.path.join(PRETRAINED, "images", f) for f in ("cat.jpg", "coffee.png", "astronaut_gray.png")]
    m = vitcpp.create_model("local-dir:" + ck)
    got = m.predict(images, topk=5)
    lines = run_vit("predict", "--checkpoint", ck, "--json", *images).splitlines()
    for mine, line in zip(got, lines):
        cli = json.loads(line)
        assert [(i, lab) for i, _, lab in mine] == [(t["index"], t["label"]) for t in cli["topk"]]
        assert np.allclose([p for _, p, _ in mine], [t["prob"] for t in cli["topk"]], rtol=0, atol=1e-6)


def test_attention_maps_and_writing_out(tmp_path):
    ck = "local-dir:" + os.path.join(PRETRAINED, "timm_cls_map")
    m = vitcpp.create_model(ck)
    x, _ = expect("timm_cls_map")
    maps = m.attention_maps(x)  # the attention pool's query, by default for such a model
    assert maps.shape == (2, 3, 3) and np.allclose(maps.sum((1, 2)), 1, atol=1e-5)
    assert m.attention_maps(x, method="rollout").shape == (2, 3, 3)
    m.save_pretrained(tmp_path / "timm")
    back = vitcpp.create_model("local-dir:" + str(tmp_path / "timm"))
    assert back.checkpoint_format == "timm" and np.array_equal(back(x), m(x))
    # What timm sees differently is a warning too (it was only the return value).
    with pytest.warns(UserWarning, match="save_pretrained: .*sin-cos"):
        notes = vitcpp.create_model("mnist-seed").save_pretrained(tmp_path / "seed")
    assert notes and "sin-cos" in notes[0]
    # Not into a training run's directory, whose checkpoints its model.safetensors would shadow.
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "args.json").write_text("{}")
    for fmt in ("timm", "hf", "vitcpp"):  # vitcpp's replaced the run's config.json
        with pytest.raises(vitcpp.Error, match="a training run's directory"):
            m.save_pretrained(tmp_path / "run", format=fmt)
    assert sorted(os.listdir(tmp_path / "run")) == ["args.json"]
    m.export_onnx(tmp_path / "m.onnx")
    assert (tmp_path / "m.onnx").stat().st_size > 4 * m.num_params()
    with pytest.warns(UserWarning, match="the graph takes .* images only"):  # one size in ONNX
        vitcpp.create_model(ck, dynamic_img_size=True).export_onnx(tmp_path / "d.onnx")
    # An int8 model's graph is int8 by default, as `vit export` of a vit quantize file (it was
    # the fp32 graph, silently): the blocks' weights in bytes, not floats.
    q = vitcpp.create_model(ck, dtype="int8")
    q.export_onnx(tmp_path / "q.onnx")
    q.export_onnx(tmp_path / "qf.onnx", dtype="float32")
    assert (tmp_path / "q.onnx").stat().st_size < (tmp_path / "qf.onnx").stat().st_size
    assert (tmp_path / "qf.onnx").read_bytes() == (tmp_path / "m.onnx").read_bytes()
    assert b"MatMulInteger" in (tmp_path / "q.onnx").read_bytes()
    with pytest.raises(ValueError, match="dtype"):
        q.export_onnx(tmp_path / "x.onnx", dtype="bfloat16")


def test_forward_intermediates_as_timm():
    ck = "local-dir:" + os.path.join(PRETRAINED, "timm_a")  # 1 class + 2 register tokens, 4x4 patches
    m = vitcpp.create_model(ck)
    x, _ = expect("timm_a")
    final, ints = m.forward_intermediates(x)
    assert np.array_equal(final, m.forward_features(x))
    assert len(ints) == 2 and all(y.shape == (2, 32, 4, 4) for y in ints)
    assert not np.allclose(ints[0], ints[1])
    # The last block's output, normed: forward_features' patch tokens, as [N, D, H, W].
    last = m.forward_intermediates(x, indices=1, norm=True, intermediates_only=True)
    assert len(last) == 1
    want = final[:, 3:].reshape(2, 4, 4, 32).transpose(0, 3, 1, 2)
    assert worst_rel(last[0], want) <= 1e-5
    nlc = m.forward_intermediates(x, indices=[-2], output_fmt="NLC", return_prefix_tokens=True,
                                  intermediates_only=True)
    (spatial, prefix), = nlc
    assert spatial.shape == (2, 16, 32) and prefix.shape == (2, 3, 32)
    assert np.array_equal(spatial.reshape(2, 4, 4, 32).transpose(0, 3, 1, 2), ints[0])
    with pytest.raises(ValueError, match="out of range"):
        m.forward_intermediates(x, indices=[2])
    # timm 1.0.29's output_dict: its keys, the same arrays.
    d = m.forward_intermediates(x, output_dict=True, return_prefix_tokens=True)
    assert sorted(d) == ["image_features", "image_intermediates", "image_intermediates_prefix"]
    assert np.array_equal(d["image_features"], final)
    assert all(np.array_equal(a, b) for a, b in zip(d["image_intermediates"], ints))
    assert all(p.shape == (2, 3, 32) for p in d["image_intermediates_prefix"])
    assert sorted(m.forward_intermediates(x, output_dict=True, intermediates_only=True)) == ["image_intermediates"]


def test_timms_attn_mask_hides_patches_and_refuses_what_it_cannot_run():
    """timm 1.0's forward(x, attn_mask=None, is_causal=False): code written for it passes them;
    they were a TypeError, then every mask was refused. A mask that hides patches from every
    query runs (PyTorch's forward with it: tests/python/test_configs.py); the masks vitcpp's
    attention has no form for are refused by name, never approximated."""
    m = vitcpp.create_model("local-dir:" + os.path.join(PRETRAINED, "timm_a"))
    x, _ = expect("timm_a")
    assert np.array_equal(m(x, attn_mask=None, is_causal=False), m(x))
    assert np.array_equal(m.forward_features(x, attn_mask=None), m.forward_features(x))
    T, pre, H = 19, m.num_prefix_tokens, m.config["num_heads"]
    seen = np.ones((2, 1, 1, T), bool)
    seen[0, ..., pre + 3:pre + 9] = False
    hidden = m.forward_features(x, attn_mask=seen)
    plain = m.forward_features(x)
    assert np.array_equal(hidden[1], plain[1]) and not np.allclose(hidden[0], plain[0])  # image 0's alone
    # The same mask in timm's other forms gives the same bits; forward pools every patch, as timm's.
    for same in (np.where(seen, 0.0, -np.inf).astype(np.float32), np.broadcast_to(seen, (2, H, T, T)),
                 np.broadcast_to(seen, (2, 1, T, T)).copy()):
        assert np.array_equal(m.forward_features(x, attn_mask=same), hidden), same.shape
    # One mask for every image: [T] broadcasts as [1, 1, 1, T] (it was refused).
    for same in (seen[0, 0, 0], seen[:1]):
        want = m.forward_features(x, attn_mask=seen[[0, 0]])
        assert np.array_equal(m.forward_features(x, attn_mask=same), want), same.shape
    assert np.allclose(m(x, attn_mask=seen), m.forward_head(hidden), rtol=0, atol=1e-6)
    _, blocks = m.forward_intermediates(x, attn_mask=seen, indices=1, output_fmt="NLC")
    assert np.array_equal(m.forward_intermediates(x, indices=1, output_fmt="NLC")[1][0][1], blocks[0][1])
    assert not np.allclose(m.forward_intermediates(x, indices=1, output_fmt="NLC")[1][0][0], blocks[0][0])
    causal = np.tril(np.ones((T, T), bool))
    prefix_hidden = seen.copy()
    prefix_hidden[..., 0] = False
    for call, words in ((lambda: m.forward_features(x, is_causal=True), "is_causal=True"),
                        (lambda: m(x, attn_mask=causal), "differs between queries or heads"),
                        (lambda: m(x, attn_mask=prefix_hidden), "hides a prefix token"),
                        (lambda: m(x, attn_mask=np.where(seen, 0.5, -np.inf)), "other biases"),
                        (lambda: m.forward_intermediates(x, attn_mask=causal), "differs between queries")):
        with pytest.raises(NotImplementedError, match=words):
            call()
    for bad, error, words in ((np.ones((3, 1, 1, T), bool), ValueError, "must broadcast to"),
                              (np.ones((2, 1, 1, T + 1), bool), ValueError, "T=19"),
                              (np.ones((2, 1, 1, 1, T), bool), ValueError, "got shape"),
                              (np.ones((2, 1, 1, T), np.int64), TypeError, "bool .* or float")):
        with pytest.raises(error, match=words):
            m(x, attn_mask=bad)
