// ONNX Runtime (CPU execution provider) timing one ONNX model, for bench/peers/peers.py.
//   node bench/peers/ort/ort_bench.mjs MODEL.onnx --shape 1,3,224,224 --threads 2 [--reps 3]
//        [--min-time 2] [--warmup 2]
// Prints one JSON line like torch_reference.py: median/min/max ms per run and images/s.
// Settings: all graph optimizations (ORT fuses LayerNorm, GELU, attention patterns), one
// inter-op thread, --threads intra-op threads, sequential execution, spinning allowed
// (ORT's default), the input a fixed random tensor of the model's declared shape.
import * as ort from "onnxruntime-node";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const path = args[0];
const threads = opt("--threads", 2), reps = opt("--reps", 3), minTime = opt("--min-time", 2),
      warmup = opt("--warmup", 2);

const session = await ort.InferenceSession.create(path, {
  intraOpNumThreads: threads,
  interOpNumThreads: 1,
  executionMode: "sequential",
  graphOptimizationLevel: "all",
});
const name = session.inputNames[0];
const si = args.indexOf("--shape");
if (si < 0) throw new Error("--shape B,C,H,W is required");
const shape = args[si + 1].split(",").map(Number);
const n = shape.reduce((a, b) => a * b, 1);
const data = new Float32Array(n);
let s = 12345;
for (let i = 0; i < n; ++i) {  // a fixed pseudo-random input in [-1, 1)
  s = (s * 1103515245 + 12345) % 2147483648;
  data[i] = s / 1073741824 - 1;
}
const feeds = { [name]: new ort.Tensor("float32", data, shape) };
for (let i = 0; i < warmup; ++i) await session.run(feeds);
const times = [];
let total = 0;
while (times.length < reps || (total < minTime && times.length < 50)) {
  const t0 = process.hrtime.bigint();
  await session.run(feeds);
  const t = Number(process.hrtime.bigint() - t0) / 1e9;
  times.push(t);
  total += t;
}
const sorted = [...times].sort((a, b) => a - b);
const mid = sorted.length >> 1;
const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
console.log(JSON.stringify({
  model: path, threads, batch: shape[0], runs: times.length,
  median_ms: +(median * 1e3).toFixed(3), min_ms: +(sorted[0] * 1e3).toFixed(3),
  max_ms: +(sorted[sorted.length - 1] * 1e3).toFixed(3), img_per_s: +(shape[0] / median).toFixed(2),
  ort_version: ort.env.versions?.common ?? "unknown",
}));
