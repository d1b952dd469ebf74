"""vit serve --grpc-port (ctest label `serve`; docs/serving.md): the Open Inference Protocol's
gRPC API with a real gRPC client (grpcio, with the messages protoc makes of
src/serve/inference.proto): every method, logits against `vit predict` and the HTTP API,
each error's status code, API keys, TLS, batching of concurrent calls, and SIGTERM under load."""
import concurrent.futures
import importlib
import json
import os
import re
import subprocess
import threading
import sys
import tempfile
import time

import grpc  # Debian's python3-grpcio (scripts/setup.sh)
import numpy as np
import pytest


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_serve as http  # noqa: E402  (its Server, fixtures and helpers; not its tests)

CK, IMAGES, TLS = http.CK, http.IMAGES, http.TLS
PROTO = os.path.join(HERE, "..", "..", "src", "serve", "inference.proto")
SERVICE = "/inference.GRPCInferenceService/"


@pytest.fixture(scope="module")
def pb():
    """inference_pb2, made by protoc from the server's own inference.proto."""
    out = tempfile.mkdtemp()
    subprocess.run(["protoc", "-I", os.path.dirname(PROTO), f"--python_out={out}", PROTO], check=True)
    sys.path.insert(0, out)
    try:
        return importlib.import_module("inference_pb2")
    finally:
        sys.path.remove(out)


class Client:
    """The service's methods on a channel: client.ModelInfer(request, metadata=..., timeout=...)."""

    def __init__(self, pb, target, credentials=None, options=()):
        self.channel = (grpc.secure_channel(target, credentials, options) if credentials
                        else grpc.insecure_channel(target, options))
        for method in ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
                       "ModelConfig", "ModelStatistics", "RepositoryIndex", "RepositoryModelLoad",
                       "RepositoryModelUnload"):
            request, response = getattr(pb, method + "Request"), getattr(pb, method + "Response")
            setattr(self, method, self.channel.unary_unary(SERVICE + method, request.SerializeToString,
                                                           response.FromString))


def serve(*args):
    """vit serve --grpc-port 0 ARGS: (the HTTP Server, the gRPC target "127.0.0.1:PORT")."""
    s = http.Server("--grpc-port", 0, *args)
    m = next(re.search(r"gRPC listening on ([\d.]+):(\d+)", line) for line in s.lines if "gRPC listening" in line)
    return s, f"{m.group(1)}:{m.group(2)}"


@pytest.fixture(scope="module")
def server(pb):
    s, target = serve("--model", f"a={CK}", "--max-batch", 16, "--max-delay-ms", 5, "--max-body-mb", 1)
    yield s, Client(pb, target)
    code, log = s.stop()
    assert code == 0, log


def pixels_request(pb, x, raw=True, **fields):
    r = pb.ModelInferRequest(model_name="a", **fields)
    t = r.inputs.add(name="pixel_values", datatype="FP32", shape=list(x.shape))
    if raw:
        r.raw_input_contents.append(x.astype("<f4").tobytes())
    else:
        t.contents.fp32_contents.extend(x.reshape(-1).tolist())
    return r


def images_request(pb, files, raw=True, classification=0):
    r = pb.ModelInferRequest(model_name="a")
    t = r.inputs.add(name="image", datatype="BYTES", shape=[len(files)])
    if raw:
        r.raw_input_contents.append(http.bytes_elements(files))
    else:
        t.contents.bytes_contents.extend(files)
    if classification:
        r.outputs.add(name="logits").parameters["classification"].int64_param = classification
    return r


def logits_of(res):
    out = res.outputs[0]
    assert out.name == "logits" and out.datatype == "FP32", out
    return np.frombuffer(res.raw_output_contents[0], "<f4").reshape(list(out.shape))


def strings_of(res):
    """A BYTES output's elements (each a 4-byte length, then its bytes)."""
    data, out = res.raw_output_contents[0], []
    while data:
        n = int.from_bytes(data[:4], "little")
        out.append(data[4:4 + n].decode())
        data = data[4 + n:]
    return out


