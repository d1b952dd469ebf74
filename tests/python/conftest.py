"""The Python module's tests (ctest label `python`; tests/CMakeLists.txt runs each file with
pytest, PYTHONPATH at build/python, VIT_BINARY the vit program). Fixtures are the C++ tests'
own: tests/fixtures/pretrained holds timm- and HF-layout checkpoints with PyTorch's logits."""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")
PRETRAINED = os.path.join(FIXTURES, "pretrained")


def vit_binary():
    return os.environ.get("VIT_BINARY") or os.path.join(HERE, "..", "..", "build", "vit")


def run_vit(*args):
    """Runs the vit program; returns its stdout, failing the test with its output on error."""
    r = subprocess.run([vit_binary(), *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"vit {' '.join(map(str, args))}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "U8": np.uint8}
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=kinds[h["dtype"]]).reshape(h["shape"])
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = np.ascontiguousarray(t, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header)
    text += " " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + b"".join(blobs))


def worst_rel(got, want):
    """max |got - want| / max |want|, the C++ tests' close_rel_max measure."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


@pytest.fixture
def fixture_dir():
    return PRETRAINED
