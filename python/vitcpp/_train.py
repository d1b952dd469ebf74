"""vitcpp.train: `vit train` from Python, on a dataset directory or on numpy arrays."""
import difflib
import json
import os
import sys
import tempfile

import numpy as np

from . import _vitcpp


class TrainHistory(list):
    """One dict per epoch trained, summary.csv's columns (accuracies in percent), with:
    model: the trained model (the last epoch's weights; None when nothing was trained);
    output: the run directory (or None); stopped: why the run stopped early ("" if it did not)."""

    model = None
    output = None
    stopped = ""

    def __repr__(self):
        return (f"TrainHistory({list.__repr__(self)}, output={self.output!r}, stopped={self.stopped!r}, "
                f"model={'None' if self.model is None else 'VisionTransformer(...)'})")


def _summary_rows(path):
    """summary.csv's rows as the history's dicts: the epoch an int, the rest floats (None where
    empty: no evaluation)."""
    import csv
    with open(path, newline="") as f:
        return [{k: int(v) if k == "epoch" else (float(v) if v != "" else None) for k, v in row.items()}
                for row in csv.DictReader(f)]


def _flag_names():
    return {name for name, _ in _vitcpp.train_flags()}


def _switches():
    """vit train's flags that take no value (--amp): True or False in Python."""
    return {name for name, switch in _vitcpp.train_flags() if switch}


def _as_split(x, y, name):
    """(X, y) as the engine takes them: X uint8 pixels or float32 model input [N, C, H, W]
    ([N, H, W] gains a channel), y int64 [N]."""
    x = np.asarray(x)
    if x.ndim == 3:
        x = x[:, None]
    if x.ndim != 4:
        raise ValueError(f"{name}: images must be [N, C, H, W] or [N, H, W], got shape {x.shape}")
    if x.dtype == np.uint8:
        x = np.ascontiguousarray(x)
    elif x.dtype == np.float32:
        x = np.ascontiguousarray(x)
    elif x.dtype.kind == "f":  # X.astype(float) / 255 reads as model input, unnormalized: say so
        raise TypeError(f"{name}: images must be uint8 pixels (normalized here) or float32 model input "
                        f"(already normalized, as create_transform gives it), got dtype {x.dtype}")
    else:
        raise TypeError(f"{name}: images must be uint8 pixels or float32 model input, got dtype {x.dtype}")
    y = np.asarray(y)
    if y.dtype.kind not in "iu":
        raise TypeError(f"{name}: labels must be integers, got dtype {y.dtype}")
    if y.ndim != 1 or len(y) != len(x):
        raise ValueError(f"{name}: labels must be [N] with N = {len(x)} (one per image), got shape {y.shape}")
    if y.dtype.kind == "u" and len(y) and int(y.max()) > np.iinfo(np.int64).max:  # int64 read it as negative
        i = int(y.argmax())
        raise ValueError(f"{name}: label {int(y[i])} of sample {i} is out of range")
    return x, np.ascontiguousarray(y, dtype=np.int64)


# timm's create_transform names for vit train's flags.
_ALIASES = {"auto_augment": "aa", "re_prob": "reprob", "re_mode": "remode", "re_count": "recount"}


