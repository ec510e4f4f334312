#!/usr/bin/env python3
"""Test for samples/demo, the tour that `./bootstrap demo` runs: runs it once
and checks each section's key lines, not only its exit status, so that a
section that silently stops showing what it is for fails here.

Timing figures are printed by the demo but only loosely checked (the median
tick lateness of section 3), since the machine may be loaded."""

import os
import re
import signal
import subprocess
import time

import harness
from harness import check, log

TIMEOUT = 90  # the tour takes a few seconds; 20 s is its budget on 2 busy cores


def run_demo(exe):
    # Its own session, so that a timeout kills the demo's children too.
    p = subprocess.Popen([exe], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        log(out)
        check(False, f"the demo ends within {TIMEOUT} s", err[-2000:])
    return p.returncode, out, err


def section(out, n):
    """The text of section n, from its header to the next one."""
    m = re.search(rf"^== {n}\. .*?(?=^== {n + 1}\. |^demo: )", out, re.M | re.S)
    check(m is not None, f"section {n} is there")
    return m.group(0)


def has(text, pattern, what):
    m = re.search(pattern, text, re.M)
    check(m is not None, what, text[-3000:] if m is None else None)
    return m


def test(exe):
    start = time.monotonic()
    rc, out, err = run_demo(exe)
    elapsed = time.monotonic() - start
    log(out)
    if err.strip():
        log(f"# stderr: {err.strip()[-2000:]}")
    check(rc == 0, "the demo exits with status 0", rc)
    log(f"# the tour took {elapsed:.1f} s")

    s1 = section(out, 1)
    has(s1, r"100000 goroutines spawned in [\d.]+ ms, all reported back after [\d.]+ ms",
        "1: spawn and join times")
    has(s1, r"runtime: \d+ Ps, \d+ Ms", "1: Ps and Ms used")
    has(s1, r"every goroutine reported back: ok$", "1: every goroutine reported back")

    s2 = section(out, 2)
    has(s2, r"the first 1000 primes: 2 3 5 7 11 13 17 19 23 29 ", "2: the first primes")
    has(s2, r" 7907 7919$", "2: the 1000th prime is 7919")
    has(s2, r"1000 primes in [\d.]+ ms: \d+ values passed between goroutines", "2: time and hand-offs")
    has(s2, r"the pipeline's primes match a sequential sieve: ok$", "2: checked")

    s3 = section(out, 3)
    if "not available in this build" in s3:
        log("# section 3: asynchronous preemption is off in this build; its checks are skipped")
    else:
        a, _, b = s3.partition("b) preemption off")
        ticks = re.findall(r"^    \| tick +(\d+): late by +(-?[\d.]+) ms$", a, re.M)
        check([int(t[0]) for t in ticks] == list(range(1, 11)),
              "3a: the ticker printed 10 ticks while the spinner ran", a)
        has(a, r"\| spinner: [\d.]+ million increments meanwhile", "3a: the spinner ran too")
        m = has(a, r"the ticker kept time: 10 of 10 ticks, median lateness ([\d.]+) ms",
                "3a: summary line")
        check(float(m.group(1)) < 20.0, "3a: median lateness below two time slices", m.group(0))
        has(a, r"preempted spinner, ticker ran on time: ok$", "3a: checked")
        check(not re.search(r"\| tick ", b), "3b: no tick without preemption", b)
        has(b, r"ticker starved: 0 ticks in 1\.[5-9] s", "3b: the ticker starved")
        has(b, r"without preemption the ticker starves: ok$", "3b: checked")

    s4 = section(out, 4)
    m = has(s4, r"^  (\d+) connections open at once after [\d.]+ ms", "4: all connections open at once")
    clients = int(m.group(1))
    if clients < 1000:
        has(s4, rf"only {clients} clients: the hard descriptor limit", "4: fewer clients, and it says why")
    has(s4, rf"totals: {clients} connections \(at most {clients} open at once\), "
            rf"{clients * 20} messages echoed,", "4: connection and message totals")
    has(s4, rf"{clients * 20 * 128} bytes each way; exchange [\d.]+ ms", "4: byte total and time")
    has(s4, r"every client got every echo back: ok$", "4: checked")

    has(out, r"^demo: all sections ok \([\d.]+ s\)$", "the closing line")


if __name__ == "__main__":
    harness.main(test)
