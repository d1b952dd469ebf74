"""vitcpp from Python: Vision Transformers on vitcpp's C++ engine, with timm's model API.

    import numpy as np, vitcpp
    model = vitcpp.create_model("local-dir:runs/mnist-seed")   # or a timm / HF checkpoint
    logits = model(np.zeros((1, 1, 28, 28), np.float32))        # numpy in, numpy out

Names and meanings follow timm 1.0 (create_model, forward_features, forward_head,
reset_classifier, set_input_size, pretrained_cfg, data.resolve_model_data_config,
data.create_transform). docs/python.md has the timm <-> vitcpp table.
"""
import atexit
import collections
import errno
import fnmatch
import functools
import json
import operator
import os
import re
import warnings
import tempfile
import threading
import weakref

import numpy as np


def _load_with_short_spinning():
    """Imports the extension with vit's OpenMP setting (apps/vit/main.cpp): threads spin
    briefly between parallel regions (OMP_WAIT_POLICY=ACTIVE GOMP_SPINCOUNT=2000). libgomp's
    default long spin made vitcpp.train 1.5-1.8x slower with another process on the second
    core. libgomp reads the setting once, as it loads: here, unless the environment sets a wait
    policy or a module imported first (torch) loaded it. The environment is then as it was, so
    child processes do not inherit it."""
    try:
        with open("/proc/self/maps") as f:
            loaded = "libgomp" in f.read()
    except OSError:
        loaded = True  # not Linux's /proc: leave it alone
    if loaded or "OMP_WAIT_POLICY" in os.environ:
        from . import _vitcpp as module
        return module
    added = {k: v for k, v in (("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "2000")) if k not in os.environ}
    os.environ.update(added)
    try:
        from . import _vitcpp as module
    finally:
        for k in added:
            del os.environ[k]
    return module


_vitcpp = _load_with_short_spinning()
from ._vitcpp import Error
Error.__module__ = "vitcpp"  # as tracebacks and help() name it (vitcpp.Error, not vitcpp._vitcpp.Error)
Error.__doc__ = ("vitcpp's error (a RuntimeError): a corrupt or unsupported file, an image that does not decode, "
                 "settings that cannot work together. Bad argument values are ValueError or TypeError, missing "
                 "files FileNotFoundError, other file system errors OSError, as Python's own.")
from . import data
from ._train import TrainHistory, train

# Calls still computing on daemon threads end before the interpreter does (python/src/gil.h).
atexit.register(_vitcpp._at_exit)

__all__ = ["Error", "VisionTransformer", "create_model", "list_models", "set_threads", "get_threads", "backend_info",
           "data", "train", "TrainHistory"]
__version__ = _vitcpp.__version__

_DTYPES = {"float32": "fp32", "fp32": "fp32", "bfloat16": "bf16", "bf16": "bf16", "int8": "int8"}


def set_threads(n):
    """Threads for every later call of vitcpp, as `vit --threads N` (n <= 0: the default,
    OMP_NUM_THREADS or else every CPU the process may run on). vitcpp's own count: PyTorch's
    (torch.set_num_threads, which importing torch sets) neither changes it nor is changed.
    At most 4096 (ValueError above)."""
    n = int(n)
    if n > 4096:
        raise ValueError(f"set_threads: {n} is more than vitcpp runs (at most 4096)")
    _vitcpp.set_threads(n)


def get_threads():
    """The threads vitcpp's calls run on."""
    return _vitcpp.threads()


def backend_info():
    """What vitcpp's CPU backend runs on this machine, as `vit info` prints it (PyTorch's
    torch.backends.cpu.get_cpu_capability, and more): "isa", the instruction-set path in use
    ("avx512", "avx2", "neon" or "generic"; VIT_ISA forces one) and "isa_detected", the best
    this CPU runs; "matrix_products", the library of the large fp32 products; "bf16", whether
    dtype="bf16" runs here, and "bf16_native", whether in the CPU's own instructions (AVX512-BF16
    or AMX; without them oneDNN emulates bf16, slower than float32); "int8_product", the int8 kernel
    ("amx": oneDNN on AMX tiles), and "int8_dot_product", whether it sums several byte products
    per instruction (AMX, VNNI, sdot: without, dtype="int8" saves memory more than time);
    "threads", get_threads()."""
    return dict(_vitcpp.backend_info(), threads=get_threads())


def list_models(filter="", module="", pretrained=False, exclude_filters="", name_matches_cfg=False,
                include_tags=None):
    """vitcpp's presets and the timm architecture names it builds, as timm's list_models:
    the 142 of timm 1.0.29's ViT and DeiT architectures vitcpp runs (`vit_*`, `deit*`,
    `flexivit_*`, `eva_*`, SigLIP's, CLIP's, DINOv2's, ...), and vitcpp's own (`mnist-seed`,
    `cifar-seed`, `vit-base-16`, ...). filter: a shell-style pattern or a list of them (any
    matches; "" every name); exclude_filters likewise, names to leave out. pretrained=True
    lists nothing: vitcpp reaches no model hub, its weights come from checkpoint_path.
    include_tags=True: timm's names with each pretrained tag ("vit_small_patch16_224.dino",
    "NAME.untrained" where timm has no weights), as create_model takes them (the tag's class
    count and preprocessing); a filter without a tag matches every tag, as timm's.
    module and name_matches_cfg are taken for timm's signature and change nothing."""
    del module, name_matches_cfg

    def patterns(p, what):
        p = [p] if isinstance(p, str) else list(p) if isinstance(p, (list, tuple, set)) else [p]
        if not all(isinstance(x, str) for x in p):
            raise TypeError(f"list_models: {what} must be a pattern or a list of patterns, got {p!r}")
        return [x for x in p if x]

    keep, drop = patterns(filter, "filter"), patterns(exclude_filters, "exclude_filters")
    if pretrained:
        return []
    names = _known_names()
    if include_tags:
        names = set(_vitcpp.preset_names()) | set(_vitcpp.timm_tagged_names())

        def with_tags(p):  # timm's _expand_filter: "vit_small*" also matches "vit_small*.*"
            return [x for f in p for x in ([f] if "." in f else [f, f + ".*"])]
        keep, drop = with_tags(keep), with_tags(drop)
    # timm's order: natural, vit_base_patch8 before vit_base_patch16.
    return sorted((n for n in names if (not keep or any(fnmatch.fnmatchcase(n, k) for k in keep))
                   and not any(fnmatch.fnmatchcase(n, d) for d in drop)),
                  key=lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n.lower())])


def _size(img_size):
    if img_size is None:
        return 0, 0
    if isinstance(img_size, (int, np.integer)):
        return int(img_size), int(img_size)
    h, w = img_size
    return int(h), int(w)


def _checkpoint_path(name, checkpoint_path):
    """The path a name or checkpoint_path names, or None for a preset / architecture name."""
    if checkpoint_path:
        path = os.fspath(checkpoint_path)
    elif name.startswith("local-dir:"):
        path = name[len("local-dir:"):]
    elif os.sep in name or name.endswith(".safetensors"):
        path = name
    elif name.partition(".")[0] in _known_names() or not os.path.exists(name):
        return None  # a model's name, even where a file or folder of that name is here
    else:
        path = name
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "no checkpoint there (a .safetensors file or a directory)", path)
    return path


