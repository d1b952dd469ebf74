"""vitcpp.train: `vit train` from Python, on arrays and directories. The same images as IDX
files (vit train) and as numpy arrays (vitcpp.train) must give the same bits; Ctrl-C stops a
run with a state that resume= continues exactly."""
import contextlib
import csv
import gzip
import io
import json
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import vitcpp
from conftest import HERE, read_safetensors, run_vit, vit_binary

# Small and quick: mnist-seed (the CLI's default model) on 28x28 digits-like noise.
OPTS = dict(epochs=2, batch_size=32, seed=3, threads=2, progress="log", lr=2e-3, hflip=0.5, reprob=0.25)


def make_digits(n, seed):
    """uint8 [n, 28, 28] images whose class (0-9) is the brightest of ten bands, and labels."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    x = rng.integers(0, 120, (n, 28, 28)).astype(np.uint8)
    for i, k in enumerate(y):
        x[i, 2 + 2 * k:4 + 2 * k, 4:24] = 250
    return x, y.astype(np.int64)


def write_idx(folder, prefix, x, y):
    """MNIST's IDX files (gzipped) for images x [n, 28, 28] and labels y."""
    os.makedirs(folder, exist_ok=True)
    with gzip.open(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, len(x), 28, 28) + x.tobytes())
    with gzip.open(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">II", 0x801, len(y)) + y.astype(np.uint8).tobytes())


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    train, test = make_digits(192, 1), make_digits(64, 2)
    folder = tmp_path_factory.mktemp("digits")
    write_idx(str(folder), "train", *train)
    write_idx(str(folder), "t10k", *test)
    return str(folder), train, test


def cli_flags(opts):
    out = []
    for k, v in opts.items():
        out += ["--" + k.replace("_", "-"), str(v)]
    return out


def assert_same_tensors(a, b):
    ta, tb = read_safetensors(a), read_safetensors(b)
    assert sorted(ta) == sorted(tb)
    for name in ta:
        diff = np.flatnonzero(ta[name].view(np.uint32) != tb[name].view(np.uint32))
        assert diff.size == 0, f"{name}: {diff.size} of {ta[name].size} values differ, first at {diff[0]}"


def summary_rows(path):
    with open(path) as f:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


def test_arrays_give_the_bits_of_vit_train_on_idx_files(digits, tmp_path):
    folder, train, test = digits
    run_vit("train", "--data-dir", folder, "--output", tmp_path / "cli", *cli_flags(OPTS))
    h = vitcpp.train(None, train=train, val=test, output=str(tmp_path / "py"), **OPTS)
    assert_same_tensors(tmp_path / "cli" / "last.safetensors", tmp_path / "py" / "last.safetensors")
    assert summary_rows(tmp_path / "cli" / "summary.csv") == summary_rows(tmp_path / "py" / "summary.csv")
    # The history is summary.csv's rows; the model is the last epoch's weights.
    assert [e["epoch"] for e in h] == [1, 2]
    assert set(h[0]) == {"epoch", "train_loss", "train_top1", "eval_loss", "eval_top1", "eval_top5", "lr",
                         "seconds"}
    last = read_safetensors(tmp_path / "py" / "last.safetensors")
    got = h.model.state_dict()
    for name, t in last.items():
        np.testing.assert_array_equal(got[name], t, err_msg=name)


def test_val_split_and_float_arrays(digits, tmp_path):
    _, (x, y), _ = digits
    # val_split as --val-split; float32 arrays are the model's input, fed as they are.
    m = vitcpp.create_model("mnist-seed")
    t = vitcpp.data.create_transform(**vitcpp.data.resolve_model_data_config(m))
    xf = np.stack([t.numpy(im[:, :, None]) for im in x])
    a = vitcpp.train(None, train=(x, y), val_split=0.25, epochs=1, batch_size=32, threads=2, progress="log")
    b = vitcpp.train(None, train=(xf, y), val_split=0.25, epochs=1, batch_size=32, threads=2, progress="log")
    assert a[0]["eval_top1"] == b[0]["eval_top1"] and a[0]["train_loss"] == b[0]["train_loss"]


