"""vit serve (ctest label `serve`; docs/serving.md): every endpoint and error status with a real
HTTP client (urllib), logits and top-5 against `vit predict`, dynamic batching under
concurrent callers, and SIGTERM under load. Each server runs on a free port (--port 0)."""
import base64
import concurrent.futures
import gzip
import http.client
import json
import os
import re
import resource
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from conftest import PRETRAINED, run_vit, vit_binary, worst_rel, write_safetensors  # noqa: E402

CK = os.path.join(PRETRAINED, "timm_a")  # a timm checkpoint with 5 class names, input 3x32x32
IMAGES = [os.path.join(PRETRAINED, "images", f) for f in ("cat.jpg", "coffee.png", "astronaut_gray.png")]


class Server:
    """vit serve ARGS on a free port; stop() sends SIGTERM and returns (exit status, log)."""

    def __init__(self, *args, files=None):
        """files: (soft, hard) limits on file descriptors for the server (ulimit -n)."""
        limit = None if files is None else (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, files))
        self.proc = subprocess.Popen([vit_binary(), "serve", "--port", "0", "--threads", "2", *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=limit)
        self.lines = []
        for line in self.proc.stdout:
            self.lines.append(line)
            m = re.search(r"listening on (https?)://([\d.]+):(\d+)", line)
            if m:
                self.url = f"{m.group(1)}://{m.group(2)}:{m.group(3)}"
                break
        else:
            raise AssertionError("vit serve did not start:\n" + "".join(self.lines))
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout))
        self.reader.start()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None and not getattr(self, "signalled", False):
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # killed, or its open pipe would hold the reader (and pytest) forever
            self.proc.kill()
            self.proc.wait()
            self.reader.join()
            raise AssertionError("vit serve did not stop within 60 s of the signal:\n" + "".join(self.lines))
        self.reader.join()
        return code, "".join(self.lines)


def call(url, body=None, headers=None, method=None, raw=False, context=None):
    """(status, headers, body text, or bytes with raw) of one request; HTTP errors are answers too.
    context: an ssl.SSLContext for https."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    kind = {"Content-Type": "application/json" if isinstance(body, dict) else "application/octet-stream"}
    req = urllib.request.Request(url, data=data, headers={**kind, **(headers or {})}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60, context=context) as r:
            status, headers, got = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, headers, got = e.code, e.headers, e.read()
    return status, headers, got if raw else got.decode()


def binary_body(request, *blobs):
    """The binary tensor data extension: the JSON, then the blobs; with its length header."""
    head = json.dumps(request).encode()
    return head + b"".join(blobs), {"Inference-Header-Content-Length": str(len(head))}


def bytes_elements(items):
    """BYTES elements as binary data: each one's length (4 bytes, little-endian), then it."""
    return b"".join(len(b).to_bytes(4, "little") + b for b in items)


def split_binary(headers, body):
    """(JSON, binary data) of an answer with binary output."""
    n = int(headers["Inference-Header-Content-Length"])
    return json.loads(body[:n]), body[n:]


def pixels(x):
    return {"inputs": [{"name": "pixel_values", "shape": list(x.shape), "datatype": "FP32",
                        "data": x.reshape(-1).tolist()}]}


def cli_logits(x, tmp_path, batch=16):
    write_safetensors(tmp_path / "x.safetensors", {"x": x})
    lines = run_vit("predict", "--checkpoint", CK, "--tensor", f"{tmp_path / 'x.safetensors'}:x", "-b", batch,
                    "--json", "--logits").splitlines()
    return np.array([json.loads(line)["logits"] for line in lines], np.float32)


@pytest.fixture(scope="module")
def server():
    s = Server("--model", f"a={CK}", "--max-batch", 16, "--max-delay-ms", 5)
    yield s
    code, log = s.stop()
    assert code == 0, log


def test_health_and_metadata_endpoints(server):
    u = server.url
    assert call(u + "/v2/health/live")[0] == 200
    status, _, body = call(u + "/v2/health/ready")
    assert status == 200 and json.loads(body)["ready"] is True
    meta = json.loads(call(u + "/v2")[2])
    assert meta["name"] == "vitcpp" and "classification" in meta["extensions"]
    m = json.loads(call(u + "/v2/models/a")[2])
    assert m["name"] == "a" and m["versions"] == ["1"]
    assert {"name": "pixel_values", "datatype": "FP32", "shape": [-1, 3, 32, 32]} in m["inputs"]
    assert {"name": "image", "datatype": "BYTES", "shape": [-1]} in m["inputs"]
    assert m["outputs"] == [{"name": "logits", "datatype": "FP32", "shape": [-1, 5]}]
    assert json.loads(call(u + "/v2/models/a/ready")[2])["ready"] is True
    assert json.loads(call(u + "/ping")[2]) == {"status": "Healthy"}


def test_triton_model_configuration():
    s = Server("--model", f"a={CK}", "--max-batch", 8, "--max-delay-ms", 2.5, "--max-queue", 40, "--instances", 2)
    try:
        assert "model_configuration" in json.loads(call(s.url + "/v2")[2])["extensions"]
        for path in ("/v2/models/a/config", "/v2/models/a/versions/1/config"):
            status, _, body = call(s.url + path)
            assert status == 200, body
            c = json.loads(body)
            assert c["name"] == "a" and c["max_batch_size"] == 8, c
            # Triton's ModelConfig: dims without the batch dimension; BYTES is TYPE_STRING.
            assert c["input"] == [
                {"name": "pixel_values", "data_type": "TYPE_FP32", "format": "FORMAT_NCHW", "dims": [3, 32, 32],
                 "optional": True},
                {"name": "image", "data_type": "TYPE_STRING", "format": "FORMAT_NONE", "dims": [1], "optional": True}]
            assert c["output"] == [{"name": "logits", "data_type": "TYPE_FP32", "dims": [5]}]
            assert c["dynamic_batching"] == {"max_queue_delay_microseconds": 2500,
                                             "default_queue_policy": {"max_queue_size": 40}}
            assert c["instance_group"] == [{"name": "a", "kind": "KIND_CPU", "count": 2}]
            assert c["parameters"] == {"dtype": {"string_value": "fp32"}}
        status, _, body = call(s.url + "/v2/models/nope/config")
        assert status == 404 and "unknown model 'nope'" in json.loads(body)["error"], body
    finally:
        code, log = s.stop()
    assert code == 0, log
    # Without batching (--max-batch 1) there is no dynamic_batching section, as in Triton.
    s = Server("--model", f"a={CK}", "--max-batch", 1)
    try:
        c = json.loads(call(s.url + "/v2/models/a/config")[2])
        assert c["max_batch_size"] == 1 and "dynamic_batching" not in c, c
    finally:
        s.stop()


def test_infer_gives_vit_predicts_logits(server, tmp_path):
    x = np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32)
    status, _, body = call(server.url + "/v2/models/a/infer", dict(pixels(x), id="r1"))
    assert status == 200, body
    r = json.loads(body)
    assert r["model_name"] == "a" and r["id"] == "r1"
    out = r["outputs"][0]
    assert out["name"] == "logits" and out["datatype"] == "FP32" and out["shape"] == [3, 5]
    got = np.array(out["data"], np.float32).reshape(3, 5)
    want = cli_logits(x, tmp_path)
    assert worst_rel(got, want) <= 1e-5, f"worst relative difference {worst_rel(got, want):.3g}"
    # Nested data is read too, and the versioned path.
    nested = pixels(x)
    nested["inputs"][0]["data"] = x.tolist()
    status, _, body = call(server.url + "/v2/models/a/versions/1/infer", nested)
    assert status == 200 and np.allclose(json.loads(body)["outputs"][0]["data"], got.reshape(-1), rtol=0, atol=0)
    # Sent as a form (curl -d), over the 8 KB cpp-httplib allows forms on its plain path.
    form = json.dumps(pixels(x)).encode()
    status, _, body = call(server.url + "/v2/models/a/infer", form, {"Content-Type": "application/x-www-form-urlencoded"})
    assert len(form) > 8192 and status == 200, body
    assert np.allclose(json.loads(body)["outputs"][0]["data"], got.reshape(-1), rtol=0, atol=0)


