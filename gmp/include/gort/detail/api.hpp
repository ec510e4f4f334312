// gort/detail/api.hpp — what libgort exports: GORT_API and GORT_INTERPOSE.
//
// Not part of the public API: included by gort's headers and sources.
// libgort is compiled with hidden visibility (-fvisibility=hidden
// -fvisibility-inlines-hidden): a symbol is in the shared library's dynamic
// symbol table only if its declaration says so (docs/runtime.md, "What
// libgort exports").
//
//   GORT_API        on everything an installed header (gort/*.hpp,
//                   gort/detail/*.hpp) declares and the library defines:
//                   the public functions, the classes with members defined
//                   in the library (the class, so that its vtable and
//                   typeinfo export too: a program catches panic_error and
//                   derives from CustomContext), and whatever inline code
//                   in those headers calls, in namespace internal as well
//                   (chan_send behind Chan<T>::send, Sema behind Mutex).
//   GORT_INTERPOSE  on the libc (and abseil) entry points the library
//                   defines to interpose (gmp/os/interpose.list): the
//                   dynamic linker must find them in libgort before libc.
//
// The test suites, which reach gort::internal everywhere, link
// libgort_testing instead: the same sources with every symbol visible
// (tests/meson.build).
#pragma once

#define GORT_API __attribute__((visibility("default")))
#define GORT_INTERPOSE __attribute__((visibility("default")))
