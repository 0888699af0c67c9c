#!/usr/bin/env python3
"""Checks the shape of the source tree (run by scripts/test.sh).

1. Layering: every `#include "dir/..."` between the project's folders follows the allowed
   edges below (docs/design.md, "Layers"); an include of a folder not listed for the
   including folder is an upward (or sideways) edge and fails the check. runtime/ and
   policies/ include no header of CAF, MPI or CUDA/NCCL (but the MPI and NCCL aggregator
   backends and the CUDA sources named in OPTIONAL_OK: the device memory, the CUDA MLP
   and the probe of a node's GPUs), so the simulator builds without them.
   CUDA sources (.cu) are checked as C++ ones.
2. Function length: no function body outside tests/ is longer than --max-lines lines
   (default 150). Bodies are found by brace matching at namespace or class scope; lambdas
   and blocks count toward the function that holds them.
3. Sizes: no source file outside tests/ over MAX_FILE_LINES lines, and no folder (its own
   files, not its subfolders) holding more than MAX_FOLDER_SHARE of the code outside tests/.
   --report N also lists the N biggest folders.
4. Test names: no ';' in a Catch2 test name (ctest would split it in two).
Every folder of project sources must be in the layer table (or a consumer's): a new folder
is a decision about layering, made here.

usage: scripts/check_shape.py [--max-lines N] [--report N]   (exit 1 on a violation)
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Folder -> folders its files may include (itself always allowed). Bottom to top. detail/
# folders hold their parent's private helpers: one layer with it.
CORE = ["runtime/core", "runtime/core/detail"]
NODE = ["runtime/node/comm", "runtime/node/train", "runtime/node/program", "runtime/node/gpu"]
ALLOWED = {
    "runtime/core/detail": ["runtime/core"],
    "runtime/core": ["runtime/core/detail"],
    "runtime/workload": CORE,
    "runtime/solver": CORE,
    "runtime/sim": CORE,
    "runtime/node/comm": CORE,
    "runtime/node/train/detail": ["runtime/core/detail"],
    "runtime/node/train": CORE + ["runtime/node/comm", "runtime/node/train/detail"],
    "runtime/node/program": CORE,
    "runtime/node/gpu": CORE,
    "runtime/service": CORE,
    "runtime/service/http": CORE,
    "policies": CORE + ["runtime/solver"],
    "actors": CORE + NODE + ["runtime/service", "runtime/service/http", "policies"],
    "launcher": CORE + ["runtime/workload", "runtime/sim", "runtime/node/train", "runtime/node/gpu",
                        "runtime/service/http", "policies", "actors"],
    # The header-only client a user's C++ program includes: it stands alone. Its parts
    # (tessera_client/) include one another and the standard library only.
    "clients/cpp": ["clients/cpp/tessera_client"],
    "clients/cpp/tessera_client": [],
}
# Folders whose includes are not checked: consumers of every layer.
CONSUMERS = ("tests", "bench", "examples", "fuzz", "build")
# No source file outside tests/ longer than this; no folder (its own files) holding more than
# this share of the code outside tests/.
MAX_FILE_LINES = 600
MAX_FOLDER_SHARE = 0.25

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SYSTEM_INCLUDE = re.compile(r'^\s*#\s*include\s+<([^>]+)>')
# Headers of the optional dependencies (CAF, MPI, CUDA/NCCL) and the only files of the plain
# layers allowed to include them, so the simulator builds without them.
OPTIONAL = re.compile(r"^(caf/|mpi\.h|mpi-ext\.h|nccl\.h|cuda|cublas)")
OPTIONAL_OK = re.compile(r"^runtime/node/comm/((mpi|nccl)_aggregator\.(hpp|cpp)|device_memory_cuda\.cu)$"
                         r"|^runtime/node/train/(cuda_mlp\.cu|cuda_support\.cuh?)$"
                         r"|^runtime/node/gpu/cuda_probe\.cpp$")


def sources(top):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not d.startswith("build")]
        for f in filenames:
            if f.endswith((".hpp", ".cpp", ".h", ".cu", ".cuh")):
                yield os.path.join(dirpath, f)


def check_layers():
    bad = []
    for path in sources(ROOT):
        rel = os.path.relpath(path, ROOT)
        folder = os.path.dirname(rel)
        if folder.split("/")[0] in CONSUMERS:
            continue
        if folder not in ALLOWED:
            bad.append(f"{rel}: folder {folder}/ is not in check_shape.py's layer table (ALLOWED)")
            continue
        plain = rel.startswith(("runtime/", "policies/")) and not OPTIONAL_OK.match(rel)
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                sm = SYSTEM_INCLUDE.match(line)
                if plain and sm and OPTIONAL.match(sm.group(1)):
                    bad.append(f"{rel}:{n}: {folder}/ includes <{sm.group(1)}>, an optional "
                               "dependency (only actors/, the MPI/NCCL backends and the CUDA "
                               "sources may)")
                m = INCLUDE.match(line)
                if not m or "/" not in m.group(1):
                    continue
                target = os.path.dirname(m.group(1))
                # An include relative to the including file (the header-only client's, which
                # users put on their include path as it is) names that file's subfolder.
                if not os.path.exists(os.path.join(ROOT, m.group(1))) and \
                        os.path.exists(os.path.join(ROOT, folder, m.group(1))):
                    target = os.path.normpath(os.path.join(folder, target))
                if target != folder and target not in ALLOWED[folder]:
                    bad.append(f"{rel}:{n}: {folder}/ includes {m.group(1)} (not below it)")
    return bad


def strip_code(text):
    """Blanks comments, string and char literals, keeping line breaks."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b")
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|try)\s*(\(|$)")


def functions(path):
    """Yields (name, first line, lines) of each function body at namespace or class scope."""
    with open(path, encoding="utf-8") as f:
        code = strip_code(f.read())
    stack = []  # kinds of the open braces: "scope", "function", "block"
    head_start = 0
    for i, c in enumerate(code):
        if c in ";}":
            if c == "}" and stack:
                kind, name, line0 = stack.pop()
                if kind == "function":
                    line1 = code.count("\n", 0, i) + 1
                    yield name, line0, line1 - line0 + 1
            head_start = i + 1
        elif c == "{":
            head = code[head_start:i].strip()
            line0 = code.count("\n", 0, i) + 1
            at_top = all(k == "scope" for k, _, _ in stack)
            if SCOPE.search(head) and "(" not in head.split("{")[0].split("=")[0]:
                stack.append(("scope", "", line0))
            elif at_top and re.search(r"\)\s*(const|noexcept|override|final|->[^{]*|\s)*$",
                                      head) and not CONTROL.search(head) and "=" not in \
                    head.split("(")[0]:
                name = re.findall(r"([~\w:]+)\s*\(", head)
                stack.append(("function", name[0] if name else "?", line0))
            else:
                stack.append(("block", "", line0))
            head_start = i + 1


def check_lengths(limit, report):
    long = []
    for path in sources(ROOT):
        rel = os.path.relpath(path, ROOT)
        if rel.split("/")[0] in CONSUMERS[:1] + ("build",):
            continue
        for name, line, lines in functions(path):
            long.append((lines, f"{rel}:{line}: {name} is {lines} lines"))
    long.sort(reverse=True)
    for _, text in long[:report]:
        print("  " + text)
    return [text for lines, text in long if lines > limit]


def code_lines():
    """(path, lines) of every source file outside tests/ and the consumers' build trees."""
    for path in sources(ROOT):
        rel = os.path.relpath(path, ROOT)
        if rel.split("/")[0] in ("tests", "build"):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            yield rel, sum(1 for _ in f)


def check_sizes(report):
    """Files over MAX_FILE_LINES; folders (their own files) over MAX_FOLDER_SHARE of the code."""
    files = list(code_lines())
    total = sum(n for _, n in files)
    by_folder = {}
    for rel, n in files:
        by_folder[os.path.dirname(rel) or "."] = by_folder.get(os.path.dirname(rel) or ".", 0) + n
    bad = [f"{rel}: {n} lines (over {MAX_FILE_LINES})" for rel, n in files if n > MAX_FILE_LINES]
    ranked = sorted(by_folder.items(), key=lambda kv: -kv[1])
    for folder, n in ranked[:report]:
        print(f"  {folder}/: {n} lines, {100.0 * n / total:.1f}% of {total}")
    bad += [f"{folder}/: {n} lines, {100.0 * n / total:.1f}% of the code (over "
            f"{100 * MAX_FOLDER_SHARE:.0f}%)" for folder, n in ranked if n > MAX_FOLDER_SHARE * total]
    return bad


TEST_NAME = re.compile(r'TEST_CASE\(\s*"((?:[^"\\]|\\.)*)"')


def check_test_names():
    """A ';' in a Catch test name splits it into two ctest tests, neither of which matches."""
    bad = []
    for dirpath, _, filenames in os.walk(os.path.join(ROOT, "tests")):
        for f in filenames:
            if not f.endswith(".cpp"):
                continue
            path = os.path.join(dirpath, f)
            text = open(path, encoding="utf-8", errors="replace").read()
            for m in TEST_NAME.finditer(text):
                if ";" in m.group(1):
                    line = text.count("\n", 0, m.start()) + 1
                    bad.append(f"{os.path.relpath(path, ROOT)}:{line}: test name holds ';'")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-lines", type=int, default=150, help="longest function allowed")
    ap.add_argument("--report", type=int, default=0, help="also list the N longest functions")
    a = ap.parse_args()
    layers = check_layers()
    lengths = check_lengths(a.max_lines, a.report)
    names = check_test_names()
    sizes = check_sizes(a.report)
    for v in layers + lengths + names + sizes:
        print("check_shape: " + v, file=sys.stderr)
    print(f"check_shape: {len(layers)} upward includes, {len(lengths)} functions over "
          f"{a.max_lines} lines outside tests/, {len(sizes)} files or folders over their size")
    return 1 if layers or lengths or names or sizes else 0


if __name__ == "__main__":
    sys.exit(main())
