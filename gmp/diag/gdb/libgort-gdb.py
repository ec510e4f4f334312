# gmp/diag/gdb/libgort-gdb.py — gdb commands for programs that use gort: list the
# goroutines and show their stacks, in a live process or a core file.
#
#   info goroutines            every goroutine: id, state, wait reason, and
#                              where it is (its innermost frame outside gort
#                              and the C/C++ libraries, with file:line)
#   goroutine N bt [full] [K]  goroutine N's backtrace (`full`: with locals;
#                              K: the innermost K frames); N may be `all`
#
# meson install puts this file where gdb auto-loads it for every program
# that loads libgort (<datadir>/gdb/auto-load/<libdir>/libgort.so-gdb.py);
# `source` it by hand otherwise. docs/gdb-and-schedtrace.md has examples.
#
# How it works. gort keeps every goroutine (G) in a list, sched.allg, in
# libgort's data; the script reads it through libgort's debug information,
# so it works as well on a core file as on a live process and changes
# nothing in the program. A goroutine that is not running has its registers
# saved on its own stack, where Boost.Context's jump_fcontext pushed them
# when it switched away (G::ctx points at them). A running one is on a
# thread (G::m, M::os_tid), whose frames gdb already knows.
#
# gdb cannot be told to unwind a stack that no thread is on, and a core
# file's registers cannot be written (Go's runtime-gdb.py sets $pc and $sp,
# which works only on a live process). So while it prints a parked
# goroutine, the script installs an unwinder that says the caller of the
# selected thread's innermost frame is the goroutine's saved context: gdb
# then unwinds the goroutine's stack with its own DWARF machinery from
# there, and the script prints the frames above that first one.
#
# Reading another program's memory can fail anywhere (a core without the
# stack pages, a goroutine list being changed as the program stopped): the
# commands report what they could not read and go on.

import re

import gdb

try:
    import gdb.unwinder
    _HAVE_UNWINDER = True
except ImportError:
    _HAVE_UNWINDER = False


class GortError(Exception):
    pass


# What Boost.Context's jump_fcontext (x86-64 System V, ELF) leaves at the
# saved stack pointer, fctx: MXCSR and the x87 control word, then these
# registers, then the return address; the caller's stack pointer is
# fctx + 0x40 once jump_fcontext returns.
_FCONTEXT_X86_64 = (("r12", 0x08), ("r13", 0x10), ("r14", 0x18), ("r15", 0x20),
                    ("rbx", 0x28), ("rbp", 0x30), ("rip", 0x38))
_FCONTEXT_SIZE = 0x40

# At most this many Gs are walked (a list that a crash left corrupt may
# loop).
_MAX_GS = 10 * 1000 * 1000


def _atomic(v):
    """The value inside a libstdc++ std::atomic (or v itself)."""
    for _ in range(4):
        t = v.type.strip_typedefs()
        if t.code != gdb.TYPE_CODE_STRUCT:
            return v
        names = [f.name for f in t.fields()]
        for inner in ("_M_i", "_M_p", "_M_b", "_M_base"):
            if inner in names:
                v = v[inner]
                break
        else:
            bases = [f for f in t.fields() if f.is_base_class]
            if not bases:
                return v
            v = v[bases[0]]
    return v


def _enum_name(v):
    """'kWaiting' for gort::internal::GStatus::kWaiting."""
    s = str(_atomic(v))
    return s.rsplit("::", 1)[-1]


def _lower_state(v):
    name = _enum_name(v)
    return name[1:].lower() if name.startswith("k") else name


def _lookup(name):
    try:
        return gdb.parse_and_eval("'gort::internal::%s'" % name)
    except gdb.error as e:
        msg = str(e)
        if "unknown type" in msg or "debug info" in msg:
            raise GortError(
                "gort: libgort has no debug information, so its goroutines cannot be read. "
                "gort's meson build has it in every build type; this copy was stripped: "
                "install it unstripped, or its debug symbols (under /usr/lib/debug).")
        raise GortError(
            "gort: no gort runtime here (gdb knows no gort::internal::%s: the program "
            "does not use libgort, or its shared libraries are not loaded yet; load a core "
            "file together with its executable)." % name)


