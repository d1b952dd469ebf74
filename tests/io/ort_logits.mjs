// Runs an ONNX model in ONNX Runtime (npm onnxruntime-node, installed in bench/peers/ort) on
// one float32 input and writes its first output, for tests/io/test_onnx_export.cpp:
//   node ort_logits.mjs ORT_DIR MODEL.onnx INPUT.f32 N,C,H,W OUTPUT.f32
// INPUT.f32 / OUTPUT.f32: raw little-endian float32, row-major. One intra-op thread and
// every graph optimization (ONNX Runtime's fused LayerNorm, GELU and attention kernels).
import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";

const [ortDir, model, input, shapeText, output] = process.argv.slice(2);
const ort = createRequire(ortDir + "/package.json")("onnxruntime-node");
const shape = shapeText.split(",").map(Number);
const bytes = readFileSync(input);
const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
const session = await ort.InferenceSession.create(model, {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  graphOptimizationLevel: "all",
});
const result = await session.run({ [session.inputNames[0]]: new ort.Tensor("float32", data, shape) });
const out = result[session.outputNames[0]];
writeFileSync(output, Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength));
console.log(JSON.stringify({ output: session.outputNames[0], dims: out.dims, ort: ort.env.versions?.common }));
