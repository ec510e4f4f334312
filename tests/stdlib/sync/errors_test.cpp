// tests/stdlib/sync/errors_test.cpp — gort::error_text (gort/errors.hpp): Go's
// err.Error() for an absl::Status, the message without absl's code prefix;
// "<nil>" for OK, the code's name for a status without a message.
//
// The texts of gort's own errors are tested with the calls that return
// them (net_error_test, os_file_test, context_test).
#include <string>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "gort/context.hpp"
#include "gort/errors.hpp"
#include "gort/gort.hpp"

namespace gort_stdlib_test {
namespace {

TEST(ErrorText, MessageWithoutTheCode) {
  absl::Status s = absl::UnavailableError("dial tcp 127.0.0.1:1: connect: Connection refused");
  EXPECT_EQ(s.ToString(), "UNAVAILABLE: dial tcp 127.0.0.1:1: connect: Connection refused");
  EXPECT_EQ(gort::error_text(s), "dial tcp 127.0.0.1:1: connect: Connection refused");
  EXPECT_EQ(gort::error_text(absl::DeadlineExceededError("context deadline exceeded")), "context deadline exceeded");
}

TEST(ErrorText, OkIsNil) {
  EXPECT_EQ(gort::error_text(absl::OkStatus()), "<nil>");
  EXPECT_EQ(gort::error_text(absl::StatusOr<int>(3)), "<nil>");
}

TEST(ErrorText, EmptyMessageIsTheCodesName) {
  EXPECT_EQ(gort::error_text(absl::CancelledError()), "CANCELLED");
  EXPECT_EQ(gort::error_text(absl::Status(absl::StatusCode::kInternal, "")), "INTERNAL");
}

TEST(ErrorText, StatusOr) {
  absl::StatusOr<std::string> r = absl::NotFoundError("open /no/such: No such file or directory");
  EXPECT_EQ(gort::error_text(r), "open /no/such: No such file or directory");
}

// The payloads absl may carry are not part of Go's text.
TEST(ErrorText, PayloadsAreNotPrinted) {
  absl::Status s = absl::InternalError("boom");
  s.SetPayload("type.example/extra", absl::Cord("detail"));
  EXPECT_EQ(gort::error_text(s), "boom");
}

// A context's error, as Go prints ctx.Err().
TEST(ErrorText, ContextErrors) {
  auto [ctx, cancel] = gort::with_cancel(gort::background());
  EXPECT_EQ(gort::error_text(ctx.err()), "<nil>");
  cancel();
  EXPECT_EQ(gort::error_text(ctx.err()), "context canceled");
  EXPECT_EQ(absl::StrCat("fetch: ", gort::error_text(ctx.err())), "fetch: context canceled");
}

}  // namespace
}  // namespace gort_stdlib_test
