"""What bench/http_compare and bench/echo_compare share: building the Go
and C servers, running a server process (pinned, optionally in a CPU-limited
cgroup), reading its CPU time, and cleaning up whatever happens.

Server CPU time is read from /proc: the first field of
/proc/PID/task/TID/schedstat (nanoseconds on a CPU) summed over the
process's threads, cross-checked with utime + stime of /proc/PID/stat
(clock ticks, but counting threads that have exited too). The difference
of two readings, divided by the work done in between, is the server's CPU
per request or per message: what a user of the server pays for, and a
figure the load generator's own limits do not cap.

Standard library only.
"""

import contextlib
import ctypes
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GO_DIR = os.path.join(ROOT, "bench", "go")
CGROUP_CPU = "/sys/fs/cgroup/cpu"
CGROUP_PREFIX = "gort-bench-"


class BenchError(Exception):
    pass


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def tail(text, lines=15):
    return "\n".join((text or "").strip().splitlines()[-lines:])


_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    """For Popen(preexec_fn=...): the child gets SIGKILL if this script
    dies, even by SIGKILL, when no finally block runs. It survives exec
    (taskset execs the server)."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def run_cmd(cmd, env=None, cwd=None, timeout=None):
    """Runs cmd, returns its stdout; BenchError with its output's tail on
    failure or timeout (subprocess.run kills the child then)."""
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                           timeout=timeout, preexec_fn=die_with_parent)
    except subprocess.TimeoutExpired:
        raise BenchError("timed out after %ss: %s" % (timeout, " ".join(cmd)))
    if p.returncode != 0:
        raise BenchError("exit status %d: %s\n%s" % (p.returncode, " ".join(cmd),
                                                      tail(p.stderr or p.stdout)))
    return p.stdout


def stop_on_sigterm():
    """Makes SIGTERM raise KeyboardInterrupt, as Ctrl-C does, so that the
    finally blocks stop the servers and remove the cgroups."""
    def handler(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, handler)


def build_go(build_dir, name):
    """go build ./<name> (a program in bench/go) into
    <build-dir>/bench-go/bin/<name>, with bench/compare.py's isolated
    settings: nothing is downloaded."""
    work = os.path.join(build_dir, "bench-go")
    out = os.path.join(work, "bin", name)
    env = dict(os.environ)
    env.update({"GOCACHE": os.path.join(work, "gocache"), "GOPATH": os.path.join(work, "gopath"),
                "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GO111MODULE": "on",
                "CGO_ENABLED": "0"})
    log("go build -o %s ./%s" % (os.path.relpath(out, ROOT), name))
    run_cmd(["go", "build", "-o", out, "./" + name], env=env, cwd=GO_DIR)
    return out


def go_binary(build_dir, name):
    return os.path.join(build_dir, "bench-go", "bin", name)


def build_c(build_dir, name):
    """cc -O2 bench/<name>.c into <build-dir>/bench-ceiling/<name>."""
    out = c_binary(build_dir, name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cc = os.environ.get("CC", "cc")
    log("%s -O2 -o %s bench/%s.c" % (cc, os.path.relpath(out, ROOT), name))
    run_cmd([cc, "-O2", "-o", out, os.path.join(ROOT, "bench", name + ".c")], cwd=ROOT)
    return out


def c_binary(build_dir, name):
    return os.path.join(build_dir, "bench-ceiling", name)


def ninja(build_dir, targets):
    log("ninja -C %s %s" % (build_dir, " ".join(targets)))
    run_cmd(["ninja", "-C", build_dir] + targets, cwd=ROOT)
    return [os.path.join(build_dir, t) for t in targets]


# ---- CPU time of a process -------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_cpu_ns(pid):
    """(utime, stime) of the whole process (live and exited threads), in
    ns; the kernel keeps each exact and rounds it down to a clock tick."""
    with open("/proc/%d/stat" % pid) as f:
        data = f.read()
    # The command name, field 2, is in parentheses and may hold spaces.
    fields = data[data.rindex(")") + 2:].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15
    tick = 1_000_000_000 // CLK_TCK
    return utime * tick, stime * tick


def _schedstat_cpu_ns(pid):
    """Nanoseconds on a CPU summed over the live threads, or None if the
    kernel has no schedstat."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            if not os.path.exists("/proc/%d/task/%s" % (pid, tid)):
                continue  # the thread exited while we looked
            return None
    return total