def _flags(options):
    """vit train's flags from keyword arguments: batch_size=64 -> --batch-size 64; True -> the
    switch alone; False and None -> nothing; a list -> its values."""
    known, switches = _flag_names(), _switches()
    args = []
    for key, value in options.items():
        flag = _ALIASES.get(key, key).replace("_", "-")
        if flag not in known:
            near = difflib.get_close_matches(flag, known, n=1)
            hint = f" (did you mean {near[0].replace('-', '_')!r}?)" if near else ""
            raise TypeError(f"train() got an unexpected keyword argument {key!r}{hint}")
        if flag in switches and not isinstance(value, (bool, np.bool_)) and value is not None:
            raise TypeError(f"train(): {key} is a switch, True or False, got {value!r}")
        if value is None or value is False or value is np.False_:
            continue
        if value is np.True_:
            value = True
        if value is True:
            args.append("--" + flag)
        elif isinstance(value, (list, tuple)):
            args += ["--" + flag, *map(str, value)]
        else:
            args += ["--" + flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return args


def _run_data_dir(run):
    """The data directory a run directory's args.json names, or None (arrays, synthetic data)."""
    try:
        with open(os.path.join(os.fspath(run), "args.json"), encoding="utf-8") as f:
            data_dir = json.load(f).get("data-dir")
    except (OSError, ValueError):
        return None  # vit train says what is wrong with the run
    return data_dir if isinstance(data_dir, str) else None


def train(model=None, train=None, val=None, output=None, *, callback=None, resume=None, **options):
    """Trains a model as `vit train` does, with its options by the same names (`-` becomes
    `_`) and defaults: epochs, batch_size, opt, lr, weight_decay, sched, warmup_epochs, seed,
    threads, the augmentations (aa, reprob, ...), mixup, model_ema, ... `vit train
    --help` lists them all.

    model: a preset or timm architecture name (random weights from `seed`), a checkpoint path
        or "local-dir:PATH" (fine-tuned, as --pretrained), or a VisionTransformer, whose
        weights training starts from and which then holds the trained weights.
    train: a dataset directory (IDX, CIFAR binary or image folders, as --data-dir), or numpy
        arrays (X, y): X uint8 pixels [N, C, H, W] or [N, H, W], produced at the model's input
        as `vit train` reads IDX/CIFAR files (the same images give the same bits either way),
        or float32 images already at the model's input; y integer labels [N].
    val: arrays (X, y) to evaluate on after each epoch (with arrays; a directory brings its
        own test split). val_split=F holds part of train out instead.
    output: the run directory (args.json, config.json, summary.csv, checkpoints, the state
        that resume continues). A model object's starting weights are kept in
        OUTPUT/pretrained/model.safetensors, which args.json names.
    callback: called after each epoch with its dict; returning False stops the run there
        (resumable). An exception it raises stops the run after the epoch's files are
        written and is raised again.
    resume: a run directory stopped early (Ctrl-C raises KeyboardInterrupt after the step
        in progress, with a state written): continues it exactly; its options come from
        its args.json (only threads, workers, progress, log_every, recovery_interval,
        epochs to train longer, and patience, may be given). Array data must be passed again; a dataset
        directory comes from args.json (train= may name the same one, not another).

    Returns a TrainHistory: the epochs' dicts, with .model (the trained model), .output and
    .stopped. Progress goes to Python's sys.stdout, as `vit train` prints it (a notebook shows
    it; contextlib.redirect_stdout captures it).
    """
    from . import VisionTransformer, _checkpoint_path

    args = []
    tmp = None
    if resume is not None:
        args += ["--resume", os.fspath(resume)]
        if output is not None and os.path.abspath(output) != os.path.abspath(resume):
            raise ValueError("resume continues its own run directory: leave output out")
        output = os.fspath(resume)
    elif isinstance(model, VisionTransformer):
        if output is not None:
            output = os.fspath(output)
            if os.path.exists(os.path.join(output, "args.json")):
                raise ValueError(f"output {output!r} holds a run already; resume={output!r} continues it")
            start = os.path.join(output, "pretrained")
        else:
            tmp = tempfile.TemporaryDirectory(prefix="vitcpp-train-")
            start = tmp.name
        model.save_pretrained(start, format="vitcpp")
        args += ["--pretrained", os.path.join(start, "model.safetensors")]
    elif isinstance(model, (str, os.PathLike)):
        path = _checkpoint_path(os.fspath(model), None)
        args += ["--pretrained", path] if path is not None else ["--model", os.fspath(model)]
    elif model is not None:
        raise TypeError(f"model must be a name, a checkpoint path or a VisionTransformer, got {type(model).__name__}")
    if output is not None and resume is None:
        args += ["--output", os.fspath(output)]

    if resume is not None and isinstance(train, (str, os.PathLike)):
        # The run's data comes from its args.json: the same directory again is taken (it was
        # refused in vit train's words, "got --data-dir"), another is an error.
        ran_on = _run_data_dir(resume)
        if ran_on is None or os.path.realpath(ran_on) != os.path.realpath(os.fspath(train)):
            raise ValueError(f"resume continues the run on its own data ({ran_on!r}, from its args.json): "
                             f"leave train out")
        train = None
    tx = ty = vx = vy = None
    if isinstance(train, (str, os.PathLike)):
        args += ["--data-dir", os.fspath(train)]
        if val is not None:
            raise ValueError("val takes arrays; a dataset directory brings its own test split (or val_split=F)")
    elif train is not None:
        if not isinstance(train, (tuple, list)) or len(train) != 2:
            raise TypeError("train must be a dataset directory or arrays (X, y)")
        tx, ty = _as_split(*train, "train")
        if val is not None:
            if not isinstance(val, (tuple, list)) or len(val) != 2:
                raise TypeError("val must be arrays (X, y)")
            vx, vy = _as_split(*val, "val")
    elif val is not None:
        raise ValueError("val needs train")
    if train is None and resume is None and not options.get("synthetic"):
        raise ValueError("train needs data: a dataset directory, arrays (X, y), or synthetic=N")
    args += _flags(options)

    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable (it gets each epoch's dict), got {type(callback).__name__}")
    if sys.stdout is not None:
        sys.stdout.flush()  # the run prints to the same stdout, from C++
    try:
        status, epochs, engine, stopped = _vitcpp.train([os.fsencode(a) for a in args], tx, ty, vx, vy, callback)
    except KeyboardInterrupt as e:
        # Ctrl-C after the step in progress, with the state written: how to go on.
        if output is not None and getattr(e, "__notes__", None) and hasattr(e, "add_note"):
            e.add_note(f"continue with vitcpp.train(resume={output!r}"
                       + (", train=(X, y)" if tx is not None else "") + (", val=(X, y)" if vx is not None else "")
                       + ")")
        raise
    except _vitcpp.Error as e:
        # The run's hint names its keyword here, not vit train's flag.
        if "(skip_bad_images leaves such files out)" not in str(e):
            raise
        raise _vitcpp.Error(str(e).replace("skip_bad_images leaves", "skip_bad_images=True leaves")) from None
    finally:
        if tmp is not None:
            tmp.cleanup()
    if resume is not None and engine is None and status == 0 and not epochs:
        # A finished run, left as it is: its history and last weights, as the run gave them.
        epochs = _summary_rows(os.path.join(output, "summary.csv"))
        engine = _vitcpp.Engine.load(os.path.join(output, "last.safetensors"), _vitcpp.LoadArgs())
    history = TrainHistory(epochs)
    history.output = output
    history.stopped = stopped
    if engine is not None:
        if isinstance(model, VisionTransformer):
            dtype = model._engine.dtype
            model._replace(engine)
            model._set_dtype(dtype)
            history.model = model
        else:
            history.model = VisionTransformer(engine)
    return history