def code_of(call):
    with pytest.raises(grpc.RpcError) as e:
        call()
    return e.value.code(), e.value.details()


def test_health_and_metadata(server, pb):
    s, c = server
    assert c.ServerLive(pb.ServerLiveRequest()).live
    assert c.ServerReady(pb.ServerReadyRequest()).ready
    meta = c.ServerMetadata(pb.ServerMetadataRequest())
    assert meta.name == "vitcpp" and meta.version and "classification" in meta.extensions
    # The server's one list, as GET /v2's (gRPC listed classification alone).
    assert list(meta.extensions) == json.loads(http.call(s.url + "/v2")[2])["extensions"]
    assert c.ModelReady(pb.ModelReadyRequest(name="a")).ready
    assert c.ModelReady(pb.ModelReadyRequest(name="a", version="1")).ready
    m = c.ModelMetadata(pb.ModelMetadataRequest(name="a"))
    assert m.name == "a" and list(m.versions) == ["1"] and m.platform == "vitcpp"
    assert [(t.name, t.datatype, list(t.shape)) for t in m.inputs] == [
        ("pixel_values", "FP32", [-1, 3, 32, 32]), ("image", "BYTES", [-1])]
    assert [(t.name, t.datatype, list(t.shape)) for t in m.outputs] == [("logits", "FP32", [-1, 5])]
    # gRPC's standard health service (Kubernetes' gRPC probes): status 1, SERVING, for the
    # server ("") and for the service; a service it does not have is NOT_FOUND.
    health = c.channel.unary_unary("/grpc.health.v1.Health/Check", lambda b: b, lambda b: b)
    assert health(b"") == b"\x08\x01"
    assert health(b"\x0a" + bytes([len("inference.GRPCInferenceService")]) + b"inference.GRPCInferenceService") == \
        b"\x08\x01"
    assert code_of(lambda: health(b"\x0a\x03foo"))[0] == grpc.StatusCode.NOT_FOUND
    # Triton's methods that vit serve does not have are UNIMPLEMENTED.
    trace = c.channel.unary_unary(SERVICE + "TraceSetting", lambda m: m.SerializeToString(), lambda b: b)
    assert code_of(lambda: trace(pb.ServerLiveRequest()))[0] == grpc.StatusCode.UNIMPLEMENTED


def numbers(v):
    """v with its digit strings as numbers (protobuf's JSON writes 64-bit numbers as strings),
    and without empty lists (Triton's fields that vit serve leaves empty)."""
    if isinstance(v, dict):
        return {k: numbers(x) for k, x in v.items() if x != []}
    if isinstance(v, list):
        return [numbers(x) for x in v]
    return int(v) if isinstance(v, str) and v.isdigit() else v


def as_json(message):
    """A message as the HTTP API's JSON has it: every field, numbers as numbers."""
    from google.protobuf import json_format
    return numbers(json_format.MessageToDict(message, preserving_proto_field_name=True,
                                             including_default_value_fields=True))


def test_triton_configuration_and_statistics_are_the_http_apis(server, pb):
    s, c = server
    c.ModelInfer(pixels_request(pb, np.ones((3, 3, 32, 32), np.float32)))
    http_json = lambda path: numbers(json.loads(http.call(s.url + path)[2]))  # noqa: E731
    config = c.ModelConfig(pb.ModelConfigRequest(name="a")).config
    assert config.max_batch_size == 16 and config.dynamic_batching.max_queue_delay_microseconds == 5000
    assert [(i.name, list(i.dims)) for i in config.input] == [("pixel_values", [3, 32, 32]), ("image", [1])]
    assert as_json(config) == http_json("/v2/models/a/config")
    stats = c.ModelStatistics(pb.ModelStatisticsRequest(name="a"))
    assert stats.model_stats[0].inference_count >= 3 and stats.model_stats[0].batch_stats, stats
    assert as_json(stats) == http_json("/v2/models/a/stats")
    assert [m.name for m in c.ModelStatistics(pb.ModelStatisticsRequest()).model_stats] == ["a"]
    for request in (pb.ModelConfigRequest(name="b"), pb.ModelConfigRequest(name="a", version="2")):
        assert code_of(lambda: c.ModelConfig(request))[0] == grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: c.ModelStatistics(pb.ModelStatisticsRequest(name="b")))[0] == grpc.StatusCode.NOT_FOUND
    # Without --model-control-mode explicit, the index lists the models and nothing loads or unloads.
    index = c.RepositoryIndex(pb.RepositoryIndexRequest())
    assert [(m.name, m.version, m.state) for m in index.models] == [("a", "1", "READY")]
    code, details = code_of(lambda: c.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="a")))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "--model-control-mode explicit" in details, details
    assert c.ModelReady(pb.ModelReadyRequest(name="a")).ready


