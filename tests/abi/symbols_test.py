"""What libgort.so exports (docs/exports.md): its
dynamic symbol table, demangled and normalised, must be the committed list
(tests/abi/libgort.symbols), and the C and abseil entry points in it must be
exactly the interposed ones (gmp/os/interpose.list).

    symbols_test.py LIBGORT_SO INTERPOSE_LIST SYMBOLS_FILE [--update]

--update rewrites SYMBOLS_FILE from LIBGORT_SO instead of comparing (the
interposition check still runs). Exit status: 0 passed, 1 failed, 77
skipped (no nm or c++filt).

Normalised, so that one list fits every build of the library:
  - abseil's inline namespace (absl::lts_20230125::, Debian's
    absl::debian3::) is dropped, and so are libstdc++'s ABI tags
    (std::__cxx11::, [abi:cxx11]); std::basic_string<char, ...> is written
    std::string (and string_view, ostream likewise);
  - the standard library's own vague-linkage symbols (weak: typeinfo,
    vtables and template instantiations in namespace std that the
    library's code happened to emit, which differ with inlining and
    optimisation) are left out: they are not gort's API, and a program
    that needs one emits its own.
"""

import fnmatch
import os
import re
import shutil
import subprocess
import sys

SKIP = 77

HEADER = """\
# libgort.so's dynamic symbols, demangled and normalised (one per line,
# sorted): gort's API, what inline code in its installed headers calls, and
# the interposed entry points. tests/abi/symbols_test.py compares the built
# library with this list; docs/exports.md, says what
# belongs here. To regenerate it after a deliberate change:
#
#   python3 tests/abi/symbols_test.py build/libgort.so gmp/os/interpose.list \\
#       tests/abi/libgort.symbols --update
"""

# The symbol kinds nm prints for vague linkage: weak objects and functions
# and GNU unique objects.
WEAK_KINDS = set("VvWwu")

SPECIAL_PREFIX = re.compile(
    r"^(?:typeinfo name for |typeinfo for |vtable for |VTT for |"
    r"construction vtable for |guard variable for )")
# A name in namespace std (or libstdc++'s __gnu_cxx), possibly after a
# template function's return type.
IN_STD = re.compile(r"^(?:[\w:]+(?:<[^()]*>)?[ *&]+)?(?:std|__gnu_cxx)::")

REWRITES = [
    (re.compile(r"absl::(?:lts_\w+|debian\w*)::"), "absl::"),
    (re.compile(r"\[abi:cxx11\]"), ""),
    (re.compile(r"std::__cxx11::"), "std::"),
    (re.compile(r"std::basic_string<char, std::char_traits<char>, std::allocator<char> >"), "std::string"),
    (re.compile(r"std::basic_string_view<char, std::char_traits<char> >"), "std::string_view"),
    (re.compile(r"std::basic_ostream<char, std::char_traits<char> >"), "std::ostream"),
]


def normalise(name):
    for pat, repl in REWRITES:
        name = pat.sub(repl, name)
    return name


def exported(lib):
    """[(kind, demangled name)] of the library's defined dynamic symbols."""
    out = subprocess.run(["nm", "-D", "--defined-only", lib],
                         check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        kind, raw = parts[-2], parts[-1]
        rows.append((kind, raw.split("@")[0]))
    demangled = subprocess.run(["c++filt"], input="\n".join(r[1] for r in rows) + "\n",
                               check=True, capture_output=True, text=True).stdout.splitlines()
    return [(kind, d) for (kind, _), d in zip(rows, demangled)]


def api_symbols(rows):
    names = set()
    for kind, name in rows:
        if kind in WEAK_KINDS and IN_STD.match(SPECIAL_PREFIX.sub("", name)):
            continue
        names.add(normalise(name))
    return names


def read_list(path):
    with open(path) as f:
        return {l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")}


def interposed(path):
    """The C names and the C++ patterns of interpose.list."""
    text = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
    patterns = re.findall(r'"([^"]+)"\s*;', text)
    text = re.sub(r'"[^"]*"\s*;', "", text)
    names = set(re.findall(r"\b([A-Za-z_]\w*)\s*;", text))
    return names, patterns


def check_interposed(rows, list_path):
    """Problems: C symbols exported but not interposed, or the reverse."""
    names, patterns = interposed(list_path)
    c_exported = {n for k, n in rows if "::" not in n and " " not in n and k in "TtWw"}
    problems = []
    for n in sorted(c_exported - names):
        problems.append("exported C function not in %s: %s (a libc function libgort defines "
                        "without GORT_INTERPOSE's reason?)" % (list_path, n))
    for n in sorted(names - c_exported):
        problems.append("interposed but not exported (GORT_INTERPOSE missing?): %s" % n)
    for p in patterns:
        if not any(fnmatch.fnmatchcase(n, p) for _, n in rows):
            problems.append("interposed but not exported (GORT_INTERPOSE missing?): %s" % p)
    return problems


def main(argv):
    update = "--update" in argv
    args = [a for a in argv if a != "--update"]
    if len(args) != 3:
        print(__doc__)
        return 2
    lib, interpose_list, symbols_file = args
    for tool in ("nm", "c++filt"):
        if shutil.which(tool) is None:
            print("no %s (binutils): skipping" % tool)
            return SKIP
    rows = exported(lib)
    failed = False
    for p in check_interposed(rows, interpose_list):
        print("FAIL: " + p)
        failed = True

    got = api_symbols(rows)
    if update:
        with open(symbols_file, "w") as f:
            f.write(HEADER)
            for n in sorted(got):
                f.write(n + "\n")
        print("wrote %d symbols to %s" % (len(got), symbols_file))
        return 1 if failed else 0

    want = read_list(symbols_file)
    added, removed = sorted(got - want), sorted(want - got)
    for n in added:
        print("+ " + n)
    for n in removed:
        print("- " + n)
    if added or removed:
        print("FAIL: %s exports %d symbols not in %s (+) and lacks %d listed ones (-)."
              % (lib, len(added), symbols_file, len(removed)))
        print("An export nobody asked for: a GORT_API too many, or a class marked whose members "
              "are not all API. A missing one: a GORT_API lost (a program built against the "
              "installed headers fails to link).")
        print("If the change is deliberate, regenerate the list and commit it:\n"
              "  python3 %s %s %s %s --update" % (os.path.relpath(__file__), lib, interpose_list,
                                                    symbols_file))
        failed = True
    else:
        print("ok - %s exports the %d listed symbols" % (os.path.basename(lib), len(got)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
