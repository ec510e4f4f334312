"""The gdb extension (gmp/diag/gdb/libgort-gdb.py) on gdb_parked (parked.cpp).

    gdb_test.py PARKED_EXE GDB_SCRIPT PARKED_SOURCE LIBGORT

For 1 and 2 Ps, gdb_parked parks three goroutines in known functions (a
channel receive reached through recurse(), a Mutex lock, a sleep) while main
waits in gort::blocking. Then:

  live     gdb attaches (-p) and runs `info goroutines` and `goroutine N bt`;
  gcore    gdb writes a core file of the live process (gcore), the process
           exits, and gdb reads the core with the same commands;
  abort    gdb_parked aborts and the kernel writes the core (skipped when
           /proc/sys/kernel/core_pattern pipes cores to a program, or no core
           appears);
  no -g    gdb on a libgort without debug information: a clear message, no
           Python traceback.

Each check compares the commands' text with the function names and the
file:line of the lines parked.cpp marks with `gdb_test: NAME`. Exit status:
0 passed, 1 failed, 77 skipped (no gdb, or ptrace not permitted here).
"""

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

SKIP = 77
_procs = []


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def log(msg):
    print(msg, flush=True)


def check(cond, what, detail=None):
    if cond:
        log("ok - " + what)
        return
    log("FAIL - " + what)
    if detail is not None:
        log("---- output ----\n" + detail[-6000:] + "\n----------------")
    raise Failure(what)


def marked_lines(source):
    """{name: line} of the lines marked `// gdb_test: name`."""
    out = {}
    with open(source) as f:
        for i, line in enumerate(f, 1):
            m = re.search(r"// gdb_test: (\w+)", line)
            if m:
                out[m.group(1)] = i
    return out


def gdb(args, timeout=180):
    cmd = ["gdb", "-batch", "-nx", "-iex", "set debuginfod enabled off",
           "-iex", "set auto-load no"] + args
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return r.stdout


def no_python_errors(out, what):
    check("Traceback" not in out and "Python Exception" not in out,
          what + ": no Python exception", out)