def test_infer_gives_vit_predicts_logits_raw_or_typed(server, pb, tmp_path):
    s, c = server
    x = np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32)
    want = http.cli_logits(x, tmp_path)
    res = c.ModelInfer(pixels_request(pb, x, id="r1"))
    assert res.model_name == "a" and res.model_version == "1" and res.id == "r1"
    got = logits_of(res)
    assert got.shape == (3, 5)
    assert http.worst_rel(got, want) <= 1e-5, f"worst relative difference {http.worst_rel(got, want):.3g}"
    typed = logits_of(c.ModelInfer(pixels_request(pb, x, raw=False, model_version="1")))
    assert np.array_equal(typed, got)
    # The HTTP API's answer for the same input, bit for bit.
    status, _, body = http.call(s.url + "/v2/models/a/infer", http.pixels(x))
    assert status == 200 and np.array_equal(np.array(json.loads(body)["outputs"][0]["data"], np.float32),
                                            got.reshape(-1))


def test_images_and_classification_give_vit_predicts_top_k(server, pb):
    _, c = server
    cli = [json.loads(line) for line in http.run_vit("predict", "--checkpoint", CK, "--json", *IMAGES).splitlines()]
    files = [open(p, "rb").read() for p in IMAGES]
    for raw in (True, False):
        res = c.ModelInfer(images_request(pb, files, raw=raw, classification=3))
        out = res.outputs[0]
        assert out.datatype == "BYTES" and list(out.shape) == [3, 3]
        strings = strings_of(res)
        for i, one in enumerate(cli):
            assert [s.split(":", 2)[1:] for s in strings[3 * i:3 * i + 3]] == [
                [str(t["index"]), t["label"]] for t in one["topk"][:3]]
    logits = logits_of(c.ModelInfer(images_request(pb, files)))
    assert [int(np.argmax(row)) for row in logits] == [one["topk"][0]["index"] for one in cli]


