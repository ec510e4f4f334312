// tests/stdlib/sync/api_constraints_test.cpp — the API's constraints: a wrong
// callable or case is rejected at the call (requires clauses on run, go,
// select, on_recv, on_send, on_default and errgroup::Group::go/try_go), and
// the results that must not be dropped are [[nodiscard]]. Checked at
// compile time: each concept below asks whether a call would compile.
#include <optional>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "gort/chan.hpp"
#include "gort/errgroup.hpp"
#include "gort/runtime.hpp"

namespace {

template <class F>
concept Runnable = requires(F f) { gort::run(std::move(f)); };
template <class... A>
concept Spawnable = requires(A&&... a) { gort::go(std::forward<A>(a)...); };
template <class... C>
concept Selectable = requires(C&&... c) { gort::select(std::forward<C>(c)...); };
template <class T, class F>
concept RecvWith = requires(gort::Chan<T> ch, F f) { gort::on_recv(ch, std::move(f)); };
template <class T, class U>
concept SendOf = requires(gort::Chan<T> ch, U u) { gort::on_send(ch, std::move(u)); };
template <class F>
concept GroupGo = requires(gort::errgroup::Group& g, F f) { g.go(std::move(f)); };

auto void_main = [] {};
auto int_main = [] { return 3; };
auto string_main = [] { return std::string(); };
auto arg_main = [](int) {};
static_assert(Runnable<decltype(void_main)> && Runnable<decltype(int_main)>);
static_assert(!Runnable<decltype(string_main)>, "run: main must return void or int");
static_assert(!Runnable<decltype(arg_main)>, "run: main takes no arguments");

auto takes_int = [](int) {};
static_assert(Spawnable<decltype(takes_int), int> && Spawnable<decltype(void_main)>);
static_assert(!Spawnable<decltype(takes_int)>, "go: missing argument");
static_assert(!Spawnable<decltype(takes_int), std::string>, "go: wrong argument type");
static_assert(!Spawnable<int>, "go: not callable");

using Recv = decltype(gort::on_recv(std::declval<gort::Chan<int>&>()));
using Default = decltype(gort::on_default());
static_assert(Selectable<Recv, Default> && Selectable<Recv, Recv> && Selectable<>);
static_assert(!Selectable<Default, Default>, "select: at most one on_default");
static_assert(!Selectable<Recv, int>, "select: only cases");

auto takes_optional = [](std::optional<int>) {};
auto takes_string = [](std::string) {};
static_assert(RecvWith<int, decltype(takes_optional)> && RecvWith<int, decltype(void_main)>);
static_assert(!RecvWith<int, decltype(takes_string)>, "on_recv: callback takes optional<T> or nothing");
static_assert(SendOf<std::string, const char*> && !SendOf<int, std::string>);

static_assert(GroupGo<decltype(void_main)> && !GroupGo<decltype(takes_int)>);

TEST(ApiConstraints, CheckedAtCompileTime) {
  // The static_asserts above are the test; this one only shows up in the
  // list, so that a build without this file is noticed.
  SUCCEED();
}

}  // namespace