def test_images_as_bytes_classification_and_torchserve_give_vit_predicts_top5(server):
    cli = [json.loads(line) for line in run_vit("predict", "--checkpoint", CK, "--json", *IMAGES).splitlines()]
    encoded = [base64.b64encode(open(p, "rb").read()).decode() for p in IMAGES]
    req = {"inputs": [{"name": "image", "shape": [len(IMAGES)], "datatype": "BYTES", "data": encoded}],
           "outputs": [{"name": "logits", "parameters": {"classification": 3}}]}
    status, _, body = call(server.url + "/v2/models/a/infer", req)
    assert status == 200, body
    out = json.loads(body)["outputs"][0]
    assert out["datatype"] == "BYTES" and out["shape"] == [3, 3]
    for i, c in enumerate(cli):
        strings = out["data"][3 * i:3 * i + 3]
        assert [s.split(":", 2)[1:] for s in strings] == [[str(t["index"]), t["label"]] for t in c["topk"][:3]]
    # The protocol lets data be nested as the shape ([N, 1] here); BYTES took it flat only.
    nested = {"inputs": [{"name": "image", "shape": [len(IMAGES), 1], "datatype": "BYTES",
                          "data": [[e] for e in encoded]}], "outputs": req["outputs"]}
    status, _, text = call(server.url + "/v2/models/a/infer", nested)
    assert status == 200 and json.loads(text)["outputs"][0]["data"] == out["data"], text
    for path, c in zip(IMAGES, cli):
        status, _, body = call(server.url + "/predictions/a", open(path, "rb").read())
        assert status == 200, body
        top = json.loads(body)
        assert list(top) == [t["label"] for t in c["topk"]]
        assert np.allclose(list(top.values()), [t["prob"] for t in c["topk"]], rtol=0, atol=1e-5)


def test_kserve_v1_predict_gives_vit_predicts_logits(server, tmp_path):
    u = server.url
    assert json.loads(call(u + "/v1/models")[2]) == {"models": ["a"]}
    assert json.loads(call(u + "/v1/models/a")[2]) == {"name": "a", "ready": True}
    assert call(u + "/v1/models/nope")[0] == 404
    x = np.random.default_rng(7).standard_normal((2, 3, 32, 32)).astype(np.float32)
    want = cli_logits(x, tmp_path)
    # Pixels nested [C][H][W], bare or named; "inputs" is KServe's other name for "instances".
    for body in ({"instances": x.tolist()}, {"inputs": x.tolist()},
                 {"instances": [{"pixel_values": x[0].tolist()}, x[1].tolist()]}):
        status, _, text = call(u + "/v1/models/a:predict", body)
        assert status == 200, text
        got = np.array(json.loads(text)["predictions"], np.float32)
        assert got.shape == (2, 5) and worst_rel(got, want) <= 1e-5, f"worst {worst_rel(got, want):.3g}"
    # Image files in base64, as TensorFlow Serving ({"b64"}) and TorchServe's wrapper ({"data"}) send them.
    encoded = [base64.b64encode(open(p, "rb").read()).decode() for p in IMAGES]
    v2 = {"inputs": [{"name": "image", "shape": [3], "datatype": "BYTES", "data": encoded}]}
    images = np.array(json.loads(call(u + "/v2/models/a/infer", v2)[2])["outputs"][0]["data"], np.float32)
    mime = [base64.encodebytes(open(p, "rb").read()).decode() for p in IMAGES]  # line breaks every 76
    for body in ({"instances": [{"b64": e} for e in encoded]}, {"instances": [{"b64": e} for e in mime]},
                 {"instances": [{"data": encoded[0]}, {"image": {"b64": encoded[1]}}, {"image": encoded[2]}]}):
        status, _, text = call(u + "/v1/models/a:predict", body)
        assert status == 200, text
        got = np.array(json.loads(text)["predictions"], np.float32).reshape(-1)
        assert worst_rel(got, images) <= 1e-5, f"worst {worst_rel(got, images):.3g}"
    # Each mistake a 400 that says what is wrong; an unknown model 404.
    for body, message in ((b"{", "not JSON"), ({"instances": []}, "\"instances\""), ({"x": 1}, "\"instances\""),
                          ({"instances": [x[0, :2].tolist()]}, "at depth 0 found 2 items"),
                          ({"instances": [[[["a"] * 32] * 32] * 3]}, "pixels are numbers"),
                          ({"instances": [{"b64": "!!"}]}, "not base64"),
                          ({"instances": [{"b64": base64.b64encode(b"not an image").decode()}]}, "instances[0]"),
                          ({"instances": [7]}, "{\"b64\"")):
        status, _, text = call(u + "/v1/models/a:predict", body)
        assert status == 400 and message in json.loads(text)["error"], (body if len(str(body)) < 99 else "", text)
    assert call(u + "/v1/models/nope:predict", {"instances": x.tolist()})[0] == 404


def test_binary_tensor_data_in_and_out(server, tmp_path):
    x = np.random.default_rng(2).standard_normal((2, 3, 32, 32)).astype(np.float32)
    u = server.url + "/v2/models/a/infer"
    want = json.loads(call(u, pixels(x))[2])["outputs"][0]["data"]
    # FP32 pixels as binary in, JSON out: the same logits as the JSON request's.
    req = {"inputs": [{"name": "pixel_values", "shape": [2, 3, 32, 32], "datatype": "FP32",
                       "parameters": {"binary_data_size": x.nbytes}}]}
    status, _, body = call(u, *binary_body(req, x.tobytes()))
    assert status == 200, body
    assert json.loads(body)["outputs"][0]["data"] == want
    # Binary out, asked for on the output or for the whole request.
    for asked in ({"outputs": [{"name": "logits", "parameters": {"binary_data": True}}]},
                  {"parameters": {"binary_data_output": True}}):
        status, headers, body = call(u, *binary_body(dict(req, **asked), x.tobytes()), raw=True)
        assert status == 200 and headers["Content-Type"] == "application/octet-stream", body
        head, data = split_binary(headers, body)
        out = head["outputs"][0]
        assert out["shape"] == [2, 5] and out["parameters"] == {"binary_data_size": 40} and "data" not in out
        got = np.frombuffer(data, "<f4").reshape(2, 5)
        assert np.array_equal(got.reshape(-1), np.array(want, np.float32)), (got, want)
        assert worst_rel(got, cli_logits(x, tmp_path)) <= 1e-5
    # Image files as they are (no base64), classification strings as binary out.
    files = [open(p, "rb").read() for p in IMAGES]
    encoded = [base64.b64encode(f).decode() for f in files]
    as_json = {"inputs": [{"name": "image", "shape": [3], "datatype": "BYTES", "data": encoded}]}
    want = json.loads(call(u, as_json)[2])["outputs"][0]["data"]
    blob = bytes_elements(files)
    req = {"inputs": [{"name": "image", "shape": [3], "datatype": "BYTES", "parameters": {"binary_data_size": len(blob)}}]}
    status, _, body = call(u, *binary_body(req, blob))
    assert status == 200 and json.loads(body)["outputs"][0]["data"] == want, body
    req["outputs"] = [{"name": "logits", "parameters": {"classification": 2, "binary_data": True}}]
    status, headers, body = call(u, *binary_body(req, blob), raw=True)
    head, data = split_binary(headers, body)
    strings, at = [], 0
    while at < len(data):
        n = int.from_bytes(data[at:at + 4], "little")
        strings.append(data[at + 4:at + 4 + n].decode())
        at += 4 + n
    assert head["outputs"][0]["shape"] == [3, 2] and len(strings) == 6 and all(s.count(":") == 2 for s in strings)
    assert "binary_tensor_data" in json.loads(call(server.url + "/v2")[2])["extensions"]


def test_bad_binary_requests_are_400(server):
    u = server.url + "/v2/models/a/infer"
    x = np.zeros((1, 3, 32, 32), np.float32).tobytes()
    inp = {"name": "pixel_values", "shape": [1, 3, 32, 32], "datatype": "FP32",
           "parameters": {"binary_data_size": len(x)}}
    img = {"name": "image", "shape": [1], "datatype": "BYTES", "parameters": {"binary_data_size": 8}}
    head = json.dumps({"inputs": [inp]}).encode()
    cases = {
        "length past the body": ((head, {"Inference-Header-Content-Length": "99999"}), "more than the body"),
        "length not a number": ((head + x, {"Inference-Header-Content-Length": "12a"}), "JSON's length"),
        "size past the data": (binary_body({"inputs": [inp]}, x[:12000]), "bytes of binary data are left"),
        "wrong size": (binary_body({"inputs": [dict(inp, parameters={"binary_data_size": 12000})]}, x[:12000]),
                       "needs 12288"),
        "bytes left over": (binary_body({"inputs": [inp]}, x, b"extra"), "that no input's binary_data_size takes"),
        "no header": ((head + x, {}), "no Inference-Header-Content-Length"),  # NUL ends JSON
        "no header, data not NUL": ((head + b"\x01" + x, {}), "send the JSON's length in the Inference-Header"),
        "data and binary": (binary_body({"inputs": [dict(inp, data=[0.0])]}, x), "both \"data\" and"),
        "element past the end": (binary_body({"inputs": [img]}, (100).to_bytes(4, "little") + b"abcd"),
                                 "element 0 is 100 bytes long"),
        "not an image": (binary_body({"inputs": [img]}, (4).to_bytes(4, "little") + b"abcd"), "image: data[0]"),
        "binary_data not a bool": (binary_body({"inputs": [inp], "parameters": {"binary_data_output": 1}}, x),
                                   "must be true or false"),
    }
    for what, ((body, headers), message) in cases.items():
        status, _, text = call(u, body, headers)
        assert status == 400, f"{what}: {status} {text}"
        assert message in json.loads(text)["error"], f"{what}: {text}"
    assert call(server.url + "/v2/health/ready")[0] == 200