def _runtime():
    """What outlives a run (gmp/sched.hpp, Runtime): `running`, the stack pools."""
    runtime = _lookup("runtime")
    try:
        if not bool(_atomic(runtime["running"])):
            raise GortError("gort: the runtime is not running (gort::run has not started, or "
                            "has returned).")
    except gdb.MemoryError:
        raise GortError("gort: cannot read the runtime's state (no process or core file?).")
    return runtime


def _sched():
    """The run's state (gmp/sched.hpp, Sched), once a run is known to be under way."""
    _runtime()
    return _lookup("sched")


def _all_gs(sched):
    g = sched["allg"]
    seen = 0
    while int(g) != 0 and seen < _MAX_GS:
        yield g
        g = g["allg_next"]
        seen += 1


def _wait_reason(g):
    """Go's text for g's wait reason, from the runtime's own table."""
    r = int(_atomic(g["waitreason"]))
    try:
        table = gdb.parse_and_eval("'gort::internal::kWaitReasonStrings'")
        lo, hi = table.type.strip_typedefs().range()
        if lo <= r <= hi:
            return table[r].string()
    except gdb.error:
        pass
    return _enum_name(g["waitreason"])


def _thread_of(m):
    """The gdb thread of M* m, or None."""
    tid = int(_atomic(m["os_tid"]))
    for th in gdb.selected_inferior().threads():
        if th.ptid[1] == tid:
            return th
    return None


class Goroutine:
    """What the commands need to know of one G, read once."""

    def __init__(self, g):
        self.g = g
        self.id = int(_atomic(g["id"]))
        self.status = _lower_state(g["status"])
        self.reason = _wait_reason(g) if self.status == "waiting" else ""
        self.m = g["m"] if int(g["m"]) != 0 else None
        self.started = bool(g["started"])
        self.thread = None
        self.in_blocking = False
        if self.m is not None:
            self.thread = _thread_of(self.m)
            self.in_blocking = bool(_atomic(self.m["in_blocking"]))

    @property
    def state(self):
        # Go's names: a goroutine inside gort::blocking is in a "syscall".
        if self.status == "running" and self.in_blocking:
            return "syscall"
        return self.status

    def on_thread(self):
        # G::m is set while the G runs, and until the switch that took it off
        # its M has saved its context: until then, its thread has the frames.
        return self.m is not None

    def not_started(self):
        return self.status == "runnable" and not self.started

    def saved_registers(self):
        """The registers jump_fcontext saved for this G, as {name: int}."""
        arch = gdb.selected_inferior().architecture().name()
        if "x86-64" not in arch:
            raise GortError("gort: unwinding a parked goroutine is implemented for x86-64 only "
                            "(this is %s)" % arch)
        fctx = int(self.g["ctx"])
        if fctx == 0:
            raise GortError("goroutine %d has no saved context" % self.id)
        lo, hi = int(self.g["stack_lo"]), int(self.g["stack_hi"])
        if not lo <= fctx < hi:
            raise GortError("goroutine %d: saved context 0x%x lies outside its stack "
                            "[0x%x, 0x%x)" % (self.id, fctx, lo, hi))
        u64 = gdb.lookup_type("unsigned long").pointer()
        regs = {}
        try:
            for name, off in _FCONTEXT_X86_64:
                regs[name] = int(gdb.Value(fctx + off).cast(u64).dereference())
        except gdb.MemoryError:
            raise GortError("goroutine %d: its stack at 0x%x is not readable (a core file "
                            "without it?)" % (self.id, fctx))
        regs["rsp"] = fctx + _FCONTEXT_SIZE
        return regs

    def entry_function(self):
        """What a goroutine that has not run yet will run: the callable
        given to gort::go (the first type of the closure's tuple in the name
        of the runtime's invoker, invoke_inline<std::tuple<F, Args...>>),
        and where its code starts, when it was inlined into the invoker."""
        try:
            pc = int(self.g["invoke"])
            block = gdb.block_for_pc(pc)
            if block is None or block.function is None:
                return gdb.execute("info symbol 0x%x" % pc, to_string=True).split(" in section")[0]
            name = block.function.print_name
            m = re.search(r"invoke_(?:inline|heap)<std::tuple<(.*)> >", name)
            if m:
                name = _first_template_arg(m.group(1)).strip()
            while block.function is None:
                block = block.superblock
            arch = gdb.selected_inferior().architecture()
            for insn in arch.disassemble(block.start, block.end - 1, 512):
                sal = gdb.find_pc_line(insn["addr"])
                if sal.symtab is not None and _user_source(sal.symtab.filename):
                    return "%s at %s:%d" % (name, sal.symtab.filename, sal.line)
            return name
        except gdb.error:
            return "??"


