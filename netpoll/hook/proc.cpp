// netpoll/hook/proc.cpp — calls that make child processes, wait for them,
// resolve names or otherwise block for long, interposed.
//
// Children: before fork, posix_spawn, system, popen and exec, a descriptor
// with O_NONBLOCK set underneath that the child will inherit gets back the
// flag the program set (hook.hpp before_child): its open file description
// is shared with the child, whose code expects what the parent's code
// asked for. glibc's system and popen make their children inside libc,
// where no hook would see them; they are interposed themselves for that.
// vfork and clone are not (a vfork child runs on the parent's stack).
//
// Long calls (Go's entersyscallblock: the P goes to another M at once):
// waiting for a child, name resolution (glibc's resolver makes its own
// calls inside libc, where no hook sees them, so the whole lookup is the
// unit; a numeric address is answered at once without a hand-off), fsync
// and friends, file locks that wait, signal waits.
// Each function is defined under its own name: none of the 64-bit
// renames (open -> open64) of _FILE_OFFSET_BITS=64, nor fortify's wrappers.
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "gmp/os/interpose.hpp"
#include "netpoll/hook/hook.hpp"

using gort::internal::hook::get_errno;
using gort::internal::hook::set_errno;

using ForkFn = pid_t (*)();
using SpawnFn = int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*, const posix_spawnattr_t*,
                        char* const*, char* const*);
using AddDup2Fn = int (*)(posix_spawn_file_actions_t*, int, int);
using SystemFn = int (*)(const char*);
using PopenFn = FILE* (*)(const char*, const char*);
using PcloseFn = int (*)(FILE*);
using ExecveFn = int (*)(const char*, char* const*, char* const*);
using ExecvFn = int (*)(const char*, char* const*);
using WaitFn = pid_t (*)(int*);
using WaitpidFn = pid_t (*)(pid_t, int*, int);
using Wait4Fn = pid_t (*)(pid_t, int*, int, rusage*);
using WaitidFn = int (*)(idtype_t, id_t, siginfo_t*, int);
using GetaddrinfoFn = int (*)(const char*, const char*, const addrinfo*, addrinfo**);
using GetnameinfoFn = int (*)(const sockaddr*, socklen_t, char*, socklen_t, char*, socklen_t, int);
using GethostbynameFn = hostent* (*)(const char*);
using Gethostbyname2Fn = hostent* (*)(const char*, int);
using GethostbynameRFn = int (*)(const char*, hostent*, char*, size_t, hostent**, int*);
using Gethostbyname2RFn = int (*)(const char*, int, hostent*, char*, size_t, hostent**, int*);
using GethostbyaddrFn = hostent* (*)(const void*, socklen_t, int);
using GethostbyaddrRFn = int (*)(const void*, socklen_t, int, hostent*, char*, size_t, hostent**, int*);
using FdIntFn = int (*)(int);
using VoidFn = void (*)();
using FlockFn = int (*)(int, int);
using LockfFn = int (*)(int, int, off_t);
using SigwaitFn = int (*)(const sigset_t*, int*);
using SigwaitinfoFn = int (*)(const sigset_t*, siginfo_t*);
using SigtimedwaitFn = int (*)(const sigset_t*, siginfo_t*, const timespec*);
using PauseFn = int (*)();
using SigsuspendFn = int (*)(const sigset_t*);

