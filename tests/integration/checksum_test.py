#!/usr/bin/env python3
"""samples/checksum: errgroup fan-out over a directory tree.

Builds a tree of files (empty, small, 1 MiB, nested, a name with a space),
runs the sample with 1 and 8 readers and compares every line with FNV-1a
computed here; then makes one file unreadable and checks that the sample
stops with that error (exit status 1) instead of hanging or printing a
partial result as success; a missing directory is an error too.
"""
import os
import subprocess
import sys
import tempfile


def fnv1a(data):
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def run(exe, *args):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)


def main():
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as root:
        files = {
            "a.txt": b"hello\n",
            "empty": b"",
            "dir/b.bin": bytes(range(256)) * 4096,
            "dir/deeper/c with space": b"x" * 12345,
        }
        for i in range(40):
            files[f"many/f{i:02d}"] = os.urandom(i * 97)
        for rel, data in files.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        want = sorted(f"{fnv1a(d):016x}  {os.path.join(root, r)}" for r, d in files.items())
        want.sort(key=lambda line: line.split("  ", 1)[1])
        for readers in ("1", "8"):
            r = run(exe, root, readers)
            if r.returncode != 0:
                sys.exit(f"checksum {readers} readers: status {r.returncode}: {r.stderr}")
            got = r.stdout.splitlines()
            if got != want:
                sys.exit(f"checksum {readers} readers: got\n{r.stdout}\nwant\n" + "\n".join(want))
        if os.geteuid() != 0:  # root reads anything: no unreadable file then
            bad = os.path.join(root, "dir/b.bin")
            os.chmod(bad, 0)
            r = run(exe, root, "4")
            if r.returncode != 1 or "cannot read" not in r.stderr:
                sys.exit(f"unreadable file: status {r.returncode}, stderr {r.stderr!r}")
        r = run(exe, os.path.join(root, "nowhere"))
        if r.returncode != 1 or "walk" not in r.stderr:
            sys.exit(f"missing directory: status {r.returncode}, stderr {r.stderr!r}")
    print("checksum: ok")


if __name__ == "__main__":
    main()