def test_a_model_object_trains_in_place_with_a_callback_and_resumes(digits, tmp_path):
    _, train, test = digits
    model = vitcpp.create_model("mnist-seed", seed=5)
    before = model.state_dict()["head.weight"].copy()
    seen = []
    out = str(tmp_path / "run")
    # The callback returns False after epoch 1: the run stops there, resumable.
    h = vitcpp.train(model, train=train, val=test, output=out, epochs=3, batch_size=32, threads=2,
                     progress="log", callback=lambda e: seen.append(e["epoch"]) or e["epoch"] < 1)
    assert seen == [1] and "after epoch 1" in h.stopped and h.model is model
    assert not np.array_equal(before, model.state_dict()["head.weight"])
    assert os.path.exists(os.path.join(out, "pretrained", "model.safetensors"))  # args.json names it
    # Resumed without the val arrays it evaluated on, or with val where it had none, the run
    # would rank its epochs by eval and train scores mixed (best checkpoint, early stopping).
    with pytest.raises(RuntimeError, match="evaluated after each epoch and this one cannot.*val="):
        vitcpp.train(model, train=train, resume=out, progress="log")
    plain = str(tmp_path / "plain")
    vitcpp.train("mnist-seed", train=train, output=plain, epochs=2, batch_size=32, threads=2, progress="log",
                 callback=lambda e: e["epoch"] < 1)
    with pytest.raises(RuntimeError, match="had no evaluation data and this one has"):
        vitcpp.train(None, train=train, val=test, resume=plain, progress="log")
    h = vitcpp.train(model, train=train, val=test, resume=out, progress="log")
    assert [e["epoch"] for e in h] == [1, 2, 3] and not h.stopped
    # Resuming the finished run changes nothing and gives its history and model (it gave an
    # empty history and no model).
    done = vitcpp.train(None, train=train, val=test, resume=out, progress="log")
    assert [e["epoch"] for e in done] == [1, 2, 3] and done[2]["eval_top1"] == h[2]["eval_top1"]
    assert np.array_equal(done.model.state_dict()["head.weight"], model.state_dict()["head.weight"])
    # The same three epochs in one go, from the same starting weights, give the same bits.
    again = vitcpp.create_model("mnist-seed", seed=5)
    vitcpp.train(again, train=train, val=test, output=str(tmp_path / "whole"), epochs=3, batch_size=32,
                 threads=2, progress="log")
    assert_same_tensors(os.path.join(out, "last.safetensors"), tmp_path / "whole" / "last.safetensors")


def test_ctrl_c_stops_with_keyboard_interrupt_and_resume_continues_exactly(digits, tmp_path):
    _, train, test = digits
    out, whole = str(tmp_path / "run"), str(tmp_path / "whole")
    opts = dict(epochs=12, batch_size=16, threads=2, progress="log", recovery_interval=1)

    def interrupt_after_epoch_one():  # SIGINT as a terminal sends it, to the main thread
        while not os.path.exists(os.path.join(out, "last.safetensors")):
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupt_after_epoch_one)
    t.start()
    with pytest.raises(KeyboardInterrupt) as stop:
        vitcpp.train(None, train=train, val=test, output=out, **opts)
    t.join()
    # Where it stopped and how to go on, as vit train prints them (the bare exception said neither).
    notes = "\n".join(getattr(stop.value, "__notes__", []))
    assert "vitcpp.train stopped after " in notes, notes
    assert f"continue with vitcpp.train(resume={out!r}, train=(X, y), val=(X, y))" in notes, notes
    with open(os.path.join(out, "summary.csv")) as f:
        done = len(f.readlines()) - 1
    assert 1 <= done < 12, f"the interrupt came after {done} epochs"
    h = vitcpp.train(None, train=train, val=test, resume=out, progress="log")
    assert h[-1]["epoch"] == 12
    vitcpp.train(None, train=train, val=test, output=whole, **opts)
    assert_same_tensors(os.path.join(out, "last.safetensors"), os.path.join(whole, "last.safetensors"))