namespace {
GORT_NEXT_SLOT(ForkFn, fork)
GORT_NEXT_SLOT(SpawnFn, posix_spawn)
GORT_NEXT_SLOT(SpawnFn, posix_spawnp)
GORT_NEXT_SLOT(AddDup2Fn, posix_spawn_file_actions_adddup2)
GORT_NEXT_SLOT(SystemFn, system)
GORT_NEXT_SLOT(PopenFn, popen)
GORT_NEXT_SLOT(PcloseFn, pclose)
GORT_NEXT_SLOT(ExecveFn, execve)
GORT_NEXT_SLOT(ExecvFn, execv)
GORT_NEXT_SLOT(ExecvFn, execvp)
GORT_NEXT_SLOT(ExecveFn, execvpe)
GORT_NEXT_SLOT(WaitFn, wait)
GORT_NEXT_SLOT(WaitpidFn, waitpid)
GORT_NEXT_SLOT(Wait4Fn, wait4)
GORT_NEXT_SLOT(WaitidFn, waitid)
GORT_NEXT_SLOT(GetaddrinfoFn, getaddrinfo)
GORT_NEXT_SLOT(GetnameinfoFn, getnameinfo)
GORT_NEXT_SLOT(GethostbynameFn, gethostbyname)
GORT_NEXT_SLOT(Gethostbyname2Fn, gethostbyname2)
GORT_NEXT_SLOT(GethostbynameRFn, gethostbyname_r)
GORT_NEXT_SLOT(Gethostbyname2RFn, gethostbyname2_r)
GORT_NEXT_SLOT(GethostbyaddrFn, gethostbyaddr)
GORT_NEXT_SLOT(GethostbyaddrRFn, gethostbyaddr_r)
GORT_NEXT_SLOT(FdIntFn, fsync)
GORT_NEXT_SLOT(FdIntFn, fdatasync)
GORT_NEXT_SLOT(FdIntFn, syncfs)
GORT_NEXT_SLOT(VoidFn, sync)
GORT_NEXT_SLOT(FlockFn, flock)
GORT_NEXT_SLOT(LockfFn, lockf)
GORT_NEXT_SLOT(SigwaitFn, sigwait)
GORT_NEXT_SLOT(SigwaitinfoFn, sigwaitinfo)
GORT_NEXT_SLOT(SigtimedwaitFn, sigtimedwait)
GORT_NEXT_SLOT(PauseFn, pause)
GORT_NEXT_SLOT(SigsuspendFn, sigsuspend)

__attribute__((constructor(101))) void resolve_all() {
  (void)GORT_NEXT(fork);
  (void)GORT_NEXT(posix_spawn);
  (void)GORT_NEXT(posix_spawnp);
  (void)GORT_NEXT(posix_spawn_file_actions_adddup2);
  (void)GORT_NEXT(system);
  (void)GORT_NEXT(popen);
  (void)GORT_NEXT(pclose);
  (void)GORT_NEXT(execve);
  (void)GORT_NEXT(execv);
  (void)GORT_NEXT(execvp);
  (void)GORT_NEXT(execvpe);
  (void)GORT_NEXT(wait);
  (void)GORT_NEXT(waitpid);
  (void)GORT_NEXT(wait4);
  (void)GORT_NEXT(waitid);
  (void)GORT_NEXT(getaddrinfo);
  (void)GORT_NEXT(getnameinfo);
  (void)GORT_NEXT(gethostbyname);
  (void)GORT_NEXT(gethostbyname2);
  (void)GORT_NEXT(gethostbyname_r);
  (void)GORT_NEXT(gethostbyname2_r);
  (void)GORT_NEXT(gethostbyaddr);
  (void)GORT_NEXT(gethostbyaddr_r);
  (void)GORT_NEXT(fsync);
  (void)GORT_NEXT(fdatasync);
  (void)GORT_NEXT(syncfs);
  (void)GORT_NEXT(sync);
  (void)GORT_NEXT(flock);
  (void)GORT_NEXT(lockf);
  (void)GORT_NEXT(sigwait);
  (void)GORT_NEXT(sigwaitinfo);
  (void)GORT_NEXT(sigtimedwait);
  (void)GORT_NEXT(pause);
  (void)GORT_NEXT(sigsuspend);
}

namespace hook = gort::internal::hook;

// f as a long call: on a goroutine the P goes to another M at once.
template <class F>
auto long_call(F&& f) {
  if (hook::mode() == hook::Mode::kThread) return f();
  return hook::in_syscall_block([&] { return f(); });
}

// execl's arguments after `arg0`, up to the null that ends them, as an
// argv; with `env`, the pointer after that null too.
std::vector<char*> collect(const char* arg0, va_list ap, char* const** env) {
  std::vector<char*> argv{const_cast<char*>(arg0)};
  if (arg0 != nullptr) {
    while (char* a = va_arg(ap, char*)) argv.push_back(a);
    argv.push_back(nullptr);
  }
  if (env != nullptr) *env = va_arg(ap, char* const*);
  return argv;
}

}  // namespace

extern "C" {

// ---- children ----

GORT_INTERPOSE pid_t fork() {
  hook::before_child(-1);
  return GORT_NEXT(fork)();
}

GORT_INTERPOSE int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa, const posix_spawnattr_t* attr,
                char* const argv[], char* const envp[]) {
  hook::before_child(-1);
  return GORT_NEXT(posix_spawn)(pid, path, fa, attr, argv, envp);
}

