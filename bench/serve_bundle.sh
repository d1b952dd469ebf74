#!/bin/bash
# Part 2 of bench/serve_load.py (dynamic batching against --max-batch 1, docs/serving.md) on
# another Linux x86-64 machine, one with python3 and numpy but no vitcpp build: writes OUT
# with the built `vit`, Debian's `wrk`, the shared libraries both need beyond glibc, the
# mnist-seed model and the request bodies (serve_load.py --prepare), and OUT/run.sh.
# ViT-S/16's random weights (88 MB) are not carried: run.sh makes the model there with timm
# when it is installed (vitcpp reads timm's folders), else part 2 runs mnist-seed alone.
#
#   bench/serve_bundle.sh OUT        (after the build; needs the Python module: build/python)
#   OUT/run.sh [serve_load.py flags] (there; e.g. --seconds 20; PYTHON=... picks the python)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: bench/serve_bundle.sh OUT}
vit=$root/build/vit
[ -x "$vit" ] || { echo "serve_bundle: no $vit: build first (README)" >&2; exit 1; }
wrk=$(command -v wrk) || { echo "serve_bundle: no wrk: scripts/setup.sh installs it" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/bin" "$out/libexec" "$out/lib"
PYTHONPATH=$root/build/python /usr/bin/python3 "$root/bench/serve_load.py" --prepare "$out/data" > /dev/null
rm -rf "$out/data/s" "$out/data/ti"  # ViT-S/16 is made there; ViT-Ti/16 is not in part 2
cp "$root/bench/serve_load.py" "$out/"
# The programs, and each library they load but glibc's (the other machine has its own).
for prog in "$vit" "$wrk"; do
  cp "$prog" "$out/libexec/"
  ldd "$prog" | awk '$3 ~ /^\// {print $3}' |
    grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64)\.so' |
    xargs -r cp -L -t "$out/lib/"
  name=$(basename "$prog")
  # Only the two programs see the libraries: the other machine's python keeps its own.
  printf '#!/bin/sh\nhere=$(dirname "$(readlink -f "$0")")\nLD_LIBRARY_PATH="$here/../lib" exec "$here/../libexec/%s" "$@"\n' \
    "$name" > "$out/bin/$name"
  chmod +x "$out/bin/$name"
done
cat > "$out/run.sh" <<'EOF'
#!/bin/bash
# serve_load.py's part 2 with every core: --instances 2 and 1 with batching, then --max-batch 1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
if [ ! -e "$here/data/s/model.safetensors" ]; then
  "$python" - "$here/data/s" <<'PY' || echo "run.sh: no timm here: ViT-S/16 left out"
import sys
import timm
from timm.models import push_to_hf

push_to_hf.save_for_hf(timm.create_model("vit_small_patch16_224", pretrained=False), sys.argv[1],
                       safe_serialization=True)
PY
fi
models=mnist
[ -e "$here/data/s/model.safetensors" ] && models=s,mnist
PATH="$here/bin:$PATH" exec "$python" "$here/serve_load.py" --prepared "$here/data" --only 2 \
  --vit "$here/bin/vit" --threads "$(nproc)" --part2-models "$models" --batch-configs 16:5:2,16:5:1,1:5:1 "$@"
EOF
chmod +x "$out/run.sh"
echo "wrote $out ($(du -sh "$out" | cut -f1)); there: $out/run.sh"