def test_a_comma_decimal_locale_changes_no_option_and_no_figure(tmp_path):
    # A program that calls locale.setlocale(LC_ALL, "") under de_DE (Qt and GTK programs do):
    # every option with a decimal point was refused ("drop: a rate in [0, 1), got 0.1": the C
    # library's strtod stopped at the '.') and the log printed "loss 2,3034".
    loc = tmp_path / "loc"
    loc.mkdir()
    subprocess.run(["localedef", "-i", "de_DE", "-f", "UTF-8", str(loc / "de_DE.UTF-8")], capture_output=True)
    assert (loc / "de_DE.UTF-8").exists(), "localedef made no de_DE.UTF-8 (Debian's locales package)"
    code = (
        "import locale, vitcpp\n"
        "locale.setlocale(locale.LC_ALL, '')\n"
        "assert locale.localeconv()['decimal_point'] == ',', locale.localeconv()\n"
        "h = vitcpp.train('mnist-seed', synthetic=64, epochs=1, batch_size=32, lr=2e-3, drop=0.1,\n"
        "                 opt_betas=(0.9, 0.95), aa='rand-m9-mstd0.5', progress='log', log_every=1, threads=1)\n"
        "print('trained', len(h))\n")
    env = dict(os.environ, LOCPATH=str(loc), LC_ALL="de_DE.UTF-8")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "trained 1" in r.stdout, r.stdout
    assert re.search(r"loss \d+\.\d{4}", r.stdout) and not re.search(r"loss \d+,\d", r.stdout), r.stdout


def test_an_exception_in_the_callback_stops_the_run_and_is_raised(digits, tmp_path):
    _, train, test = digits

    def fail(e):
        raise ArithmeticError("from the callback")

    with pytest.raises(ArithmeticError, match="from the callback"):
        vitcpp.train(None, train=train, val=test, output=str(tmp_path / "r"), epochs=3, batch_size=64,
                     threads=2, progress="log", callback=fail)
    with open(tmp_path / "r" / "summary.csv") as f:
        assert len(f.readlines()) == 2  # epoch 1 written, then stopped


def test_a_callbacks_answer_is_read_as_python_reads_truth(digits):
    """A string (or any object) answered "go on"; it failed the run with pybind11's cast error."""
    _, train, _ = digits
    opts = dict(epochs=2, batch_size=64, threads=2, progress="log")
    assert len(vitcpp.train(None, train=train, callback=lambda e: "continue", **opts)) == 2
    h = vitcpp.train(None, train=train, callback=lambda e: np.False_, **opts)
    assert len(h) == 1 and "after epoch 1" in h.stopped


def test_early_stopping_says_so_in_the_history(digits):
    """patience= ended a run after 6 of 30 epochs with history.stopped empty."""
    _, train, test = digits
    h = vitcpp.train(None, train=train, val=test, epochs=30, lr=1.0, patience=1, batch_size=64, threads=2,
                     progress="log")
    assert len(h) < 30 and h.stopped.startswith(f"early stopping after epoch {len(h)} of 30"), (len(h), h.stopped)