def test_bad_calls_get_their_status_codes(server, pb):
    s, c = server
    C = grpc.StatusCode
    x = np.zeros((1, 3, 32, 32), np.float32)
    r = pixels_request(pb, x)
    r.model_name = "nope"
    assert code_of(lambda: c.ModelInfer(r)) == (C.NOT_FOUND, "unknown model 'nope'; this server has: a")
    assert code_of(lambda: c.ModelMetadata(pb.ModelMetadataRequest(name="a", version="2")))[0] == C.NOT_FOUND
    # ModelReady of a model or version the server lacks: not ready, as Triton answers (NOT_FOUND
    # made tritonclient.grpc's is_model_ready raise in a loop waiting for a model to load).
    assert not c.ModelReady(pb.ModelReadyRequest(name="b")).ready
    assert not c.ModelReady(pb.ModelReadyRequest(name="a", version="2")).ready

    def invalid(request, words):
        code, details = code_of(lambda: c.ModelInfer(request))
        assert code == C.INVALID_ARGUMENT and words in details, (code, details)

    invalid(pixels_request(pb, np.zeros((1, 3, 16, 16), np.float32)), "does not fit the model's input [N, 3, 32, 32]")
    r = pixels_request(pb, x)
    r.raw_input_contents[0] = r.raw_input_contents[0][:-4]
    invalid(r, "bytes of raw_input_contents")
    r = pixels_request(pb, x)
    r.inputs[0].shape[0] = 1 << 40  # a huge N with little data: refused before any allocation
    invalid(r, "raw_input_contents")
    r = pixels_request(pb, x, raw=False)
    r.raw_input_contents.append(b"\0" * 4)
    invalid(r, "both contents and raw_input_contents")
    r = pixels_request(pb, x)
    r.inputs[0].datatype = "FP16"
    invalid(r, "datatype must be FP32")
    r = pixels_request(pb, x)
    r.inputs[0].name = "pixels"
    invalid(r, "unknown input \"pixels\"")
    r = pixels_request(pb, x)
    r.inputs.add(name="image", datatype="BYTES", shape=[1])
    invalid(r, "one input")
    r = pixels_request(pb, x)
    r.outputs.add(name="probabilities")
    invalid(r, "the only output is \"logits\"")
    r = pixels_request(pb, x)  # as over HTTP: the second's classification replaced the first's
    r.outputs.add(name="logits")
    r.outputs.add(name="logits").parameters["classification"].int64_param = 2
    invalid(r, "\"logits\" twice")
    r = pixels_request(pb, x)
    r.outputs.add(name="logits").parameters["classification"].string_param = "3"
    invalid(r, "positive int64_param")
    invalid(images_request(pb, [b"not an image"]), "image: data[0]")
    r = images_request(pb, [b"abc"])
    r.raw_input_contents[0] = r.raw_input_contents[0][:5]
    invalid(r, "element 0 is 3 bytes long")
    r = pb.ModelInferRequest(model_name="a")
    r.inputs.add(name="image", datatype="BYTES", shape=[2])
    invalid(r, "0 bytes_contents")
    # Over --max-body-mb (1): gRPC refuses the message itself.
    big = pixels_request(pb, np.zeros((100, 3, 32, 32), np.float32))
    assert code_of(lambda: c.ModelInfer(big))[0] == C.RESOURCE_EXHAUSTED
    # The same gzip-compressed (a few KB): the limit holds for the message decompressed; a small
    # compressed call is answered as it is plain.
    assert code_of(lambda: c.ModelInfer(big, compression=grpc.Compression.Gzip))[0] == C.RESOURCE_EXHAUSTED
    assert np.array_equal(logits_of(c.ModelInfer(pixels_request(pb, x), compression=grpc.Compression.Gzip)),
                          logits_of(c.ModelInfer(pixels_request(pb, x))))
    # Small files that decode past the limit (100 images of 3x32x32 floats: 1.2 MB).
    png = open(os.path.join(http.PRETRAINED, "..", "digit_7.png"), "rb").read()
    code, details = code_of(lambda: c.ModelInfer(images_request(pb, [png] * 100)))
    assert code == C.RESOURCE_EXHAUSTED and "over the --max-body-mb limit" in details, details
    # Still serving, and the calls are logged and counted as the HTTP requests are.
    assert logits_of(c.ModelInfer(pixels_request(pb, x))).shape == (1, 5)
    log = "".join(s.lines)
    assert re.search(r"^127\.0\.0\.1:\d+ gRPC ModelInfer INVALID_ARGUMENT [\d.]+ ms batch 0$", log, re.M), log
    assert re.search(r"^127\.0\.0\.1:\d+ gRPC ModelInfer OK [\d.]+ ms batch 1$", log, re.M), log
    metrics = http.call(s.url + "/metrics")[2]
    assert re.search(r'vit_requests_total\{model="a",status="400"\} \d+', metrics), metrics


