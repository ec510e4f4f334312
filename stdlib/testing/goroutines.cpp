// stdlib/testing/goroutines.cpp — reading Go-format tracebacks
// (gort::stack(true); docs/debugging.md) for gort/testing.hpp: the
// goroutines of a dump, and waiting until some are in a state.
//
// A block is "goroutine <id> [<state>]:" (with " gp=... m=..." before the
// bracket at GORT_TRACEBACK=2 and up, and ", N minutes" inside it after a
// minute's wait), one function line and one tab-indented file:line line per
// frame, then "created by F in goroutine K" and its location; blocks are
// separated by blank lines.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "gort/runtime.hpp"
#include "gort/testing.hpp"
#include "stdlib/testing/poll.hpp"

namespace gort::testing {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The state between the header's brackets, without ", N minute(s)".
std::string header_state(std::string_view header) {
  size_t open = header.find('[');
  size_t close = header.rfind("]:");
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return "";
  std::string_view state = header.substr(open + 1, close - open - 1);
  size_t comma = state.rfind(", ");
  if (comma != std::string_view::npos) {
    std::string_view tail = state.substr(comma + 2);
    size_t i = 0;
    while (i < tail.size() && is_digit(tail[i])) i++;
    if (i > 0 && (tail.substr(i) == " minute" || tail.substr(i) == " minutes")) state = state.substr(0, comma);
  }
  return std::string(state);
}

std::string describe(Duration timeout) { return absl::FormatDuration(timeout); }

}  // namespace

bool Goroutine::has_frame(std::string_view function) const {
  size_t eol = text.find('\n');  // the header is no frame
  while (eol != std::string::npos && eol + 1 < text.size()) {
    size_t bol = eol + 1;
    eol = text.find('\n', bol);
    std::string_view line(text.data() + bol, (eol == std::string::npos ? text.size() : eol) - bol);
    if (line.empty() || line[0] == '\t' || line.starts_with("created by ")) continue;
    if (line.find(function) != std::string_view::npos) return true;
  }
  return false;
}

std::vector<Goroutine> parse_goroutines(std::string_view dump) {
  static constexpr std::string_view kHead = "goroutine ";
  std::vector<Goroutine> out;
  for (size_t at = dump.find(kHead); at != std::string_view::npos; at = dump.find(kHead, at + 1)) {
    if (at != 0 && dump[at - 1] != '\n') continue;
    size_t i = at + kHead.size();
    int64_t id = 0;
    while (i < dump.size() && is_digit(dump[i])) id = id * 10 + (dump[i++] - '0');
    if (i == at + kHead.size() || i >= dump.size() || dump[i] != ' ') continue;
    size_t end = dump.find("\n\n", at);
    size_t eol = dump.find('\n', at);
    Goroutine g;
    g.id = id;
    g.state = header_state(dump.substr(at, eol == std::string_view::npos ? std::string_view::npos : eol - at));
    g.text = std::string(dump.substr(at, end == std::string_view::npos ? std::string_view::npos : end + 1 - at));
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<Goroutine> all_goroutines() { return parse_goroutines(gort::stack(true)); }

::testing::AssertionResult wait_for_state(int64_t id, std::string_view state, Duration timeout) {
  if (gort::procs() == 0) return ::testing::AssertionFailure() << "wait_for_state: gort::run is not active";
  std::string dump;
  const Goroutine* found = nullptr;
  std::vector<Goroutine> all;
  bool ok = detail::poll_with_pauses(
      [&] {
        dump = gort::stack(true);
        all = parse_goroutines(dump);
        auto it = std::find_if(all.begin(), all.end(), [&](const Goroutine& g) { return g.id == id; });
        found = it == all.end() ? nullptr : &*it;
        return found != nullptr && found->state == state;
      },
      timeout);
  if (ok) return ::testing::AssertionSuccess();
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << "goroutine " << id;
  if (found == nullptr) {
    r << " does not exist (it exited, or never started)";
  } else {
    r << " is in state \"" << found->state << "\"";
  }
  r << ", not \"" << state << "\", after " << describe(timeout) << "; the last dump:\n" << dump;
  return r;
}

::testing::AssertionResult wait_for_state(absl::FunctionRef<bool(const Goroutine&)> which, std::string_view state,
                                          int count, Duration timeout) {
  if (gort::procs() == 0) return ::testing::AssertionFailure() << "wait_for_state: gort::run is not active";
  std::string dump;
  int matching = 0, in_state = 0;
  bool ok = detail::poll_with_pauses(
      [&] {
        dump = gort::stack(true);
        matching = in_state = 0;
        for (const Goroutine& g : parse_goroutines(dump)) {
          if (!which(g)) continue;
          matching++;
          if (g.state == state) in_state++;
        }
        return in_state >= count;
      },
      timeout);
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "wanted " << count << " of the goroutines asked about in state \"" << state
                                       << "\"; after " << describe(timeout) << ", " << in_state << " of the "
                                       << matching << " are; the last dump:\n"
                                       << dump;
}

}  // namespace gort::testing
