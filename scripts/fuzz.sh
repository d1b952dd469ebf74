#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang + ASan + UBSan) and runs each.
#   scripts/fuzz.sh                 every harness for 60 s (FUZZ_SECONDS), 1 job each
#   scripts/fuzz.sh 3600 image      one harness for an hour: long runs
#   FUZZ_SECONDS=10 scripts/fuzz.sh a short smoke run (what CI would use)
# Corpora grow in fuzz/corpus/<name> (git-ignored; seeded here from tests/fixtures); crashes
# are written to build-fuzz/crashes/<name>/ and fail the script.
# Needs clang and libclang-rt-14-dev (scripts/setup.sh --fuzz installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-${FUZZ_SECONDS:-60}}"
shift || true
names=("$@")
((${#names[@]})) || names=(safetensors config idx cifar image pretrained_config tensor_spec infer_request grpc_request)
scripts/setup.sh --fuzz
source scripts/build_env.sh
CXX=clang++ CC=clang cmake -S . -B build-fuzz "${vit_launcher[@]}" -DVIT_FUZZ=ON -DVIT_BUILD_TESTS=OFF -DVIT_BUILD_BENCH=OFF -DVIT_PYTHON=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build-fuzz -j"$(nproc)" --target "${names[@]/#/fuzz_}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
status=0
for n in "${names[@]}"; do
  corpus=fuzz/corpus/$n crashes=build-fuzz/crashes/$n
  mkdir -p "$corpus" "$crashes"
  # Seeds: the inputs the tests already use, so the fuzzer starts from valid files.
  case $n in
    safetensors) cp -n tests/fixtures/*.safetensors tests/fixtures/pretrained/*.safetensors "$corpus"/ ;;
    config) for f in tests/fixtures/pretrained/*/config.json; do cp -n "$f" "$corpus/$(basename "$(dirname "$f")").json"; done ;;
    image) cp -n tests/fixtures/digit_7.png tests/fixtures/jpeg_claiming_4g_pixels.jpg tests/fixtures/pretrained/images/*.{png,jpg} "$corpus"/ ;;
    pretrained_config) for k in timm_a hf vit_pytorch; do  # the first byte picks the weights
        { case $k in hf) printf '\1' ;; vit_pytorch) printf '\2' ;; *) printf '\0' ;; esac
          cat tests/fixtures/pretrained/$k/config.json; } >"$corpus/$k"
      done ;;
    tensor_spec) hdr='{"x":{"dtype":"F32","shape":[2,1,4,4],"data_offsets":[0,128]}}'
      { echo "x.safetensors:x"; printf "$(printf '\\x%02x' "${#hdr}")\0\0\0\0\0\0\0%s" "$hdr"
        head -c 128 /dev/zero; } >"$corpus/valid" ;;
    infer_request) # two bytes of Inference-Header-Content-Length (0: all JSON; ffff: KServe V1), then the body
      png=$(base64 -w0 tests/fixtures/digit_7.png)
      printf '\xff\xff{"instances":[{"b64":"%s"},{"image":{"b64":"%s"}}]}' "$png" "$png" >"$corpus/v1_images"
      printf '\xff\xff{"instances":[%s]}' "$(python3 -c 'print([[[0.5] * 32] * 32] * 3)')" >"$corpus/v1_pixels"
      { printf '\0\0{"id":"x","inputs":[{"name":"image","shape":[1],"datatype":"BYTES","data":["%s"]}],' "$png"
        printf '"outputs":[{"name":"logits","parameters":{"classification":2}}]}'; } >"$corpus/json_image"
      hdr='{"inputs":[{"name":"pixel_values","shape":[1,3,32,32],"datatype":"FP32","parameters":{"binary_data_size":12288}}],"parameters":{"binary_data_output":true}}'
      { printf "$(printf '\\x%02x\\x%02x' $((${#hdr} % 256)) $((${#hdr} / 256)))%s" "$hdr"
        head -c 12288 /dev/zero; } >"$corpus/binary_pixels"
      size=$(stat -c %s tests/fixtures/digit_7.png)
      hdr='{"inputs":[{"name":"image","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":'$((size + 4))'}}]}'
      { printf "$(printf '\\x%02x\\x%02x' $((${#hdr} % 256)) $((${#hdr} / 256)))%s" "$hdr"
        printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((size % 256)) $((size / 256)) 0 0)"
        cat tests/fixtures/digit_7.png; } >"$corpus/binary_image" ;;
    grpc_request) # serialized inference.ModelInferRequest messages, written by protoc from text
      enc() { protoc --encode=inference.ModelInferRequest -I src/serve src/serve/inference.proto; }
      hex() { od -An -v -tx1 | tr -d ' \n' | sed 's/../\\x&/g'; }
      png=$(hex <tests/fixtures/digit_7.png) size=$(stat -c %s tests/fixtures/digit_7.png)
      { echo 'model_name: "a" id: "x" inputs { name: "pixel_values" datatype: "FP32" shape: [1, 3, 32, 32] }'
        printf 'raw_input_contents: "%s"\n' "$(head -c 12288 /dev/zero | hex)"; } | enc >"$corpus/raw_pixels"
      { echo 'model_name: "a" inputs { name: "pixel_values" datatype: "FP32" shape: [1, 3, 32, 32]'
        printf 'contents { fp32_contents: [%s] } }\n' "$(yes 0.5 | head -n 3072 | paste -sd,)"; } | enc >"$corpus/typed_pixels"
      { echo 'model_name: "a" inputs { name: "image" datatype: "BYTES" shape: [1] }'
        echo 'outputs { name: "logits" parameters { key: "classification" value { int64_param: 2 } } }'
        printf 'raw_input_contents: "%s%s"\n' "$(printf '%08x' "$size" | sed 's/\(..\)\(..\)\(..\)\(..\)/\\x\4\\x\3\\x\2\\x\1/')" \
          "$png"; } | enc >"$corpus/raw_image"
      { echo 'model_name: "a" inputs { name: "image" datatype: "BYTES" shape: [1]'
        printf 'contents { bytes_contents: "%s" } }\n' "$png"; } | enc >"$corpus/typed_image" ;;
  esac
  echo "fuzz_$n: ${seconds} s"
  log=build-fuzz/fuzz_$n.log
  if ! build-fuzz/fuzz/fuzz_$n "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -max_len=65536 -artifact_prefix="$crashes/" -print_final_stats=1 >"$log" 2>&1; then
    echo "fuzz_$n: FOUND A CRASH (see $log and $crashes/)"
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "$log" | tail -n 3 || true
done
exit $status
