#!/usr/bin/env python3
"""Compares the machine code (SASS) of two builds function by function.

A change meant to leave the kernels alone (a header split, a host-only clean-up) is committed
without a GPU run only when its SASS matches the build before (docs/wtconv.md, notes 18 and 120).
nvcc does not always give the same SASS for the same source: a few forward base instances vary
between compiles (their filter loads' vector widths), so a difference counts only when it persists
across rebuilds. This prints, per object or library present in both builds, the functions whose
code differs, with the change of each opcode's count.

  python3 dev/python/sass_diff.py BUILD_A BUILD_B          # every *.cu.o of the two build folders
  python3 dev/python/sass_diff.py a.o b.o                  # two files

Needs cuobjdump and nvdisasm on PATH (the CUDA toolkit, or the nvidia-cuda-cuobjdump and
nvidia-cuda-nvdisasm wheels). Exit status 1 when any function differs.
"""
import collections
import re
import subprocess
import sys
from pathlib import Path

FUNCTION = re.compile(r"Function : (\S+)")
INSTRUCTION = re.compile(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
PREDICATE = re.compile(r"^@!?U?P\w+\s+")


ANONYMOUS = re.compile(r"(\d+)_GLOBAL__N__")


def stable_name(mangled):
    """The name without its anonymous namespace, whose mangled form hashes the file's contents."""
    m = ANONYMOUS.search(mangled)
    if not m:
        return mangled
    end = m.start(1) + len(m.group(1)) + int(m.group(1))
    return mangled[: m.start()] + "_GLOBAL__N_" + mangled[end:]


def sass_functions(path):
    """{mangled name: [instruction text]} of every function in the file's sm_* code."""
    out = subprocess.run(["cuobjdump", "-sass", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"cuobjdump -sass {path}: {out.stderr.strip()}")
    functions, current = {}, None
    for line in out.stdout.splitlines():
        m = FUNCTION.search(line)
        if m:
            current = functions.setdefault(stable_name(m.group(1)), [])
            continue
        m = INSTRUCTION.match(line)
        if m and current is not None:
            current.append(m.group(1))
    return functions


def opcode_counts(instructions):
    return collections.Counter(PREDICATE.sub("", i).split()[0] for i in instructions)


def without_addresses(instructions):
    """Branch and call targets shift when an earlier function changes size."""
    return [re.sub(r"0x[0-9a-f]+", "X", i) for i in instructions]


def compare(a, b, label):
    fa, fb = sass_functions(a), sass_functions(b)
    differing = 0
    for name in sorted(set(fa) ^ set(fb)):
        print(f"{label}: only in {'first' if name in fa else 'second'}: {name}")
        differing += 1
    for name in sorted(set(fa) & set(fb)):
        if fa[name] == fb[name] or without_addresses(fa[name]) == without_addresses(fb[name]):
            continue
        ca, cb = opcode_counts(fa[name]), opcode_counts(fb[name])
        delta = {op: cb[op] - ca[op] for op in sorted(set(ca) | set(cb)) if cb[op] != ca[op]}
        print(f"{label}: {name}: {len(fa[name])} -> {len(fb[name])} instructions, opcodes {delta or 'same counts'}")
        differing += 1
    return len(set(fa) | set(fb)), differing


def pairs(a, b):
    if a.is_file() and b.is_file():
        return [(a, b, a.name)]
    found = []
    for obj in sorted(a.rglob("*.cu.o")):
        other = b / obj.relative_to(a)
        if other.exists():
            found.append((obj, other, str(obj.relative_to(a))))
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = Path(sys.argv[1]), Path(sys.argv[2])
    total = differing = 0
    for x, y, label in pairs(a, b):
        n, d = compare(x, y, label)
        total, differing = total + n, differing + d
    print(f"{differing} of {total} functions differ")
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
