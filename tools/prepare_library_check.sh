#!/usr/bin/env bash
# Makes the exports that tools/check_with_libraries.py --exports reads: six small models
# trained by vitcpp for one epoch on synthetic data (1-channel MNIST-sized; avg pooling without
# a class token and a fixed sin-cos table; register tokens, LayerScale and pre_norm; 512 wide;
# QuickGELU; GELU's tanh form) and eight fixtures (two with attention pooling), each written as timm, Hugging Face (where it can be) and ONNX, with an
# input tensor and the logits `vit predict --json --logits` gives for it.
#   tools/prepare_library_check.sh [BUILD_DIR] [OUT_DIR]   (defaults: build, build-libcheck)
set -euo pipefail
cd "$(dirname "$0")/.."
V="$PWD/${1:-build}/vit"
OUT="${2:-build-libcheck}"
F="$PWD/tests/fixtures/pretrained"
PY=/usr/bin/python3
rm -rf "$OUT" && mkdir -p "$OUT/exp"
cd "$OUT"
cat > n2.json <<'JSON'
{"img_size":[24,32],"in_chans":3,"patch_size":[8,8],"embed_dim":48,"depth":2,"num_heads":4,"mlp_dim":96,"qkv_bias":true,"global_pool":"avg","class_token":false,"reg_tokens":0,"pos_embed":"sincos","num_classes":6}
JSON
cat > n3.json <<'JSON'
{"img_size":[32,32],"in_chans":3,"patch_size":[8,8],"embed_dim":48,"depth":2,"num_heads":3,"mlp_dim":128,"qkv_bias":false,"global_pool":"token","class_token":true,"reg_tokens":3,"no_embed_class":true,"pre_norm":true,"patch_bias":false,"init_values":0.1,"pos_embed":"learn","num_classes":4}
JSON
cat > n4.json <<'JSON'
{"img_size":[32,32],"in_chans":3,"patch_size":[16,16],"embed_dim":512,"depth":1,"num_heads":8,"mlp_dim":256,"qkv_bias":true,"global_pool":"token","class_token":true,"pos_embed":"learn","num_classes":5}
JSON
"$V" train --model mnist-seed --synthetic 256 --epochs 1 --output n1 --progress log | tail -1
for n in 2 3 4; do "$V" train --config n$n.json --synthetic 256 --epochs 1 --output n$n --progress log | tail -1; done
# The MLP's other activations: QuickGELU with avg pooling, GELU's tanh form on the 512-wide model.
"$V" train --config n2.json --act-layer quick_gelu --synthetic 256 --epochs 1 --output n5 --progress log | tail -1
"$V" train --config n4.json --act-layer gelu_tanh --synthetic 256 --epochs 1 --output n6 --progress log | tail -1
declare -A SRC=([n1]=n1 [n2]=n2 [n3]=n3 [n4]=n4 [n5]=n5 [n6]=n6 [timm_a]=$F/timm_a [timm_b]=$F/timm_b [hf]=$F/hf
                [clip]=$F/libraries/timm_clip [clip_quickgelu]=$F/libraries/timm_clip_quickgelu
                [dinov2]=$F/libraries/timm_dinov2_reg [reg_map]=$F/timm_reg_map [cls_map]=$F/timm_cls_map)
for m in "${!SRC[@]}"; do
  for f in timm hf onnx; do
    o=exp/$m.$f
    [ $f = onnx ] && o=$o.onnx
    "$V" export --checkpoint "${SRC[$m]}" --format $f --out $o > /dev/null 2>&1 || echo "$m: no $f export (it cannot hold the model)"
  done
  # An input of the model's size ([2, C, H, W], seeded) and vitcpp's logits for it.
  $PY - "$m" <<'PYEOF'
import json, sys, zlib
import torch
sys.path.insert(0, "../tools")
import make_fixtures
torch.set_default_dtype(torch.float32)
m = sys.argv[1]
size = json.load(open(f"exp/{m}.timm/config.json"))["pretrained_cfg"]["input_size"]
g = torch.Generator().manual_seed(zlib.crc32(m.encode()))
make_fixtures.write_safetensors(f"exp/{m}.input.safetensors", {"x": torch.randn(2, *size, generator=g)}, {})
PYEOF
  "$V" predict --checkpoint "${SRC[$m]}" --tensor exp/$m.input.safetensors:x --json --logits > exp/$m.vitcpp.jsonl
done
echo "wrote $OUT/exp: copy it beside tools/check_with_libraries.py and run that with --exports $OUT/exp"
