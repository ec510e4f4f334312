// stdlib/sync/errgroup.cpp — see gort/errgroup.hpp.
#include "gort/errgroup.hpp"

#include <mutex>
#include <string>

namespace gort::errgroup {

Group::Group(const Context& parent) {
  auto [ctx, cancel] = with_cancel_cause(parent);
  ctx_ = std::move(ctx);
  cancel_ = std::move(cancel);
}

Group::~Group() { wg_.wait(); }

void Group::fail(absl::Status s) {
  {
    std::lock_guard<Mutex> lock(mu_);
    if (err_.has_value()) return;
    err_ = s;
  }
  if (cancel_) cancel_(std::move(s));
}

void Group::fail_exception(std::exception_ptr e) {
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    what = x.what();
  } catch (...) {
  }
  {
    std::lock_guard<Mutex> lock(mu_);
    if (!exc_) exc_ = e;
  }
  fail(absl::InternalError("errgroup: a goroutine threw: " + what));
}

void Group::done() {
  if (sem_) sem_.recv();
  wg_.done();
}

absl::Status Group::wait() {
  wg_.wait();
  std::exception_ptr exc;
  absl::Status err;
  {
    std::lock_guard<Mutex> lock(mu_);
    // Kept, as Go's errOnce keeps g.err: a later wait reports them again.
    exc = exc_;
    if (err_.has_value()) err = *err_;
  }
  if (cancel_) cancel_(err);
  if (exc) std::rethrow_exception(exc);
  return err;
}

void Group::set_limit(int n) {
  if (n < 0) {
    sem_ = Chan<char>();
    return;
  }
  if (sem_ && sem_.len() != 0) {
    throw panic_error("errgroup: modify limit while " + std::to_string(sem_.len()) +
                      " goroutines in the group are still active");
  }
  sem_ = make_chan<char>(static_cast<size_t>(n));
}

}  // namespace gort::errgroup