def create_model(model_name, pretrained=False, checkpoint_path=None, num_classes=None, img_size=None,
                 global_pool=None, dynamic_img_size=False, dtype=None, threads=None, labels_file=None,
                 seed=42, pos_resample=None, drop_rate=None, drop_path_rate=None, attn_drop_rate=None,
                 proj_drop_rate=None, pos_drop_rate=None, patch_drop_rate=None, **kwargs):
    """A Vision Transformer, as timm.create_model makes one.

    model_name: a vitcpp preset or timm architecture name (random weights, drawn from `seed`
        as timm's init; seed 42 by default, `vit train`'s and vitcpp.train's, so that
        vitcpp.train(create_model(name)) starts where vitcpp.train(name) does), "local-dir:PATH" (timm 1.0's scheme) or a plain path (str or
        os.PathLike): any checkpoint `vit predict --checkpoint` reads (vitcpp, timm, Hugging
        Face, vit-pytorch; a file or a directory; a `vit train` run directory gives its
        best.safetensors).
    pretrained: with a name, the weights must come from checkpoint_path (no model hub here).
    checkpoint_path: the checkpoint for model_name's weights. With a preset or timm name the
        checkpoint must be that model (another width, depth, heads or patch is an error, as in
        timm), and a bare timm state dict (no config.json) takes its heads, activation and
        LayerNorm eps from the name.
    num_classes: a new head of that many classes (0: none, features only, and model(x) gives
        the pooled features, as timm's). A checkpoint's new head starts at zero (the ViT
        paper's fine-tuning, as `vit train --pretrained --num-classes`).
    img_size: int or (H, W): the input size; position embeddings are resampled as timm's
        resample_abs_pos_embed (bicubic, antialiased).
    global_pool: with a name (not a checkpoint, whose pooling is its own): "token", "avg" or "map".
    dynamic_img_size: accept any input size the patches divide (resampled per size; the last 4 sizes are kept).
    dtype: "float32", "bfloat16" (CPUs with AVX-512 bf16 or AMX) or "int8" for the blocks'
        products (int8: weights per output channel, inputs per row at run time). Default: the
        checkpoint's own ("int8" for `vit quantize`'s files), else "float32".
    threads: threads for every call of vitcpp (set_threads: the process's count for vitcpp).
    labels_file: class names, one per line (default: the checkpoint's own).
    pos_resample: how a new size resamples the position embeddings: "timm"
        (resample_abs_pos_embed) or "hf" (transformers' interpolate_pos_encoding); default:
        "hf" for Hugging Face checkpoints, "timm" for the others (`vit --pos-resample`).
    drop_rate, drop_path_rate, attn_drop_rate, proj_drop_rate, pos_drop_rate: timm's
        regularization rates (head dropout, stochastic depth, attention, projection and
        position-embedding dropout), in [0, 1); default: the checkpoint's or preset's own.
        Inference ignores them, as timm's model.eval() does; vitcpp.train(model) trains with
        them (its drop, drop_path and attn_drop options override them), and save_pretrained
        keeps them in config.json. patch_drop_rate (timm's PatchDropout) is not implemented:
        only 0 is taken.
    Other keyword arguments timm takes are refused by name.
    """
    if kwargs:
        raise TypeError(f"create_model() got unexpected keyword arguments {sorted(kwargs)}")
    rates = {"drop_rate": drop_rate, "drop_path_rate": drop_path_rate, "attn_drop_rate": attn_drop_rate,
             "proj_drop_rate": proj_drop_rate, "pos_drop_rate": pos_drop_rate}
    for name, rate in {**rates, "patch_drop_rate": patch_drop_rate}.items():
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating))
                                 or not 0 <= rate < 1):
            raise ValueError(f"{name} must be a rate in [0, 1), got {rate!r}")
    if patch_drop_rate:
        raise ValueError(f"patch_drop_rate={patch_drop_rate!r}: timm's PatchDropout is not implemented in vitcpp "
                         "(0 or None)")
    if dtype is not None and dtype not in _DTYPES:
        raise ValueError(f"dtype must be 'float32', 'bfloat16' or 'int8', got {dtype!r}")
    if num_classes is not None and (not isinstance(num_classes, (int, np.integer)) or num_classes < 0):
        raise ValueError(f"num_classes must be an int >= 0 (0: no head), got {num_classes!r}")
    if img_size is not None and min(_size(img_size)) <= 0:
        raise ValueError(f"img_size must be positive, got {img_size!r}")
    if threads is not None:
        set_threads(threads)
    model_name = os.fspath(model_name)
    current = _deprecated_names().get(model_name)  # timm 0.6's vit_base_patch16_224_in21k
    if current:
        warnings.warn(f"Mapping deprecated model name {model_name} to current {current}.", stacklevel=2)
        model_name = current
    path = _checkpoint_path(model_name, checkpoint_path)
    if path is None and pretrained:
        raise ValueError(f"pretrained=True needs checkpoint_path or 'local-dir:PATH': vitcpp reaches no model hub "
                         f"to fetch {model_name!r}")
    if labels_file is not None and not os.path.exists(labels_file):
        raise FileNotFoundError(errno.ENOENT, "no labels file there", os.fspath(labels_file))
    a = _vitcpp.LoadArgs()
    a.num_classes = -1 if num_classes is None else int(num_classes)
    a.img_h, a.img_w = _size(img_size)
    a.labels_file = os.fsencode(labels_file) if labels_file else ""
    if global_pool == "":  # timm's "no pooling" (a head on every token): not built here
        raise ValueError('global_pool="" (no pooling) is not supported: "token", "avg" or "map"; '
                         "forward_features gives every token")
    a.global_pool = global_pool or ""
    # A seed outside uint64 wrapped or failed in pybind11's words; 1.5 was taken as 1.
    if (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool)
            or not 0 <= int(seed) <= 0xFFFF_FFFF_FFFF_FFFF):
        raise ValueError(f"seed must be an int in [0, 2**64 - 1], got {seed!r}")
    a.seed = int(seed)
    a.pos_resample = pos_resample or ""
    for name, rate in rates.items():
        if rate is not None:
            setattr(a, name, float(rate))
    if path is None or checkpoint_path:  # a name: timm's "architecture.pretrained_tag" (the tag picks weights)
        arch = model_name.partition(".")[0]
        if arch not in _known_names():
            arch = model_name
    if path is not None:
        if checkpoint_path:
            if arch not in _known_names():  # timm's error: a name that is nothing is not ignored
                if _vitcpp.is_timm_architecture(arch):
                    _vitcpp.preset_config_json(arch)  # one of timm's that vitcpp does not build: says why
                raise Error(f"Unknown model ({model_name}): vitcpp.list_models() lists the names")
            a.model_name = model_name  # the file must be that model (a bare state dict takes its and its tag's settings)
        engine = _vitcpp.Engine.load(os.fsencode(path), a)  # bytes: a name that is not UTF-8 too
    else:
        engine = _vitcpp.Engine.create(model_name, a)  # a tag's class count and preprocessing too
    model = VisionTransformer(engine, dynamic_img_size=dynamic_img_size)
    # A checkpoint's pooling is its own: the same value is taken, as timm takes it (it was
    # refused whatever its value); another is refused (timm builds another head around the
    # weights, with a new fc_norm in place of norm).
    if path is not None and global_pool is not None and global_pool != model.global_pool:
        raise ValueError(f"global_pool={global_pool!r}: the checkpoint pools {model.global_pool!r}, and its pooling "
                         f"is its own here (it sets which norms and tokens the weights have)")
    # The checkpoint's own precision unless asked: vit quantize's int8 files run in int8, as
    # `vit predict` runs them.
    model._set_dtype(_DTYPES[dtype] if dtype is not None else engine.stored_dtype)
    if model._engine.dtype == "bf16" and _vitcpp._bf16_emulated():
        warnings.warn(f"dtype='bfloat16': {_vitcpp._bf16_emulated()}", RuntimeWarning, stacklevel=2)
    return model