def test_triton_statistics_count_requests_images_passes_and_their_times():
    s = Server("--model", f"a={CK}", "--model", f"b={CK}", "--max-batch", 4, "--max-delay-ms", 100)
    try:
        u = s.url
        assert "statistics" in json.loads(call(u + "/v2")[2])["extensions"]
        x = np.random.default_rng(5).standard_normal((3, 3, 32, 32)).astype(np.float32)
        before = int(time.time() * 1000)
        # 1 and 2 images at once (one pass of 3 within --max-delay-ms, or two), then a PNG.
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda b: call(u + "/v2/models/a/infer", pixels(b))[0], (x[:1], x[1:])))
        assert answers == [200, 200]
        assert call(u + "/predictions/a", open(IMAGES[0], "rb").read())[0] == 200
        assert call(u + "/v2/models/a/infer", {"inputs": []})[0] == 400  # a failed request
        assert call(u + "/v2/models/a")[0] == 200  # metadata: not an inference
        for path in ("/v2/models/a/stats", "/v2/models/a/versions/1/stats"):
            # A request is counted just after its answer is sent (cpp-httplib's logger): wait for the 4th.
            end = time.monotonic() + 10
            while True:
                status, _, body = call(u + path)
                assert status == 200, body
                (m,) = json.loads(body)["model_stats"]
                done = m["inference_stats"]["success"]["count"] + m["inference_stats"]["fail"]["count"]
                if done >= 4 or time.monotonic() > end:
                    break
                time.sleep(0.02)
            assert m["name"] == "a" and m["version"] == "1"
            assert before <= m["last_inference"] <= time.time() * 1000 + 1
            st = m["inference_stats"]
            assert st["success"]["count"] == 3 and st["fail"]["count"] == 1, st
            assert st["success"]["ns"] > 0 and st["fail"]["ns"] > 0
            assert m["inference_count"] == 4, m  # images
            passes = m["execution_count"]
            assert passes in (2, 3), m
            for k in ("queue", "compute_input", "compute_infer", "compute_output"):
                assert st[k]["count"] == 3, (k, st)  # the requests that reached a pass
            assert st["compute_infer"]["ns"] > 0 and st["queue"]["ns"] > 0
            assert st["cache_hit"] == {"count": 0, "ns": 0}
            batches = m["batch_stats"]
            assert sum(b["compute_infer"]["count"] for b in batches) == passes
            assert sum(b["batch_size"] * b["compute_infer"]["count"] for b in batches) == 4
            assert all(b["compute_infer"]["ns"] > 0 for b in batches)
        everything = json.loads(call(u + "/v2/models/stats")[2])["model_stats"]
        assert [m["name"] for m in everything] == ["a", "b"]
        assert everything[1]["inference_count"] == 0 and everything[1]["batch_stats"] == []
        status, _, body = call(u + "/v2/models/nope/stats")
        assert status == 404, body
        # The same counts under Triton's metric names, for its dashboards and alerts.
        text = call(u + "/metrics")[2]
        value = lambda name, model="a", extra="": int(re.search(  # noqa: E731
            rf'^{name}{{model="{model}",version="1"{extra}}} (\d+)$', text, re.M).group(1))
        st = m["inference_stats"]
        assert value("nv_inference_request_success") == 3 and value("nv_inference_count") == 4
        assert value("nv_inference_exec_count") == m["execution_count"]
        assert value("nv_inference_request_failure", extra=',reason="OTHER"') == 1
        assert value("nv_inference_request_failure", extra=',reason="REJECTED"') == 0
        for name, key in (("request", "success"), ("queue", "queue"), ("compute_input", "compute_input"),
                          ("compute_infer", "compute_infer"), ("compute_output", "compute_output")):
            assert value(f"nv_inference_{name}_duration_us") == st[key]["ns"] // 1000, name
        assert value("nv_inference_pending_request_count", "b") == 0 and value("nv_inference_count", "b") == 0
        for family in ("nv_inference_request_success counter", "nv_inference_pending_request_count gauge"):
            assert "# TYPE " + family in text
    finally:
        code, log = s.stop()
    assert code == 0, log


def test_bad_requests_get_their_protocol_answers(server):
    u = server.url + "/v2/models/a/infer"
    x = np.zeros((1, 3, 32, 32), np.float32)
    cases = {
        "malformed JSON": (b"{not json", "not valid JSON"),
        "wrong shape": (pixels(np.zeros((1, 3, 16, 16), np.float32)), "does not fit the model's input"),
        "wrong datatype": (dict(inputs=[dict(pixels(x)["inputs"][0], datatype="INT8")]), "datatype must be FP32"),
        "wrong size": (dict(inputs=[dict(pixels(x)["inputs"][0], shape=[2, 3, 32, 32])]), "needs 6144"),
        "huge shape": (dict(inputs=[dict(pixels(x)["inputs"][0], shape=[10**15, 3, 32, 32])]),
                       "more elements than the body's"),
        # 2 MB of brackets a million deep: once a stack overflow that ended the server.
        "deep nesting": (('{"inputs":[{"name":"pixel_values","shape":[1,3,32,32],"datatype":"FP32","data":' +
                          "[" * 10**6 + "1" + "]" * 10**6 + "}]}").encode(), "more than 32 deep"),
        "unknown input": (dict(inputs=[dict(pixels(x)["inputs"][0], name="x")]), "unknown input"),
        "not an image": ({"inputs": [{"name": "image", "shape": [1], "datatype": "BYTES",
                                      "data": [base64.b64encode(b"not an image").decode()]}]}, "image: data[0]"),
        "not base64": ({"inputs": [{"name": "image", "shape": [1], "datatype": "BYTES", "data": ["***"]}]},
                       "not base64"),
        # The message names a byte that is half a UTF-8 character: once this ended the server.
        "not base64, not ASCII": ({"inputs": [{"name": "image", "shape": [1], "datatype": "BYTES", "data": ["\u00e9"]}]},
                                  "not base64 (byte 0xc3)"),
        "name not a string": (dict(inputs=[dict(pixels(x)["inputs"][0], name=["pixel_values"])]),
                              "\"name\" must be a string"),
        "bad output": (dict(pixels(x), outputs=[{"name": "probs"}]), "the only output"),
        # It said the shape had more elements than the body could hold.
        "no data": ({"inputs": [{"name": "pixel_values", "shape": [1, 3, 32, 32], "datatype": "FP32"}]},
                    "pixel_values: no \"data\""),
        "null data": ({"inputs": [{"name": "image", "shape": [1], "datatype": "BYTES", "data": None}]},
                      "image: no \"data\""),
        # Triton refuses an output asked for twice; the last one was answered alone.
        "output twice": (dict(pixels(x), outputs=[{"name": "logits"}, {"name": "logits"}]), "\"logits\" twice"),
        "past FP32": (('{"inputs":[{"name":"pixel_values","shape":[1,3,32,32],"datatype":"FP32","data":[3.4028236e38'
                       + ",0" * 3071 + "]}]}").encode(), "beyond FP32's range"),
    }
    for what, (body, message) in cases.items():
        status, _, text = call(u, body)
        assert status == 400, f"{what}: {status} {text}"
        assert message in json.loads(text)["error"], f"{what}: {text}"
    # FLT_MAX as its shortest text (numpy's, Java's and Go's): a float, not "beyond FP32's range".
    for text in ("3.4028235e38", "-3.4028235e38", "3.4028234663852886e38"):
        body = ('{"inputs":[{"name":"pixel_values","shape":[1,3,32,32],"datatype":"FP32","data":[' + text +
                ",0" * 3071 + "]}]}").encode()
        assert call(u, body)[0] == 200, text
    status, _, text = call(server.url + "/predictions/a", b"\x89PNG garbage")
    assert status == 400 and "error" in json.loads(text)
    for path in ("/v2/models/nope/infer", "/v2/models/nope", "/predictions/nope"):
        status, _, text = call(server.url + path, pixels(x) if "infer" in path or "pred" in path else None)
        assert status == 404 and "unknown model 'nope'" in json.loads(text)["error"], text
    status, _, text = call(server.url + "/v2/models/%C3/ready")  # a name that is not UTF-8
    assert status == 404 and "unknown model" in json.loads(text)["error"], text
    assert call(server.url + "/v3/nothing")[0] == 404
    # The server is still up and right after all that.
    assert call(server.url + "/v2/health/ready")[0] == 200