GORT_INTERPOSE int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa, const posix_spawnattr_t* attr,
                 char* const argv[], char* const envp[]) {
  hook::before_child(-1);
  return GORT_NEXT(posix_spawnp)(pid, file, fa, attr, argv, envp);
}

// The child will get a copy of fd (close-on-exec or not): it shares fd's
// open file description.
GORT_INTERPOSE int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t* fa, int fd, int newfd) noexcept {
  hook::before_child(fd);
  return GORT_NEXT(posix_spawn_file_actions_adddup2)(fa, fd, newfd);
}

GORT_INTERPOSE int system(const char* cmd) {
  hook::before_child(-1);
  return long_call([&] { return GORT_NEXT(system)(cmd); });
}

GORT_INTERPOSE FILE* popen(const char* cmd, const char* type) {
  hook::before_child(-1);
  return GORT_NEXT(popen)(cmd, type);
}

GORT_INTERPOSE int pclose(FILE* f) {
  return long_call([&] { return GORT_NEXT(pclose)(f); });
}

GORT_INTERPOSE int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  hook::before_child(-1);
  return GORT_NEXT(execve)(path, argv, envp);
}

GORT_INTERPOSE int execv(const char* path, char* const argv[]) noexcept {
  hook::before_child(-1);
  return GORT_NEXT(execv)(path, argv);
}

GORT_INTERPOSE int execvp(const char* file, char* const argv[]) noexcept {
  hook::before_child(-1);
  return GORT_NEXT(execvp)(file, argv);
}

GORT_INTERPOSE int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  hook::before_child(-1);
  return GORT_NEXT(execvpe)(file, argv, envp);
}

GORT_INTERPOSE int execl(const char* path, const char* arg0, ...) noexcept {
  va_list ap;
  va_start(ap, arg0);
  std::vector<char*> argv = collect(arg0, ap, nullptr);
  va_end(ap);
  return execv(path, argv.data());
}

GORT_INTERPOSE int execlp(const char* file, const char* arg0, ...) noexcept {
  va_list ap;
  va_start(ap, arg0);
  std::vector<char*> argv = collect(arg0, ap, nullptr);
  va_end(ap);
  return execvp(file, argv.data());
}

GORT_INTERPOSE int execle(const char* path, const char* arg0, ...) noexcept {
  va_list ap;
  va_start(ap, arg0);
  char* const* env = nullptr;
  std::vector<char*> argv = collect(arg0, ap, &env);
  va_end(ap);
  return execve(path, argv.data(), env);
}

GORT_INTERPOSE pid_t wait(int* status) {
  return long_call([&] { return GORT_NEXT(wait)(status); });
}

GORT_INTERPOSE pid_t waitpid(pid_t pid, int* status, int options) {
  if ((options & WNOHANG) != 0) return GORT_NEXT(waitpid)(pid, status, options);
  return long_call([&] { return GORT_NEXT(waitpid)(pid, status, options); });
}

GORT_INTERPOSE pid_t wait4(pid_t pid, int* status, int options, rusage* ru) noexcept {
  if ((options & WNOHANG) != 0) return GORT_NEXT(wait4)(pid, status, options, ru);
  return long_call([&] { return GORT_NEXT(wait4)(pid, status, options, ru); });
}

GORT_INTERPOSE int waitid(idtype_t type, id_t id, siginfo_t* info, int options) {
  if ((options & WNOHANG) != 0) return GORT_NEXT(waitid)(type, id, info, options);
  return long_call([&] { return GORT_NEXT(waitid)(type, id, info, options); });
}

// ---- name resolution ----

GORT_INTERPOSE int getaddrinfo(const char* node, const char* service, const addrinfo* hints, addrinfo** res) {
  if (hook::mode() == hook::Mode::kThread || node == nullptr) {
    return GORT_NEXT(getaddrinfo)(node, service, hints, res);
  }
  // A numeric address needs no lookup: answered here, without a hand-off.
  addrinfo numeric{};
  if (hints != nullptr) {
    numeric = *hints;
  } else {
    numeric.ai_family = AF_UNSPEC;
    numeric.ai_flags = AI_V4MAPPED | AI_ADDRCONFIG;
  }
  numeric.ai_flags |= AI_NUMERICHOST;
  if (GORT_NEXT(getaddrinfo)(node, service, &numeric, res) == 0) return 0;
  return long_call([&] { return GORT_NEXT(getaddrinfo)(node, service, hints, res); });
}

