#!/usr/bin/python3
"""vit serve under load: the figures of docs/serving.md. Not part of CI.

    PYTHONPATH=build/python /usr/bin/python3 bench/serve_load.py [--seconds 60] [--memory-minutes 10]

1. 64 connections for --seconds on mnist-seed (FP32 pixel_values) and ViT-Ti/16 (a PNG as
   BYTES), 10% of the requests malformed:
   - a Python client on 64 threads that checks every answer (400 for the malformed ones,
     the expected logits within 1e-5 for the others) and reports p50/p99 and requests/s;
   - wrk (Debian's) with a Lua script sending the same mix: its p50/p99 and requests/s, and
     the statuses it got.
2. ViT-S/16 (a photo as BYTES) and mnist-seed (pixel_values) with dynamic batching
   (--max-batch 16) against --max-batch 1, 16 wrk connections: images/s of each, their
   ratio, and what the engine alone gains from batches of 16 (vit bench).
3. --memory-minutes of load on both models: the server's resident memory every 30 s.
4. FP32 pixel_values as JSON numbers against the binary tensor data extension, on mnist-seed
   and ViT-S/16, 16 wrk connections: requests/s of each.
5. gRPC (--grpc-port; over one channel, and over a channel per client) against HTTP with
   binary tensor data, the same Python client for each: 16 threads sending one image's FP32
   pixel_values each, every answer checked; requests/s and p50/p99 on mnist-seed and
   ViT-S/16 (python3-grpcio; protoc makes the messages).
6. --memory-minutes of gRPC load on mnist-seed and ViT-Ti/16, every client reconnecting
   every 15 s: the server's resident memory every 30 s.
7. One ViT-S/16 image at a time from one client (--max-batch 1): the time per request as
   binary tensor data, v2 JSON, KServe V1 pixels (read from the text) and V1 with a named
   input (through nlohmann); medians of 12 rounds, each kind in turn.
The models are the presets with random weights (vitcpp.create_model(...).save_pretrained).

Part 2 on another machine, without the Python module there: `--prepare DIR` writes the
models and request bodies here; `--prepared DIR --only 2` reads them there (a ViT-S/16 folder
DIR/s may come from elsewhere, e.g. timm's save_for_hf of vit_small_patch16_224).
"""
import argparse
import base64
import concurrent.futures
import json
import os
import random
import re
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VIT = os.path.join(ROOT, "build", "vit")
PHOTO = os.path.join(ROOT, "tests", "fixtures", "pretrained", "images", "cat.jpg")
THREADS = 2  # the server's and vit bench's --threads (--threads)
WRK_THREADS = 2  # wrk's -t (--wrk-threads)
PART2 = (("s", "vit-small-16", "image"), ("mnist", "mnist-seed", "pixels"))  # name, preset, input

