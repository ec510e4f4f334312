// gort/detail/deadlines.hpp — the std::chrono forms of a handle's deadline
// setters, written once for every handle that has Go's three (net::Conn,
// net::PacketConn, os::File, tls::Conn).
//
// A handle derives from ChronoDeadlines<Self>, declares its own absl::Time
// set_deadline / set_read_deadline / set_write_deadline, and brings these in
// with `using`: each converts the time point (gort/chrono.hpp's
// from_chrono) and calls the absl::Time one. Constrained to chrono time
// points, they are never candidates for an absl::Time argument. Empty: the
// handle's layout is unchanged. Costs what from_chrono costs.
#pragma once

#include "absl/status/status.h"
#include "gort/chrono.hpp"

namespace gort::internal {

template <class Self>
class ChronoDeadlines {
 public:
  template <chrono_time_point T>
  absl::Status set_deadline(T t) {
    return self().set_deadline(from_chrono(t));
  }
  template <chrono_time_point T>
  absl::Status set_read_deadline(T t) {
    return self().set_read_deadline(from_chrono(t));
  }
  template <chrono_time_point T>
  absl::Status set_write_deadline(T t) {
    return self().set_write_deadline(from_chrono(t));
  }

 private:
  Self& self() { return static_cast<Self&>(*this); }
};

}  // namespace gort::internal