class _FrameId:
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


if _HAVE_UNWINDER:
    class _GoroutineUnwinder(gdb.unwinder.Unwinder):
        """While armed, the caller of the selected thread's innermost frame
        has a goroutine's saved registers.

        The innermost frame gdb unwinds with an unwinder is the thread's
        innermost normal frame (inline frames above it share its registers),
        which need not be level 0: it is found by its stack pointer and pc,
        and `level` records where it was.
        """

        def __init__(self):
            super().__init__("gort-goroutine")
            self.regs = None
            self.thread_sp = None
            self.thread_pc = None
            self.level = None

        def arm(self, regs, thread_sp, thread_pc):
            self.regs = regs
            self.thread_sp = thread_sp
            self.thread_pc = thread_pc
            self.level = None

        def disarm(self):
            self.regs = None
            self.level = None

        def __call__(self, pending_frame):
            if self.regs is None:
                return None
            sp = pending_frame.read_register("rsp")
            pc = pending_frame.read_register("rip")
            if int(sp) != self.thread_sp or int(pc) != self.thread_pc:
                return None
            if self.level is not None and pending_frame.level() != self.level:
                return None
            self.level = pending_frame.level()
            # Stack address 0 in this frame's id: gdb stops a backtrace whose
            # next frame lies below this one ("previous frame inner to this
            # frame"), and the goroutine's stack may lie anywhere relative to
            # this thread's.
            info = pending_frame.create_unwind_info(_FrameId(gdb.Value(0).cast(sp.type), pc))
            for name, value in self.regs.items():
                info.add_saved_register(name, gdb.Value(value).cast(sp.type))
            return info

    _unwinder = _GoroutineUnwinder()
    gdb.unwinder.register_unwinder(None, _unwinder, replace=True)


class _Frames:
    """gdb frames of a goroutine: `with _Frames(gr) as frames: ...`."""

    def __init__(self, gr):
        self.gr = gr
        self.saved_thread = None
        self.saved_frame = None

    def __enter__(self):
        self.saved_thread = gdb.selected_thread()
        try:
            self.saved_frame = gdb.selected_frame()
        except gdb.error:
            self.saved_frame = None
        try:
            return self._frames()
        except BaseException:
            # __exit__ does not run when __enter__ fails: restore here.
            self.__exit__(None, None, None)
            raise

    def _frames(self):
        gr = self.gr
        if gr.on_thread():
            if gr.thread is None:
                raise GortError("goroutine %d runs on M%d, whose thread (LWP %d) gdb does not "
                                "know" % (gr.id, int(gr.m["id"]), int(_atomic(gr.m["os_tid"]))))
            gr.thread.switch()
            gdb.invalidate_cached_frames()
            return _iter_frames(gdb.newest_frame())
        if not _HAVE_UNWINDER:
            raise GortError("gort: this gdb has no Python unwinder API (gdb 7.10 or later)")
        if self.saved_thread is None:
            raise GortError("gort: no thread selected (no process or core file?)")
        regs = gr.saved_registers()
        gdb.invalidate_cached_frames()
        top = gdb.newest_frame()
        _unwinder.arm(regs, int(top.read_register("rsp")), int(top.read_register("rip")))
        gdb.invalidate_cached_frames()
        # The thread's own innermost frames come first (up to the one whose
        # caller the unwinder replaced); the goroutine's stack starts above.
        f = gdb.newest_frame()
        while f is not None and (_unwinder.level is None or f.level() <= _unwinder.level):
            f = f.older()
        if _unwinder.level is None:
            raise GortError("gort: the goroutine unwinder was not consulted (another unwinder "
                            "took the selected thread's innermost frame)")
        return _iter_frames(f)

    def __exit__(self, *exc):
        if _HAVE_UNWINDER:
            _unwinder.disarm()
        gdb.invalidate_cached_frames()
        if self.saved_thread is not None and self.saved_thread.is_valid():
            self.saved_thread.switch()
            if self.saved_frame is not None:
                try:
                    self.saved_frame.select()
                except gdb.error:
                    pass
        return False


