"""timm's data-config helpers: resolve_model_data_config(model) and create_transform(**cfg).
The transform gives the float32 [C, H, W] array `vit predict` feeds the model, bit for bit:
the same decoder (Pillow's pixels), resize filters, center crop and normalization."""
import os
import sys

import numpy as np

from . import _vitcpp

__all__ = ["resolve_model_data_config", "resolve_data_config", "create_transform", "Transform"]


_KEYS = ("input_size", "interpolation", "mean", "std", "crop_pct", "crop_mode")


def resolve_model_data_config(model, args=None):
    """The model's eval preprocessing as timm names it: input_size (C, H, W), interpolation,
    mean, std, crop_pct, crop_mode. args may override any of them."""
    return resolve_data_config(args, model=model)


def resolve_data_config(args=None, pretrained_cfg=None, model=None, use_test_size=False, verbose=False):
    """timm's resolve_data_config: the model's (or pretrained_cfg's) eval preprocessing, args
    overriding any of it. `resolve_data_config({}, model=model)` is timm's common form."""
    if model is None and pretrained_cfg is None:
        raise ValueError("resolve_data_config needs model= or pretrained_cfg= (vitcpp has no defaults of its own)")
    c = dict(pretrained_cfg if pretrained_cfg is not None else model.pretrained_cfg)
    cfg = {k: c[k] for k in _KEYS if k in c}
    cfg.update({k: v for k, v in (args or {}).items() if k in _KEYS and v is not None})
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
        a = self.numpy(image)
        torch = sys.modules.get("torch")
        return torch.from_numpy(a) if torch is not None and hasattr(torch, "from_numpy") else a

    def numpy(self, image):
        """The model's input for one image as a float32 numpy array [C, H, W]."""
        if isinstance(image, (str, os.PathLike)):
            path = os.fspath(image)
            if not os.path.exists(path):
                raise FileNotFoundError(f"no image at {path!r}")
            return _vitcpp.preprocess_file(self._spec, path)
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


def create_transform(input_size, interpolation="bilinear", mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5),
                     crop_pct=1.0, crop_mode="center", is_training=False, **kwargs):
    """timm's create_transform for evaluation: resize (Pillow's filters) and center crop by
    crop_pct and crop_mode, then normalize. Training augmentation is `vit train`'s (its flags
    are timm's); is_training=True is refused here."""
    if is_training:
        raise ValueError("create_transform(is_training=True): training augmentation runs inside vitcpp.train")
    unknown = set(kwargs) - {"crop_border_pixels", "tf_preprocessing", "use_prefetcher"}
    if unknown:
        raise TypeError(f"create_transform() got unexpected keyword arguments {sorted(unknown)}")
    if isinstance(input_size, int):
        input_size = (3, input_size, input_size)
    if len(input_size) == 2:
        input_size = (3, *input_size)
    c, h, w = (int(v) for v in input_size)
    if crop_mode not in ("center", "squash"):
        raise ValueError(f"crop_mode {crop_mode!r}: vitcpp has 'center' and 'squash'")
    spec = _vitcpp.InputSpec(c, h, w, [float(v) for v in mean], [float(v) for v in std], str(interpolation),
                             float(crop_pct), str(crop_mode))
    return Transform(spec, {"input_size": (c, h, w), "interpolation": interpolation, "mean": tuple(mean),
                            "std": tuple(std), "crop_pct": crop_pct, "crop_mode": crop_mode})


def _rebuild(cfg):
    return create_transform(**cfg)