class CpuReading:
    def __init__(self, pid):
        self.schedstat = _schedstat_cpu_ns(pid)
        self.user, self.sys = _stat_cpu_ns(pid)
        self.stat = self.user + self.sys


def cpu_used_ns(before, after):
    """The CPU time between two readings, in ns: the schedstat sum when it
    is available and agrees with /proc/PID/stat; stat's figure (10 ms
    resolution) when a thread exited in between, taking its time out of
    the sum."""
    stat_ns = after.stat - before.stat
    if before.schedstat is None or after.schedstat is None:
        return stat_ns
    sched_ns = after.schedstat - before.schedstat
    tick = 1_000_000_000 // CLK_TCK
    if abs(sched_ns - stat_ns) > 2 * tick + stat_ns // 50:
        log("note: schedstat (%.3f s) and /proc/PID/stat (%.3f s) disagree, a thread exited; "
            "using stat" % (sched_ns / 1e9, stat_ns / 1e9))
        return stat_ns
    return sched_ns


# ---- system calls and context switches (perf stat) ---------------------------

PERF_EVENTS = ["raw_syscalls:sys_enter", "context-switches", "cpu-migrations"]


class PerfStat:
    """`perf stat` attached to a running process (all its threads) until
    stop(), which returns {event: count}. Tracing every system call costs
    the traced process CPU time: figures measured meanwhile are inflated."""

    def __init__(self, pid, events=PERF_EVENTS):
        self.out = tempfile.NamedTemporaryFile(prefix="perfstat-", suffix=".csv")
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen(["perf", "stat", "-x", ",", "-e", ",".join(events),
                                   "-p", str(pid), "-o", self.out.name],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=self.err, preexec_fn=die_with_parent)
        time.sleep(0.2)  # attached to every thread before the work starts
        if self.p.poll() is not None:
            err = self._err()
            self.close()
            raise BenchError("perf stat failed:\n" + err)

    def _err(self):
        self.err.seek(0)
        return tail(self.err.read().decode(errors="replace"))

    def stop(self):
        try:
            self.p.send_signal(signal.SIGINT)
            self.p.wait(timeout=10)
            with open(self.out.name) as f:
                text = f.read()
            counts = {}
            for line in text.splitlines():
                fields = line.split(",")
                if len(fields) >= 3 and not line.startswith("#"):
                    try:
                        counts[fields[2]] = float(fields[0])
                    except ValueError:  # "<not counted>"
                        pass
            if not counts:
                raise BenchError("perf stat counted nothing:\n%s\n%s" % (text, self._err()))
            return counts
        finally:
            self.close()

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.out.close()
        self.err.close()


# ---- a CPU-limited cgroup ---------------------------------------------------