def _iter_frames(frame, limit=4096):
    """Frames from `frame` outwards, up to the goroutine's first function
    (goroutine_main): what lies beyond it is Boost.Context's start-up
    trampoline, whose caller is no code at all."""
    n = 0
    while frame is not None and n < limit:
        yield frame
        if (frame.name() or "").endswith("gort::internal::goroutine_main"):
            return
        n += 1
        try:
            frame = frame.older()
        except gdb.error:
            return


# ---- which frames are the program's own ----

_SYSTEM_LIBS = re.compile(r"^(libc|libstdc\+\+|libgcc_s|ld-linux|libpthread|libm|libboost_context|"
                          r"libabsl_|libasan|libtsan|libubsan)[.-]")
_RUNTIME_NAMES = re.compile(r"^(std::|__gnu_cxx::|__cxxabiv1::|boost::|gort::|__|_start$|"
                            r"start_thread$|clone3?$)")


def _top_level(s, sep):
    """Index of the first `sep` in s outside <...> and (...), or -1."""
    depth = 0
    for i, c in enumerate(s):
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif c == sep and depth == 0:
            return i
    return -1


def _strip_return_type(name):
    # Template functions demangle with their return type first ("void
    # gort::internal::invoke_inline<...>(void*)"): drop it before matching.
    i = _top_level(name, " ")
    return name[i + 1:] if i >= 0 else name


def _first_template_arg(args):
    i = _top_level(args, ",")
    return args[:i] if i >= 0 else args


def _user_source(path):
    """Not gort's public headers (inlined into the program), not the C++
    standard library's."""
    return ("/include/gort/" not in path and not path.startswith("include/gort/") and
            not path.startswith("/usr/include/") and "/c++/" not in path)


def _objfile_base(frame):
    try:
        sym = frame.function()
        if sym is not None and sym.symtab is not None:
            return sym.symtab.objfile.filename.rsplit("/", 1)[-1]
        solib = gdb.solib_name(frame.pc())
        return solib.rsplit("/", 1)[-1] if solib else ""
    except gdb.error:
        return ""


def _is_user_frame(frame):
    """A frame of the program's own code (not gort's, not a library's)."""
    name = frame.name()
    if name is None:
        return False
    lib = _objfile_base(frame)
    if lib.startswith("libgort") or _SYSTEM_LIBS.match(lib):
        return False
    if _RUNTIME_NAMES.match(_strip_return_type(name)):
        return False
    sal = frame.find_sal()
    return sal.symtab is not None and _user_source(sal.symtab.filename)


def _where(frame):
    name = frame.name() or "0x%x" % frame.pc()
    sal = frame.find_sal()
    if sal.symtab is not None:
        return "%s at %s:%d" % (name, sal.symtab.filename, sal.line)
    lib = _objfile_base(frame)
    return "%s from %s" % (name, lib) if lib else name


def _is_entry_point(frame):
    """A public function of libgort's (gort::sleep, gort::Mutex::lock_slow),
    not one of its internals."""
    name = frame.name()
    if name is None or not _objfile_base(frame).startswith("libgort"):
        return False
    name = _strip_return_type(name)
    return (name.startswith("gort::") and not name.startswith("gort::internal::") and
            "(anonymous namespace)" not in name)


