#!/usr/bin/python3
"""A copy of ONNX Runtime that runs its AVX2 kernels on an AVX-512 CPU, for bench/peers/peers.py --ort-avx2.

    /usr/bin/python3 bench/peers/ort/hold_to_avx2.py [DEST]     # default build/peers/ort-avx2

ONNX Runtime has no switch for its instruction set: its kernel library (MLAS) picks the
AVX-512 kernels when CPUID says AVX512F and XCR0 says the OS saves the AVX-512 registers
(bits 5-7: opmask, upper halves of zmm0-15, zmm16-31). To time it as it runs on an AVX2-only
CPU, this copies the npm package (bench/peers/ort/node_modules) to DEST with ort_bench.mjs
and changes four bytes of the copy's libonnxruntime.so.1, so that every reader of XCR0 sees
those bits clear:
- MLAS's platform setup and the cpuinfo library read XCR0 with `xgetbv; mov %eax,%eax`
  (0f 01 d0 89 c0); the mov becomes `and $0x1f,%al` (24 1f). xgetbv already zero-extends,
  so the mov did nothing else, and no flag set by the `and` is read before the next test.
- ONNX Runtime's own CPUIDInfo keeps XCR0 in r14d and tests `(xcr0 & 0xe6) == 0xe6` for
  AVX-512; its mask `and $0xe6,%r14d` becomes `and $0x06` so the test fails.
The sites are found by their bytes, and the copy is refused unless exactly the expected
number of each is found (checked for onnxruntime-node 1.30.0 on x86-64): another build
gets a clear error, not a half-patched library. CPUID itself cannot be changed from user
space here (no CPUID faulting in a VM), and the FMA3/AVX2 kernels MLAS then picks are the
ones it runs on an AVX2-only CPU (perf on ViT-B/16 batch 1: 74% of samples on zmm
instructions before, none after, 72% on ymm). Only for timing: nothing in vitcpp uses it.
"""
import hashlib
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
LIB = "node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1"

# (what, bytes found, offset of the change, new bytes, how many there must be)
SITES = [
    ("xgetbv; mov %eax,%eax -> xgetbv; and $0x1f,%al (MLAS, cpuinfo)", bytes.fromhex("0f01d089c0"), 3,
     bytes.fromhex("241f"), 2),
    ("and $0xe6,%r14d -> and $0x06,%r14d (CPUIDInfo)", bytes.fromhex("4181e6e6000000" "31f6" "31c9" "4181fee6000000"),
     3, bytes.fromhex("06"), 1),
]


def patch(data):
    """data with every site changed; raises ValueError when a site is not found the expected number of times."""
    out = bytearray(data)
    for what, pattern, at, new, expected in SITES:
        found = []
        i = out.find(pattern)
        while i >= 0:
            found.append(i)
            i = out.find(pattern, i + 1)
        if len(found) != expected:
            raise ValueError(f"{what}: found {len(found)} times, expected {expected}: not the ONNX Runtime "
                             f"build this was written for (onnxruntime-node 1.30.0, x86-64)")
        for i in found:
            out[i + at:i + at + len(new)] = new
    return bytes(out)


def make(dest=os.path.join(ROOT, "build/peers/ort-avx2")):
    """The patched copy at dest (made once per installed library); returns the path of its ort_bench.mjs."""
    if os.uname().machine != "x86_64":
        raise SystemExit("hold_to_avx2: only for x86-64")
    src_lib = os.path.join(HERE, LIB)
    if not os.path.exists(src_lib):
        raise SystemExit(f"hold_to_avx2: {src_lib} not found: (cd bench/peers/ort && npm install --ignore-scripts)")
    with open(src_lib, "rb") as f:
        data = f.read()
    stamp = hashlib.sha256(data).hexdigest()
    stamp_path = os.path.join(dest, "patched-from.sha256")
    script = os.path.join(dest, "ort_bench.mjs")
    if os.path.exists(stamp_path) and open(stamp_path).read() == stamp and os.path.exists(script):
        return script
    try:
        patched = patch(data)
    except ValueError as e:
        raise SystemExit(f"hold_to_avx2: {e}")
    tmp = dest + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    # Only this platform's binaries: the package also carries arm64, macOS and Windows ones.
    skip = {"darwin", "win32", "arm64"}
    shutil.copytree(os.path.join(HERE, "node_modules"), os.path.join(tmp, "node_modules"),
                    ignore=lambda d, names: [n for n in names if n in skip and d.endswith(("napi-v6", "linux"))])
    shutil.copy(os.path.join(HERE, "ort_bench.mjs"), tmp)
    shutil.copy(os.path.join(HERE, "package.json"), tmp)
    with open(os.path.join(tmp, LIB), "wb") as f:
        f.write(patched)
    with open(os.path.join(tmp, "patched-from.sha256"), "w") as f:
        f.write(stamp)
    shutil.rmtree(dest, ignore_errors=True)
    os.rename(tmp, dest)
    return script


if __name__ == "__main__":
    print(make(*sys.argv[1:2]))