WRK_LUA = r"""
local bodies, weights, lengths, threads = {}, {}, {}, {}
counts = {}  -- global: done() reads each thread's with thread:get
function setup(thread) table.insert(threads, thread) end
function init(args)
  -- args: path, then FILE:WEIGHT[:JSON_LENGTH] (the bodies, how often each is sent, and for
  -- binary tensor data the length of the JSON before it)
  path = args[1]
  for i = 2, #args do
    local file, w, n = args[i]:match("([^:]+):(%d+):?(%d*)")
    local f = io.open(file, "rb"); table.insert(bodies, f:read("*a")); f:close()
    table.insert(weights, tonumber(w))
    lengths[#weights] = n ~= "" and n or false
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  math.randomseed(os.time() + #threads)
end
function request()
  local r, i = math.random(100), 1
  while r > weights[i] do r = r - weights[i]; i = i + 1 end
  local headers = nil
  if lengths[i] then
    headers = {["Content-Type"] = "application/octet-stream", ["Inference-Header-Content-Length"] = lengths[i]}
  end
  return wrk.format("POST", path, headers, bodies[i])
end
function response(status) counts[status] = (counts[status] or 0) + 1 end
function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("counts")) do total[tostring(k)] = (total[tostring(k)] or 0) + v end
  end
  local s = ""
  for k, v in pairs(total) do s = s .. string.format('%s"%s":%d', s == "" and "" or ",", k, v) end
  io.write(string.format('WRK {"p50_ms":%.2f,"p99_ms":%.2f,"requests":%d,"seconds":%.2f,"statuses":{%s},' ..
    '"socket_errors":%d}\n', latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.requests,
    summary.duration / 1e6, s, summary.errors.connect + summary.errors.read + summary.errors.write +
    summary.errors.timeout))
end
"""


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([VIT, "serve", "--port", "0", "--threads", str(THREADS), *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in self.proc.stdout:
            g = re.search(r"gRPC listening on ([\d.]+:\d+)", line)
            if g:
                self.grpc_target = g.group(1)
            m = re.search(r"listening on (http://[\d.:]+)", line)
            if m:
                self.url = m.group(1)
                break
        self.log_lines = 0
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self):
        for _ in self.proc.stdout:
            self.log_lines += 1

    def cpu_seconds(self):
        """User and system CPU time the server has used so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)


def post(url, body):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def bodies_for(model, kind):
    """(good body, expected logits, [malformed bodies]) for a model taking `kind` inputs."""
    c, h, w = model.pretrained_cfg["input_size"]
    if kind == "pixels":
        x = np.round(np.random.default_rng(0).standard_normal((1, c, h, w)), 3).astype(np.float32)
        good = {"inputs": [{"name": "pixel_values", "shape": [1, c, h, w], "datatype": "FP32",
                            "data": x.reshape(-1).tolist()}]}
    else:
        import vitcpp
        t = vitcpp.data.create_transform(**vitcpp.data.resolve_model_data_config(model))
        x = t(PHOTO)[None]
        good = {"inputs": [{"name": "image", "shape": [1], "datatype": "BYTES",
                            "data": [base64.b64encode(open(PHOTO, "rb").read()).decode()]}]}
    bad = [b"{not json", json.dumps({"inputs": [dict(good["inputs"][0], shape=[1, 3, 7, 7])]}).encode(),
           json.dumps({"inputs": [{"name": "image", "shape": [1], "datatype": "BYTES",
                                   "data": [base64.b64encode(b"no image").decode()]}]}).encode()]
    return json.dumps(good).encode(), model(x)[0], bad


def checked_load(url, good, want, bad, seconds, connections):
    """Every answer checked: (p50 ms, p99 ms, requests/s, wrong answers, counts by status)."""
    stop = time.monotonic() + seconds
    lat, wrong, statuses = [], [], {}
    lock = threading.Lock()

    def client(i):
        rng = random.Random(i)
        while time.monotonic() < stop:
            malformed = rng.random() < 0.1
            t = time.perf_counter()
            status, body = post(url, rng.choice(bad) if malformed else good)
            ms = (time.perf_counter() - t) * 1e3
            ok = status == 400 if malformed else status == 200 and np.allclose(
                json.loads(body)["outputs"][0]["data"], want, rtol=0, atol=1e-5 * np.abs(want).max())
            with lock:
                lat.append(ms)
                statuses[status] = statuses.get(status, 0) + 1
                if not ok:
                    wrong.append((status, body[:200]))

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(connections) as pool:
        list(pool.map(client, range(connections)))
    elapsed = time.monotonic() - t0
    lat.sort()
    return lat[len(lat) // 2], lat[int(len(lat) * 0.99)], len(lat) / elapsed, wrong, statuses


def mean_batch_counts(url, model):
    """(images, forward passes) so far, from the server's /metrics (vit_batch_size)."""
    text = urllib.request.urlopen(f"{url}/metrics", timeout=30).read().decode()
    found = [re.search(rf'^vit_batch_size_{k}{{model="{model}"}} (\S+)$', text, re.M) for k in ("sum", "count")]
    return tuple(float(m.group(1)) if m else 0.0 for m in found)  # (0, 0) before the first pass


def mean_batch(url, model):
    """Images per forward pass so far."""
    images, passes = mean_batch_counts(url, model)
    return images / max(passes, 1)


def wrk(url, path, mix, seconds, connections, tmp):
    """wrk's figures for bodies sent with the given weights (percent): the WRK line's dict."""
    lua = os.path.join(tmp, "mix.lua")
    with open(lua, "w") as f:
        f.write(WRK_LUA)
    args = []
    for i, (body, weight, *json_length) in enumerate(mix):  # json_length: binary tensor data
        p = os.path.join(tmp, f"body{i}.json")
        with open(p, "wb") as f:
            f.write(body)
        args.append(":".join([p, str(weight), *map(str, json_length)]))
    out = subprocess.run(["wrk", "-t", str(WRK_THREADS), "-c", str(connections), "-d", f"{seconds}s", "--timeout", "30s",
                          "-s", lua, url, "--", path, *args], capture_output=True, text=True).stdout
    return json.loads(out.split("WRK ", 1)[1].splitlines()[0])


def binary_pixels(good):
    """A JSON pixel_values body as binary tensor data: (body, length of its JSON)."""
    req = json.loads(good)
    inp = req["inputs"][0]
    data = np.array(inp.pop("data"), "<f4").tobytes()
    inp["parameters"] = {"binary_data_size": len(data)}
    head = json.dumps(req).encode()
    return head + data, len(head)


def main():
    global VIT, THREADS, WRK_THREADS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--memory-minutes", type=float, default=10)
    ap.add_argument("--only", default="", help="1 to 7: one part")
    ap.add_argument("--threads", type=int, default=2, help="the server's --threads (and vit bench's)")
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--vit", default=VIT)
    ap.add_argument("--batch-configs", default="16:5,1:5",
                    help="part 2: MAX_BATCH:MAX_DELAY_MS[:INSTANCES],...; the ratio is the first's over the last's")
    ap.add_argument("--part2-models", default="s,mnist", help="part 2: s (ViT-S/16) and/or mnist")
    ap.add_argument("--prepare", default="", help="write part 2's models and bodies to this folder and stop")
    ap.add_argument("--prepared", default="", help="part 2 from a --prepare folder, without the Python module")
    a = ap.parse_args()
    VIT, THREADS, WRK_THREADS = a.vit, a.threads, a.wrk_threads
    tmp = tempfile.mkdtemp(prefix="serve-load-")
    models = {}
    if a.prepared:
        if a.only != "2":
            ap.error("--prepared runs part 2 alone: add --only 2")
        tmp = a.prepared
    else:
        import vitcpp
        for name, preset in (("mnist", "mnist-seed"), ("ti", "vit-tiny-16"), ("s", "vit-small-16")):
            m = vitcpp.create_model(preset, seed=1)
            m.save_pretrained(os.path.join(a.prepare or tmp, name), format="vitcpp")
            models[name] = m
        if a.prepare:
            for name, _, kind in PART2:
                with open(os.path.join(a.prepare, f"{name}.body.json"), "wb") as f:
                    f.write(bodies_for(models[name], kind)[0])
            print(f"wrote {a.prepare}")
            return
    print(f"{os.cpu_count()} CPUs; server --threads {THREADS}; wrk -t {WRK_THREADS}")
    if a.only in ("", "1"):
        s = Server("--model", f"mnist={tmp}/mnist", "--model", f"ti={tmp}/ti", "--max-batch", 16,
                   "--max-delay-ms", 5)
        for name, kind in (("mnist", "pixels"), ("ti", "image")):
            url = f"{s.url}/v2/models/{name}/infer"
            good, want, bad = bodies_for(models[name], kind)
            p50, p99, rps, wrong, st = checked_load(url, good, want, bad, a.seconds, a.connections)
            print(f"{name} ({kind}), Python client, {a.connections} threads, {a.seconds} s, 10% malformed: "
                  f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, {rps:.1f} requests/s, statuses {st}, wrong answers "
                  f"{len(wrong)}{': ' + str(wrong[:3]) if wrong else ''}", flush=True)
            w = wrk(s.url, f"/v2/models/{name}/infer", [(good, 90)] + [(b, 10 // len(bad) + (i < 10 % len(bad)))
                                                                       for i, b in enumerate(bad)],
                    a.seconds, a.connections, tmp)
            print(f"{name} ({kind}), wrk, {a.connections} connections, {a.seconds} s, 10% malformed: "
                  f"p50 {w['p50_ms']:.1f} ms, p99 {w['p99_ms']:.1f} ms, {w['requests'] / w['seconds']:.1f} "
                  f"requests/s, statuses {w['statuses']}, socket errors {w['socket_errors']}", flush=True)
        alive = s.proc.poll() is None
        print(f"server alive after part 1: {alive}; exit status on SIGTERM: {s.stop()}", flush=True)
    if a.only in ("", "2"):
        # (--max-batch, --max-delay-ms, --instances); the ratio is the first's rate over the last's
        configs = [tuple(int(v) for v in (c + ":1").split(":")[:3]) for c in a.batch_configs.split(",")]
        for name, preset, kind in PART2:
            if name not in a.part2_models.split(","):
                continue
            if a.prepared:
                with open(os.path.join(tmp, f"{name}.body.json"), "rb") as f:
                    good = f.read()
            else:
                good, _, _ = bodies_for(models[name], kind)
            rates = {}
            for batch, delay, instances in configs:
                s = Server("--model", f"{name}={tmp}/{name}", "--max-batch", batch, "--max-delay-ms", delay,
                           "--instances", instances)
                w = wrk(s.url, f"/v2/models/{name}/infer", [(good, 100)], a.seconds // 2, 16, tmp)
                rates[batch, delay, instances] = w["requests"] / w["seconds"]
                print(f"{preset} ({kind}), 16 wrk connections, {a.seconds // 2} s, --max-batch {batch} "
                      f"--max-delay-ms {delay} --instances {instances}: {rates[batch, delay, instances]:.1f} "
                      f"images/s, p50 {w['p50_ms']:.1f} ms, "
                      f"p99 {w['p99_ms']:.1f} ms, mean batch {mean_batch(s.url, name):.2f}, "
                      f"statuses {w['statuses']}", flush=True)
                s.stop()
            # What the engine itself gains from batches: vit bench at batch 1 and 16.
            engine = {}
            for b in (1, 16):
                out = subprocess.run([VIT, "bench", "--model", preset, "-b", str(b), "--threads", str(THREADS), "--min-time",
                                      "3", "--json"], capture_output=True, text=True, check=True).stdout
                engine[b] = b * 1e3 / json.loads(out.strip().splitlines()[-1])["median_ms"]
            print(f"{preset}: dynamic batching / --max-batch 1: {rates[configs[0]] / rates[configs[-1]]:.2f}x; "
                  f"the engine alone (vit bench): {engine[1]:.1f} images/s at batch 1, {engine[16]:.1f} at batch 16 "
                  f"({engine[16] / engine[1]:.2f}x)", flush=True)
    if a.only in ("", "3"):
        s = Server("--model", f"mnist={tmp}/mnist", "--model", f"ti={tmp}/ti")
        good_m, want_m, bad_m = bodies_for(models["mnist"], "pixels")
        good_t, want_t, bad_t = bodies_for(models["ti"], "image")
        end = time.monotonic() + a.memory_minutes * 60
        samples = []
        while time.monotonic() < end:
            for name, good, want, bad in (("mnist", good_m, want_m, bad_m), ("ti", good_t, want_t, bad_t)):
                *_, wrong, _ = checked_load(f"{s.url}/v2/models/{name}/infer", good, want, bad, 15, 16)
                assert not wrong, wrong[:3]
            samples.append((time.monotonic(), s.rss_mb()))
            print(f"  {len(samples) * 30:4d} s: RSS {samples[-1][1]:.1f} MB", flush=True)
        warm = [r for t, r in samples[2:]] or [samples[-1][1]]
        print(f"resident memory over {a.memory_minutes} min of load: after 1 min {warm[0]:.1f} MB, at the end "
              f"{samples[-1][1]:.1f} MB, max {max(warm):.1f} MB, min {min(warm):.1f} MB", flush=True)
        s.stop()
    if a.only in ("", "4"):
        s = Server("--model", f"mnist={tmp}/mnist", "--model", f"s={tmp}/s")
        for name in ("mnist", "s"):
            good, _, _ = bodies_for(models[name], "pixels")
            binary, n = binary_pixels(good)
            rates = {}
            for kind, mix in (("JSON", [(good, 100)]), ("binary", [(binary, 100, n)])):
                w = wrk(s.url, f"/v2/models/{name}/infer", mix, a.seconds // 2, 16, tmp)
                assert set(w["statuses"]) == {"200"}, w
                rates[kind] = w["requests"] / w["seconds"]
                print(f"{name}, FP32 pixel_values as {kind} ({len(mix[0][0]):,} bytes), 16 wrk connections, "
                      f"{a.seconds // 2} s: {rates[kind]:.1f} requests/s, p50 {w['p50_ms']:.1f} ms, "
                      f"p99 {w['p99_ms']:.1f} ms", flush=True)
            print(f"{name}: binary / JSON {rates['binary'] / rates['JSON']:.2f}x", flush=True)
        s.stop()
    if a.only in ("", "5"):
        grpc_against_http(models, tmp, a.seconds // 2)
    if a.only in ("", "6"):
        grpc_memory(models, tmp, a.memory_minutes)
    if a.only in ("", "7"):
        json_forms(tmp)


def grpc_messages(tmp):
    """inference_pb2, made by protoc from the server's inference.proto into tmp."""
    import importlib
    import sys
    proto = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "serve", "inference.proto")
    subprocess.run(["protoc", "-I", os.path.dirname(proto), f"--python_out={tmp}", proto], check=True)
    sys.path.insert(0, tmp)
    return importlib.import_module("inference_pb2")


def pixels_request(pb, name, x):
    request = pb.ModelInferRequest(model_name=name)
    request.inputs.add(name="pixel_values", datatype="FP32", shape=list(x.shape))
    request.raw_input_contents.append(x.astype("<f4").tobytes())
    return request


def grpc_memory(models, tmp, minutes, clients=16):
    """Part 6: the server's resident memory under gRPC load, every 30 s: 15 s on mnist-seed and
    15 s on ViT-Ti/16, each client on a channel of its own made anew every 15 s."""
    import grpc
    pb = grpc_messages(tmp)
    s = Server("--model", f"mnist={tmp}/mnist", "--model", f"ti={tmp}/ti", "--grpc-port", 0)
    work = {}
    for name in ("mnist", "ti"):
        c, h, w = models[name].pretrained_cfg["input_size"]
        x = np.round(np.random.default_rng(0).standard_normal((1, c, h, w)), 3).astype("<f4")
        work[name] = (pixels_request(pb, name, x), models[name](x)[0])
    end, samples = time.monotonic() + minutes * 60, []
    while time.monotonic() < end:
        for name, (request, want) in work.items():
            stop, wrong = time.monotonic() + 15, [0]

            def client(_):
                with grpc.insecure_channel(s.grpc_target, options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
                    infer = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                           pb.ModelInferRequest.SerializeToString, pb.ModelInferResponse.FromString)
                    while time.monotonic() < stop:
                        got = np.frombuffer(infer(request, timeout=60).raw_output_contents[0], "<f4")
                        wrong[0] += not np.allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())

            with concurrent.futures.ThreadPoolExecutor(clients) as pool:
                list(pool.map(client, range(clients)))
            assert wrong[0] == 0, wrong
        samples.append(s.rss_mb())
        print(f"  {len(samples) * 30:4d} s: RSS {samples[-1]:.1f} MB", flush=True)
    warm = samples[2:] or [samples[-1]]
    print(f"resident memory over {minutes} min of gRPC load: after 1 min {warm[0]:.1f} MB, at the end "
          f"{samples[-1]:.1f} MB, max {max(warm):.1f} MB, min {min(warm):.1f} MB", flush=True)
    s.stop()


def grpc_against_http(models, tmp, seconds, clients=16):
    """Part 5: the same raw pixels over gRPC and over HTTP's binary tensor data."""
    import http.client

    import grpc
    pb = grpc_messages(tmp)
    s = Server("--model", f"mnist={tmp}/mnist", "--model", f"s={tmp}/s", "--grpc-port", 0)
    target = s.grpc_target
    host, port = s.url[len("http://"):].split(":")
    channel = grpc.insecure_channel(target)
    infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                pb.ModelInferRequest.SerializeToString, pb.ModelInferResponse.FromString)
    for name in ("mnist", "s"):
        c, h, w = models[name].pretrained_cfg["input_size"]
        x = np.round(np.random.default_rng(0).standard_normal((1, c, h, w)), 3).astype("<f4")
        want = models[name](x)[0]
        request = pixels_request(pb, name, x)
        head = json.dumps({"inputs": [{"name": "pixel_values", "shape": [1, c, h, w], "datatype": "FP32",
                                       "parameters": {"binary_data_size": x.nbytes}}],
                           "parameters": {"binary_data_output": True}}).encode()
        body, n = head + x.tobytes(), len(head)

        def over_grpc(call):
            return np.frombuffer(call(request, timeout=60).raw_output_contents[0], "<f4")

        def own_channel():  # a channel (one HTTP/2 connection) of the client thread's own
            channel = grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
            return channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                       pb.ModelInferRequest.SerializeToString, pb.ModelInferResponse.FromString)

        def over_http(conn):
            conn.request("POST", f"/v2/models/{name}/infer", body, {"Inference-Header-Content-Length": str(n)})
            r = conn.getresponse()
            got = r.read()
            assert r.status == 200, got[:200]
            k = int(r.getheader("Inference-Header-Content-Length"))
            return np.frombuffer(got[k:], "<f4")

        kinds = {"gRPC, one channel": (lambda: infer, over_grpc),
                 "gRPC, a channel per client": (own_channel, over_grpc),
                 "HTTP binary": (lambda: http.client.HTTPConnection(host, int(port), timeout=60), over_http)}
        rates = {kind: [] for kind in kinds}
        for kind in [*kinds, *reversed(kinds)]:  # each order once
            make, call = kinds[kind]
            stop, lat, wrong, lock = time.monotonic() + seconds / 2, [], [0], threading.Lock()
            passes, cpu, client_cpu = mean_batch_counts(s.url, name), s.cpu_seconds(), time.process_time()

            def client(_):
                conn = make()
                while time.monotonic() < stop:
                    t = time.perf_counter()
                    got = call(conn)
                    ms = (time.perf_counter() - t) * 1e3
                    ok = np.allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
                    with lock:
                        lat.append(ms)
                        wrong[0] += not ok

            t0 = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(clients) as pool:
                list(pool.map(client, range(clients)))
            rates[kind].append(len(lat) / (time.monotonic() - t0))
            cpu, client_cpu = s.cpu_seconds() - cpu, time.process_time() - client_cpu
            images, count = (b - a for a, b in zip(passes, mean_batch_counts(s.url, name)))
            lat.sort()
            print(f"{name}, one image's FP32 pixel_values over {kind}, {clients} Python clients, {seconds / 2:g} s: "
                  f"{rates[kind][-1]:.1f} requests/s, p50 {lat[len(lat) // 2]:.1f} ms, p99 "
                  f"{lat[int(len(lat) * 0.99)]:.1f} ms, mean batch {images / max(count, 1):.2f}, server CPU {cpu:.1f} s, "
                  f"client CPU {client_cpu:.1f} s, {wrong[0]} wrong",
                  flush=True)
            assert wrong[0] == 0
        for kind in list(kinds)[:2]:
            print(f"{name}: {kind} / HTTP binary {sum(rates[kind]) / sum(rates['HTTP binary']):.2f}x", flush=True)
    s.stop()


def json_forms(tmp, rounds=12):
    """Part 7: one ViT-S/16 image's pixels in each request form, one request at a time."""
    s = Server("--model", f"s={tmp}/s", "--max-batch", 1)
    x = np.round(np.random.default_rng(0).standard_normal((1, 3, 224, 224)), 4).astype("<f4")
    head = json.dumps({"inputs": [{"name": "pixel_values", "shape": [1, 3, 224, 224], "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    forms = {
        "binary tensor data": ("/v2/models/s/infer", head + x.tobytes(),
                               {"Inference-Header-Content-Length": str(len(head))}),
        "v2 JSON": ("/v2/models/s/infer", json.dumps({"inputs": [{"name": "pixel_values", "shape": [1, 3, 224, 224],
                                                                  "datatype": "FP32", "data": x.reshape(-1).tolist()}]
                                                      }).encode(), {}),
        "V1 pixels": ("/v1/models/s:predict", json.dumps({"instances": x.tolist()}).encode(), {}),
        "V1 named input": ("/v1/models/s:predict", json.dumps({"instances": [{"pixel_values": x[0].tolist()}]}).encode(),
                           {}),
    }
    times = {k: [] for k in forms}
    for r in range(rounds + 1):  # the first round warms up
        for kind, (path, body, headers) in forms.items():
            req = urllib.request.Request(s.url + path, data=body,
                                         headers={"Content-Type": "application/json", **headers})
            t = time.perf_counter()
            with urllib.request.urlopen(req, timeout=60) as res:
                assert res.status == 200
                res.read()
            if r:
                times[kind].append((time.perf_counter() - t) * 1e3)
    for kind, t in times.items():
        print(f"ViT-S/16, one image as {kind}, one client: median {sorted(t)[len(t) // 2]:.1f} ms over {rounds}",
              flush=True)
    s.stop()


if __name__ == "__main__":
    main()