class CpuCgroup:
    """A cgroup v1 CPU controller group limited to quota_us per period_us
    (50000/100000: half a CPU). Processes join it before they exec
    (join, from a preexec_fn), so that every thread they ever start is
    limited. remove()
    kills anything left in it and deletes it; use it as a context manager."""

    def __init__(self, quota_us, period_us=100000):
        if not os.path.isdir(CGROUP_CPU):
            raise BenchError("%s is not mounted (cgroup v1 cpu controller); --server-bound "
                             "needs it" % CGROUP_CPU)
        remove_stale_cgroups()
        self.path = os.path.join(CGROUP_CPU, "%s%d-%d" % (CGROUP_PREFIX, os.getpid(),
                                                          time.monotonic_ns()))
        try:
            os.mkdir(self.path)
        except OSError as e:
            raise BenchError("cannot create a cgroup (are we root?): %s" % e)
        try:
            # The period first: the quota may not exceed what it allows.
            self._write("cpu.cfs_period_us", period_us)
            self._write("cpu.cfs_quota_us", quota_us)
        except BaseException:
            self.remove()
            raise

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write("%d\n" % value)

    def join(self):
        """Moves the calling process into the group (from a preexec_fn)."""
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write("%d\n" % os.getpid())

    def stat(self):
        """cpu.stat as a dict: nr_periods, nr_throttled, throttled_time."""
        out = {}
        with open(os.path.join(self.path, "cpu.stat")) as f:
            for line in f:
                k, _, v = line.partition(" ")
                if v.strip().isdigit():
                    out[k] = int(v)
        return out

    def remove(self):
        _remove_cgroup(self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _remove_cgroup(path):
    for attempt in range(50):
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(l) for l in f if l.strip()]
        except FileNotFoundError:
            return
        for pid in pids:  # only processes this script started get here
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)  # a killed process leaves its cgroup when it is reaped
    log("warning: could not remove the cgroup %s" % path)


def remove_stale_cgroups():
    """Removes the groups of earlier runs of these scripts that were killed
    before they could (their owner's pid, in the name, is gone)."""
    try:
        names = os.listdir(CGROUP_CPU)
    except OSError:
        return
    for name in names:
        m = re.fullmatch(re.escape(CGROUP_PREFIX) + r"(\d+)-\d+", name)
        if m and not os.path.exists("/proc/%s" % m.group(1)):
            try:
                os.rmdir(os.path.join(CGROUP_CPU, name))
            except OSError:
                pass  # not empty: a stray server, left for someone to look at


# ---- a server process --------------------------------------------------------

class Server:
    """One server process started as `taskset -c CPUS EXE ARGS...`, its
    output in temporary files (a pipe nobody reads could fill and block
    it). It must print "listening on HOST:PORT" within 10 s. stop() sends
    SIGTERM (SIGKILL after 10 s) and fails, with the server's stderr tail,
    unless the server exits cleanly."""

    def __init__(self, exe, args, cpus, env=None, cgroup=None):
        self.exe = exe
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        # Its stderr once it is gone (kill), for a caller that looks at what
        # it said on its way out (bench/http_compare: the tracer's messages).
        self.final_stderr = ""
        cmd = ["taskset", "-c", cpus, exe] + args

        def setup():
            die_with_parent()
            if cgroup:
                cgroup.join()
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=self.out,
                                  stderr=self.err, preexec_fn=setup)
        try:
            self.addr = self._wait_listening()
        except BaseException:
            self.kill()
            raise

    def _read(self, f):
        f.seek(0)
        return f.read().decode(errors="replace")

    def stderr_tail(self):
        return tail(self._read(self.err), 10)

    def _wait_listening(self):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = re.search(r"listening on (\S+)\n", self._read(self.out))
            if m:
                return m.group(1)
            if self.p.poll() is not None:
                raise BenchError("%s exited with status %s before listening:\n%s"
                                 % (self.exe, self.p.returncode, self.stderr_tail()))
            time.sleep(0.02)
        raise BenchError("%s did not print 'listening on ADDR' within 10 s:\n%s"
                         % (self.exe, self.stderr_tail()))

    @property
    def pid(self):
        return self.p.pid

    def cpu(self):
        """A CpuReading; fails if the server has died."""
        self.check_alive()
        try:
            return CpuReading(self.p.pid)
        except (FileNotFoundError, ProcessLookupError):
            self.check_alive()
            raise

    def check_alive(self):
        if self.p.poll() is not None:
            raise BenchError("%s died (status %s) during the run:\n%s"
                             % (self.exe, self.p.returncode, self.stderr_tail()))

    def stop(self):
        """SIGTERM and wait; BenchError if it was dead already or exits badly."""
        if self.p.poll() is not None:
            self.check_alive()
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            raise BenchError("%s did not exit within 10 s of SIGTERM:\n%s"
                             % (self.exe, self.stderr_tail()))
        if self.p.returncode not in (0, -signal.SIGTERM):
            raise BenchError("%s exited with status %s after SIGTERM:\n%s"
                             % (self.exe, self.p.returncode, self.stderr_tail()))

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        if not self.err.closed:
            self.final_stderr = self._read(self.err)
        self.out.close()
        self.err.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.stop()
            elif (self.p.poll() is not None and exc_type is not KeyboardInterrupt
                  and self.exe not in str(exc)):
                # What failed (the load generator, say) may be the symptom.
                log("%s exited with status %s during the run:\n%s"
                    % (self.exe, self.p.returncode, self.stderr_tail()))
        finally:
            self.kill()


