#!/usr/bin/env python3
"""The lock rules the compiler checks (gmp/lock.hpp, gort/sync.hpp).

clang's -Wthread-safety must accept code that keeps the rules and reject,
with the expected diagnostic, code that breaks them: an unannotated lock
type or guard, or a lost ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED,
makes a case here fail. Usage: lock_annotations_test.py CLANG++ SOURCE_ROOT
"""
import os
import subprocess
import sys
import tempfile

PRELUDE = """
#include "absl/base/thread_annotations.h"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gort/sync.hpp"
using namespace gort;
using namespace gort::internal;
struct Counters {
  gort::Mutex mu;
  int n ABSL_GUARDED_BY(mu) = 0;
  gort::RWMutex rw;
  int m ABSL_GUARDED_BY(rw) = 0;
  WordLock<LockRank::kChan> word;
  int w ABSL_GUARDED_BY(word) = 0;
};
"""

# (name, body, expected diagnostic or None when the code must compile)
CASES = [
    ("rules kept", """
void f(Counters& c) {
  c.mu.lock(); c.n++; c.mu.unlock();
  if (c.mu.try_lock()) { c.n++; c.mu.unlock(); }
  c.rw.lock(); c.m++; c.rw.unlock();
  c.rw.lock_shared(); int x = c.m; c.rw.unlock_shared(); (void)x;
  if (c.rw.try_lock_shared()) { (void)c.m; c.rw.unlock_shared(); }
  auto rl = c.rw.rlocker(); (void)rl;
  { MutexLock lock(c.word); c.w++; }
  {
    MutexLock lock(sched.lock);
    sched.nmidle++;
    globrunqput_locked(nullptr);
  }
  if (sched.lock.try_lock()) sched.lock.unlock();
  UniqueLock lock(sched.lock);
  sched.nmidle++;
  lock.unlock();
  lock.lock();
  sched.nmidle++;
}
""", None),
    ("Sched field without Sched::lock", """
int f() { return sched.nmidle; }
""", "reading variable 'nmidle' requires holding mutex 'sched.lock'"),
    ("a *_locked function without Sched::lock", """
void f(G* g) { globrunqput_locked(g); }
""", "calling function 'globrunqput_locked' requires holding mutex 'sched.lock' exclusively"),
    ("UniqueLock after unlock()", """
void f() {
  UniqueLock lock(sched.lock);
  lock.unlock();
  sched.nmidle++;
}
""", "writing variable 'nmidle' requires holding mutex 'sched.lock' exclusively"),
    ("WordLock field without the lock", """
void f(Counters& c) { c.w = 1; }
""", "writing variable 'w' requires holding mutex 'c.word' exclusively"),
    ("gort::Mutex field without the lock", """
void f(Counters& c) { c.n = 1; }
""", "writing variable 'n' requires holding mutex 'c.mu' exclusively"),
    ("gort::Mutex left locked", """
void f(Counters& c) { c.mu.lock(); }
""", "mutex 'c.mu' is still held at the end of function"),
    ("write under RWMutex's read lock", """
void f(Counters& c) { c.rw.lock_shared(); c.m = 1; c.rw.unlock_shared(); }
""", "writing variable 'm' requires holding mutex 'c.rw' exclusively"),
    ("field after a failed try_lock", """
void f(Counters& c) { if (!c.mu.try_lock()) c.n = 1; else c.mu.unlock(); }
""", "writing variable 'n' requires holding mutex 'c.mu' exclusively"),
]


def main():
    clang, root = sys.argv[1], sys.argv[2]
    incs = ["-I" + root] + ["-I" + os.path.join(root, d)
                            for d in ("gmp/include", "stdlib/include", "preempt/include")]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, body, expect) in enumerate(CASES):
            src = os.path.join(tmp, f"case{i}.cpp")
            with open(src, "w") as f:
                f.write(PRELUDE + body)
            p = subprocess.run([clang, "-std=c++20", "-pthread", "-fsyntax-only", "-Wthread-safety",
                                "-Werror=thread-safety", *incs, src],
                               capture_output=True, text=True)
            if expect is None:
                ok = p.returncode == 0
            else:
                ok = p.returncode != 0 and expect in p.stderr
            print(("ok   " if ok else "FAIL ") + name)
            if not ok:
                failures += 1
                print("  expected: " + (expect or "no diagnostic"))
                print("  " + p.stderr.replace("\n", "\n  "))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