GORT_INTERPOSE int getnameinfo(const sockaddr* sa, socklen_t salen, char* host, socklen_t hostlen, char* serv, socklen_t servlen,
                int flags) {
  bool numeric = (host == nullptr || (flags & NI_NUMERICHOST) != 0) && (serv == nullptr || (flags & NI_NUMERICSERV) != 0);
  if (numeric) return GORT_NEXT(getnameinfo)(sa, salen, host, hostlen, serv, servlen, flags);
  return long_call([&] { return GORT_NEXT(getnameinfo)(sa, salen, host, hostlen, serv, servlen, flags); });
}

GORT_INTERPOSE hostent* gethostbyname(const char* name) {
  return long_call([&] { return GORT_NEXT(gethostbyname)(name); });
}

GORT_INTERPOSE hostent* gethostbyname2(const char* name, int af) {
  return long_call([&] { return GORT_NEXT(gethostbyname2)(name, af); });
}

GORT_INTERPOSE int gethostbyname_r(const char* name, hostent* ret, char* buf, size_t len, hostent** result, int* h_errnop) {
  return long_call([&] { return GORT_NEXT(gethostbyname_r)(name, ret, buf, len, result, h_errnop); });
}

GORT_INTERPOSE int gethostbyname2_r(const char* name, int af, hostent* ret, char* buf, size_t len, hostent** result,
                     int* h_errnop) {
  return long_call([&] { return GORT_NEXT(gethostbyname2_r)(name, af, ret, buf, len, result, h_errnop); });
}

GORT_INTERPOSE hostent* gethostbyaddr(const void* addr, socklen_t len, int type) {
  return long_call([&] { return GORT_NEXT(gethostbyaddr)(addr, len, type); });
}

GORT_INTERPOSE int gethostbyaddr_r(const void* addr, socklen_t alen, int type, hostent* ret, char* buf, size_t len,
                    hostent** result, int* h_errnop) {
  return long_call([&] { return GORT_NEXT(gethostbyaddr_r)(addr, alen, type, ret, buf, len, result, h_errnop); });
}

// ---- the disk, file locks, signals ----

GORT_INTERPOSE int fsync(int fd) {
  return long_call([&] { return GORT_NEXT(fsync)(fd); });
}

GORT_INTERPOSE int fdatasync(int fd) {
  return long_call([&] { return GORT_NEXT(fdatasync)(fd); });
}

GORT_INTERPOSE int syncfs(int fd) noexcept {
  return long_call([&] { return GORT_NEXT(syncfs)(fd); });
}

GORT_INTERPOSE void sync() noexcept {
  long_call([&] {
    GORT_NEXT(sync)();
    return 0;
  });
}

GORT_INTERPOSE int flock(int fd, int op) noexcept {
  if ((op & LOCK_NB) != 0) return GORT_NEXT(flock)(fd, op);
  return long_call([&] { return GORT_NEXT(flock)(fd, op); });
}

GORT_INTERPOSE int lockf(int fd, int cmd, off_t len) {
  if (cmd != F_LOCK) return GORT_NEXT(lockf)(fd, cmd, len);
  return long_call([&] { return GORT_NEXT(lockf)(fd, cmd, len); });
}

GORT_INTERPOSE int sigwait(const sigset_t* set, int* sig) {
  return long_call([&] { return GORT_NEXT(sigwait)(set, sig); });
}

GORT_INTERPOSE int sigwaitinfo(const sigset_t* set, siginfo_t* info) {
  return long_call([&] { return GORT_NEXT(sigwaitinfo)(set, info); });
}

GORT_INTERPOSE int sigtimedwait(const sigset_t* set, siginfo_t* info, const timespec* ts) {
  // A zero timeout only takes a pending signal: not a wait.
  if (ts != nullptr && ts->tv_sec == 0 && ts->tv_nsec == 0) return GORT_NEXT(sigtimedwait)(set, info, ts);
  return long_call([&] { return GORT_NEXT(sigtimedwait)(set, info, ts); });
}

GORT_INTERPOSE int pause() {
  return long_call([&] { return GORT_NEXT(pause)(); });
}

GORT_INTERPOSE int sigsuspend(const sigset_t* set) {
  return long_call([&] { return GORT_NEXT(sigsuspend)(set); });
}

}  // extern "C"