def test_metrics_count_requests_latency_batches_and_queue(server):
    call(server.url + "/v2/models/a/infer", pixels(np.zeros((2, 3, 32, 32), np.float32)))
    call(server.url + "/v2/models/a/infer", b"{")
    text = call(server.url + "/metrics")[2]
    assert re.search(r'vit_requests_total\{model="a",status="200"\} \d+', text)
    assert re.search(r'vit_requests_total\{model="a",status="400"\} \d+', text)
    assert 'vit_request_duration_seconds_bucket{model="a",le="+Inf"}' in text
    assert 'vit_batch_size_bucket{model="a",le="2"}' in text
    assert re.search(r'vit_queue_depth\{model="a"\} 0', text)
    assert re.search(r'vit_forward_passes_total\{model="a",instance="0"\} [1-9]', text)
    for family in ("vit_requests_total counter", "vit_request_duration_seconds histogram", "vit_batch_size histogram",
                   "vit_forward_passes_total counter", "vit_forward_seconds_total counter", "vit_queue_depth gauge",
                   "vit_http_threads gauge", "vit_http_connections_waiting gauge"):
        assert "# TYPE " + family in text
    # The process, as Prometheus' client libraries report it (from /proc).
    process = dict(re.findall(r"^(process_\w+) (\S+)$", text, re.M))
    rss = int(open("/proc/%d/status" % server.proc.pid).read().split("VmRSS:")[1].split()[0]) * 1024
    assert abs(float(process["process_resident_memory_bytes"]) - rss) < rss * 0.2, (process, rss)
    btime = next(int(line.split()[1]) for line in open("/proc/stat") if line.startswith("btime"))
    ticks = int(open("/proc/%d/stat" % server.proc.pid).read().rsplit(")", 1)[1].split()[19])
    started = btime + ticks / os.sysconf("SC_CLK_TCK")
    assert started <= time.time()
    assert abs(float(process["process_start_time_seconds"]) - started) < 0.05, (process, started)
    assert float(process["process_cpu_seconds_total"]) > 0
    assert 3 <= int(process["process_open_fds"]) <= int(process["process_max_fds"])
    assert int(process["process_virtual_memory_bytes"]) >= int(process["process_resident_memory_bytes"])


def test_concurrent_callers_are_batched_and_get_their_own_answers(tmp_path):
    s = Server("--model", f"a={CK}", "--max-batch", 8, "--max-delay-ms", 50)
    try:
        rng = np.random.default_rng(1)
        xs = [rng.standard_normal((int(n), 3, 32, 32)).astype(np.float32) for n in rng.integers(1, 4, 24)]
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(lambda x: call(s.url + "/v2/models/a/infer", pixels(x)), xs))
        want = cli_logits(np.concatenate(xs), tmp_path)
        at = 0
        for x, (status, _, body) in zip(xs, answers):
            assert status == 200, body
            got = np.array(json.loads(body)["outputs"][0]["data"], np.float32).reshape(len(x), 5)
            assert worst_rel(got, want[at:at + len(x)]) <= 1e-5
            at += len(x)
    finally:
        code, log = s.stop()
    assert code == 0
    batches = [int(b) for b in re.findall(r"POST /v2/models/a/infer 200 [\d.]+ ms batch (\d+)", log)]
    assert len(batches) == 24 and max(batches) > 3, f"no request was batched with another: {batches}"
    assert max(batches) <= 8, batches