def test_full_queue_is_unavailable_and_late_answers_are_deadline_exceeded(pb):
    C = grpc.StatusCode
    x = np.zeros((1, 3, 32, 32), np.float32)
    s, target = serve("--model", f"a={CK}", "--max-batch", 64, "--max-delay-ms", 1500, "--max-queue", 1,
                      "--timeout-s", 5)
    try:
        c = Client(pb, target)

        def one(_):
            try:
                c.ModelInfer(pixels_request(pb, x))
                return C.OK, ""
            except grpc.RpcError as e:
                return e.code(), e.details()

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(one, range(3)))
        codes = [a[0] for a in answers]
        assert C.OK in codes and C.UNAVAILABLE in codes, answers
        assert all(code == C.OK or "queue is full" in d for code, d in answers), answers
        # The client's own deadline, shorter than --timeout-s, is the server's too.
        t = time.monotonic()
        code, details = code_of(lambda: c.ModelInfer(pixels_request(pb, x), timeout=0.3))
        # Bounds in these deadline checks are far from the waits they tell apart (a loaded
        # machine once took 0.7 s over a 0.2 s deadline).
        assert code == C.DEADLINE_EXCEEDED and time.monotonic() - t < 3, (code, details)
    finally:
        code, log = s.stop()
    assert code == 0, log
    # Given up at the client's 0.3 s, not at --timeout-s (5 s); without the client's deadline
    # the server would see the call cancelled instead.
    late = re.search(r"gRPC ModelInfer DEADLINE_EXCEEDED (\d+)\.\d ms", log)
    assert late and 250 <= int(late.group(1)) < 2500, log
    s, target = serve("--model", f"a={CK}", "--max-batch", 64, "--max-delay-ms", 2000, "--timeout-s", 0.3)
    try:
        c = Client(pb, target)
        # A call the client cancels is given up at once (and skipped if its pass has not started).
        f = c.ModelInfer.future(pixels_request(pb, x), timeout=30)
        time.sleep(0.1)
        f.cancel()
        code, details = code_of(lambda: c.ModelInfer(pixels_request(pb, x)))
        assert code == C.DEADLINE_EXCEEDED and "--timeout-s" in details, details
        assert c.ServerLive(pb.ServerLiveRequest()).live
    finally:
        code, log = s.stop()
    assert code == 0, log
    assert "gRPC ModelInfer DEADLINE_EXCEEDED" in log, log
    assert "gRPC ModelInfer CANCELLED" in log, log  # not DEADLINE_EXCEEDED at --timeout-s
    # Triton's "timeout" request parameter (microseconds), when sooner than --timeout-s.
    s, target = serve("--model", f"a={CK}", "--max-batch", 64, "--max-delay-ms", 3000, "--no-warmup")
    try:
        r = pixels_request(pb, x)
        r.parameters["timeout"].int64_param = 200000
        t = time.monotonic()
        code, details = code_of(lambda: Client(pb, target).ModelInfer(r))
        assert code == C.DEADLINE_EXCEEDED and "request's timeout" in details and time.monotonic() - t < 2.4
        r.parameters["timeout"].string_param = "200000"
        assert code_of(lambda: Client(pb, target).ModelInfer(r))[0] == C.INVALID_ARGUMENT
    finally:
        assert s.stop()[0] == 0


def test_calls_waiting_in_the_queue_each_have_a_thread(pb, tmp_path):
    # gRPC answers a call it has no thread for with RESOURCE_EXHAUSTED, unlogged. With
    # --http-threads 1, 16 calls waiting together in the queue are still each answered, each
    # with vit predict's logits within the 1e-5 relative. Not bit for bit with each
    # other: the 16 run as one pass, and oneDNN's sgemm can give a pass's last rows other last
    # bits than the rest (AVX2 on an AMD Zen 2; docs/serving.md, "Batching").
    s, target = serve("--model", f"a={CK}", "--max-batch", 64, "--max-delay-ms", 1000, "--max-queue", 32,
                      "--http-threads", 1, "--no-warmup")
    try:
        c = Client(pb, target)
        x = np.zeros((1, 3, 32, 32), np.float32)
        want = http.cli_logits(x, tmp_path)
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            got = list(pool.map(lambda _: logits_of(c.ModelInfer(pixels_request(pb, x))), range(16)))
        worst = max(http.worst_rel(g, want) for g in got)
        assert len(got) == 16 and worst <= 1e-5, f"worst relative difference {worst:.3g}"
    finally:
        code, log = s.stop()
    assert code == 0 and log.count("gRPC ModelInfer OK") == 16, log


