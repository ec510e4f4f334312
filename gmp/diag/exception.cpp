// gmp/diag/exception.cpp — see exception.hpp.
#include "gmp/diag/exception.hpp"

#include <cxxabi.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gort/runtime.hpp"

namespace gort::internal {
namespace {

// Rethrows the exception being handled as T and formats it; only called
// once its type is known to be exactly T.
template <class T, class F>
std::string value_text(F format) {
  try {
    throw;
  } catch (const T& v) {
    return format(v);
  } catch (...) {
  }
  return "";
}

struct Value {
  const std::type_info& type;
  const char* name;
  std::string (*text)();
};

template <class T>
std::string number_text() {
  return value_text<T>([](T v) { return absl::StrCat(v); });
}

// Thrown values that print as Go prints panic(v) for a string or a number.
const Value kValues[] = {
    {typeid(const char*), "const char*", [] { return value_text<const char*>([](const char* s) { return std::string(s != nullptr ? s : "<nil>"); }); }},
    {typeid(char*), "char*", [] { return value_text<char*>([](char* s) { return std::string(s != nullptr ? s : "<nil>"); }); }},
    {typeid(std::string), "std::string", [] { return value_text<std::string>([](const std::string& s) { return s; }); }},
    {typeid(std::string_view), "std::string_view", [] { return value_text<std::string_view>([](std::string_view s) { return std::string(s); }); }},
    {typeid(bool), "bool", [] { return value_text<bool>([](bool b) { return std::string(b ? "true" : "false"); }); }},
    {typeid(char), "char", [] { return value_text<char>([](char c) { return std::string(1, c); }); }},
    {typeid(int), "int", &number_text<int>},
    {typeid(long), "long", &number_text<long>},
    {typeid(long long), "long long", &number_text<long long>},
    {typeid(unsigned), "unsigned int", &number_text<unsigned>},
    {typeid(unsigned long), "unsigned long", &number_text<unsigned long>},
    {typeid(unsigned long long), "unsigned long long", &number_text<unsigned long long>},
    {typeid(short), "short", &number_text<short>},
    {typeid(unsigned short), "unsigned short", &number_text<unsigned short>},
    {typeid(double), "double", &number_text<double>},
    {typeid(float), "float", &number_text<float>},
};

}  // namespace

std::string type_name(const std::type_info& t) {
  int status = 0;
  char* d = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string name = d != nullptr ? d : t.name();
  std::free(d);
  // libstdc++'s ABI namespace is noise to a reader; std::string is how
  // everyone spells its long name.
  return absl::StrReplaceAll(name, {{"std::__cxx11::", "std::"},
                                    {"std::basic_string<char, std::char_traits<char>, std::allocator<char> >",
                                     "std::string"},
                                    {"std::basic_string_view<char, std::char_traits<char> >", "std::string_view"}});
}

ExceptionInfo current_exception_info() {
  ExceptionInfo info;
  try {
    throw;
  } catch (const panic_error& e) {
    if (typeid(e) == typeid(panic_error)) {
      info.go_panic = true;
      info.text = e.what();
      return info;
    }
  } catch (...) {
  }
  try {
    throw;
  } catch (const std::exception& e) {
    info.type = type_name(typeid(e));
    try {
      info.text = e.what();
    } catch (...) {
      info.text = "(exception whose what() threw)";
    }
    return info;
  } catch (...) {
  }
  const std::type_info* t = abi::__cxa_current_exception_type();
  if (t == nullptr) return info;
  for (const Value& v : kValues) {
    if (*t == v.type) {
      info.type = v.name;
      info.text = v.text();
      return info;
    }
  }
  info.type = type_name(*t);
  return info;
}

std::string panic_value(const ExceptionInfo& e) {
  if (e.go_panic) return e.text;
  std::string type = e.type.empty() ? "unknown type" : e.type;
  if (e.text.empty()) return absl::StrCat("[", type, "]");
  return absl::StrCat(e.text, " [", type, "]");
}

}  // namespace gort::internal
