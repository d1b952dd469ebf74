from os import PathLike
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import data as data

__version__: str

class Error(RuntimeError): ...

# Aliases of this stub alone (not importable from vitcpp).
_Images = Any  # float images [N, C, H, W]: numpy, a CPU torch tensor, anything numpy reads
_Size = Union[int, Sequence[int]]  # S, or (H, W)
_Epoch = Dict[str, Optional[float]]  # summary.csv's columns; "epoch" an int, eval_* None without evaluation

class _IncompatibleKeys(NamedTuple):  # torch's Module.load_state_dict return
    missing_keys: List[str]
    unexpected_keys: List[str]

def set_threads(n: int) -> None: ...
def get_threads() -> int: ...
def backend_info() -> Dict[str, Union[str, bool, int]]: ...
def list_models(
    filter: Union[str, Sequence[str]] = ...,
    module: str = ...,
    pretrained: bool = ...,
    exclude_filters: Union[str, Sequence[str]] = ...,
    name_matches_cfg: bool = ...,
    include_tags: Optional[bool] = ...,
) -> List[str]: ...
def create_model(
    model_name: Union[str, PathLike],
    pretrained: bool = ...,
    checkpoint_path: Optional[Union[str, PathLike]] = ...,
    num_classes: Optional[int] = ...,
    img_size: Optional[_Size] = ...,
    global_pool: Optional[str] = ...,
    dynamic_img_size: bool = ...,
    dtype: Optional[str] = ...,
    threads: Optional[int] = ...,
    labels_file: Optional[Union[str, PathLike]] = ...,
    seed: int = ...,
    pos_resample: Optional[str] = ...,
    drop_rate: Optional[float] = ...,
    drop_path_rate: Optional[float] = ...,
    attn_drop_rate: Optional[float] = ...,
    proj_drop_rate: Optional[float] = ...,
    pos_drop_rate: Optional[float] = ...,
    patch_drop_rate: Optional[float] = ...,
) -> VisionTransformer: ...

class VisionTransformer:
    dynamic_img_size: bool
    @property
    def num_classes(self) -> int: ...
    @property
    def num_features(self) -> int: ...
    @property
    def embed_dim(self) -> int: ...
    @property
    def num_prefix_tokens(self) -> int: ...
    @property
    def global_pool(self) -> str: ...
    @property
    def config(self) -> Dict[str, Any]: ...
    @property
    def class_names(self) -> List[str]: ...
    @property
    def checkpoint_format(self) -> str: ...
    @property
    def notes(self) -> List[str]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def pretrained_cfg(self) -> Dict[str, Any]: ...
    @property
    def default_cfg(self) -> Dict[str, Any]: ...
    def num_params(self) -> int: ...
    def state_dict(self) -> Dict[str, np.ndarray]: ...
    def load_state_dict(self, state_dict: Dict[str, Any], strict: bool = ...) -> _IncompatibleKeys: ...
    # numpy arrays; torch tensors (sharing the arrays' memory) for torch tensor inputs
    def forward(self, x: _Images, attn_mask: Optional[Any] = ..., is_causal: bool = ...) -> Any: ...
    def __call__(self, x: _Images, attn_mask: Optional[Any] = ..., is_causal: bool = ...) -> Any: ...
    def forward_features(self, x: _Images, attn_mask: Optional[Any] = ..., is_causal: bool = ...) -> Any: ...
    def forward_head(self, x: _Images, pre_logits: bool = ...) -> Any: ...
    def forward_pooled(self, x: _Images) -> Any: ...
    def forward_intermediates(
        self,
        x: _Images,
        indices: Optional[Union[int, Sequence[int]]] = ...,
        return_prefix_tokens: bool = ...,
        norm: bool = ...,
        stop_early: bool = ...,
        output_fmt: str = ...,
        intermediates_only: bool = ...,
        output_dict: bool = ...,
        attn_mask: Optional[Any] = ...,
        is_causal: bool = ...,
    ) -> Any: ...
    def predict(self, images: Any, topk: int = ...) -> List[List[Tuple[int, float, str]]]: ...
    def attention_maps(
        self, x: _Images, method: Optional[str] = ..., layer: int = ..., head: Optional[int] = ...
    ) -> Any: ...  # numpy, or a torch tensor for a torch input
    def eval(self) -> "VisionTransformer": ...
    def train(self, mode: bool = ...) -> "VisionTransformer": ...
    def requires_grad_(self, requires_grad: bool = ...) -> "VisionTransformer": ...
    def to(self, *args: Any, **kwargs: Any) -> "VisionTransformer": ...
    def cpu(self) -> "VisionTransformer": ...
    def float(self) -> "VisionTransformer": ...
    def cuda(self, device: Any = ...) -> "VisionTransformer": ...  # raises: CPU only
    def half(self) -> "VisionTransformer": ...  # raises: no float16
    def bfloat16(self) -> "VisionTransformer": ...  # raises: create_model(dtype="bfloat16") sets it
    def reset_classifier(self, num_classes: int, global_pool: Optional[str] = ...) -> None: ...
    def set_input_size(self, img_size: Optional[_Size] = ..., patch_size: Optional[_Size] = ...) -> None: ...
    def save_pretrained(self, save_directory: Union[str, PathLike], format: str = ...) -> List[str]: ...
    def export_onnx(self, path: Union[str, PathLike], dtype: Optional[str] = ...) -> None: ...

_Arrays = Tuple[Any, Any]  # (X uint8 [N, C, H, W] / [N, H, W] pixels or float32 model input, y int [N])

class TrainHistory(List[_Epoch]):
    model: Optional[VisionTransformer]
    output: Optional[str]
    stopped: str

def train(
    model: Optional[Union[str, PathLike, VisionTransformer]] = ...,
    train: Optional[Union[str, PathLike, _Arrays]] = ...,
    val: Optional[_Arrays] = ...,
    output: Optional[Union[str, PathLike]] = ...,
    *,
    callback: Optional[Callable[[_Epoch], Optional[bool]]] = ...,
    resume: Optional[Union[str, PathLike]] = ...,
    **options: Any,
) -> TrainHistory: ...