def test_api_keys_and_mutual_tls(pb, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("s3cret\n")
    flags = http.tls_flags("--ssl-ca-certs", os.path.join(TLS, "ca.pem"))
    s, target = serve("--model", f"a={CK}", "--api-key-file", keys, *flags)
    read = lambda f: open(os.path.join(TLS, f), "rb").read()  # noqa: E731
    try:
        assert "gRPC listening on" in "".join(s.lines) and "(TLS)" in "".join(s.lines)
        mine = grpc.ssl_channel_credentials(read("ca.pem"), read("client.key"), read("client.pem"))
        c = Client(pb, target, mine)
        x = np.ones((1, 3, 32, 32), np.float32)
        key = [("authorization", "Bearer s3cret")]
        assert c.ServerLive(pb.ServerLiveRequest()).live  # health is open
        assert c.channel.unary_unary("/grpc.health.v1.Health/Check", lambda b: b, lambda b: b)(b"") == b"\x08\x01"
        assert code_of(lambda: c.ModelInfer(pixels_request(pb, x)))[0] == grpc.StatusCode.UNAUTHENTICATED
        assert code_of(lambda: c.ModelMetadata(pb.ModelMetadataRequest(name="a"),
                                               metadata=[("authorization", "Bearer wrong")]))[0] == \
            grpc.StatusCode.UNAUTHENTICATED
        got = logits_of(c.ModelInfer(pixels_request(pb, x), metadata=key))
        status, _, body = http.call(s.url + "/v2/models/a/infer", http.pixels(x), {"Authorization": "Bearer s3cret"},
                                    context=http.tls_context(client_cert=True))
        assert status == 200 and np.array_equal(got.reshape(-1), np.array(
            json.loads(body)["outputs"][0]["data"], np.float32)), body
        # No client certificate, or no TLS at all: no call gets through.
        for other in (Client(pb, target, grpc.ssl_channel_credentials(read("ca.pem"))), Client(pb, target)):
            assert code_of(lambda: other.ServerLive(pb.ServerLiveRequest(), timeout=10))[0] == \
                grpc.StatusCode.UNAVAILABLE
    finally:
        code, log = s.stop()
    assert code == 0, log


def test_concurrent_calls_are_batched_and_sigterm_answers_every_accepted_call(pb, tmp_path):
    s, target = serve("--model", f"a={CK}", "--max-batch", 8, "--max-delay-ms", 200)
    c = Client(pb, target)
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((1 + i % 3, 3, 32, 32)).astype(np.float32) for i in range(8)]
    want = [http.cli_logits(x, tmp_path) for x in xs]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda x: logits_of(c.ModelInfer(pixels_request(pb, x))), xs))
    for g, w in zip(got, want):  # each caller its own rows, whatever the batch
        assert http.worst_rel(g, w) <= 1e-5, f"worst relative difference {http.worst_rel(g, w):.3g}"
    # The access log's lines follow the answers: waited for.
    http.wait_for(lambda: re.search(r"gRPC ModelInfer OK [\d.]+ ms batch ([2-9]|1\d)", "".join(s.lines)))

    def send():
        try:
            c.ModelInfer(pixels_request(pb, xs[0]), timeout=30)
            return grpc.StatusCode.OK, True
        except grpc.RpcError as e:
            return e.code(), False

    results, stopped, code, log = http.sigterm_under_load(s, send)
    assert code == 0, log
    early = [code for t, code in results if t < stopped - 0.05]
    assert early and all(code == grpc.StatusCode.OK for code in early), early
    # Every call the server answered OK reached its caller; those after the stop were refused.
    assert log.count("gRPC ModelInfer OK") == sum(1 for _, code in results if code == grpc.StatusCode.OK) + 8
    # After the signal, gRPC refuses new calls: UNAVAILABLE, or CANCELLED for one it had
    # received but not yet handed to the service. None that the service took was cut off.
    late = {code for _, code in results} - {grpc.StatusCode.OK}
    assert late <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}, results
    assert "gRPC ModelInfer INTERNAL" not in log and "gRPC ModelInfer CANCELLED" not in log, log