def _location(gr):
    """Where goroutine gr is: its innermost user frame; else (a program
    without debug information, or a callable that jumped to gort in tail
    position) the outermost of libgort's public functions it is in, as
    tracebacks show gort::sleep; else its innermost frame."""
    if gr.not_started():
        return "not started: will run " + gr.entry_function()
    if gr.status in ("idle", "dead"):
        return ""
    with _Frames(gr) as frames:
        first = None
        entry = None
        for f in frames:
            if first is None:
                first = f
            if _is_user_frame(f):
                return _where(f)
            if _is_entry_point(f):
                entry = _where(f)
        if entry is not None:
            return entry
        return _where(first) if first is not None else "(no frames)"


# ---- printing frames as `bt` does ----

def _scalar(v):
    code = v.type.strip_typedefs().code
    return code not in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION, gdb.TYPE_CODE_ARRAY)


def _value_text(v, full):
    try:
        if not full and not _scalar(v):
            return "..."
        return v.format_string(max_elements=20, repeat_threshold=10) if full else str(v)
    except gdb.error as e:
        return "<%s>" % e


def _function_block(frame):
    try:
        b = frame.block()
    except RuntimeError:
        return None, None
    inner = b
    while b is not None and b.function is None:
        b = b.superblock
    return inner, b


def _format_frame(level, frame, full):
    pc = frame.pc()
    name = frame.name() or "??"
    args = []
    inner, fblock = _function_block(frame)
    if fblock is not None:
        for sym in fblock:
            if sym.is_argument:
                try:
                    args.append("%s=%s" % (sym.print_name,
                                           _value_text(frame.read_var(sym, fblock), False)))
                except (gdb.error, ValueError) as e:
                    args.append("%s=<%s>" % (sym.print_name, e))
    line = "#%-2d 0x%016x in %s (%s)" % (level, pc, name, ", ".join(args))
    sal = frame.find_sal()
    if sal.symtab is not None:
        line += " at %s:%d" % (sal.symtab.filename, sal.line)
    else:
        lib = _objfile_base(frame)
        if lib:
            line += " from " + lib
    out = [line]
    if full:
        locals_ = []
        b = inner
        while b is not None:
            for sym in b:
                if sym.is_variable and not sym.is_argument:
                    try:
                        text = _value_text(frame.read_var(sym, b), True)
                    except (gdb.error, ValueError) as e:
                        text = "<%s>" % e
                    locals_.append("        %s = %s" % (sym.print_name, text))
            # gdb hands out a new Python object per block: compare ranges.
            if fblock is None or (b.start == fblock.start and b.end == fblock.end):
                break
            b = b.superblock
        out.extend(locals_ if locals_ else ["No locals."])
    return "\n".join(out)


# ---- the commands ----

def _goroutines():
    sched = _sched()
    out = []
    zeroed = 0
    for g in _all_gs(sched):
        try:
            gr = Goroutine(g)
            if int(g["stack_hi"]) == 0:
                zeroed += 1
                continue
        except gdb.MemoryError as e:
            gdb.write("gort: cannot read the G at 0x%x: %s\n" % (int(g), e))
            continue
        if gr.status == "dead":
            continue
        out.append(gr)
    if zeroed > 0 and not out:
        raise GortError(
            "gort: the goroutines are missing from this core file (their memory reads as "
            "zeros): gdb's gcore cannot copy gort's stack slabs on Linux 6.13 and later. "
            "Write cores with `gort gcore FILE`, or let the kernel write them.")
    return out


