from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

IMAGENET_DEFAULT_MEAN: Tuple[float, float, float]
IMAGENET_DEFAULT_STD: Tuple[float, float, float]
DEFAULT_CROP_PCT: float
DEFAULT_CROP_MODE: str

def resolve_model_data_config(
    model: Any,
    args: Optional[Dict[str, Any]] = ...,
    pretrained_cfg: Optional[Dict[str, Any]] = ...,
    use_test_size: bool = ...,
    verbose: bool = ...,
) -> Dict[str, Any]: ...
def resolve_data_config(
    args: Optional[Dict[str, Any]] = ...,
    pretrained_cfg: Optional[Dict[str, Any]] = ...,
    model: Any = ...,
    use_test_size: bool = ...,
    verbose: bool = ...,
) -> Dict[str, Any]: ...

class Transform:
    cfg: Dict[str, Any]
    def __call__(self, image: Any) -> Any: ...  # a torch.Tensor once torch is imported, else np.ndarray
    def numpy(self, image: Any) -> np.ndarray: ...

def create_transform(
    input_size: Union[int, Sequence[int]] = ...,
    is_training: bool = ...,
    interpolation: str = ...,
    mean: Sequence[float] = ...,
    std: Sequence[float] = ...,
    crop_pct: Optional[float] = ...,
    crop_mode: Optional[str] = ...,
    **kwargs: Any,
) -> Transform: ...