def test_grpc_port_in_use_is_a_clear_error():
    s, target = serve("--model", f"a={CK}")
    try:
        port = target.split(":")[1]
        r = subprocess.run([http.vit_binary(), "serve", "--model", f"a={CK}", "--port", "0", "--grpc-port", port,
                            "--no-warmup"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert r.returncode != 0 and "--grpc-port: cannot listen on 127.0.0.1:" + port in r.stderr, r.stderr
    finally:
        assert s.stop()[0] == 0


def test_repository_index_load_and_unload(pb, tmp_path):
    C = grpc.StatusCode
    repo = tmp_path / "models"
    repo.mkdir()
    os.symlink(os.path.abspath(CK), repo / "cats")
    os.symlink(os.path.abspath(CK), repo / "ants")
    s, target = serve("--model-repository", repo, "--model-control-mode", "explicit", "--load-model", "cats",
                      "--max-batch", 4, "--max-queue", 8, "--http-threads", 1, "--no-warmup")
    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    try:
        c = Client(pb, target)
        index = lambda **kw: [(m.name, m.state, m.reason)  # noqa: E731
                              for m in c.RepositoryIndex(pb.RepositoryIndexRequest(**kw)).models]
        assert index() == [("ants", "UNAVAILABLE", "unloaded"), ("cats", "READY", "")]
        assert index(ready=True) == [("cats", "READY", "")]
        code, details = code_of(lambda: c.RepositoryIndex(pb.RepositoryIndexRequest(repository_name="x")))
        assert code == C.INVALID_ARGUMENT and "repository_name" in details, details
        r = pixels_request(pb, x)
        r.model_name = "cats"
        want = logits_of(c.ModelInfer(r))
        # tritonclient's unload_model sends unload_dependents.
        unload = pb.RepositoryModelUnloadRequest(model_name="cats")
        unload.parameters["unload_dependents"].bool_param = False
        c.RepositoryModelUnload(unload)
        code, details = code_of(lambda: c.ModelInfer(r))
        assert code == C.NOT_FOUND and "is not loaded" in details, details
        assert code_of(lambda: c.RepositoryModelUnload(unload))[0] == C.NOT_FOUND
        # Triton's file overrides are refused; a config (JSON) is taken; loading again gives the same answers.
        override = pb.RepositoryModelLoadRequest(model_name="cats")
        override.parameters["file:1/model.onnx"].bytes_param = b"onnx"
        code, details = code_of(lambda: c.RepositoryModelLoad(override))
        assert code == C.INVALID_ARGUMENT and "file:" in details, details
        configured = pb.RepositoryModelLoadRequest(model_name="cats")
        configured.parameters["config"].string_param = json.dumps({"max_batch_size": 2, "dynamic_batching": {}})
        c.RepositoryModelLoad(configured)
        config = c.ModelConfig(pb.ModelConfigRequest(name="cats")).config
        assert config.max_batch_size == 2 and config.HasField("dynamic_batching"), config
        assert np.array_equal(logits_of(c.ModelInfer(r)), want)
        assert code_of(lambda: c.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="cows")))[0] == \
            C.NOT_FOUND
        # A model added since the start is found, and its queue gets threads (each model's
        # queue and passes, twice: 2 x (8 + 4) calls at the start; cats' config now makes it 8 + 2).
        assert "gRPC listening on" in "".join(s.lines) and ", up to 48 calls at once" in "".join(s.lines)
        os.symlink(os.path.abspath(CK), repo / "dogs")
        c.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="dogs"))
        assert c.ModelReady(pb.ModelReadyRequest(name="dogs")).ready
        assert index() == [("ants", "UNAVAILABLE", "unloaded"), ("cats", "READY", ""), ("dogs", "READY", "")]
    finally:
        code, log = s.stop()
    assert code == 0, log
    assert "gRPC: up to 68 calls at once" in log, log  # 2 x ((8 + 4) + (8 + 2) + (8 + 4))
    assert "gRPC RepositoryModelLoad OK" in log and "gRPC RepositoryModelUnload NOT_FOUND" in log, log