def start_parked(exe, procs, mode, cwd=None):
    p = subprocess.Popen([exe, str(procs), mode], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    _procs.append(p)
    line = p.stdout.readline()
    m = re.match(r"ready (\d+)$", line.strip())
    if not m:
        p.kill()
        _, err = p.communicate(timeout=30)
        raise Failure("gdb_parked did not get ready: %r %r" % (line, err))
    return p


def parse_goroutines(out):
    """{function: (id, state, reason, location)} from `info goroutines`."""
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^([* ]) (\d+)\s+(\w+)\s+(.*?)\s*$", line)
        if not m:
            continue
        star, goid, state, rest = m.groups()
        for name in ("park_in_chan_recv", "park_in_mutex_lock", "park_in_sleep"):
            if name in rest:
                rows[name] = (int(goid), state, rest, star)
        if goid == "1":
            rows["main"] = (1, state, rest, star)
    return rows


def check_dump(out, lines, source_name, label, main_state):
    """Checks `info goroutines` and the backtraces in one gdb run's text."""
    no_python_errors(out, label)
    rows = parse_goroutines(out)
    for name, reason, mark in (("park_in_chan_recv", "chan receive", "chan"),
                               ("park_in_mutex_lock", "sync.Mutex.Lock", "mutex"),
                               ("park_in_sleep", "sleep", "sleep")):
        check(name in rows, "%s: info goroutines lists the goroutine in %s" % (label, name), out)
        goid, state, rest, star = rows[name]
        where = "%s:%d" % (source_name, lines[mark])
        check(state == "waiting" and rest.startswith(reason) and where in rest and star == " ",
              "%s: goroutine %d is waiting (%s) at %s" % (label, goid, reason, where), out)
    check("main" in rows, label + ": info goroutines lists main (goroutine 1)", out)
    _, state, rest, star = rows["main"]
    if main_state == "syscall":
        where = "%s:%d" % (source_name, lines["main"])
        check(state == "syscall" and star == "*" and where in rest and "[thread" in rest,
              "%s: main is in a syscall on a thread, at %s" % (label, where), out)
    else:
        check(state == main_state and star == "*" and "[thread" in rest,
              "%s: main is %s on a thread" % (label, main_state), out)
    # The backtraces (printed after the listing, one `goroutine N bt` each).
    bts = {}
    for block in re.split(r"^=== ", out, flags=re.M)[1:]:
        head, _, body = block.partition("\n")
        bts[head.strip()] = body
    chan = bts.get("park_in_chan_recv", "")
    check(re.search(r"^#0 .* in gort::internal::switch_to ", chan, re.M) is not None,
          label + ": a parked goroutine's backtrace starts at the switch", chan)
    frames = [re.sub(r"^#\d+\s+0x[0-9a-f]+ in ", "", l) for l in chan.splitlines() if l.startswith("#")]
    names = [f.split(" (")[0] for f in frames]
    want = ["gort::Chan<int>::recv", "(anonymous namespace)::park_in_chan_recv"] + \
        ["(anonymous namespace)::recurse"] * 4
    got = [n for n in names if n in want]
    check(got == want, label + ": chan goroutine's frames in order: recv, park_in_chan_recv, "
          "recurse x4", chan)
    # The outermost recurse frame's depth is a value in every build; the
    # inner ones' may read <optimized out> where the compiler kept depth in
    # a register (the ASan build does).
    check(re.search(r"park_in_chan_recv \(ch=.*\) at .*%s:%d" % (re.escape(source_name), lines["chan"]),
                    chan) is not None and "recurse (depth=3," in chan,
          label + ": frames show arguments and file:line", chan)
    check(names and names[-1] == "gort::internal::goroutine_main",
          label + ": the backtrace ends at goroutine_main", chan)
    mutex = bts.get("park_in_mutex_lock", "")
    check("gort::Mutex::lock " in mutex and
          re.search(r"park_in_mutex_lock \(mu=0x[0-9a-f]+\) at .*%s:%d" % (re.escape(source_name),
                                                                          lines["mutex"]), mutex),
          label + ": mutex goroutine's backtrace", mutex)
    sleep = bts.get("park_in_sleep", "")
    check("gort::sleep " in sleep and "%s:%d" % (source_name, lines["sleep"]) in sleep,
          label + ": sleeping goroutine's backtrace", sleep)
    main = bts.get("main", "")
    check(main.startswith("#0 ") and "goroutine_main" in main and source_name in main,
          label + ": main's backtrace (its thread's frames)", main)
    full = bts.get("full", "")
    check(re.search(r"park_in_chan_recv \(ch=.*\n(        \w+ = .*\n)*        v = ", full) and
          re.search(r"recurse \(depth=2, .*\n        ch = ", full) is None,
          label + ": bt full shows each frame's locals (and arguments only in the frame line)", full)
    limit = bts.get("limit", "")
    check(len(re.findall(r"^#\d", limit, re.M)) == 2 and "(More stack frames follow...)" in limit,
          label + ": bt 2 shows two frames", limit)
    check("No such goroutine: 999999" in bts.get("end", ""), label + ": an unknown id is reported", out)


def dump(target_args, script, lines, source_name, label, main_state):
    """Runs info goroutines, then a bt of each goroutine of interest."""
    first = gdb(target_args + ["-x", script, "-ex", "info goroutines"])
    if "ptrace: Operation not permitted" in first or "Could not attach" in first:
        scope = "?"
        try:
            with open("/proc/sys/kernel/yama/ptrace_scope") as f:
                scope = f.read().strip()
        except OSError:
            pass
        raise Skip("gdb may not attach to a process here (ptrace: Operation not permitted; "
                   "yama ptrace_scope=%s, or no CAP_SYS_PTRACE in this container)" % scope)
    rows = parse_goroutines(first)
    cmds = ["-x", script, "-ex", "info goroutines"]
    for name, row in rows.items():
        cmds += ["-ex", "echo === %s\\n" % name, "-ex", "goroutine %d bt" % row[0]]
    if "park_in_chan_recv" in rows:
        goid = rows["park_in_chan_recv"][0]
        cmds += ["-ex", "echo === full\\n", "-ex", "goroutine %d bt full" % goid,
                 "-ex", "echo === limit\\n", "-ex", "goroutine %d bt 2" % goid]
    cmds += ["-ex", "echo === end\\n", "-ex", "goroutine 999999 bt"]
    out = gdb(target_args + cmds)
    check_dump(out, lines, source_name, label, main_state)
    return out


def find_core(cwd, pid):
    try:
        with open("/proc/sys/kernel/core_pattern") as f:
            pattern = f.read().strip()
    except OSError:
        return None, "cannot read core_pattern"
    if pattern.startswith("|"):
        return None, "core_pattern pipes cores to %s" % pattern[1:].split()[0]
    pat = re.sub(r"%p", str(pid), pattern)
    pat = re.sub(r"%.", "*", pat)
    if not pat.startswith("/"):
        pat = os.path.join(cwd, pat)
    found = glob.glob(pat) + glob.glob(pat + ".%d" % pid)
    if not found:
        return None, "no core file matching %s appeared (core_pattern %r)" % (pat, pattern)
    return found[0], None


def main():
    exe, script, source, libgort = (os.path.abspath(a) for a in sys.argv[1:5])
    if shutil.which("gdb") is None:
        raise Skip("gdb is not installed (Debian: apt-get install gdb; ./bootstrap lists it)")
    lines = marked_lines(source)
    source_name = os.path.basename(source)
    with open(exe, "rb") as f:
        asan = b"__asan_init" in f.read()
    tmp = tempfile.mkdtemp(prefix="gort-gdb-")
    try:
        for procs in (1, 2):
            # Live, then core files that gdb writes: with `gort gcore`, and
            # with gdb's own gcore, which loses the goroutine stacks on
            # kernels with guard regions (the script must say so).
            p = start_parked(exe, procs, "live")
            core = os.path.join(tmp, "gcore.%d" % procs)
            plain = os.path.join(tmp, "plain.%d" % procs)
            dump(["-p", str(p.pid)], script, lines, source_name, "live procs=%d" % procs, "syscall")
            if asan:
                # A core of an AddressSanitizer process holds its shadow
                # memory too, terabytes of address space: it fills the disk.
                log("skip - core files, procs=%d: an AddressSanitizer build" % procs)
                p.stdin.close()
                check(p.wait(timeout=60) == 0, "gdb_parked exits normally after gdb detached")
                continue
            out = gdb(["-p", str(p.pid), "-x", script, "-ex", "gort gcore " + core,
                       "-ex", "gcore " + plain])
            no_python_errors(out, "gort gcore")
            check(os.path.exists(core) and os.path.exists(plain) and
                  re.search(r"Saved corefile .* \(with \d+ KiB of goroutine stacks", out),
                  "gort gcore and gcore wrote core files", out)
            p.stdin.close()
            check(p.wait(timeout=60) == 0, "gdb_parked exits normally after gdb detached")
            dump([exe, core], script, lines, source_name, "gort gcore procs=%d" % procs, "syscall")
            out = gdb([exe, plain, "-x", script, "-ex", "info goroutines"])
            no_python_errors(out, "gcore")
            if "goroutines are missing from this core file" in out:
                log("ok - gcore procs=%d: the script says gdb's gcore lost the stacks" % procs)
            else:
                dump([exe, plain], script, lines, source_name, "gcore procs=%d" % procs, "syscall")
            os.unlink(core)
            os.unlink(plain)

            # A core that the kernel writes when the program aborts.
            cwd = os.path.join(tmp, "abort%d" % procs)
            os.mkdir(cwd)
            p = start_parked(exe, procs, "abort", cwd=cwd)
            status = p.wait(timeout=60)
            check(status == -signal.SIGABRT, "gdb_parked abort mode dies of SIGABRT")
            kcore, why = find_core(cwd, p.pid)
            if kcore is None:
                log("skip - kernel core file, procs=%d: %s" % (procs, why))
            else:
                out = dump([exe, kcore], script, lines, source_name,
                           "kernel core procs=%d" % procs, "running")
                # Started just before the abort: with one P it cannot
                # have run (main had the P), and it is listed as such.
                if procs == 1:
                    where = r"%s:%d" % (re.escape(source_name), lines["never_started"])
                    check(re.search(r"^  \d+\s+runnable\s+not started: will run "
                                    r"main\(int, char\*\*\)::<lambda\(\)>::<lambda\(\)> at .*" + where,
                                    out, re.M),
                          "kernel core procs=1: a goroutine not started yet names what it will run",
                          out)
            shutil.rmtree(cwd)

        # libgort without debug information: a message, not a traceback.
        stripped = os.path.join(tmp, "libgort-nodebug.so")
        subprocess.run(["objcopy", "--strip-debug", libgort, stripped], check=True)
        out = gdb([stripped, "-x", script, "-ex", "info goroutines", "-ex", "goroutine 1 bt"])
        no_python_errors(out, "no debug info")
        check(out.count("libgort has no debug information") == 2,
              "no debug info: both commands say libgort has no debug information", out)
    finally:
        for p in _procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Skip as e:
        log("SKIP: %s" % e)
        sys.exit(SKIP)
    except Failure:
        sys.exit(1)
    log("PASS")