def test_bad_input_raises_clear_errors(digits, tmp_path):
    _, (x, y), _ = digits
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'.*batch_size"):
        vitcpp.train(None, train=(x, y), batchsize=3)
    # A switch given a value said "The following argument was not expected: bfloat16" (CLI11's).
    with pytest.raises(TypeError, match="amp is a switch, True or False, got 'bfloat16'"):
        vitcpp.train(None, train=(x, y), amp="bfloat16")
    with pytest.raises(ValueError, match=r"labels must be \[N\]"):
        vitcpp.train(None, train=(x, y[:-1]))
    with pytest.raises(TypeError, match="labels must be integers"):
        vitcpp.train(None, train=(x, y.astype(np.float32)))
    with pytest.raises(TypeError, match="uint8 pixels or float32"):
        vitcpp.train(None, train=(x.astype(np.int32), y))
    # float64 from X.astype(float) / 255 read as model input, never normalized: refused.
    with pytest.raises(TypeError, match=r"float32 model input \(already normalized"):
        vitcpp.train(None, train=(x.astype(float) / 255, y))
    # An option's bad value is a ValueError in train()'s keywords (a RuntimeError naming --opt).
    with pytest.raises(ValueError, match=r"^opt: adan not in"):
        vitcpp.train(None, train=(x, y), epochs=1, opt="adan")
    with pytest.raises(ValueError, match=r"^num_classes: a positive number"):
        vitcpp.train(None, train=(x, y), epochs=1, num_classes=-1)
    with pytest.raises(TypeError, match="callback must be callable"):
        vitcpp.train(None, train=(x, y), epochs=1, callback=5)
    with pytest.raises(ValueError, match=r"\[N, C, H, W\] or \[N, H, W\]"):
        vitcpp.train(None, train=(x[0], y[:1]))
    bad = y.copy()
    bad[7] = -1
    with pytest.raises(vitcpp.Error, match="label -1 of sample 7 is negative"):
        vitcpp.train(None, train=(x, bad), epochs=1, threads=2, progress="log")
    huge = y.astype(np.uint64)
    huge[3] = 2**63 + 5  # it was "label -9223372036854775803 ... is negative"
    with pytest.raises(ValueError, match=f"train: label {2**63 + 5} of sample 3 is out of range"):
        vitcpp.train(None, train=(x, huge), epochs=1)
    # Errors name train()'s keywords, not vit train's flags ("--batch-size must be positive").
    with pytest.raises(Exception, match=r"^batch_size must be positive") as e:
        vitcpp.train(None, train=(x, y), epochs=1, batch_size=0, progress="log")
    assert "--" not in str(e.value), e.value
    eleven = y.copy()
    eleven[0] = 10
    with pytest.raises(vitcpp.Error, match=r"\(set num_classes=11\)"):
        vitcpp.train("mnist-seed", train=(x, eleven), epochs=1, progress="none")
    with pytest.raises(vitcpp.Error, match=r"float32 images are the model's input, \[N, 1, 28, 28\]"):
        vitcpp.train(None, train=(np.zeros((4, 1, 32, 32), np.float32), y[:4]), epochs=1, progress="log")
    # A value that cannot work is a ValueError, as argparse's (it was vitcpp.Error).
    for bad, message in (({"lr": -1}, "the learning rate. must be a positive number"),
                         ({"epochs": -1}, "epochs must be positive, got -1"),
                         ({"smoothing": 1.0}, r"smoothing must be in \[0, 1\), got 1")):
        with pytest.raises(ValueError, match=message):
            vitcpp.train(None, train=(x, y), progress="log", **{"epochs": 1, **bad})
    with pytest.raises(ValueError, match="needs data"):
        vitcpp.train("mnist-seed")
    with pytest.raises(ValueError, match="val takes arrays"):
        vitcpp.train(None, train=str(tmp_path), val=(x, y))
    # A file that does not decode in an image folder: the hint names the keyword, not the flag.
    for split in ("train", "val"):
        for cls in ("a", "b"):
            (tmp_path / "bad" / split / cls).mkdir(parents=True)
            (tmp_path / "bad" / split / cls / "x.png").write_bytes(b"\x89PNG\r\n\x1a\n not one")
    with pytest.raises(vitcpp.Error, match=r"\(skip_bad_images=True leaves such files out\)"):
        vitcpp.train("mnist-seed", train=str(tmp_path / "bad"), epochs=1, progress="log")