@functools.lru_cache(maxsize=None)
def _deprecated_names():
    return _vitcpp.deprecated_timm_names()


def _known_names():
    return set(_vitcpp.preset_names()) | set(_vitcpp.timm_names())


def _as_images(x, what="images"):
    """x as a float32 C-contiguous array, read in place where it already is one: numpy
    arrays, anything with the buffer protocol or __array__ (CPU torch tensors), or
    __dlpack__. Integer, bool and complex inputs are refused: images here are floats. A torch
    tensor is read detached (vitcpp computes no gradients, as under torch.no_grad()), and
    bfloat16 as float32 (numpy has none): both were refused in torch's words."""
    if _is_torch(x) and hasattr(x, "detach"):
        if x.device.type != "cpu":
            raise TypeError(f"{what} must be on the CPU (tensor.cpu()), got a tensor on {x.device}")
        x = x.detach()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__dlpack__") and not hasattr(x, "__array__"):
            x = np.from_dlpack(x)
        else:
            try:
                x = np.asarray(x)
            except (TypeError, ValueError, RuntimeError) as e:
                raise TypeError(f"{what} must be an array of floats (numpy, a CPU tensor, ...): {e}") from None
    if x.dtype.kind != "f":
        raise TypeError(f"{what} must be floating point (float32 read in place; float16/64 and bfloat16 "
                        f"converted), got dtype {x.dtype}")
    return np.ascontiguousarray(x, dtype=np.float32)