def test_instances_share_the_threads_and_each_runs_passes(tmp_path):
    s = Server("--model", f"a={CK}", "--instances", 2, "--max-batch", 4, "--max-delay-ms", 200)
    try:
        xs = [np.random.default_rng(i).standard_normal((1, 3, 32, 32)).astype(np.float32) for i in range(16)]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda x: call(s.url + "/v2/models/a/infer", pixels(x)), xs))
        want = cli_logits(np.concatenate(xs), tmp_path)
        for i, (status, _, body) in enumerate(answers):
            assert status == 200, body
            got = np.array(json.loads(body)["outputs"][0]["data"], np.float32).reshape(1, 5)
            assert worst_rel(got, want[i:i + 1]) <= 1e-5
        # While one instance runs a pass the other gathers the next: both ran some.
        text = call(s.url + "/metrics")[2]
        passes = {int(i): int(n) for i, n in re.findall(r'vit_forward_passes_total\{model="a",instance="(\d)"\} (\d+)', text)}
        assert sorted(passes) == [0, 1] and min(passes.values()) > 0, passes
        assert sum(passes.values()) >= 4, passes  # 16 images, at most 4 a pass
        assert re.search(r'vit_forward_seconds_total\{model="a",instance="1"\} [\d.e-]+', text)
    finally:
        code, log = s.stop()
    assert code == 0, log
    assert "2 instances sharing 2 threads" in log, log
    bad = subprocess.run([vit_binary(), "serve", "--port", "0", "--threads", "2", "--instances", "3", "--model",
                          f"a={CK}"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--instances 3 is more than the 2 threads" in bad.stderr, bad.stderr


def test_full_queue_is_503_and_a_late_answer_is_504():
    s = Server("--model", f"a={CK}", "--max-batch", 64, "--max-delay-ms", 1500, "--max-queue", 1, "--timeout-s", 5)
    try:
        x = pixels(np.zeros((1, 3, 32, 32), np.float32))
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(lambda _: call(s.url + "/v2/models/a/infer", x), range(3)))
        statuses = sorted(a[0] for a in answers)
        assert statuses[0] == 200 and statuses[-1] == 503, statuses
        full = next(a for a in answers if a[0] == 503)
        assert full[1]["Retry-After"] == "1" and "queue is full" in json.loads(full[2])["error"]
    finally:
        assert s.stop()[0] == 0
    s = Server("--model", f"a={CK}", "--max-batch", 64, "--max-delay-ms", 2000, "--timeout-s", 0.3)
    try:
        status, _, body = call(s.url + "/v2/models/a/infer", x)
        assert status == 504 and "timeout" in json.loads(body)["error"], body
        assert call(s.url + "/v2/health/live")[0] == 200
    finally:
        code, log = s.stop()
    assert code == 0, log
    # Such a delay is said at the start (every request short of a batch times out).
    assert "note: --max-delay-ms 2000 is not shorter than --timeout-s 0.3 s" in log, log


def test_a_requests_timeout_parameter_is_its_deadline():
    """Triton's "timeout" request parameter (microseconds): a deadline sooner than --timeout-s."""
    # The batch waits 2.5 s for company; the 0.2 s deadline must end the call well before
    # (the bound leaves a loaded machine 1.8 s).
    s = Server("--model", f"a={CK}", "--max-batch", 64, "--max-delay-ms", 2500, "--timeout-s", 5, "--no-warmup")
    x = pixels(np.zeros((1, 3, 32, 32), np.float32))
    try:
        t = time.monotonic()
        status, _, text = call(s.url + "/v2/models/a/infer", dict(x, parameters={"timeout": 200000}))
        assert status == 504 and "the request's timeout of 200000 us" in text, text
        assert time.monotonic() - t < 2.0
        assert call(s.url + "/v2/models/a/infer", dict(x, parameters={"timeout": 10**8}))[0] == 200  # 5 s binds
        for bad in (-1, "1000", 1.5):
            status, _, text = call(s.url + "/v2/models/a/infer", dict(x, parameters={"timeout": bad}))
            assert status == 400 and "timeout" in text, (bad, text)
    finally:
        code, log = s.stop()
    assert code == 0, log


def test_body_limit_is_413_and_api_keys_are_401(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("s3cret\n")
    s = Server("--model", f"a={CK}", "--max-body-mb", 0.5, "--api-key-file", keys)
    try:
        big = pixels(np.zeros((40, 3, 32, 32), np.float32))  # ~1 MB of JSON
        status, _, body = call(s.url + "/v2/models/a/infer", big, {"Authorization": "Bearer s3cret"})
        assert status == 413, body
        # Small files that decode to more than the limit (50 images of 3x32x32 floats: 614 KB).
        png = open(os.path.join(PRETRAINED, "..", "digit_7.png"), "rb").read()
        blob = bytes_elements([png] * 50)
        body, headers = binary_body({"inputs": [{"name": "image", "shape": [50], "datatype": "BYTES",
                                                 "parameters": {"binary_data_size": len(blob)}}]}, blob)
        status, _, text = call(s.url + "/v2/models/a/infer", body, {**headers, "Authorization": "Bearer s3cret"})
        assert len(body) < 100_000 and status == 413 and "over the --max-body-mb limit" in text, (status, text)
        # gzip is undone as the body is read, and the decoded bytes count: 200 KB of gzip that
        # would make 200 MB get 413 on both endpoints; a small gzip body is answered as plain.
        auth = {"Authorization": "Bearer s3cret", "Content-Encoding": "gzip"}
        bomb = gzip.compress(bytes(200_000_000), compresslevel=9)
        for path in ("/v2/models/a/infer", "/predictions/a"):
            status, _, text = call(s.url + path, bomb, auth)
            assert len(bomb) < 300_000 and status == 413 and "decompressed" in text, (path, status, text)
        x = pixels(np.ones((1, 3, 32, 32), np.float32))
        plain = call(s.url + "/v2/models/a/infer", x, {"Authorization": "Bearer s3cret"})
        packed = call(s.url + "/v2/models/a/infer", gzip.compress(json.dumps(x).encode()),
                      {**auth, "Content-Type": "application/json"})
        assert plain[0] == packed[0] == 200 and plain[2] == packed[2], (plain, packed)
        status, headers, body = call(s.url + "/v2/models/a")
        assert status == 401 and headers["WWW-Authenticate"] == "Bearer" and "API key" in json.loads(body)["error"]
        assert call(s.url + "/v2/models/a", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert call(s.url + "/metrics")[0] == 401
        assert call(s.url + "/v2/models/a", headers={"Authorization": "Bearer s3cret"})[0] == 200
        assert call(s.url + "/v2/health/ready")[0] == 200 and call(s.url + "/ping")[0] == 200  # open
    finally:
        assert s.stop()[0] == 0


def sigterm_under_load(s, send, clients=8):
    """send() from `clients` threads; SIGTERM after 1 s. Each client goes on for 1 s more, or
    until send() returns (result, False). Returns ([(time sent, result)], time of the signal,
    exit status, log)."""
    results, stop_at = [], []
    lock = threading.Lock()

    def client():
        go_on = True
        while go_on and (not stop_at or time.monotonic() < stop_at[0] + 1):
            t = time.monotonic()
            result, go_on = send()
            with lock:
                results.append((t, result))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    stop_at.append(time.monotonic())
    s.proc.send_signal(signal.SIGTERM)
    s.signalled = True
    for t in threads:
        t.join()
    return (results, stop_at[0], *s.stop())


@pytest.mark.parametrize("instances", [1, 2])
def test_sigterm_under_load_answers_every_accepted_request_and_exits_0(instances):
    s = Server("--model", f"a={CK}", "--max-batch", 4, "--max-delay-ms", 300, "--instances", instances)
    x = pixels(np.zeros((1, 3, 32, 32), np.float32))

    def send():
        try:
            return call(s.url + "/v2/models/a/infer", x)[0], True
        except (ConnectionError, urllib.error.URLError) as e:
            return type(getattr(e, "reason", e)).__name__, False

    results, stopped, code, log = sigterm_under_load(s, send)
    assert code == 0, log
    assert "SIGTERM: no new requests" in log and "vit serve: stopped" in log
    # Sent well before the signal: accepted, and so answered (each waits up to 300 ms to batch).
    early = [status for t, status in results if t < stopped - 0.05]
    assert early and all(st == 200 for st in early), early
    # Every answer the server logged reached its caller, and nothing failed.
    assert log.count("POST /v2/models/a/infer 200") == sum(1 for _, st in results if st == 200)
    assert not re.search(r"POST \S+ 5\d\d", log), log


def test_torchserve_takes_put_and_multipart_and_sigint_stops_cleanly():
    s = Server("--model", f"a={CK}")
    try:
        raw = open(IMAGES[0], "rb").read()
        want = json.loads(call(s.url + "/predictions/a", raw)[2])
        status, _, body = call(s.url + "/predictions/a", raw, method="PUT")  # curl -T
        assert status == 200 and json.loads(body) == want
        boundary = "vitcppboundary"
        form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"data\"; filename=\"cat.jpg\"\r\n"
                f"Content-Type: image/jpeg\r\n\r\n").encode() + raw + f"\r\n--{boundary}--\r\n".encode()
        status, _, body = call(s.url + "/predictions/a", form,
                               {"Content-Type": f"multipart/form-data; boundary={boundary}"})  # curl -F
        assert status == 200 and json.loads(body) == want, body
    finally:
        code, log = s.stop(signal.SIGINT)
    assert code == 0 and "SIGINT: no new requests" in log, log


def test_clients_that_disconnect_mid_request_do_not_disturb_the_others():
    s = Server("--model", f"a={CK}", "--max-delay-ms", 200)
    try:
        host, port = s.url[len("http://"):].split(":")
        x = pixels(np.zeros((1, 3, 32, 32), np.float32))
        body = json.dumps(x).encode()
        head = (f"POST /v2/models/a/infer HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            others = [pool.submit(call, s.url + "/v2/models/a/infer", x) for _ in range(4)]
            for cut in (len(head) // 2, len(head) + len(body) // 2, len(head) + len(body)):
                with socket.create_connection((host, int(port))) as c:  # gone before its answer
                    c.sendall((head + body)[:cut])
            answers = [f.result() for f in others]
        assert all(a[0] == 200 for a in answers), answers
        assert call(s.url + "/v2/models/a/infer", x)[0] == 200
    finally:
        code, log = s.stop()
    assert code == 0, log


def test_more_clients_than_http_threads_take_turns():
    """Two keep-alive clients that never pause hold both of --http-threads 2. A third client is
    answered while they go on: while it waits, their answers close their connections (and they
    reconnect). Before, it waited until one of them had sent keep-alive's 1,000 requests."""
    s = Server("--model", f"a={CK}", "--http-threads", 2)
    host, port = s.url[len("http://"):].split(":")
    third_answered = threading.Event()
    counts, closes, errors = [0, 0], [0, 0], []

    def busy(i):
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            while not third_answered.is_set() and counts[i] < 900:  # below 1,000: the server's cap per connection
                conn.request("GET", "/v2/health/ready")
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    raise AssertionError(f"status {r.status}")
                closes[i] += r.getheader("Connection") == "close"  # http.client reconnects on the next request
                counts[i] += 1
        except Exception as e:  # a client that stopped early would free its thread: the test would prove nothing
            errors.append(repr(e))
        conn.close()

    try:
        clients = [threading.Thread(target=busy, args=(i,)) for i in range(2)]
        for t in clients:
            t.start()
        while min(counts) < 5 and all(t.is_alive() for t in clients):
            time.sleep(0.01)
        status, _, body = call(s.url + "/v2/models/a/ready")
        stopped = [c >= 900 for c in counts]
        third_answered.set()
        for t in clients:
            t.join()
        assert status == 200, body
        assert not errors, errors
        assert not any(stopped), f"the third client was answered only after a busy one stopped: {counts}"
        assert sum(closes) > 0, counts
        text = call(s.url + "/metrics")[2]
        assert re.search(r"^vit_http_threads [12]$", text, re.M), text
    finally:
        code, log = s.stop()
    assert code == 0, log



def test_a_low_descriptor_limit_is_raised_or_said():
    """Each connection holds a descriptor: a shell's soft limit of 1024 went unraised, and
    clients past it waited in silence. The soft limit goes up to the hard one (as Go's runtime
    raises it); where the hard one is too low for --http-threads, one line says so."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip(f"the hard limit on descriptors here is {hard}")
    s = Server("--model", f"a={CK}", "--http-threads", 512, files=(64, 1024))
    try:
        text = call(s.url + "/metrics")[2]
        assert re.search(r"^process_max_fds 1024$", text, re.M), text
    finally:
        code, log = s.stop()
    assert code == 0 and "ulimit -n" not in log, log
    s = Server("--model", f"a={CK}", "--http-threads", 512, files=(64, 64))
    try:
        assert call(s.url + "/v2/health/ready")[0] == 200
    finally:
        code, log = s.stop()
    assert code == 0, log
    assert "vit serve: note: ulimit -n 64 (the hard limit 64): fewer file descriptors than --http-threads 512" in log, log


def test_sigterm_answers_the_connections_waiting_for_a_thread():
    """Six requests on --http-threads 2: two are served (each waits 400 ms to batch), four wait
    for a thread. SIGTERM then: the four are answered too, before the server stops listening."""
    s = Server("--model", f"a={CK}", "--http-threads", 2, "--max-batch", 8, "--max-delay-ms", 400)
    x = pixels(np.zeros((1, 3, 32, 32), np.float32))

    def send(_):
        try:
            return call(s.url + "/v2/models/a/infer", x)[0]
        except (ConnectionError, urllib.error.URLError, http.client.HTTPException) as e:
            return repr(e)

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        answers = [pool.submit(send, i) for i in range(6)]
        time.sleep(0.15)  # sent; the first two wait to batch until 0.4 s
        assert not any(a.done() for a in answers)
        s.proc.send_signal(signal.SIGTERM)
        s.signalled = True
        got = [a.result() for a in answers]
    code, log = s.stop()
    assert code == 0, log
    assert got == [200] * 6, (got, log)
    # Once stopped, it listens no more.
    with pytest.raises((ConnectionError, urllib.error.URLError)):
        call(s.url + "/v2/health/live")


def test_sigterm_answers_the_connections_the_kernel_holds_for_accept():
    """Clients that connected and sent before SIGTERM, but that the server had not accept()ed
    yet (in the kernel's accept queue: here the server is stopped while they connect), are
    answered too: closing the listener at once would reset them."""
    s = Server("--model", f"a={CK}", "--max-batch", 8, "--max-delay-ms", 20)
    host, port = s.url.split("//")[1].split(":")
    body = json.dumps(pixels(np.zeros((1, 3, 32, 32), np.float32))).encode()
    request = (b"POST /v2/models/a/infer HTTP/1.1\r\nHost: vit\r\nContent-Type: application/json\r\n"
               b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
    socks = []
    os.kill(s.proc.pid, signal.SIGSTOP)
    try:
        for _ in range(6):
            socks.append(socket.create_connection((host, int(port)), timeout=30))
            socks[-1].sendall(request)
        s.proc.send_signal(signal.SIGTERM)
        s.signalled = True
    finally:
        os.kill(s.proc.pid, signal.SIGCONT)
    got = []
    for c in socks:
        answer = b""
        with c:
            try:
                while chunk := c.recv(65536):
                    answer += chunk
            except ConnectionResetError:
                answer += b"(reset)"
        got.append(answer.split(b"\r\n", 1)[0])
    code, log = s.stop()
    assert code == 0, log
    assert got == [b"HTTP/1.1 200 OK"] * 6, (got, log)


def test_a_signal_before_the_server_listens_stops_it():
    """SIGTERM while the model loads (signals are held from then on) is taken as the server
    starts to listen. It once came before httplib's listen loop had begun, whose stop() then did
    nothing: the server listened on, hung (2 starts in 10 here). Ten starts, each must stop."""
    for _ in range(10):
        p = subprocess.Popen([vit_binary(), "serve", "--port", "0", "--threads", "2", "--model", f"a={CK}"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        for line in p.stdout:
            lines.append(line)
            if line.startswith("model a:"):  # said after the signals are held
                p.send_signal(signal.SIGTERM)
                break
        try:
            code = p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            code = "hung"
        log = "".join(lines) + p.stdout.read()
        p.stdout.close()
        assert code == 0 and "vit serve: stopped" in log, (code, log)


TLS = os.path.join(HERE, "..", "fixtures", "tls")  # tests/fixtures/tls/make.sh


def tls_context(client_cert=False):
    ctx = ssl.create_default_context(cafile=os.path.join(TLS, "ca.pem"))
    if client_cert:
        ctx.load_cert_chain(os.path.join(TLS, "client.pem"), os.path.join(TLS, "client.key"))
    return ctx


def tls_flags(*extra):
    return ["--ssl-certfile", os.path.join(TLS, "server.pem"), "--ssl-keyfile", os.path.join(TLS, "server.key"), *extra]


def test_https_answers_with_its_certificate_and_plain_http_does_not_disturb_it(tmp_path):
    s = Server("--model", f"a={CK}", *tls_flags())
    try:
        assert s.url.startswith("https://127.0.0.1:")
        x = np.random.default_rng(3).standard_normal((2, 3, 32, 32)).astype(np.float32)
        status, _, body = call(s.url + "/v2/models/a/infer", pixels(x), context=tls_context())
        assert status == 200, body
        got = np.array(json.loads(body)["outputs"][0]["data"], np.float32).reshape(2, -1)
        want = cli_logits(x, tmp_path)
        assert worst_rel(got, want) <= 1e-5, f"worst relative mismatch {worst_rel(got, want):.3g}"
        with pytest.raises(urllib.error.URLError) as e:  # not a CA the client trusts
            call(s.url + "/v2/health/ready", context=ssl.create_default_context())
        assert isinstance(e.value.reason, ssl.SSLCertVerificationError), e.value
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.RemoteDisconnected)):
            call("http" + s.url[len("https"):] + "/v2/health/ready")  # plain HTTP to the TLS port
        assert call(s.url + "/v2/health/ready", context=tls_context())[0] == 200
    finally:
        code, log = s.stop()
    assert code == 0, log
    assert re.search(r"^127\.0\.0\.1:\d+ GET /v2/health/ready 200 [\d.]+ ms batch 0$", log, re.M), log


def test_client_certificates_are_required_with_ssl_ca_certs():
    s = Server("--model", f"a={CK}", *tls_flags("--ssl-ca-certs", os.path.join(TLS, "ca.pem")))
    try:
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            call(s.url + "/v2/health/ready", context=tls_context())
        assert call(s.url + "/v2/health/ready", context=tls_context(client_cert=True))[0] == 200
    finally:
        code, log = s.stop()
    assert code == 0, log


@pytest.mark.parametrize("flags,message", [
    (["--ssl-certfile", "server.pem", "--ssl-keyfile", "client.key"], "is not the key of --ssl-certfile"),
    (["--ssl-certfile", "server.pem", "--ssl-keyfile", "server.pem"], "not a PEM private key"),
    (["--ssl-certfile", "server.key", "--ssl-keyfile", "server.key"], "not a PEM certificate"),
    (["--ssl-certfile", "server.pem"], "--ssl-certfile needs --ssl-keyfile"),
    (["--ssl-ca-certs", "ca.pem"], "need --ssl-certfile"),
    (["--ssl-certfile", "server.pem", "--ssl-keyfile", "server.key", "--ssl-ca-certs", "make.sh"],
     "--ssl-ca-certs"),
])
def test_bad_tls_files_are_a_clear_error(flags, message):
    args = [os.path.join(TLS, f) if not f.startswith("--") else f for f in flags]
    r = subprocess.run([vit_binary(), "serve", "--model", f"a={CK}", "--port", "0", *args], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and message in r.stderr, r.stdout + r.stderr
    assert "listening" not in r.stdout


def test_warmup_runs_before_listening_and_is_not_counted_and_no_warmup_skips_it():
    s = Server("--model", f"a={CK}", "--max-batch", 4, "--instances", 2)
    try:
        text = call(s.url + "/metrics")[2]
        stats = json.loads(call(s.url + "/v2/models/a/stats")[2])["model_stats"][0]
    finally:
        code, log = s.stop()
    assert code == 0, log
    assert re.search(r"model a: warmed up in [\d.]+ s \(a pass of 4 images and one of 1 on each instance\)", log), log
    assert log.index("warmed up") < log.index("listening on"), log
    assert not re.search(r'vit_forward_passes_total\{model="a",instance="\d"\} [1-9]', text), text
    for i in (0, 1):  # listed before their first pass, as zeros
        assert re.search(rf'^vit_forward_passes_total\{{model="a",instance="{i}"\}} 0$', text, re.M), text
    assert stats["execution_count"] == 0 and stats["inference_count"] == 0, stats
    s = Server("--model", f"a={CK}", "--no-warmup")
    code, log = s.stop()
    assert code == 0 and "warmed up" not in log, log


def test_a_max_batch_too_large_for_memory_stops_the_server_at_its_warmup():
    r = subprocess.run([vit_binary(), "serve", "--model", f"a={CK}", "--port", "0", "--max-batch", "100000000"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "out of memory for 100000000 images" in r.stderr, r.stdout + r.stderr
    assert "listening" not in r.stdout


def test_an_idle_keep_alive_connection_is_closed_after_timeout_keep_alive():
    s = Server("--model", f"a={CK}", "--timeout-keep-alive", 1)
    try:
        host, port = s.url[len("http://"):].split(":")
        with socket.create_connection((host, int(port)), timeout=4) as c:  # 4 s: below the default 5
            c.sendall(f"GET /v2/health/live HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            got = b""
            while b'{"live":true}' not in got:
                got += c.recv(4096)
            assert b"HTTP/1.1 200" in got and b"Keep-Alive: timeout=1" in got, got
            assert c.recv(4096) == b"", "the server did not close the idle connection"  # socket.timeout otherwise
    finally:
        code, log = s.stop()
    assert code == 0, log


def test_model_repository_serves_each_folder_and_safetensors_file(tmp_path):
    repo = tmp_path / "models"
    repo.mkdir()
    os.symlink(os.path.abspath(CK), repo / "cats")
    os.symlink(os.path.abspath(CK), repo / ".hidden")
    (repo / "README.txt").write_text("not a model\n")
    mnist = tmp_path / "mnist"
    run_vit("train", "--recipe", "mnist-seed", "--synthetic", 64, "--epochs", 1, "--output", mnist)
    os.symlink(mnist / "best.safetensors", repo / "digits.safetensors")
    s = Server("--model-repository", repo, "--model", f"a={CK}", "--no-warmup")
    try:
        log = "".join(s.lines)
        assert re.findall(r"^model (\w+):", log, re.M) == ["a", "cats", "digits"], log
        assert json.loads(call(s.url + "/v2/models/cats")[2])["inputs"][0]["shape"] == [-1, 3, 32, 32]
        assert json.loads(call(s.url + "/v2/models/digits")[2])["inputs"][0]["shape"] == [-1, 1, 28, 28]
        # KServe V1: a one-channel model takes [H][W] rows as [1][H][W].
        digit = np.random.default_rng(1).standard_normal((28, 28)).astype(np.float32)
        answers = [json.loads(call(s.url + "/v1/models/digits:predict", {"instances": [d]})[2])["predictions"]
                   for d in (digit.tolist(), [digit.tolist()])]
        assert answers[0] == answers[1] and len(answers[0][0]) == 10, answers
        assert call(s.url + "/v2/models/README")[0] == 404 and call(s.url + "/v2/models/.hidden")[0] == 404
        # Triton's repository index: every model, READY; loading and unloading are refused.
        want = [{"name": n, "version": "1", "state": "READY"} for n in ("a", "cats", "digits")]
        for body in (b"", {}, {"ready": True}):
            status, _, text = call(s.url + "/v2/repository/index", body, method="POST")
            assert status == 200 and json.loads(text) == want, (status, text)
        assert call(s.url + "/v2/repository/index", b"[1]", method="POST")[0] == 400
        assert "model_repository" in json.loads(call(s.url + "/v2")[2])["extensions"]
        # Without --model-control-mode explicit, models are not loaded or unloaded while serving.
        status, _, text = call(s.url + "/v2/repository/models/cats/unload", b"", method="POST")
        assert status == 400 and "--model-control-mode explicit" in json.loads(text)["error"], text
        assert call(s.url + "/v2/models/cats/ready")[0] == 200
    finally:
        assert s.stop()[0] == 0
    for args, message in ((["--model-repository", tmp_path / "empty"], "no model in it"),
                          (["--model-repository", repo, "--model", f"cats={CK}"], "two models named cats")):
        (tmp_path / "empty").mkdir(exist_ok=True)
        r = subprocess.run([vit_binary(), "serve", "--port", "0", *map(str, args)], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        assert r.returncode != 0 and message in r.stderr, r.stderr


def copy_model(dst, config=None):
    """The fixture model's files in a folder of its own, with a config.pbtxt when given."""
    os.makedirs(dst)
    for f in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(CK, f), dst)
    if config is not None:
        with open(os.path.join(dst, "config.pbtxt"), "w") as f:
            f.write(config)


def test_a_models_configuration_sets_its_batching_instances_and_queue(tmp_path):
    repo = tmp_path / "models"
    copy_model(repo / "cats", """
        name: "cats"
        backend: "onnxruntime"
        max_batch_size: 2
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, 32, 32 ] reshape { shape: [ 1 ] } } ]
        dynamic_batching { max_queue_delay_microseconds: 300000 default_queue_policy { max_queue_size: 20 } }
        instance_group [ { count: 2 kind: KIND_CPU } ]
        model_warmup [ { name: "w" batch_size: 1 } ]""")
    copy_model(repo / "dogs", "max_batch_size: 4")  # no dynamic_batching: requests are not combined
    s = Server("--model-repository", repo, "--max-batch", 16, "--max-delay-ms", 300, "--model-control-mode",
               "explicit", "--load-model", "*", "--no-warmup")
    x = pixels(np.zeros((1, 3, 32, 32), np.float32))
    config = lambda m: json.loads(call(s.url + f"/v2/models/{m}/config")[2])  # noqa: E731
    try:
        cats, dogs = config("cats"), config("dogs")
        assert cats["max_batch_size"] == 2 and cats["instance_group"][0]["count"] == 2, cats
        assert cats["dynamic_batching"] == {"max_queue_delay_microseconds": 300000,
                                            "default_queue_policy": {"max_queue_size": 20}}, cats
        assert dogs["max_batch_size"] == 4 and "dynamic_batching" not in dogs, dogs
        # 16 at once for cats, as in the --instances test: while one instance runs a pass, the
        # other gathers the next (with 6, a tiny model's first instance could take them all).
        for model, n in (("cats", 16), ("dogs", 6)):
            with concurrent.futures.ThreadPoolExecutor(n) as pool:
                assert list(pool.map(lambda _: call(s.url + f"/v2/models/{model}/infer", x)[0], range(n))) == [200] * n
        # The access log's line follows the answer: wait for the last (once, read too early, 5 of 6).
        wait_for(lambda: "".join(s.lines).count("POST /v2/models/dogs/infer 200") == 6)
        log = "".join(s.lines)
        batches = {m: [int(b) for b in re.findall(rf"POST /v2/models/{m}/infer 200 [\d.]+ ms batch (\d+)", log)]
                   for m in ("cats", "dogs")}
        assert max(batches["cats"]) == 2 and batches["dogs"] == [1] * 6, batches  # the flags would batch 6
        assert re.search(r'vit_forward_passes_total\{model="cats",instance="1"\} [1-9]', call(s.url + "/metrics")[2])
        for note in ("line 5: ModelInput.reshape is not read by vit serve", "model_warmup is not read",
                     'backend "onnxruntime": vit serve runs it as vitcpp', "max batch 2, max delay 300 ms, max queue 20",
                     "2 instances sharing 2 threads", "no dynamic batching, up to 4 images a request"):
            assert note in log, (note, log)
        # A load's config (Triton's JSON) takes the place of config.pbtxt; a bad one is a 400.
        body = {"parameters": {"config": json.dumps({"max_batch_size": 8, "dynamic_batching": {}})}}
        assert call(s.url + "/v2/repository/models/dogs/load", body, method="POST")[0] == 200
        assert config("dogs")["max_batch_size"] == 8 and "dynamic_batching" in config("dogs")
        body = {"parameters": {"config": json.dumps({"instance_group": [{"kind": "KIND_GPU"}]})}}
        status, _, text = call(s.url + "/v2/repository/models/dogs/load", body, method="POST")
        assert status == 400 and "runs on the CPU" in text, text
        assert config("dogs")["max_batch_size"] == 8  # the old copy serves on
    finally:
        code, log = s.stop()
    assert code == 0, log
    # A configuration that does not parse stops the server at start, saying where.
    (repo / "dogs" / "config.pbtxt").write_text("max_batch_size: 4\ndynamic_batching { max_queue_delay_microseconds: x }")
    r = subprocess.run([vit_binary(), "serve", "--port", "0", "--model-repository", repo], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "dogs/config.pbtxt: line 2 column" in r.stderr, r.stderr


def test_tritons_layout_serves_the_highest_version_folder_as_that_version(tmp_path):
    repo = tmp_path / "models"
    copy_model(repo / "cats" / "2")
    copy_model(repo / "cats" / "10")  # 10 > 2: numbers, not text
    (repo / "cats" / "config.pbtxt").write_text("max_batch_size: 4 dynamic_batching { }")
    (repo / "cats" / "v3").mkdir()  # not a version
    s = Server("--model-repository", repo, "--no-warmup")
    u = s.url
    x = pixels(np.zeros((1, 3, 32, 32), np.float32))
    try:
        assert json.loads(call(u + "/v2/models/cats")[2])["versions"] == ["10"]
        status, _, text = call(u + "/v2/models/cats/versions/10/infer", x)
        assert status == 200 and json.loads(text)["model_version"] == "10", text
        status, _, text = call(u + "/v2/models/cats/versions/1/infer", x)
        assert status == 404 and "has version 10 only, not '1'" in text, text
        assert call(u + "/v2/models/cats/versions/10/ready")[0] == 200
        assert json.loads(call(u + "/v2/models/cats/config")[2])["max_batch_size"] == 4  # the model folder's
        assert json.loads(call(u + "/v2/repository/index", b"", method="POST")[2]) == [
            {"name": "cats", "version": "10", "state": "READY"}]
        assert json.loads(call(u + "/v2/models/cats/versions/10/stats")[2])["model_stats"][0]["version"] == "10"
        assert 'nv_inference_count{model="cats",version="10"} 1' in call(u + "/metrics")[2]
    finally:
        code, log = s.stop()
    assert code == 0, log
    assert re.search(r"model cats: \S+/cats/10 \(", log), log


def wait_for(condition, seconds=10):
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_poll_model_control_follows_the_repository(tmp_path):
    repo = tmp_path / "models"
    copy_model(repo / "cats")
    s = Server("--model-repository", repo, "--model-control-mode", "poll", "--repository-poll-secs", 0.2,
               "--no-warmup")
    x = pixels(np.random.default_rng(4).standard_normal((1, 3, 32, 32)).astype(np.float32))
    infer = lambda m: call(s.url + f"/v2/models/{m}/infer", x)  # noqa: E731
    log = lambda: "".join(s.lines)  # noqa: E731
    try:
        want = json.loads(infer("cats")[2])["outputs"][0]["data"]
        # A model added (written aside, then moved in) is served at the next poll.
        copy_model(tmp_path / "staging")
        os.rename(tmp_path / "staging", repo / "dogs")
        wait_for(lambda: call(s.url + "/v2/models/dogs/ready")[0] == 200)
        assert json.loads(infer("dogs")[2])["outputs"][0]["data"] == want
        # A changed model is loaded again while requests go on, each answered.
        stop, answers = threading.Event(), []
        worker = threading.Thread(target=lambda: [answers.append(infer("cats")[0]) for _ in iter(stop.is_set, True)])
        worker.start()
        (repo / "cats" / "config.pbtxt").write_text("max_batch_size: 2 dynamic_batching { }")
        wait_for(lambda: json.loads(call(s.url + "/v2/models/cats/config")[2])["max_batch_size"] == 2)
        stop.set()
        worker.join()
        assert answers and set(answers) == {200}, answers
        wait_for(lambda: "model cats: loaded again" in log())  # said just after the swap
        # A version folder added (Triton's layout) is served as that version.
        copy_model(tmp_path / "v5")
        os.rename(tmp_path / "v5", repo / "cats" / "5")
        wait_for(lambda: json.loads(call(s.url + "/v2/models/cats")[2])["versions"] == ["5"])
        # One that does not load is said once, and the others serve on.
        (repo / "broken").mkdir()
        (repo / "broken" / "config.json").write_text("{not json")
        wait_for(lambda: "model broken: did not load" in log())
        time.sleep(0.5)
        assert log().count("model broken: did not load") == 1, log()
        assert infer("cats")[0] == 200 and call(s.url + "/v2/models/broken/ready")[0] == 404
        # A model removed is unloaded; load and unload requests are not taken in this mode.
        shutil.rmtree(repo / "dogs")
        wait_for(lambda: call(s.url + "/v2/models/dogs/ready")[0] == 404)
        wait_for(lambda: "model dogs: unloaded (gone from its repository)" in log())  # said just after
        status, _, text = call(s.url + "/v2/repository/models/dogs/load", b"", method="POST")
        assert status == 400 and "as their repository changes" in text, text
    finally:
        code, out = s.stop()
    assert code == 0, out


def test_a_port_in_use_is_a_clear_error():
    # cpp-httplib's SO_REUSEPORT let a second server start on the port, and the kernel split the
    # requests between the two (a leftover server answering with its old model).
    s = Server("--model", f"a={CK}", "--no-warmup")
    try:
        port = s.url.rsplit(":", 1)[1]
        r = subprocess.run([vit_binary(), "serve", "--model", f"a={CK}", "--port", port, "--no-warmup"],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert r.returncode != 0 and f"cannot listen on 127.0.0.1:{port} (in use" in r.stderr, r.stderr
    finally:
        assert s.stop()[0] == 0


def test_an_empty_repository_is_served_when_models_can_join_it(tmp_path):
    # Polled or loaded by request, a repository may start empty (it was refused, as it still is
    # without --model-control-mode: there nothing could join it).
    repo = tmp_path / "models"
    repo.mkdir()
    for mode in ("poll", "explicit"):
        s = Server("--model-repository", repo, "--model-control-mode", mode, "--repository-poll-secs", 0.2,
                   "--no-warmup")
        try:
            assert call(s.url + "/v2/health/ready")[0] == 200
            assert json.loads(call(s.url + "/v2/repository/index", b"", method="POST")[2]) == []
            copy_model(tmp_path / "staging")
            os.rename(tmp_path / "staging", repo / "cats")
            if mode == "explicit":
                assert call(s.url + "/v2/repository/models/cats/load", b"", method="POST")[0] == 200
            wait_for(lambda: call(s.url + "/v2/models/cats/ready")[0] == 200)
        finally:
            code, out = s.stop()
        assert code == 0, out
        shutil.rmtree(repo / "cats")


def test_explicit_model_control_loads_and_unloads_while_serving(tmp_path):
    repo = tmp_path / "models"
    repo.mkdir()
    os.symlink(os.path.abspath(CK), repo / "cats")
    os.symlink(os.path.abspath(CK), repo / "ants")
    # As Triton's: explicit control loads what --load-model names at start (ants waits).
    s = Server("--model-repository", repo, "--model-control-mode", "explicit", "--load-model", "cats",
               "--max-batch", 4, "--max-delay-ms", 20)
    x = pixels(np.random.default_rng(2).standard_normal((1, 3, 32, 32)).astype(np.float32))
    index = lambda: json.loads(call(s.url + "/v2/repository/index", b"", method="POST")[2])  # noqa: E731
    load = lambda name, what="load", body=b"": call(s.url + f"/v2/repository/models/{name}/{what}", body,  # noqa
                                                    method="POST")
    unavailable = {"version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}
    try:
        assert index() == [{"name": "ants", **unavailable}, {"name": "cats", "version": "1", "state": "READY"}]
        assert call(s.url + "/v2/models/ants/ready")[0] == 404
        want = json.loads(call(s.url + "/v2/models/cats/infer", x)[2])["outputs"][0]["data"]
        # Unloaded: gone from serving, listed UNAVAILABLE; loaded again: the same answers.
        # tritonclient's unload_model sends unload_dependents; Triton's load overrides are refused.
        assert load("cats", "unload", {"parameters": {"unload_dependents": False}})[0] == 200
        status, _, text = call(s.url + "/v2/models/cats/infer", x)
        assert status == 404 and "is not loaded: POST /v2/repository/models/cats/load" in text, text
        assert index() == [{"name": "ants", **unavailable}, {"name": "cats", **unavailable}]
        assert json.loads(call(s.url + "/v2/repository/index", {"ready": True}, method="POST")[2]) == []
        assert load("cats", "unload")[0] == 404
        for body in ({"parameters": {"file:1/model.onnx": "AAAA"}}, {"parameters": {"config": 1}},
                     {"parameters": 1}, b"[1]"):
            status, _, text = load("cats", body=body)
            assert status == 400 and "parameter" in json.loads(text)["error"], (body, text)
        assert call(s.url + "/v2/models/cats/ready")[0] == 404
        assert load("cats")[0] == 200
        assert json.loads(call(s.url + "/v2/models/cats/infer", x)[2])["outputs"][0]["data"] == want
        # A model added to the repository since the start is found; one that is not there is 404;
        # one that does not load is 400 and leaves the others serving.
        os.symlink(os.path.abspath(CK), repo / "dogs")
        assert load("dogs")[0] == 200 and call(s.url + "/v2/models/dogs/ready")[0] == 200
        assert load("birds")[0] == 404
        (repo / "broken").mkdir()
        (repo / "broken" / "config.json").write_text("{not json")
        status, _, text = call(s.url + "/v2/repository/models/broken/load", b"", method="POST")
        assert status == 400 and "did not load" in json.loads(text)["error"], text
        # Loading again while requests run: every request answered, with the same logits
        # (within 1e-5 relative: batched together, not always the same last bits).
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            calls = [pool.submit(call, s.url + "/v2/models/cats/infer", x) for _ in range(40)]
            assert load("cats")[0] == 200
            answers = [f.result() for f in calls]
        assert all(a[0] == 200 for a in answers), [a[:1] + a[2:] for a in answers if a[0] != 200][:3]
        got = np.array([json.loads(a[2])["outputs"][0]["data"] for a in answers], np.float32)
        worst = worst_rel(got, np.array([want] * len(answers), np.float32))
        assert worst <= 1e-5, f"worst relative mismatch {worst:.3g}"
        assert [e["name"] for e in index()] == ["ants", "broken", "cats", "dogs"]
    finally:
        code, log = s.stop()
    assert code == 0, log
    assert "model cats: unloaded" in log and "model cats: loaded again" in log and "model dogs: loaded" in log
    assert "model ants:" not in log, log
    # --load-model '*' loads every model; --load-model needs explicit control and a model of that name.
    (repo / "broken" / "config.json").unlink()
    (repo / "broken").rmdir()
    s = Server("--model-repository", repo, "--model-control-mode", "explicit", "--load-model", "*", "--no-warmup")
    try:
        assert [e["name"] for e in index() if e["state"] == "READY"] == ["ants", "cats", "dogs"]
    finally:
        assert s.stop()[0] == 0
    for args, message in ((["--load-model", "cats"], "with --model-control-mode explicit"),
                          (["--model-control-mode", "explicit", "--load-model", "cows"], "--load-model cows: no")):
        r = subprocess.run([vit_binary(), "serve", "--port", "0", "--model-repository", repo, *args],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert r.returncode != 0 and message in r.stderr, r.stderr


def test_a_log_nobody_reads_stops_nothing():
    """The access log was written under a lock by each request's thread: a stdout pipe its
    harness stopped reading held every HTTP thread after about 1,300 requests (health checks
    too), and SIGTERM then never ended the server. The log now has a thread of its own."""
    import fcntl
    p = subprocess.Popen([vit_binary(), "serve", "--port", "0", "--threads", "2", "--no-warmup", "--model", f"a={CK}"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        fcntl.fcntl(p.stdout.fileno(), 1031, 4096)  # F_SETPIPE_SZ: a page, full after ~60 lines
        url = None
        for line in p.stdout:
            m = re.search(rb"listening on http://([\d.]+):(\d+)", line)
            if m:
                url = (m.group(1).decode(), int(m.group(2)))
                break
        assert url, "vit serve did not start"
        conn = http.client.HTTPConnection(*url, timeout=10)
        for _ in range(300):  # five pipes' worth of log lines, never read
            conn.request("GET", "/v2/health/live")
            conn.getresponse().read()
        conn.close()
        assert call(f"http://{url[0]}:{url[1]}/v2/health/ready")[0] == 200
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # --no-access-log: the start's lines, none per request
    s = Server("--no-warmup", "--no-access-log", "--model", f"a={CK}")
    assert call(s.url + "/v2/health/live")[0] == 200
    code, log = s.stop()
    assert code == 0 and "GET /v2/health/live" not in log and "vit serve: stopped" in log, log