def test_a_directory_and_synthetic_data(digits, tmp_path):
    folder, _, _ = digits
    h = vitcpp.train("mnist-seed", train=folder, epochs=1, batch_size=64, threads=2, progress="log")
    assert len(h) == 1 and h.model.num_classes == 10
    h = vitcpp.train("mnist-seed", synthetic=64, epochs=1, threads=2, progress="log")
    assert len(h) == 1
    # A directory run resumes with train= the same directory (it was refused in vit train's
    # words, "got --data-dir"); another directory is not the run's data.
    out = str(tmp_path / "dir_run")
    vitcpp.train("mnist-seed", train=folder, output=out, epochs=1, batch_size=64, threads=2, progress="log")
    longer = vitcpp.train(train=folder + os.sep, resume=out, epochs=2, threads=2, progress="log")
    assert longer[-1]["epoch"] == 2
    with pytest.raises(ValueError, match="resume continues the run on its own data.*leave train out"):
        vitcpp.train(train=str(tmp_path), resume=out, epochs=3, progress="log")


def test_the_train_arrays_example_runs(digits, tmp_path):
    folder, _, _ = digits
    example = os.path.join(HERE, "..", "..", "examples", "python", "train_arrays.py")
    r = subprocess.run([sys.executable, example, folder, "--epochs", "1", "--output", str(tmp_path / "run")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "test top-1" in r.stdout
    assert os.path.exists(tmp_path / "run" / "last.safetensors")
    # What it wrote is a checkpoint vit predict reads.
    run_vit("info", "--checkpoint", tmp_path / "run" / "last.safetensors")


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_log_goes_to_pythons_stdout(capfd):
    """sys.stdout, not the process's: a notebook shows it, redirect_stdout captures it. Before,
    the lines went to file descriptor 1 (the terminal of a notebook's server)."""
    for stream, bar in ((io.StringIO(), False), (Terminal(), True)):
        with contextlib.redirect_stdout(stream):
            vitcpp.train("mnist-seed", synthetic=128, epochs=1, batch_size=32, threads=2)  # progress auto
        lines = stream.getvalue().splitlines()
        assert lines[0].startswith("vit train: model mnist-seed"), lines[:3]
        assert lines[-1].startswith("best: "), lines[-3:]
        assert ("\r" in stream.getvalue()) == bar  # a bar where the stream is a terminal, else log lines
    out, err = capfd.readouterr()
    assert "vit train" not in out + err, out + err


def test_without_evaluation_data_the_eval_figures_are_none(digits):
    """They were 0.0: a run without val read as one at 0% top-1."""
    _, train, _ = digits
    h = vitcpp.train("mnist-seed", train=train, epochs=1, batch_size=64, threads=2, progress="log")
    assert h[0]["eval_top1"] is None and h[0]["eval_loss"] is None
    assert isinstance(h[0]["train_loss"], float) and h[0]["train_loss"] > 0


def test_without_evaluation_data_summary_csv_leaves_the_eval_columns_empty(digits, tmp_path):
    """summary.csv said 0,0,0 (a 0% top-1 that vit plot drew); the history of the finished run,
    read back from it, said 0.0 where the run's own said None."""
    _, train, _ = digits
    out = str(tmp_path / "noeval")
    h = vitcpp.train("mnist-seed", train=train, output=out, epochs=1, batch_size=64, threads=2, progress="log",
                     model_ema=True)
    rows = summary_rows(os.path.join(out, "summary.csv"))
    assert [r["eval_top1"] for r in rows] == [""] and float(rows[0]["train_loss"]) > 0, rows
    done = vitcpp.train(train=train, resume=out, progress="log")
    assert done[0]["eval_top1"] is None and done[0]["eval_loss"] is None
    assert sorted(done[0]) == sorted(h[0]), "the finished run's history has the fresh one's keys"
    assert "wrote" in run_vit("plot", "--run", out)  # train curves alone


def test_timms_loss_and_clipping_keywords_reach_the_run(digits):
    """bce_loss, bce_target_thresh, bce_pos_weight, bce_sum and clip_mode, as timm's train.py
    flags: each changes the run (a keyword dropped on the way would train cross-entropy with
    norm clipping)."""
    _, train, _ = digits
    kw = dict(train=train, epochs=1, batch_size=64, threads=2, progress="none", clip_grad=0.05)
    losses = {}
    for name, extra in [("ce", {}), ("bce", {"bce_loss": True}),
                        ("bce_opts", {"bce_loss": True, "bce_target_thresh": 0.2, "bce_pos_weight": 2.0,
                                      "bce_sum": True}),
                        ("agc", {"clip_mode": "agc"})]:
        losses[name] = vitcpp.train("mnist-seed", **kw, **extra)[0]["train_loss"]
    assert len(set(losses.values())) == len(losses), losses
    assert losses["bce"] < 1.0 < losses["ce"], losses  # BCE averages over classes: log 2 at the start


def test_timms_drop_rates_in_create_model_reach_training(digits, tmp_path):
    """timm.create_model(name, drop_path_rate=..., attn_drop_rate=..., ...): the rates are the
    model's (its config, save_pretrained's config.json), inference ignores them (as timm's
    eval()), and vitcpp.train(model) trains with them: the bits of the same model trained with
    train's drop_path and attn_drop options."""
    _, train, _ = digits
    rates = dict(drop_rate=0.1, drop_path_rate=0.2, attn_drop_rate=0.05, proj_drop_rate=0.15, pos_drop_rate=0.1)
    model = vitcpp.create_model("mnist-seed", seed=5, **rates)
    plain = vitcpp.create_model("mnist-seed", seed=5)
    x = np.random.default_rng(0).standard_normal((2, 1, 28, 28)).astype(np.float32)
    assert np.array_equal(model(x), plain(x))
    model.save_pretrained(tmp_path / "saved", format="vitcpp")
    with open(tmp_path / "saved" / "config.json") as f:
        saved = json.load(f)
    assert {k: saved[k] for k in rates} == pytest.approx(rates), saved
    kw = dict(train=train, epochs=1, batch_size=64, threads=2, progress="none")
    a = vitcpp.train(vitcpp.create_model("mnist-seed", seed=5, drop_path_rate=0.2, attn_drop_rate=0.05),
                     output=str(tmp_path / "a"), **kw)
    b = vitcpp.train(vitcpp.create_model("mnist-seed", seed=5), output=str(tmp_path / "b"), drop_path=0.2,
                     attn_drop=0.05, **kw)
    c = vitcpp.train(vitcpp.create_model("mnist-seed", seed=5), output=str(tmp_path / "c"), **kw)
    assert a[0]["train_loss"] == b[0]["train_loss"] != c[0]["train_loss"]
    assert_same_tensors(tmp_path / "a" / "last.safetensors", tmp_path / "b" / "last.safetensors")
    with open(tmp_path / "a" / "config.json") as f:
        assert json.load(f)["drop_path_rate"] == pytest.approx(0.2)


def test_timms_augmentation_keywords_reach_the_run(digits):
    """re_prob, re_mode and re_count (create_transform's names), and aa="3a" and
    gaussian_blur_prob (train.py's): each changes the run (a keyword dropped on the way would
    train without it). grayscale_prob is left out: these digits are gray already."""
    _, train, _ = digits
    kw = dict(train=train, epochs=1, batch_size=64, threads=2, progress="none")
    losses = {}
    for name, extra in [("plain", {}), ("erase", {"re_prob": 0.5}),
                        ("erase_const", {"re_prob": 0.5, "re_mode": "const"}),
                        ("erase_3", {"re_prob": 0.5, "re_count": 3}),
                        ("three", {"auto_augment": "3a"}), ("blur", {"gaussian_blur_prob": 0.5})]:
        losses[name] = vitcpp.train("mnist-seed", **kw, **extra)[0]["train_loss"]
    assert len(set(losses.values())) == len(losses), losses
