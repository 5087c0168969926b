#!/usr/bin/env python3
"""Mutation testing: applies each mutant of a list, builds, runs the list's tests, restores.

A mutant is a small wrong change to the source (a bound off by one, a dropped term, a check
removed). The tests should fail on every one that changes behaviour; one they pass is a gap,
unless the list marks it `equivalent` (with the reason it cannot be told apart).

Usage: python3 dev/mutants/run.py dev/mutants/cpu.py [--ids R1,V2] [--jobs 2]
       python3 dev/mutants/run.py --check dev/mutants/{cpu,host_cuda,python}.py   (all still apply)
Lists: cpu.py (winconv_tests_cpu of a CPU-only build), host_cuda.py (winconv_tests_host_cuda,
needs nvcc), python.py (tests/python). Builds go to build-mutants/<list>; run from the repository
root on a clean checkout. Every file is restored, with its original modification time, so other
build folders see no change. Exit status 1 when a mutant that is not marked equivalent survived,
or could not be applied (its `old` text is gone: update the list).
"""

from __future__ import annotations

import argparse
import os
import runpy
import subprocess
import sys
from pathlib import Path

CONFIGURE = {
    "cpu": ["-DWINCONV_ENABLE_CUDA=OFF", "-DWINCONV_BUILD_BENCH=OFF"],
    "host_cuda": [],
}
# Seconds a mutant's test run may take: the unmutated C++ tests take seconds, the Python tests minutes.
TEST_TIMEOUT_S = {"cpu": 300, "host_cuda": 300, "python": 1800}
TARGET = {"cpu": "winconv_tests_cpu", "host_cuda": "winconv_tests_host_cuda"}


def commands(kind: str, build: Path, jobs: int):
    """(configure or None, build or None, test) for a list's TEST kind."""
    if kind == "python":
        return None, None, [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/python"]
    configure = ["cmake", "-S", ".", "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", *CONFIGURE[kind]]
    make = ["cmake", "--build", str(build), "--target", TARGET[kind], "-j", str(jobs)]
    return configure, make, [str(build / "tests" / TARGET[kind]), "--gtest_brief=1"]


def run(cmd, env=None, timeout=1800) -> int:
    return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=timeout).returncode


def run_tests(kind, cmd, env) -> str:
    """The verdict of a mutant's test run; a run that hangs (a lost wake-up, say) is killed."""
    try:
        return "KILLED" if run(cmd, env, timeout=TEST_TIMEOUT_S.get(kind, 1800)) != 0 else "SURVIVED"
    except subprocess.TimeoutExpired:
        return "KILLED (hangs)"


def stale_mutants(spec: dict) -> list[str]:
    """What keeps a list (its module's globals) from running as written: a mutant whose `old` text
    is not in its file exactly once (the code was rewritten), one that changes nothing, a repeated
    id."""
    if "MUTANTS" not in spec:
        return ["not a mutant list (it defines no MUTANTS)"]
    problems, seen = [], set()
    for m in spec["MUTANTS"]:
        if m["id"] in seen:
            problems.append(f"{m['id']}: id used twice")
        seen.add(m["id"])
        path = Path(m["file"])
        count = path.read_text().count(m["old"]) if path.is_file() else 0
        if count != 1:
            problems.append(f"{m['id']}: `old` found {count} times in {m['file']} (update the list)")
        if m["new"] == m["old"]:
            problems.append(f"{m['id']}: `new` is `old`")
    return problems


def check(lists: list[Path]) -> int:
    status = 0
    for list_path in lists:
        spec = runpy.run_path(str(list_path))
        problems = stale_mutants(spec)
        count = len(spec.get("MUTANTS", []))
        print(f"{list_path}: {count} mutants, {'all apply' if not problems else f'{len(problems)} problems'}")
        for problem in problems:
            print(f"  {problem}")
        status |= bool(problems)
    return status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lists", type=Path, nargs="+", metavar="list")
    parser.add_argument("--ids", help="comma-separated mutant ids (default: all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--check", action="store_true",
                        help="only check that every mutant of the lists applies (no build, no tests)")
    args = parser.parse_args()
    if args.check:
        return check(args.lists)
    if len(args.lists) != 1:
        parser.error("give one list to run (several only with --check)")
    spec = runpy.run_path(str(args.lists[0]))
    kind, mutants = spec["TEST"], spec["MUTANTS"]
    if args.ids:
        wanted = set(args.ids.split(","))
        mutants = [m for m in mutants if m["id"] in wanted]
    build = Path("build-mutants") / kind
    configure, make, test = commands(kind, build, args.jobs)
    env = dict(os.environ, PYTHONPATH=str(Path("python").resolve()))
    if configure and not (build / "CMakeCache.txt").exists() and run(configure) != 0:
        sys.exit(f"configure failed: {' '.join(configure)}")
    if (make and run(make) != 0) or run(test, env) != 0:
        sys.exit("the unmutated source does not build or pass its tests")
    original_times, gaps = {}, []
    try:
        for m in mutants:
            path = Path(m["file"])
            text = path.read_text()
            if text.count(m["old"]) != 1:
                print(f"{m['id']:6} NOT APPLICABLE  {m['desc']}", flush=True)
                gaps.append(m["id"])
                continue
            stat = path.stat()
            original_times.setdefault(path, (stat.st_atime_ns, stat.st_mtime_ns))
            try:
                path.write_text(text.replace(m["old"], m["new"]))
                if make and run(make) != 0:
                    verdict = "KILLED (does not build)"
                else:
                    verdict = run_tests(kind, test, env)
            finally:
                path.write_text(text)  # a fresh time: the next build recompiles what the mutant touched
            if verdict == "SURVIVED":
                if m.get("equivalent"):
                    verdict = f"equivalent ({m['equivalent']})"
                else:
                    gaps.append(m["id"])
            print(f"{m['id']:6} {verdict:24} {m['desc']}", flush=True)
    finally:
        if make:
            run(make)  # the mutation build back in step with the restored source (fresh times)
        for path, times in original_times.items():
            os.utime(path, ns=times)  # then the original times: other build folders see no change
    print(f"{len(mutants)} mutants, {len(gaps)} survived or not applicable: {' '.join(gaps) or '-'}")
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
