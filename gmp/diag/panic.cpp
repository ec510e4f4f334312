// gmp/diag/panic.cpp — Go's unrecovered panic for a C++ exception that escapes a
// goroutine, reported with the stack where it was thrown.
//
// Nothing catches exceptions around a goroutine's function: below its first
// frame lies a zero return address (make_context, switch.cpp), so the C++
// runtime's search for a handler (the first phase of unwinding) ends there
// without finding one and calls std::terminate from __cxa_throw, before any
// frame is unwound. Our terminate handler then runs on top of the intact
// stack and walks it from the throw. (A catch in goroutine_main would have
// unwound the stack first, and with it every frame worth printing.)
//
// The handler is installed by the first gort::run and stays: on a thread
// that is not running a goroutine, or without an exception in flight (an
// explicit std::terminate), it passes on to the handler installed before.
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>

#include "gmp/diag/exception.hpp"
#include "gmp/diag/fatal.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gmp/diag/unwind.hpp"

namespace gort::internal {
namespace {

std::terminate_handler g_prev = nullptr;
std::once_flag g_once;

[[noreturn]] void on_terminate() {
  G* g = getg();
  std::exception_ptr e = std::current_exception();
  if (g == nullptr || !e) {
    if (g_prev != nullptr) g_prev();
    std::abort();
  }
  // `panic: index 7 past the end [std::out_of_range]`; Go's text alone
  // for a gort::panic_error (gmp/diag/exception.hpp).
  std::string what = panic_value(current_exception_info());
  Death d;
  d.text[0] = "panic: ";
  d.text[1] = what.c_str();
  d.text[2] = "\n";
  d.g = g;
  GORT_CURRENT_REGS(&d.regs, &d.view);
  d.have_regs = true;
  d.first_pc = FirstPc::kReturnAddress;
  d.cut_at_throw = true;
  die(&d);
}

}  // namespace

void panic_init() {
  std::call_once(g_once, [] { g_prev = std::set_terminate(&on_terminate); });
}

}  // namespace gort::internal
