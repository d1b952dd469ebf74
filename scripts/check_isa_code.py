#!/usr/bin/python3
"""Checks, without running anything, that no AVX2 or AVX-512 instruction can run on a CPU
that lacks it (scripts/test_isa.sh runs this on x86-64):

  1. the machine code: in the given binaries and static libraries (objdump -d), an
     instruction with an EVEX prefix (AVX-512) appears only in functions of the namespace
     vit::cpu::avx512, and one with a VEX prefix (AVX, AVX2, FMA) only there or in
     vit::cpu::avx2. The kernels' files (src/backends/cpu/avx2/, avx512/) give their
     functions those namespaces and the target attributes; everything else is built for
     plain x86-64. This covers every function, reached by a test or not, including an
     inline function that the compiler copies out of an AVX-512 kernel under a shared name.
  2. the dispatch: outside those folders (src/, apps/, include/), every mention of
     avx512::, avx2:: or neon:: comes after an Isa::avx512, Isa::avx2 or Isa::neon (a
     `case` arm or an `isa() == ...` test) naming the same path, with no other Isa:: in
     between (within the 12 lines before).

  scripts/check_isa_code.py build/vit build/libvitcpp.a ...   # both checks
  scripts/check_isa_code.py --self-test                          # each check catches a planted fault

Prints each violation (function, instruction, or file:line) and exits 1 if there is one.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEGACY_PREFIXES = {"66", "67", "f2", "f3", "f0", "2e", "36", "3e", "26", "64", "65"}
ALLOWED = {"evex": ("vit::cpu::avx512::",), "vex": ("vit::cpu::avx512::", "vit::cpu::avx2::")}


def qualified_name(demangled):
    """vit::cpu::avx512::foo from 'void vit::cpu::avx512::foo<1>(float*) [clone .part.0]'."""
    s = demangled.replace("(anonymous namespace)", "anon")
    prev = None
    while prev != s:  # template arguments may name other namespaces: drop them
        prev, s = s, re.sub(r"<[^<>]*>", "", s)
    s = s.split("(", 1)[0]  # parameters
    return s.split(" ")[-1]


def encoding(hex_bytes):
    """'evex', 'vex' or None for an instruction's bytes as objdump prints them."""
    for b in hex_bytes:
        if b in LEGACY_PREFIXES:
            continue
        return {"62": "evex", "c4": "vex", "c5": "vex"}.get(b)
    return None


def check_machine_code(path):
    """(violations as (function, encoding, instruction), count of VEX/EVEX instructions)."""
    out = subprocess.run(["objdump", "-d", "-C", "-w", path], check=True, capture_output=True, text=True).stdout
    bad, fn, counted = [], None, 0
    header = re.compile(r"^[0-9a-f]+ <(.*)>:$")
    for line in out.splitlines():
        m = header.match(line)
        if m:
            fn = m.group(1)
            continue
        parts = line.split("\t")
        if fn is None or len(parts) < 3 or not parts[0].strip().endswith(":"):
            continue
        enc = encoding(parts[1].split())
        if enc is None:
            continue
        counted += 1
        if not qualified_name(fn).startswith(ALLOWED[enc]):
            bad.append((fn, enc, parts[2].strip()))
    return bad, counted


def check_dispatch(files):
    """(violations as (path, line number, path named, nearest Isa:: or None, line), count of mentions)."""
    bad, mentions = [], 0
    mention = re.compile(r"\b(avx512|avx2|neon)::")
    guard = re.compile(r"\bIsa::(\w+)")
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        for i, line in enumerate(lines):
            code = line.split("//", 1)[0]
            for m in mention.finditer(code):
                mentions += 1
                # The nearest Isa:: before the mention: earlier on its line, then up to 12 lines back.
                before = [g.group(1) for g in guard.finditer(code[: m.start()])]
                j = i
                while not before and j > 0 and i - j < 12:
                    j -= 1
                    before = [g.group(1) for g in guard.finditer(lines[j].split("//", 1)[0])]
                if not before or before[-1] != m.group(1):
                    bad.append((path, i + 1, m.group(1), before[-1] if before else None, line.strip()))
    return bad, mentions


def source_files():
    skip = re.compile(r"src/backends/cpu/(avx2|avx512|neon)/")
    for top in ("src", "apps", "include"):
        for d, _, names in os.walk(os.path.join(ROOT, top)):
            for n in names:
                p = os.path.join(d, n)
                if n.endswith((".cpp", ".h")) and not skip.search(os.path.relpath(p, ROOT)):
                    yield p


def self_test():
    """Each check must catch a planted fault, and pass the same code without it."""
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        def planted(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            return path

        src = planted("planted.cpp",
                      '#include <immintrin.h>\n'
                      'namespace vit::cpu::avx512 { __attribute__((target("avx512f"))) void good(float* p)'
                      ' { _mm512_storeu_ps(p, _mm512_setzero_ps()); } }\n'
                      'namespace vit::cpu { __attribute__((target("avx512f"))) void escaped(float* p)'
                      ' { _mm512_storeu_ps(p, _mm512_setzero_ps()); } }\n'
                      'namespace vit::cpu::avx2 { __attribute__((target("avx2"))) void vex(float* p)'
                      ' { _mm256_storeu_ps(p, _mm256_setzero_ps()); } }\n'
                      'namespace vit::cpu::avx2 { __attribute__((target("avx512f"))) void evex(float* p)'
                      ' { _mm512_storeu_ps(p, _mm512_setzero_ps()); } }\n')
        obj = os.path.join(tmp, "planted.o")
        subprocess.run(["g++", "-O2", "-c", src, "-o", obj], check=True)
        bad, counted = check_machine_code(obj)
        flagged = sorted({qualified_name(fn) for fn, _, _ in bad})
        print(f"self-test, machine code: {counted} vector instructions, flagged {flagged}")
        ok &= flagged == ["vit::cpu::avx2::evex", "vit::cpu::escaped"]
        disp = planted("dispatch.cpp",
                       "switch (isa()) {\n"
                       "  case Isa::avx512: return avx512::f();\n"
                       "  case Isa::avx2:\n"
                       "    if (avx2::fits(n))\n"
                       "      return avx2::f();\n"
                       "    return avx512::f();  // planted: the avx2 arm calls the avx512 kernel\n"
                       "  default: return neon::f();  // planted: no Isa::neon\n"
                       "}\n")
        bad, mentions = check_dispatch([disp])
        lines = [line for _, line, *_ in bad]
        print(f"self-test, dispatch: {mentions} mentions, flagged lines {lines}")
        ok &= lines == [6, 7]
    print("self-test:", "passed" if ok else "FAILED")
    return ok


def main(argv):
    if argv == ["--self-test"]:
        return 0 if self_test() else 1
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    bad = []
    for path in argv:
        b, counted = check_machine_code(path)
        print(f"check_isa_code: {os.path.relpath(path)}: {counted} VEX/EVEX instructions, {len(b)} outside their path")
        bad += [f"{path}: {enc.upper()} instruction outside {' or '.join(ALLOWED[enc])}: {fn}: {insn}"
                for fn, enc, insn in b]
    b, mentions = check_dispatch(sorted(source_files()))
    print(f"check_isa_code: {mentions} mentions of a path's namespace outside its folder, {len(b)} not under its Isa:: test")
    bad += [f"{path}:{n}: {name}:: after {'Isa::' + seen if seen else 'no Isa:: test'}: {line}"
            for path, n, name, seen, line in b]
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