def test_tritons_version_folders(pb, tmp_path):
    repo = tmp_path / "models"
    http.copy_model(repo / "cats" / "7")
    s, target = serve("--model-repository", repo, "--no-warmup")
    try:
        c = Client(pb, target)
        assert list(c.ModelMetadata(pb.ModelMetadataRequest(name="cats")).versions) == ["7"]
        r = pixels_request(pb, np.zeros((1, 3, 32, 32), np.float32), model_version="7")
        r.model_name = "cats"
        assert c.ModelInfer(r).model_version == "7"
        r.model_version = "1"
        code, details = code_of(lambda: c.ModelInfer(r))
        assert code == grpc.StatusCode.NOT_FOUND and "has version 7 only" in details, details
        assert [m.version for m in c.RepositoryIndex(pb.RepositoryIndexRequest()).models] == ["7"]
        assert c.ModelStatistics(pb.ModelStatisticsRequest(name="cats")).model_stats[0].version == "7"
    finally:
        code, log = s.stop()
    assert code == 0, log


def test_a_stream_of_requests_is_batched_and_each_answered_by_its_id(pb, tmp_path):
    s, target = serve("--model", f"a={CK}", "--max-batch", 8, "--max-delay-ms", 200)
    c = Client(pb, target)
    stream = c.channel.stream_stream(SERVICE + "ModelStreamInfer", pb.ModelInferRequest.SerializeToString,
                                     pb.ModelStreamInferResponse.FromString)
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(6)]
    want = {f"r{i}": logits_of(c.ModelInfer(pixels_request(pb, x))) for i, x in enumerate(xs)}
    try:
        requests = [pixels_request(pb, x, id=f"r{i}") for i, x in enumerate(xs)]
        bad = pb.ModelInferRequest(model_name="a", id="bad")
        bad.inputs.add(name="pixel_values", datatype="FP32", shape=[1, 3, 2, 2])
        answers = list(stream(iter(requests[:3] + [bad] + requests[3:]), timeout=60))
        assert len(answers) == 7
        got = {a.infer_response.id: a for a in answers}
        assert "does not fit" in got["bad"].error_message and got["bad"].infer_response.model_name == "a"
        # Each answer found by its id, ModelInfer's logits within 1e-5 relative (batched with
        # others, not always the same last bits: docs/serving.md, "Batching").
        for rid, w in want.items():
            assert not got[rid].error_message, (rid, got[rid].error_message)
            worst = http.worst_rel(logits_of(got[rid].infer_response), w)
            assert worst <= 1e-5, f"{rid}: worst relative mismatch {worst:.3g}"
        # Batched together; the access log's lines follow the answers: waited for.
        http.wait_for(lambda: re.search(r"gRPC ModelStreamInfer OK [\d.]+ ms batch [2-8]", "".join(s.lines)))
        http.wait_for(lambda: "gRPC ModelStreamInfer INVALID_ARGUMENT" in "".join(s.lines))
        # A stream left open does not hold up the stop: its requests are answered, then it ends.
        held = threading.Event()

        def requests_then_wait():
            yield pixels_request(pb, xs[0], id="last")
            held.wait(30)

        open_stream = stream(requests_then_wait(), timeout=60)
        first = next(open_stream)
        assert first.infer_response.id == "last" and not first.error_message
        t = time.monotonic()
        code, log = s.stop()
        held.set()
        assert code == 0 and time.monotonic() - t < 10, log
    finally:
        s.stop()
