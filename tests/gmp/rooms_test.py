"""The runtime's rooms (gmp/room.hpp, stdlib/sync/room.hpp, docs/runtime.md
"Rooms"): gmp's os <- race <- core <- diag, then stdlib's sync <- net <- os
and sync <- pprof, each compiled with its room's macro. A header of a room above the
including one is a compile error; one below, or the same room, is not. Also
checks that the tree keeps the rule: every header of a room opens with its
room's marker.

Usage: rooms_test.py <c++ compiler> <source root>
"""
import glob
import os
import subprocess
import sys
import tempfile

# (room compiling, header included, whether it must compile)
CASES = [
    ("OS", "gmp/os/note.hpp", True),
    ("OS", "gmp/os/fatal.hpp", True),
    ("OS", "gmp/race/race.hpp", False),
    ("OS", "gmp/sched.hpp", False),
    ("OS", "gmp/diag/traceback.hpp", False),
    ("RACE", "gmp/os/futex.hpp", True),
    ("RACE", "gmp/race/sanitizer.hpp", True),
    ("RACE", "gmp/g.hpp", False),
    ("RACE", "gmp/diag/fatal.hpp", False),
    ("CORE", "gmp/race/race.hpp", True),
    ("CORE", "gmp/sched.hpp", True),
    ("CORE", "gmp/diag/fatal.hpp", False),
    ("CORE", "gmp/diag/unwind.hpp", False),
    ("CORE", "gmp/diag/schedtrace.hpp", False),
    ("DIAG", "gmp/sched.hpp", True),
    ("DIAG", "gmp/diag/traceback.hpp", True),
    ("CORE", "stdlib/sync/chan_core.hpp", False),
    ("DIAG", "stdlib/net/net_fd.hpp", False),
    ("STDLIB_SYNC", "gmp/sched.hpp", True),
    ("STDLIB_SYNC", "stdlib/sync/chan_ring.hpp", True),
    ("STDLIB_SYNC", "stdlib/net/net_fd.hpp", False),
    ("STDLIB_NET", "stdlib/sync/context_node.hpp", True),
    ("STDLIB_NET", "stdlib/net/net_fd.hpp", True),
    ("STDLIB_OS", "stdlib/net/net_fd.hpp", True),
    ("STDLIB_PPROF", "gmp/diag/symbolize.hpp", True),
    ("STDLIB_PPROF", "stdlib/sync/chan_ring.hpp", True),
    ("STDLIB_PPROF", "stdlib/pprof/labels.hpp", True),
    ("STDLIB_SYNC", "stdlib/pprof/labels.hpp", False),
    ("STDLIB_NET", "stdlib/pprof/labels.hpp", False),
    ("CORE", "stdlib/pprof/labels.hpp", False),
]

MARKERS = {"gmp": "gmp/room.hpp", "gmp/race": "gmp/race/room.hpp", "gmp/diag": "gmp/diag/room.hpp",
           "stdlib/sync": "stdlib/sync/room.hpp", "stdlib/net": "stdlib/net/room.hpp",
           "stdlib/trace": "stdlib/trace/room.hpp",
           "stdlib/pprof": "stdlib/pprof/room.hpp"}
# Not included by anything: force-included into every source (race build).
UNMARKED = {"gmp/race/race_glibcxx.hpp"}


def main():
    cxx, root = sys.argv[1], sys.argv[2]
    incs = ["-I" + root] + ["-I" + os.path.join(root, d)
                            for d in ("gmp/include", "stdlib/include", "preempt/include")]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (room, header, compiles) in enumerate(CASES):
            src = os.path.join(tmp, f"case{i}.cpp")
            with open(src, "w") as f:
                f.write(f'#include "{header}"\n')
            p = subprocess.run([cxx, "-std=c++20", "-pthread", "-fsyntax-only", f"-DGORT_ROOM_{room}",
                                *incs, src], capture_output=True, text=True)
            ok = (p.returncode == 0) if compiles else (p.returncode != 0 and "docs/runtime.md, Rooms" in p.stderr)
            name = f"room {room} includes {header}: " + ("compiles" if compiles else "refused")
            print(("ok   " if ok else "FAIL ") + name)
            if not ok:
                failures += 1
                print("  " + p.stderr[:2000].replace("\n", "\n  "))
    for d, marker in MARKERS.items():
        for h in sorted(glob.glob(os.path.join(root, d, "*.hpp"))):
            rel = os.path.relpath(h, root)
            if rel == marker or rel in UNMARKED:
                continue
            with open(h) as f:
                text = f.read()
            ok = f'#include "{marker}"' in text
            if not ok:
                failures += 1
                print(f"FAIL {rel} does not open with #include \"{marker}\"")
    print("ok   every room header has its marker" if failures == 0 else "")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