def _is_float_batch(x):
    """Whether x is already a batch of preprocessed images: a 4-D float array or tensor."""
    dtype, shape = getattr(x, "dtype", None), getattr(x, "shape", None)
    if dtype is None or shape is None or len(shape) != 4:
        return False
    return getattr(dtype, "is_floating_point", None) is True or (isinstance(dtype, np.dtype) and dtype.kind == "f")


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


_IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _as_input(x, out):
    """out (an array, or lists and tuples of them) as the type x came in: torch tensors that
    share the arrays' memory when x is a torch tensor (so code written for timm goes on with
    torch ops: softmax, topk), else the numpy arrays themselves."""
    if not _is_torch(x):
        return out
    import torch

    def wrap(v):
        if isinstance(v, np.ndarray):
            return torch.from_numpy(v)
        if isinstance(v, (list, tuple)):
            return type(v)(wrap(u) for u in v)
        return v
    return wrap(out)


def _mask_array(attn_mask):
    """timm's attn_mask as a numpy array (torch tensors too: bool stays bool)."""
    if _is_torch(attn_mask) and hasattr(attn_mask, "detach"):
        attn_mask = attn_mask.detach().cpu()
        if str(attn_mask.dtype) == "torch.bfloat16":
            attn_mask = attn_mask.float()
        attn_mask = attn_mask.numpy()
    m = np.asarray(attn_mask)
    if m.dtype != bool and not np.issubdtype(m.dtype, np.floating):
        raise TypeError(f"attn_mask must be bool (True: attend) or float (added to the scores), got {m.dtype}")
    return m


# Every model, for the fork handler below: a lock held by another thread when the process
# forked (a resample for dynamic_img_size, tens of ms without the GIL) stays held in the
# child, whose next call at a new size waited for it forever. The child makes them anew.
_models = weakref.WeakSet()


def _renew_locks_in_child():
    for m in list(_models):
        m._resize_lock = threading.Lock()


os.register_at_fork(after_in_child=_renew_locks_in_child)


