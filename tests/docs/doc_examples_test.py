#!/usr/bin/env python3
"""Compiles the C++ examples of the README and the tutorial as written.

Usage: doc_examples_test.py CXX SOURCE_ROOT FILE.md... -- COMPILER_FLAGS...

Every ```cpp block of each file is compiled with -fsyntax-only against the
public headers:
  - a block with `int main` is a whole program and is compiled as it is;
  - any other block is a fragment of a goroutine's body: it is compiled
    inside `void example() { ... }` after the includes a reader would have
    (<gort/gort.hpp> and the standard library), with `using namespace
    std::chrono_literals`;
  - a fragment that needs names from outside itself says so in an HTML
    comment on the line before the block, which is not shown when the
    Markdown is rendered:
      <!-- doc-example: prelude: int compute(); extern gort::Chan<int> ch; -->
    puts declarations before the function (the reader sees them
    described in the text; the comment may span lines, for #include), and
      <!-- doc-example: top-level -->
    compiles the block at namespace scope (it defines functions).
      <!-- doc-example: skip: REASON -->
    leaves a block out (shell-like pseudo-code); REASON is required.
      <!-- doc-example: split -->
    compiles the block's first paragraph (up to its first blank line) at
    namespace scope and the rest as the fragment. Settings combine with
    " | ": <!-- doc-example: split | prelude: extern gort::Context ctx; -->
Exits 1 naming each block that does not compile, with the compiler's
first lines.
"""
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

HEADER = """#include <gort/gort.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ranges>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>
using namespace std::chrono_literals;
"""


def blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```cpp":
            directive = ""
            j = i - 1
            while j >= 0 and lines[j].strip() == "":
                j -= 1
            if j >= 0 and lines[j].rstrip().endswith("-->"):
                first = j
                while first > 0 and "<!--" not in lines[first]:
                    first -= 1
                comment = "\n".join(lines[first:j + 1])
                m = re.match(r"\s*<!--\s*doc-example:\s*(.*?)\s*-->\s*$", comment, re.S)
                if m:
                    directive = m.group(1)
            start = i + 1
            k = start
            while k < len(lines) and lines[k].strip() != "```":
                k += 1
            yield start, "\n".join(lines[start:k]), directive
            i = k + 1
        else:
            i += 1


def source_for(code, directive):
    opts = {}
    for part in directive.split(" | ") if directive else []:
        key, _, value = part.partition(":")
        opts[key.strip()] = value.strip()
    if "int main" in code or "top-level" in opts:
        return HEADER + code + "\n"
    top, body = "", code
    if "split" in opts:
        top, _, body = code.partition("\n\n")
    prelude = opts.get("prelude", "")
    return (HEADER + prelude + "\n" + top + "\n[[maybe_unused]] static auto example() {\n" + body +
            "\n}\n")


def compile_one(cxx, flags, tmp, index, source):
    src = os.path.join(tmp, "example%d.cpp" % index)
    with open(src, "w") as f:
        f.write(source)
    return subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra",
                           "-Wno-unused-variable", "-Wno-unused-but-set-variable",
                           "-Wno-unused-parameter", "-Wno-unused-function"] + flags + [src],
                          capture_output=True, text=True)


def main():
    argv = sys.argv[1:]
    sep = argv.index("--")
    cxx, root, files, flags = argv[0], argv[1], argv[2:sep], argv[sep + 1:]
    failures = 0
    jobs = []  # (where, source)
    for md in files:
        for line, code, directive in blocks(os.path.join(root, md)):
            if directive.startswith("skip"):
                if not directive[len("skip"):].strip(": "):
                    print("%s:%d: doc-example: skip needs a reason" % (md, line))
                    failures += 1
                continue
            jobs.append(("%s:%d" % (md, line), source_for(code, directive)))
    # One compiler per CPU: each example parses all of <gort/gort.hpp>.
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = pool.map(lambda j: compile_one(cxx, flags, tmp, j[0], j[1][1]), enumerate(jobs))
        for (where, _), r in zip(jobs, results):
            if r.returncode != 0:
                failures += 1
                print("FAIL %s: this example does not compile:" % where)
                print("\n".join(r.stderr.splitlines()[:25]))
    print("%d examples compiled, %d failed" % (len(jobs), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
