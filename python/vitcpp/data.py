"""timm's data-config helpers: resolve_model_data_config(model) and create_transform(**cfg).
The transform gives the float32 [C, H, W] array `vit predict` feeds the model, bit for bit:
the same decoder (Pillow's pixels), resize filters, center crop and normalization."""
import os
import sys

import numpy as np

from . import _vitcpp

__all__ = ["resolve_model_data_config", "resolve_data_config", "create_transform", "Transform"]


# timm.data.constants
IMAGENET_DEFAULT_MEAN = (0.485, 0.456, 0.406)
IMAGENET_DEFAULT_STD = (0.229, 0.224, 0.225)
DEFAULT_CROP_PCT = 0.875
DEFAULT_CROP_MODE = "center"


def resolve_model_data_config(model, args=None, pretrained_cfg=None, use_test_size=False, verbose=False):
    """The model's eval preprocessing as timm names it: input_size (C, H, W), interpolation,
    mean, std, crop_pct, crop_mode. args may override any of them."""
    return resolve_data_config(args, pretrained_cfg, model, use_test_size, verbose)


def _per_channel(values, in_chans, name):
    values = tuple(values)
    if len(values) == 1:
        return values * in_chans
    if len(values) != in_chans:
        raise ValueError(f"resolve_data_config: {name} has {len(values)} values for {in_chans} channels")
    return values


def resolve_data_config(args=None, pretrained_cfg=None, model=None, use_test_size=False, verbose=False):
    """timm's resolve_data_config, rule for rule: args (a dict, as timm's scripts pass
    vars(args)) first, then pretrained_cfg (or the model's), then timm's defaults (3 x 224 x 224,
    bicubic, ImageNet's mean and std, crop_pct 0.875, center)."""
    if model is not None and pretrained_cfg is not None:
        raise ValueError("resolve_data_config takes model= or pretrained_cfg=, not both")
    args = args or {}
    pretrained_cfg = pretrained_cfg or {}
    if not pretrained_cfg and model is not None and hasattr(model, "pretrained_cfg"):
        pretrained_cfg = model.pretrained_cfg
    cfg = {}
    in_chans = 3
    if args.get("in_chans") is not None:
        in_chans = args["in_chans"]
    elif args.get("chans") is not None:
        in_chans = args["chans"]
    input_size = (in_chans, 224, 224)
    if args.get("input_size") is not None:
        if not isinstance(args["input_size"], (tuple, list)) or len(args["input_size"]) != 3:
            raise ValueError(f"resolve_data_config: input_size must be (C, H, W), got {args['input_size']!r}")
        input_size = tuple(args["input_size"])
        in_chans = input_size[0]
    elif args.get("img_size") is not None:
        if not isinstance(args["img_size"], int):
            raise ValueError(f"resolve_data_config: img_size must be an int, got {args['img_size']!r}")
        input_size = (in_chans, args["img_size"], args["img_size"])
    elif use_test_size and pretrained_cfg.get("test_input_size") is not None:
        input_size = pretrained_cfg["test_input_size"]
    elif pretrained_cfg.get("input_size") is not None:
        input_size = pretrained_cfg["input_size"]
    cfg["input_size"] = tuple(input_size)
    cfg["interpolation"] = args.get("interpolation") or pretrained_cfg.get("interpolation") or "bicubic"
    for key, default in (("mean", IMAGENET_DEFAULT_MEAN), ("std", IMAGENET_DEFAULT_STD)):
        if args.get(key) is not None:
            cfg[key] = _per_channel(args[key], in_chans, key)
        else:
            cfg[key] = tuple(pretrained_cfg.get(key) or default)
    crop_pct = DEFAULT_CROP_PCT
    if args.get("crop_pct"):
        crop_pct = args["crop_pct"]
    elif use_test_size and pretrained_cfg.get("test_crop_pct"):
        crop_pct = pretrained_cfg["test_crop_pct"]
    elif pretrained_cfg.get("crop_pct"):
        crop_pct = pretrained_cfg["crop_pct"]
    cfg["crop_pct"] = crop_pct
    cfg["crop_mode"] = args.get("crop_mode") or pretrained_cfg.get("crop_mode") or DEFAULT_CROP_MODE
    if verbose:
        print("Data processing configuration for current model + dataset:")
        for k, v in cfg.items():
            print(f"\t{k}: {v}")
    return cfg