class InfoGoroutines(gdb.Command):
    """List gort's goroutines: id, state, wait reason and where each one is.

A '*' marks goroutines that are on a thread now. The location is the
innermost frame of the program's own code (not gort's, not a library's),
with its file:line; `goroutine N bt` shows the whole stack."""

    def __init__(self):
        super().__init__("info goroutines", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        try:
            grs = _goroutines()
        except GortError as e:
            raise gdb.GdbError(str(e))
        gdb.write("  %-6s %-9s %-24s %s\n" % ("Id", "State", "Wait reason", "Location"))
        for gr in grs:
            try:
                where = _location(gr)
            except GortError as e:
                where = "<%s>" % e
            except gdb.error as e:
                where = "<cannot unwind: %s>" % e
            if gr.thread is not None:
                where += "  [thread %d, LWP %d]" % (gr.thread.num, gr.thread.ptid[1])
            gdb.write("%s %-6d %-9s %-24s %s\n" % ("*" if gr.on_thread() else " ", gr.id,
                                                   gr.state, gr.reason, where))


class GoroutineCmd(gdb.Command):
    """Show a goroutine's stack: goroutine N bt [full] [COUNT].

N is a goroutine id (`info goroutines` lists them) or `all`. `full` adds
each frame's local variables; COUNT limits the output to the innermost
COUNT frames. Works on a live process and on a core file."""

    def __init__(self):
        super().__init__("goroutine", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        argv = gdb.string_to_argv(arg)
        if len(argv) < 2 or argv[1] not in ("bt", "backtrace"):
            raise gdb.GdbError("usage: goroutine N|all bt [full] [COUNT]")
        full = False
        limit = None
        for a in argv[2:]:
            if a == "full":
                full = True
            elif re.fullmatch(r"\d+", a):
                limit = int(a)
            else:
                raise gdb.GdbError("goroutine: unknown bt argument %r" % a)
        try:
            grs = _goroutines()
        except GortError as e:
            raise gdb.GdbError(str(e))
        if argv[0] != "all":
            try:
                goid = int(gdb.parse_and_eval(argv[0]))
            except gdb.error:
                raise gdb.GdbError("goroutine: %r is not a goroutine id" % argv[0])
            grs = [gr for gr in grs if gr.id == goid]
            if not grs:
                raise gdb.GdbError("No such goroutine: %d" % goid)
        for i, gr in enumerate(grs):
            if argv[0] == "all":
                if i > 0:
                    gdb.write("\n")
                state = gr.reason if gr.status == "waiting" and gr.reason else gr.state
                gdb.write("goroutine %d [%s]:\n" % (gr.id, state))
            self._bt(gr, full, limit)

    def _bt(self, gr, full, limit):
        if gr.not_started():
            gdb.write("goroutine %d has not started; it will run %s\n" % (gr.id, gr.entry_function()))
            return
        if gr.status == "idle":
            gdb.write("goroutine %d is being created\n" % gr.id)
            return
        try:
            with _Frames(gr) as frames:
                for level, f in enumerate(frames):
                    if limit is not None and level >= limit:
                        gdb.write("(More stack frames follow...)\n")
                        break
                    gdb.write(_format_frame(level, f, full) + "\n")
        except GortError as e:
            gdb.write("%s\n" % e)
        except gdb.error as e:
            gdb.write("goroutine %d: cannot unwind: %s\n" % (gr.id, e))


# ---- gort gcore: a core file that keeps the goroutine stacks ----
#
# gdb's gcore copies each mapping in 1 MiB reads and gives up on the rest of
# a mapping at the first read that fails. The kernel refuses reads of the
# guard pages that madvise(MADV_GUARD_INSTALL) puts inside a stack slab
# (gmp/stack.hpp; Linux 6.13+), so gcore writes every slab as zeros: the
# core has no goroutine stacks and no Gs (they live at the top of their
# stacks). `gort gcore` runs gcore, then copies each slab's pages into the
# core file itself, stack by stack around the guards: the pages that are
# resident or swapped (/proc/PID/pagemap), or all of them if pagemap cannot
# be read. Kernel-written cores need none of this (the kernel writes guard
# pages as zeros and goes on).

_PAGE = 4096


def _vector_items(v):
    impl = v["_M_impl"]
    start, finish = impl["_M_start"], impl["_M_finish"]
    return [(start + i).dereference() for i in range(int(finish - start))]


def _core_loads(path):
    """[(vaddr, filesz, offset)] of the PT_LOAD segments of an ELF64 core."""
    import struct
    with open(path, "rb") as f:
        ehdr = f.read(64)
        if ehdr[:4] != b"\x7fELF" or ehdr[4] != 2 or ehdr[5] != 1:
            raise GortError("gort gcore: %s is not a little-endian ELF64 core" % path)
        phoff, = struct.unpack_from("<Q", ehdr, 32)
        phentsize, phnum = struct.unpack_from("<HH", ehdr, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    loads = []
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", table,
                                                                       i * phentsize)
        if p_type == 1 and p_filesz > 0:
            loads.append((p_vaddr, p_filesz, p_offset))
    return loads


def _present_pages(pid, lo, hi):
    """Runs [a, b) of pages in [lo, hi) that are resident or swapped out
    (all of [lo, hi) if /proc/PID/pagemap cannot be read)."""
    import struct
    try:
        with open("/proc/%d/pagemap" % pid, "rb") as f:
            f.seek(lo // _PAGE * 8)
            data = f.read((hi - lo) // _PAGE * 8)
    except OSError:
        return [(lo, hi)]
    runs = []
    for i, (entry,) in enumerate(struct.iter_unpack("<Q", data)):
        if entry & (3 << 62):  # bit 63 present, bit 62 swapped
            a = lo + i * _PAGE
            if runs and runs[-1][1] == a:
                runs[-1] = (runs[-1][0], a + _PAGE)
            else:
                runs.append((a, a + _PAGE))
    return runs


def _stack_pools():
    """The runtime's stack pools: the default size class's, then each other
    class's (runtime.sized_stacks, gmp/stackclass.cpp), each with its own
    slot size."""
    rt = _runtime()
    pools = [rt["stacks"]]
    try:
        sized = rt["sized_stacks"]
        first, last = sized.type.strip_typedefs().range()
        pools += [sized[i] for i in range(first, last + 1)]
    except gdb.error:
        pass  # a library without stack size classes
    return pools


def _gcore(path):
    inf = gdb.selected_inferior()
    if inf.pid == 0 or not inf.threads():
        raise GortError("gort gcore: needs a live process")
    # (base, bytes, slot, stack) of every slab of every pool.
    slabs = []
    for stacks in _stack_pools():
        slot = int(stacks["slot_"])
        stack = int(stacks["size_"])
        slabs += [(int(p["first"]), int(p["second"]), slot, stack)
                  for p in _vector_items(stacks["slabs_"])]
    gdb.execute("gcore %s" % path, to_string=True)
    loads = _core_loads(path)
    copied = 0
    with open(path, "r+b") as core:
        for base, size, slot, stack in slabs:
            seg = [l for l in loads if l[0] <= base and base + size <= l[0] + l[1]]
            if not seg:
                gdb.write("gort gcore: the stack slab at 0x%x is not in the core\n" % base)
                continue
            vaddr, _, offset = seg[0]
            for run_lo, run_hi in _present_pages(inf.pid, base, base + size):
                # Each slot is [guard | stack]: copy the run's part of each
                # stack, never a guard (the kernel refuses those reads).
                first = base + (run_lo - base) // slot * slot
                for lo in range(first, run_hi, slot):
                    a, b = max(run_lo, lo + slot - stack), min(run_hi, lo + slot)
                    if a >= b:
                        continue
                    try:
                        data = inf.read_memory(a, b - a)
                    except gdb.MemoryError:
                        continue
                    core.seek(offset + a - vaddr)
                    core.write(bytes(data))
                    copied += b - a
    gdb.write("Saved corefile %s (with %d KiB of goroutine stacks in %d slabs)\n"
              % (path, copied // 1024, len(slabs)))


class GortPrefix(gdb.Command):
    """gort's commands (see also `info goroutines` and `goroutine`)."""

    def __init__(self):
        super().__init__("gort", gdb.COMMAND_USER, gdb.COMPLETE_COMMAND, prefix=True)


class GortGcore(gdb.Command):
    """Write a core file of the live process that keeps its goroutine stacks.

Usage: gort gcore [FILE]   (default: core.PID)

gdb's own gcore loses every goroutine stack of a gort program on Linux 6.13
and later (it gives up on a stack slab at its first guard page); this runs
gcore and then copies the stacks into the file."""

    def __init__(self):
        super().__init__("gort gcore", gdb.COMMAND_FILES, gdb.COMPLETE_FILENAME)

    def invoke(self, arg, from_tty):
        argv = gdb.string_to_argv(arg)
        path = argv[0] if argv else "core.%d" % gdb.selected_inferior().pid
        try:
            _gcore(path)
        except GortError as e:
            raise gdb.GdbError(str(e))


InfoGoroutines()
GoroutineCmd()
GortPrefix()
GortGcore()
