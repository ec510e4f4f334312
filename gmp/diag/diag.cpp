// gmp/diag/diag.cpp — see diag.hpp.
#include "gmp/diag/diag.hpp"

#include <mutex>

#include "gmp/diag/fatal.hpp"
#include "gmp/diag/symbolize.hpp"
#include "gmp/diag/traceback.hpp"

namespace gort::internal {
namespace {

void diag_init() {
  install_fatal_signal_handlers();
  traceback_init();
  panic_init();
}

void diag_fini() {
  std::lock_guard<std::mutex> lock(symbolizer_mutex());
  symbolizer_reset();
}

}  // namespace

void install_diag_hooks(SchedHooks* hooks) {
  hooks->diag_init = &diag_init;
  hooks->diag_fini = &diag_fini;
}

}  // namespace gort::internal