# ---- what else ran meanwhile -----------------------------------------------------

def _machine_busy_ns():
    """CPU time all CPUs spent outside idle and iowait since boot, in ns
    (first line of /proc/stat, clock ticks)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = sum(v[:8]) - v[3] - v[4]  # user nice system idle iowait irq softirq steal
    return busy * 1_000_000_000 // CLK_TCK


def _own_ns():
    """CPU time of this script and of its children that have been waited
    for (the load generator)."""
    import resource
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return int(total * 1e9)


class Others:
    """Measures the CPU time that processes other than the server, the load
    generator and this script used during a window: the machine is shared,
    and a build next door inflates every figure. start() before the load
    generator is started, stop(server_cpu_ns) after it has been waited for
    (a load generator that goes on running: add the CPU time it reports
    for the window to server_cpu_ns); the result is in ns (clock-tick
    resolution)."""

    def start(self):
        self.busy0, self.own0 = _machine_busy_ns(), _own_ns()

    def stop(self, server_ns):
        others = (_machine_busy_ns() - self.busy0) - (_own_ns() - self.own0) - server_ns
        return max(0, others)


# ---- a measured round: the sides take turns -------------------------------------

# Names of the figures measure_round returns for each side. The scripts add
# their unit: COUNT, RATE and CPU_US are per request or per message.
CPU_US = "server_cpu_us"     # server CPU time / count
RATE = "rate"                # count / the load generator's seconds
UTIL = "server_cpus"         # server CPU time / the load generator's seconds
USER_PCT = "server_user_pct"  # the share of the server's CPU time in user mode
OTHERS = "others_cpus"       # CPU other processes used / wall time of the slices
THROTTLED = "throttled_pct"  # periods in which the cgroup quota ran out
SYSCALLS = "syscalls"        # --syscalls: system calls / count
SWITCHES = "context_switches"  # --syscalls: context switches / count


def measure_round(sides, start, load, duration, slice_s, warmup, turn, syscalls=False):
    """One run of every side with fresh servers, taking turns.

    start(side) returns (Server, CpuCgroup or None) for a new server;
    load(server, seconds) runs the load generator against it and returns
    (requests or messages completed, seconds it measured), or a triple
    whose third item is the CPU ns that a load generator still running
    (one kept between turns, not yet waited for) used in the turn, so
    that it is not counted as other processes' time. Every server is
    started, warmed up for `warmup` seconds, then the sides take turns in
    slices of about slice_s seconds until each has had `duration`, the
    order rotating by one each slice (starting at `turn`), so that a change
    of the machine's speed -- this shared host changes by a factor of two
    within seconds -- falls on all sides alike. The server's CPU time is
    read just before and after each slice. With syscalls, perf stat counts
    each side's system calls in one unsliced piece instead.

    Returns {side: {figure: value}} with the names above. Servers and
    cgroups are stopped and removed whatever happens."""
    slices = 1 if syscalls else max(1, int(round(duration / slice_s)))
    each = duration / slices
    acc = {side: dict(cpu=0, user=0, stat=0, count=0, load_s=0.0, wall_s=0.0, others=0, periods=0,
                      throttled=0, syscalls=0.0, switches=0.0) for side in sides}
    with contextlib.ExitStack() as stack:
        servers = {}
        for side in sides:
            srv, cgroup = start(side)
            if cgroup:
                stack.callback(cgroup.remove)
            stack.enter_context(srv)  # entered last: stopped before its cgroup goes
            servers[side] = (srv, cgroup)
        for side in sides:
            if warmup > 0:
                load(servers[side][0], warmup)
        for k in range(slices):
            r = (turn + k) % len(sides)
            for side in sides[r:] + sides[:r]:
                srv, cgroup = servers[side]
                a = acc[side]
                srv.check_alive()
                perf = PerfStat(srv.pid) if syscalls else None
                try:
                    others = Others()
                    t0, before = time.monotonic(), srv.cpu()
                    others.start()
                    thr0 = cgroup.stat() if cgroup else None
                    done = load(srv, each)
                    count, secs = done[0], done[1]
                    helper_ns = done[2] if len(done) > 2 else 0
                    # The load generator's closes (if it closed) reach the server.
                    time.sleep(0.05)
                    after, t1 = srv.cpu(), time.monotonic()
                    cpu = cpu_used_ns(before, after)
                    a["cpu"] += cpu
                    a["user"] += after.user - before.user
                    a["stat"] += after.stat - before.stat
                    a["count"] += count
                    a["load_s"] += secs
                    a["wall_s"] += t1 - t0
                    a["others"] += others.stop(cpu + helper_ns)
                    if perf:
                        counts = perf.stop()
                        a["syscalls"] += counts.get("raw_syscalls:sys_enter", 0)
                        a["switches"] += counts.get("context-switches", 0)
                    if cgroup:
                        thr = cgroup.stat()
                        a["periods"] += thr["nr_periods"] - thr0["nr_periods"]
                        a["throttled"] += thr["nr_throttled"] - thr0["nr_throttled"]
                finally:
                    if perf:
                        perf.close()
    out = {}
    for side, a in acc.items():
        r = {CPU_US: a["cpu"] / 1e3 / a["count"], RATE: a["count"] / a["load_s"],
             UTIL: a["cpu"] / 1e9 / a["load_s"], OTHERS: a["others"] / 1e9 / a["wall_s"],
             USER_PCT: 100.0 * a["user"] / a["stat"] if a["stat"] else 0.0}
        if servers[side][1]:
            r[THROTTLED] = 100.0 * a["throttled"] / a["periods"] if a["periods"] else 0.0
        if syscalls:
            r[SYSCALLS] = a["syscalls"] / a["count"]
            r[SWITCHES] = a["switches"] / a["count"]
        out[side] = r
    return out


# ---- summaries ------------------------------------------------------------------

def median(values):
    return statistics.median(values)


def user_kernel(med):
    """(user, kernel) CPU µs per count from a side's medians: its CPU per
    count split by the user share of /proc/PID/stat (clock ticks, exact
    enough over seconds of load)."""
    user = med[CPU_US] * med[USER_PCT] / 100.0
    return user, med[CPU_US] - user


def fmt_runs(values, fmt="%.0f"):
    return " ".join(fmt % v for v in values)


def paired_ratios(a, b):
    """Run-by-run ratios a[i] / b[i]: the two sides of one run are minutes
    apart at most, so a change of the machine's speed between runs cancels."""
    return [x / y for x, y in zip(a, b)]


def verdict(ratio, target, higher_better):
    ok = ratio >= target if higher_better else ratio <= target
    return "target %s %.2f: %s" % (">=" if higher_better else "<=", target,
                                    "met" if ok else "MISSED")