class VisionTransformer:
    """A vitcpp model with timm's VisionTransformer API (inference). Call it on images
    [N, C, H, W] (float32 numpy, or anything numpy reads: a CPU torch tensor) for logits
    [N, num_classes]. Calls release the GIL; two threads may share one model (one call at a
    time runs on it). Made by create_model (or vitcpp.train), not by this class's constructor."""

    # dynamic_img_size: the engines of the last sizes used that are kept (each a copy of the
    # weights: 40 sizes of ViT-Ti held 900 MB); another size is resampled again.
    _RESIZED_KEPT = 4

    def __init__(self, engine, dynamic_img_size=False):
        if not isinstance(engine, _vitcpp.Engine):
            raise TypeError("VisionTransformer is made by vitcpp.create_model(name or checkpoint, ...), "
                            f"not by its constructor (got {type(engine).__name__})")
        self._engine = engine
        self._cfg = json.loads(engine.config_json())
        self.dynamic_img_size = bool(dynamic_img_size)
        self._resized = {}  # (H, W) -> engine, for dynamic_img_size, oldest use first
        self._resize_lock = threading.Lock()
        _models.add(self)

    # ---- what the model is
    @property
    def num_classes(self):
        """Classes of the head (0: none; the model gives pooled features)."""
        return self._cfg["num_classes"]

    @property
    def num_features(self):
        """Width of the pooled features (timm's num_features = embed_dim)."""
        return self._cfg["embed_dim"]

    embed_dim = num_features

    @property
    def num_prefix_tokens(self):
        """Tokens before the patches: class, distillation and register tokens (timm's)."""
        c = self._cfg
        return int(c.get("class_token", True)) + int(c.get("dist_token", False)) + c.get("reg_tokens", 0)

    @property
    def global_pool(self):
        """How the head's input is pooled: "token" (class token), "avg" or "map" (timm's)."""
        return self._cfg["global_pool"]

    @property
    def config(self):
        """vitcpp's config of the model (a dict, as config.json holds it)."""
        return dict(self._cfg)

    @property
    def class_names(self):
        """The classes' names from the checkpoint or labels_file ([] when it has none)."""
        return list(self._engine.class_names)

    @property
    def checkpoint_format(self):
        """Where the weights came from: "vitcpp", "timm", "hf" or "vit-pytorch"."""
        return self._engine.format

    @property
    def notes(self):
        """What the loader adapted or skipped, in words."""
        return list(self._engine.notes)

    @property
    def dtype(self):
        """The precision of the blocks' products: "float32", "bfloat16" or "int8"."""
        return {"bf16": "bfloat16", "int8": "int8"}.get(self._engine.dtype, "float32")

    @property
    def pretrained_cfg(self):
        """timm's pretrained_cfg: input_size, mean, std, interpolation, crop_pct, crop_mode,
        num_classes, and label_names when the checkpoint has them."""
        c = self._cfg
        h, w = c["img_size"]
        cfg = {"input_size": (c["in_chans"], h, w), "mean": tuple(c["mean"]), "std": tuple(c["std"]),
               "interpolation": c["interpolation"], "crop_pct": c["crop_pct"], "crop_mode": c["crop_mode"],
               "num_classes": c["num_classes"], "first_conv": "patch_embed.proj", "classifier": "head"}
        if self.class_names:
            cfg["label_names"] = self.class_names
        return cfg

    default_cfg = pretrained_cfg

    def num_params(self):
        """The number of parameters (every tensor of the state dict)."""
        return self._engine.num_params()

    def state_dict(self):
        """Every parameter by timm's name, as float32 numpy arrays (copies)."""
        return self._engine.params()

    def load_state_dict(self, state_dict, strict=True):
        """Sets the parameters from a dict of arrays or tensors by timm's name (a
        `torch.nn.DataParallel` "module." prefix is dropped, as timm's loader drops it), as
        torch's Module.load_state_dict: strict=True refuses missing and unexpected names, and
        a shape that differs is always an error (RuntimeError, with every problem listed).
        Returns (missing_keys, unexpected_keys). The model keeps its dtype."""
        current = self._engine.param_shapes()  # {name: shape}: no copy of the weights
        given = {}
        for name, value in state_dict.items():
            name = name[len("module."):] if name.startswith("module.") else name
            if _is_torch(value):
                value = value.detach().cpu().float().numpy()
            given[name] = np.asarray(value)
        missing = [n for n in current if n not in given]
        unexpected = [n for n in given if n not in current]
        problems = [f"size mismatch for {n}: copying a param with shape {tuple(given[n].shape)}, "
                    f"the shape in the current model is {current[n]}"
                    for n in current if n in given and tuple(given[n].shape) != current[n]]
        if strict and missing:
            problems.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{n}"' for n in missing))
        if strict and unexpected:
            problems.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{n}"' for n in unexpected))
        if problems:
            raise RuntimeError("Error(s) in loading state_dict for VisionTransformer:\n\t" + "\n\t".join(problems))
        tensors = {}  # the missing ones stay as they are
        for n, t in given.items():
            if n not in current:
                continue
            if t.dtype.kind != "f":
                raise ValueError(f"{n}: parameters must be finite floats, got dtype {t.dtype}")
            with np.errstate(over="ignore"):
                t = np.ascontiguousarray(t, dtype=np.float32)  # as the model holds them: 1e300 is inf
            if not np.all(np.isfinite(t)):
                raise ValueError(f"{n}: parameters must be finite floats, got NaN or infinite values "
                                 f"(as float32)")
            tensors[n] = t
        # Copied into the model in place, as torch's (a float32 C-contiguous array is read as
        # it is); the resized engines of dynamic_img_size held the old weights.
        with self._resize_lock:
            self._engine.set_params(tensors)
            self._resized = {}
        return _IncompatibleKeys(missing, unexpected)

    # ---- pickling: multiprocessing's spawn and forkserver, ProcessPoolExecutor, copy.deepcopy
    def __getstate__(self):
        """The weights as a vitcpp checkpoint's files (bit for bit), and what the model was
        made with: dtype, dynamic_img_size, where it came from."""
        with tempfile.TemporaryDirectory() as d:
            self._engine.save(d, "vitcpp", fp32=True)  # an int8 model's kept fp32 weights too
            files = {}
            for name in os.listdir(d):
                with open(os.path.join(d, name), "rb") as f:
                    files[name] = f.read()
        e = self._engine
        return {"files": files, "dtype": e.dtype, "dynamic_img_size": self.dynamic_img_size,
                "origin": (e.format, e.pos_resample, list(e.notes))}

    def __deepcopy__(self, memo):
        """A model of its own, at one copy of the weights (pickling's way took three)."""
        other = VisionTransformer(self._engine.clone(), self.dynamic_img_size)
        memo[id(self)] = other
        return other

    def __setstate__(self, state):
        with tempfile.TemporaryDirectory() as d:
            for name, blob in state["files"].items():
                with open(os.path.join(d, name), "wb") as f:
                    f.write(blob)
            engine = _vitcpp.Engine.load(d, _vitcpp.LoadArgs())
        if state["dtype"] != "fp32":
            engine.set_dtype(state["dtype"])
        engine.set_origin(*state["origin"])
        self.__init__(engine, state["dynamic_img_size"])

    def __repr__(self):
        c = self._cfg
        return (f"VisionTransformer(embed_dim={c['embed_dim']}, depth={c['depth']}, num_heads={c['num_heads']}, "
                f"img_size={tuple(c['img_size'])}, patch_size={tuple(c['patch_size'])}, "
                f"in_chans={c['in_chans']}, num_classes={c['num_classes']}, global_pool={c['global_pool']!r}, "
                f"dtype={self.dtype!r}" + (", dynamic_img_size=True" if self.dynamic_img_size else "")
                + f", checkpoint_format={self.checkpoint_format!r})")

    # ---- the forward passes
    def _engine_for(self, x):
        """The engine for images x [N, C, H, W]: the model's, or with dynamic_img_size one
        resampled to x's size."""
        c = self._cfg
        if not self.dynamic_img_size or x.ndim != 4 or (x.shape[2], x.shape[3]) == tuple(c["img_size"]):
            return self._engine  # which says what it takes when x does not fit
        size = (x.shape[2], x.shape[3])
        ph, pw = c["patch_size"]
        if size[0] % ph or size[1] % pw:  # timm's PatchEmbed with dynamic_img_size refuses it too
            raise ValueError(f"input size {size} is not divisible by the patch size {(ph, pw)}")
        with self._resize_lock:
            engine = self._resized.pop(size, None) or self._engine.resized(*size)
            self._resized[size] = engine  # the most recent last
            while len(self._resized) > self._RESIZED_KEPT:  # each holds a copy of the weights
                self._resized.pop(next(iter(self._resized)))
            return engine

    def _patch_mask(self, attn_mask, is_causal, x):
        """timm 1.0's attn_mask for images x as vitcpp's patch mask uint8 [N, patches] (1: the
        attention sees the patch), or None. timm adds it to every block's attention scores
        (bool: True attends, False is -inf; float: added), broadcast to [N, heads, T, T]. vitcpp
        runs the masks that hide keys: the same for every query and head, 0 or -inf (False or
        True), the prefix tokens seen. Others are refused by name, never approximated."""
        if is_causal:
            raise NotImplementedError("is_causal=True: vitcpp's attention masks hide patches from every token "
                                      "(a key mask); a causal mask is not one")
        if attn_mask is None:
            return None
        m = _mask_array(attn_mask)
        n, (ph, pw), pre, heads = x.shape[0], self._cfg["patch_size"], self.num_prefix_tokens, self._cfg["num_heads"]
        t = pre + (x.shape[2] // ph) * (x.shape[3] // pw)
        want = f"[N, heads, T, T] with N={n}, heads={heads}, T={t} (or broadcast to it)"
        if not 1 <= m.ndim <= 4:
            raise ValueError(f"attn_mask must broadcast to {want}, got shape {m.shape}")
        m = m.reshape((1,) * (4 - m.ndim) + m.shape)
        if m.shape[0] not in (1, n) or m.shape[1] not in (1, heads) or m.shape[2] not in (1, t) \
                or m.shape[3] != t:
            raise ValueError(f"attn_mask must broadcast to {want}, got shape {np.asarray(attn_mask).shape}")
        if m.dtype == bool:
            seen = m
        else:
            if not np.all((m == 0) | (m == -np.inf)):
                raise NotImplementedError("attn_mask: vitcpp takes additive masks of 0 (attend) and -inf (hidden); "
                                          "other biases are not supported")
            seen = m == 0
        keys = seen[:, :1, :1, :]
        if not np.array_equal(np.broadcast_to(keys, seen.shape), seen):
            raise NotImplementedError("attn_mask: vitcpp's masks hide patches from every query and head alike (a key "
                                      "mask, [N, 1, 1, T]); this one differs between queries or heads")
        keys = np.broadcast_to(keys[:, 0, 0, :], (n, t))
        if not keys[:, :pre].all():
            raise NotImplementedError(f"attn_mask hides a prefix token (the first {pre}: class, distillation, "
                                      "register): vitcpp's masks hide patches alone")
        return np.ascontiguousarray(keys[:, pre:], dtype=np.uint8)

    def forward(self, x, attn_mask=None, is_causal=False):
        """Logits [N, num_classes] of images x [N, C, H, W] (a torch tensor for a torch tensor).
        A model without a head (num_classes=0) gives the pooled features [N, num_features], as
        timm's head is then the identity. attn_mask: timm 1.0's, a mask that hides patches
        from the attention of every block (bool [N, 1, 1, T]: False hides; or float 0 / -inf;
        any shape that broadcasts to [N, heads, T, T] and is the same for every query and
        head); as timm's, the pooling then reads every patch (forward_head on
        forward_features' tokens). is_causal=True is refused."""
        if attn_mask is not None or is_causal:
            return self.forward_head(self.forward_features(x, attn_mask=attn_mask, is_causal=is_causal))
        a = _as_images(x)
        if self.num_classes == 0:
            return self.forward_pooled(x)
        return _as_input(x, self._engine_for(a).logits(a))

    __call__ = forward

    def forward_features(self, x, attn_mask=None, is_causal=False):
        """Every token after the final norm, [N, T, embed_dim] (timm's forward_features; the
        class and register tokens first). attn_mask and is_causal as in forward."""
        a = _as_images(x)
        mask = self._patch_mask(attn_mask, is_causal, a)
        return _as_input(x, self._engine_for(a).features(a, False, True, mask)[1])

    def forward_head(self, x, pre_logits=False):
        """Pooling, fc_norm and the head on forward_features' tokens [N, T, D] (timm's
        forward_head); pre_logits=True gives the pooled vector [N, D]."""
        from ._head import forward_head
        return _as_input(x, forward_head(self, _as_images(x, "tokens"), pre_logits))

    def forward_intermediates(self, x, indices=None, return_prefix_tokens=False, norm=False, stop_early=False,
                              output_fmt="NCHW", intermediates_only=False, output_dict=False, attn_mask=None,
                              is_causal=False):
        """timm 1.0's forward_intermediates: the residual stream after the blocks `indices` names
        (None: all; an int n: the last n; a list: those, negative from the end), in block order.
        norm=True applies the final norm to each. The prefix tokens are split off: output_fmt
        "NCHW" gives [N, D, grid_h, grid_w] each, "NLC" [N, patches, D]; return_prefix_tokens
        pairs each with its prefix tokens [N, prefix, D]. Returns (forward_features(x),
        intermediates), or the intermediates alone with intermediates_only; output_dict=True
        gives timm's dict instead ('image_intermediates', 'image_intermediates_prefix' with
        return_prefix_tokens, 'image_features' unless intermediates_only). stop_early is
        accepted and changes nothing (the same values either way); attn_mask and is_causal as
        in forward."""
        if output_fmt not in ("NCHW", "NLC"):
            raise ValueError(f"output_fmt must be 'NCHW' or 'NLC', got {output_fmt!r}")
        depth = self._cfg["depth"]
        if indices is None:
            take = list(range(depth))
        elif isinstance(indices, (int, np.integer)):
            if not 0 < indices <= depth:
                raise ValueError(f"indices={indices}: the model has {depth} blocks")
            take = list(range(depth - int(indices), depth))
        else:
            take = [depth + int(i) if i < 0 else int(i) for i in indices]
        if any(not 0 <= i < depth for i in take):
            raise ValueError(f"indices {list(indices)} out of range: the model has {depth} blocks")
        take = sorted(set(take))  # timm takes them as the blocks run
        images, x = x, _as_images(x)
        blocks, final = self._engine_for(x).intermediates(x, take, self._patch_mask(attn_mask, is_causal, x))
        from ._head import final_norm
        out = [final_norm(self, y) if norm else y for y in blocks]
        pre = self.num_prefix_tokens
        prefix = [y[:, :pre] for y in out]
        out = [y[:, pre:] for y in out]
        if output_fmt == "NCHW":
            ph, pw = self._cfg["patch_size"]
            gh, gw = x.shape[2] // ph, x.shape[3] // pw
            out = [np.ascontiguousarray(y.reshape(y.shape[0], gh, gw, y.shape[2]).transpose(0, 3, 1, 2)) for y in out]
        if output_dict:
            result = {"image_intermediates": out}
            if return_prefix_tokens and pre:
                result["image_intermediates_prefix"] = prefix
            if not intermediates_only:
                result["image_features"] = final
            return {k: _as_input(images, v) for k, v in result.items()}
        if return_prefix_tokens and pre:
            out = list(zip(out, prefix))
        return _as_input(images, out if intermediates_only else (final, out))

    def forward_pooled(self, x):
        """The pooled, normed vector the head reads, [N, D] (timm's
        forward_head(forward_features(x), pre_logits=True), in one pass)."""
        a = _as_images(x)
        return _as_input(x, self._engine_for(a).features(a, True, False)[0])

    def predict(self, images, topk=5):
        """The top-k classes of each image, best first: lists of (index, probability, label),
        as `vit predict` prints them. images: paths, PNG/JPEG bytes, uint8 [H, W, C] arrays,
        PIL images, or already preprocessed float images [N, C, H, W]."""
        if isinstance(topk, bool) or not isinstance(topk, (int, np.integer)) or topk < 1:
            raise ValueError(f"topk must be a positive int, got {topk!r}")
        if self.num_classes == 0:
            raise ValueError("predict needs a classifier head; the model has none (num_classes=0)")
        if _is_float_batch(images):
            x = images
        else:
            if _is_torch(images):  # a uint8 image tensor reads as its array (iterated, it was rows)
                images = images.detach().cpu().numpy()
            if isinstance(images, (str, bytes, os.PathLike, np.ndarray)) or hasattr(images, "convert"):
                images = [images]
            images = list(images)
            if not images:
                return []  # as an empty float batch
            t = data.create_transform(**data.resolve_model_data_config(self))
            x = np.stack([t.numpy(im) for im in images])
        logits = np.asarray(self.forward(x))
        # Without class names, an index's label is its number, as `vit predict` prints it.
        names = self.class_names or [str(k) for k in range(self.num_classes)]
        return [_vitcpp.top_k(row, int(topk), names) for row in logits]

    def attention_maps(self, x, method=None, layer=-1, head=None):
        """Where the model looks, per image [N, grid_h, grid_w], as `vit attention` draws it:
        method "cls" (the class token's attention in block `layer`), "rollout" (attention
        rollout through blocks 0..layer), "dist" (DeiT's distillation token) or "pool" (the
        attention pool's query; the default for such models). layer: a block, -1 the last;
        head: None (the heads' mean) or an index."""
        given, x = x, _as_images(x)
        method = method or ("pool" if self.global_pool == "map" else "cls")
        # Python's errors in Python's words (they were vitcpp.Error in the CLI's: "--method pool").
        if method not in ("cls", "rollout", "dist", "pool"):
            raise ValueError(f"method={method!r}: one of 'cls', 'rollout', 'dist' (distilled models) or 'pool' "
                             "(models with the attention pool)")
        if method == "dist" and not self._cfg.get("dist_token"):
            raise ValueError("method='dist': the model has no distillation token; 'cls' or 'rollout'")
        if method == "pool" and self.global_pool != "map":
            raise ValueError(f"method='pool': the model has no attention pool (global_pool "
                             f"{self.global_pool!r}); 'cls' or 'rollout'")
        depth, heads = self._cfg["depth"], self._cfg["num_heads"]
        if isinstance(layer, str):
            raise TypeError("layer is an int (vit attention's --layer all is one call a block: "
                            "[model.attention_maps(x, layer=i) for i in range(depth)])")
        if isinstance(head, str):
            raise TypeError("head is an int, or None for the heads' mean (vit attention's --head mean)")
        try:
            layer, head = operator.index(layer), None if head is None else operator.index(head)
        except TypeError:
            raise TypeError(f"layer and head are ints, got layer={layer!r}, head={head!r}") from None
        if not -depth <= int(layer) < depth:
            raise ValueError(f"layer={layer}: the model has {depth} blocks (0 to {depth - 1}, negative from the end)")
        if head is not None and not -heads <= int(head) < heads:
            raise ValueError(f"head={head}: the model has {heads} heads (0 to {heads - 1}, negative from the end; "
                             "None: their mean)")
        return _as_input(given, self._engine_for(x).maps(x, method, int(layer) % depth,
                                                         -1 if head is None else int(head) % heads))

    # ---- torch.nn.Module's mode and device calls, for code written for timm. A vitcpp model
    # infers, on the CPU, from float inputs: these change nothing, or say why they cannot.
    def eval(self):
        """The model (always in eval mode: no dropout, no drop path)."""
        return self

    def train(self, mode=True):
        """train(False) is eval(); a vitcpp model does not train in place by calls:
        vitcpp.train(model, ...) trains it."""
        if mode:
            raise RuntimeError("a vitcpp model infers only; vitcpp.train(model, train=..., ...) trains it "
                               "(vit train's options, the weights updated in place)")
        return self

    def requires_grad_(self, requires_grad=True):
        """requires_grad_(False) changes nothing (no gradients here); True is refused."""
        if requires_grad:
            raise RuntimeError("a vitcpp model gives no gradients; vitcpp.train trains it")
        return self

    def to(self, *args, **kwargs):
        """to("cpu"), to(torch.device("cpu")), to(torch.float32): the model as it is. Other
        devices and dtypes are refused (create_model's dtype= sets the products' precision)."""
        for a in list(args) + list(kwargs.values()):
            if a is None or isinstance(a, bool) or str(a).split(":")[0] in ("cpu", "torch.float32", "float32"):
                continue
            raise ValueError(f"to({a!r}): a vitcpp model runs on the CPU from float32 inputs; for bf16 or int8 "
                             "products give create_model dtype='bfloat16' or 'int8'")
        return self

    def cpu(self):
        """The model as it is (it runs on the CPU)."""
        return self

    def float(self):
        """The model as it is: its inputs and outputs are float32 whatever its dtype."""
        return self

    def cuda(self, device=None):
        """Refused: vitcpp runs on the CPU (no CUDA build yet)."""
        raise RuntimeError("cuda(): a vitcpp model runs on the CPU (there is no CUDA build yet)")

    def half(self):
        """Refused: there are no fp16 products; create_model's dtype='bfloat16' or 'int8' give
        lower precision."""
        raise RuntimeError("half(): vitcpp has no float16 products; create_model(..., dtype='bfloat16') "
                           "(CPUs with AVX-512 bf16) or dtype='int8' give lower precision")

    def bfloat16(self):
        """Refused: a model's precision is set when it is made, by create_model's
        dtype='bfloat16' (its inputs and outputs stay float32)."""
        raise RuntimeError("bfloat16(): give create_model(..., dtype='bfloat16') for bf16 products (inputs and "
                           "outputs stay float32)")

    # ---- changing the model
    def _set_dtype(self, dtype):
        with self._resize_lock:  # the resized engines were made in the old dtype
            self._engine.set_dtype(dtype)
            self._resized = {}

    def reset_classifier(self, num_classes, global_pool=None):
        """A new head of num_classes (0: none), zero-initialized as create_model(checkpoint,
        num_classes=K) makes it (the ViT paper's fine-tuning); the rest of the weights kept."""
        if global_pool is not None and global_pool != self.global_pool:
            raise ValueError(f"global_pool is the model's own ({self.global_pool!r}); it cannot change here")
        self._replace(self._engine.with_head(int(num_classes), 0))

    def set_input_size(self, img_size=None, patch_size=None):
        """A new input size: position embeddings resampled as timm's set_input_size does."""
        if patch_size is not None and tuple(_size(patch_size)) != tuple(self._cfg["patch_size"]):
            raise ValueError("patch_size cannot change: vitcpp does not resample the patch embedding")
        if img_size is not None:
            self._replace(self._engine.resized(*_size(img_size)))

    def _replace(self, engine):
        # Under the resize lock: a resize under way (another thread's forward at a new size)
        # builds from the old engine and caches it; the cache is cleared after it, not before
        # (reset_classifier's new head was lost at that size).
        with self._resize_lock:
            self._engine = engine
            self._cfg = json.loads(engine.config_json())
            self._resized = {}

    # ---- writing it out
    def save_pretrained(self, save_directory, format="timm"):
        """Writes a directory timm ("timm": model.safetensors + config.json, for
        timm.create_model("local-dir:DIR")), transformers ("hf") or vitcpp ("vitcpp") loads.
        Returns the notes on what the other library sees differently, each also given as a
        UserWarning (as `vit export` prints them)."""
        notes = list(self._engine.save(os.fsencode(save_directory), format))
        for note in notes:
            warnings.warn(f"save_pretrained: {note}", stacklevel=2)
        return notes

    def export_onnx(self, path, dtype=None):
        """Writes the model as ONNX (opset 17, dynamic batch; `vit export --format onnx`):
        dtype "float32" or "int8" (the blocks' products as onnxruntime's quantize_dynamic
        writes them); None: int8 for an int8 model, as `vit export` of a `vit quantize` file,
        else float32 (a bfloat16 model's graph is float32)."""
        if dtype is None:
            dtype = "int8" if self._engine.dtype == "int8" else "float32"
        if dtype not in ("float32", "int8"):
            raise ValueError(f"export_onnx: dtype must be 'float32' or 'int8', got {dtype!r}")
        if self.dynamic_img_size:
            c = self._cfg
            warnings.warn(f"export_onnx: the graph takes {c['img_size'][0]}x{c['img_size'][1]} images only "
                          "(dynamic_img_size resamples per size in vitcpp; an ONNX graph has one position "
                          "table)", stacklevel=2)
        self._engine.export_onnx(os.fsencode(path), dtype == "int8")


def __dir__():
    """The public names (tab completion lists them, not the modules imported here)."""
    return sorted(set(__all__) | {"__version__"})