class Transform:
    """A callable: an image (a path, PNG/JPEG bytes, a uint8 [H, W] or [H, W, C] array, or a
    PIL image) -> float32 [C, H, W]: a torch.Tensor when the program has imported torch (as
    timm's transform gives one), else a numpy array. numpy(image) gives the array always."""

    def __init__(self, spec, cfg):
        self._spec = spec
        self.cfg = cfg

    def __repr__(self):
        return f"vitcpp.data.Transform({self.cfg})"

    def __reduce__(self):  # pickled by its settings (DataLoader workers started by spawn)
        return _rebuild, (self.cfg,)

    def __call__(self, image):
        """The image as the model's input, float32 [C, H, W]: a torch.Tensor when the program
        has imported torch, else a numpy array."""
        a = self.numpy(image)
        torch = sys.modules.get("torch")
        return torch.from_numpy(a) if torch is not None and hasattr(torch, "from_numpy") else a

    def numpy(self, image):
        """The model's input for one image as a float32 numpy array [C, H, W]."""
        if isinstance(image, (str, os.PathLike)):
            path = os.fspath(image)
            if not os.path.exists(path):
                raise FileNotFoundError(f"no image at {path!r}")
            return _vitcpp.preprocess_file(self._spec, os.fsencode(path))  # bytes: any file name
        if isinstance(image, (bytes, bytearray, memoryview)):
            return _vitcpp.preprocess_bytes(self._spec, bytes(image))
        if hasattr(image, "convert") and hasattr(image, "mode"):  # a PIL image: its pixels as they are
            if image.mode not in ("L", "RGB", "RGBA"):
                image = image.convert("RGB")
            image = np.asarray(image)
        a = np.asarray(image)
        if a.dtype != np.uint8:
            raise TypeError(f"an image array must be uint8 [H, W] or [H, W, C], got dtype {a.dtype}")
        if a.ndim == 2:
            a = a[:, :, None]
        if a.ndim != 3:
            raise ValueError(f"an image array must be [H, W] or [H, W, C], got shape {a.shape}")
        return _vitcpp.preprocess_pixels(self._spec, np.ascontiguousarray(a))


# create_transform's training arguments: timm ignores them when is_training is False.
_TRAIN_ONLY = {"no_aug", "train_crop_mode", "scale", "ratio", "hflip", "vflip", "color_jitter", "color_jitter_prob",
               "grayscale_prob", "gaussian_blur_prob", "auto_augment", "re_prob", "re_mode", "re_count",
               "re_num_splits", "patch_size", "max_seq_len"}
# Arguments that change timm's eval transform, with the value that changes nothing.
_UNSUPPORTED = {"crop_border_pixels": None, "tf_preprocessing": False, "use_prefetcher": False, "normalize": True,
                "separate": False, "naflex": False, "patchify": False}


def create_transform(input_size=224, is_training=False, interpolation="bilinear", mean=IMAGENET_DEFAULT_MEAN,
                     std=IMAGENET_DEFAULT_STD, crop_pct=None, crop_mode=None, **kwargs):
    """timm's create_transform for evaluation, with timm's defaults: resize (Pillow's
    filters) to size / crop_pct (None: 0.875) and center crop ("center", None) or resize both
    sides ("squash"), then normalize. Training augmentation is `vit train`'s (its flags are
    timm's); is_training=True is refused here, and so is what vitcpp's transform does not do
    (crop_border_pixels, use_prefetcher's uint8 output, normalize=False, ...)."""
    if is_training:
        raise ValueError("create_transform(is_training=True): training augmentation runs inside vitcpp.train")
    unknown = set(kwargs) - _TRAIN_ONLY - set(_UNSUPPORTED)
    if unknown:
        raise TypeError(f"create_transform() got unexpected keyword arguments {sorted(unknown)}")
    for key, inert in _UNSUPPORTED.items():
        if key in kwargs and kwargs[key] != inert and not (inert is None and not kwargs[key]):
            raise ValueError(f"create_transform({key}={kwargs[key]!r}): vitcpp's transform does not do that "
                             f"(it resizes, crops and normalizes; {key}={inert!r} is what it does)")
    if isinstance(input_size, int):
        input_size = (3, input_size, input_size)
    if len(input_size) == 2:
        input_size = (3, *input_size)
    c, h, w = (int(v) for v in input_size)
    crop_pct = crop_pct or DEFAULT_CROP_PCT
    crop_mode = crop_mode or DEFAULT_CROP_MODE
    if crop_mode not in ("center", "squash"):
        raise ValueError(f"crop_mode {crop_mode!r}: vitcpp has 'center' and 'squash'")
    spec = _vitcpp.InputSpec(c, h, w, [float(v) for v in mean], [float(v) for v in std], str(interpolation),
                             float(crop_pct), str(crop_mode))
    return Transform(spec, {"input_size": (c, h, w), "interpolation": interpolation, "mean": tuple(mean),
                            "std": tuple(std), "crop_pct": crop_pct, "crop_mode": crop_mode})


def _rebuild(cfg):
    return create_transform(**cfg)


def __dir__():
    """The public names (tab completion lists them, not the modules imported here)."""
    return sorted(__all__)
