#!/usr/bin/env bash
# tests/install/install_test.sh BUILD_DIR SOURCE_DIR
#
# Installs the build into a temporary DESTDIR and builds hello.cpp against it
# exactly as a user would (`c++ -std=c++20 hello.cpp $(pkg-config --cflags
# --libs gort)`), then runs it; then gtest_hello.cpp with `pkg-config
# --cflags --libs gort-gtest`, where the build has it; then spinner.cpp against the installed
# libgort.a with `pkg-config --static --cflags --libs gort` (-lgort read as
# the archive), which must keep asynchronous preemption. Exit 77 (skip)
# when there is no compiler or pkg-config.
set -euo pipefail

build_dir=$1
src_dir=$2

CXX=${CXX:-c++}
command -v "$CXX" >/dev/null 2>&1 || { echo "no C++ compiler ($CXX): skipping"; exit 77; }
command -v pkg-config >/dev/null 2>&1 || { echo "no pkg-config: skipping"; exit 77; }
MESON=${MESON:-meson}
command -v "$MESON" >/dev/null 2>&1 || { echo "no meson: skipping"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gort-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
destdir=$tmp/root

# meson test has already built everything; do not race it for the ninja lock.
"$MESON" install -C "$build_dir" --destdir "$destdir" --no-rebuild --quiet

pc=$(find "$destdir" -name gort.pc -path '*/pkgconfig/*' | head -n 1)
[[ -n "$pc" ]] || { echo "FAIL: gort.pc was not installed"; find "$destdir"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
# The .pc names the final prefix (e.g. /usr/local); the files are under
# DESTDIR. PKG_CONFIG_SYSROOT_DIR prefixes every -I/-L path with it — unless
# the .pc is already relocatable (prefix computed from ${pcfiledir}).
prefix=$(pkg-config --variable=prefix gort)
pc_libdir=$(pkg-config --variable=libdir gort)
pc_includedir=$(pkg-config --variable=includedir gort)
if [[ "$prefix" != "$destdir"* ]]; then
  export PKG_CONFIG_SYSROOT_DIR=$destdir
fi
flags=$(pkg-config --cflags --libs gort)
echo "pkg-config --cflags --libs gort: $flags"

lib=$(find "$destdir" -name 'libgort.so*' ! -name '*-gdb.py' | head -n 1)
[[ -n "$lib" ]] || { echo "FAIL: libgort.so was not installed"; exit 1; }

# The installed library has debug information in every build type
# (meson.build adds -g where the build type has none, and meson install
# keeps it): tracebacks show file:line in gort's frames, and the gdb
# extension reads the runtime's structures through it. In the library, or
# in a separate file that its .gnu_debuglink names, installed beside it.
# Not checked when the build strips on install (-Dstrip=true).
strip_opt=$("$MESON" introspect "$build_dir" --buildoptions |
  python3 -c 'import json, sys; print(next((o["value"] for o in json.load(sys.stdin) if o["name"] == "strip"), False))')
if [[ "$strip_opt" != True ]] && command -v readelf >/dev/null 2>&1; then
  real_lib=$(readlink -f "$lib")
  sections=$(readelf -S -W "$real_lib")
  if [[ "$sections" == *" .debug_info "* ]]; then
    echo "debug information: in $(basename "$real_lib")"
  else
    debuglink=""
    if [[ "$sections" == *" .gnu_debuglink "* ]]; then
      debuglink=$(readelf -p .gnu_debuglink "$real_lib" | awk '$1 == "[" || $1 ~ /^\[/ { print $NF; exit }')
    fi
    found=""
    [[ -n "$debuglink" ]] && found=$(find "$destdir" -name "$debuglink" -type f)
    if [[ -z "$found" ]]; then
      printf 'FAIL: the installed %s has no debug information (no .debug_info, no separate debug file):\n%s\n' \
        "$(basename "$real_lib")" "$sections"
      exit 1
    fi
    echo "debug information: in $found"
  fi
fi

san=()
if [[ -n "${GORT_SANITIZE:-}" && "$GORT_SANITIZE" != none ]]; then
  san=(-fsanitize="$GORT_SANITIZE")
fi
# shellcheck disable=SC2086 # word splitting of the flags is intended
"$CXX" -std=c++20 -Wall -Wextra "${san[@]}" -o "$tmp/hello" "$src_dir/hello.cpp" $flags

export LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=$("$tmp/hello")
echo "$out"
# It must have used the installed library, not the one in the build tree.
# (Capture first: `ldd | grep -q` fails under pipefail when grep exits early.)
libs=$(ldd "$tmp/hello")
if [[ "$libs" != *"$destdir"*libgort* && "$libs" != *libgort*"$destdir"* ]]; then
  printf 'FAIL: hello is not linked against the installed libgort:\n%s\n' "$libs"
  exit 1
fi
expected="hello from goroutine 1: 10 goroutines summed to 55, 1 left
gort::run returned 7"
if [[ "$out" != "$expected" ]]; then
  printf 'FAIL: unexpected output; wanted:\n%s\n' "$expected"
  exit 1
fi

# The GoogleTest helpers (libgort_gtest.a, gort-gtest.pc), where the build
# has them (it skips them without GoogleTest): a test program built with
# `pkg-config --cflags --libs gort-gtest` runs and passes, against the
# installed libgort_gtest.a and libgort.
if pkg-config --exists gort-gtest; then
  gtest_flags=$(pkg-config --cflags --libs gort-gtest)
  echo "pkg-config --cflags --libs gort-gtest: $gtest_flags"
  if [[ "$gtest_flags" != *-lgort_gtest* || -z "$(find "$destdir" -name libgort_gtest.a)" ]]; then
    printf 'FAIL: gort-gtest.pc does not link the installed libgort_gtest.a:\n%s\n' "$gtest_flags"
    exit 1
  fi
  # shellcheck disable=SC2086 # word splitting of the flags is intended
  "$CXX" -std=c++20 -Wall -Wextra "${san[@]}" -o "$tmp/gtest_hello" "$src_dir/gtest_hello.cpp" $gtest_flags
  libs=$(ldd "$tmp/gtest_hello")
  if [[ "$libs" != *"$destdir"*libgort* && "$libs" != *libgort*"$destdir"* ]]; then
    printf 'FAIL: gtest_hello is not linked against the installed libgort:\n%s\n' "$libs"
    exit 1
  fi
  out=$("$tmp/gtest_hello" 2>&1) || { printf 'FAIL: gtest_hello:\n%s\n' "$out"; exit 1; }
  if [[ "$out" != *"[  PASSED  ] 6 tests."* ]]; then
    printf 'FAIL: gtest_hello did not pass its 6 tests:\n%s\n' "$out"
    exit 1
  fi
  echo "gtest_hello: 6 tests passed"
elif [[ -n "$(find "$destdir" -name 'libgort_gtest.a')" ]]; then
  echo "FAIL: libgort_gtest was installed without gort-gtest.pc"
  exit 1
else
  echo "no libgort_gtest (built without GoogleTest): not checking it"
fi

# A release program (-O2, no -g) whose goroutine calls gort::sleep in tail
# position: its traceback shows gort::sleep, with the file:line the
# installed library's debug information gives, and no frame of the
# runtime's internals (docs/debugging.md).
# shellcheck disable=SC2086 # word splitting of the flags is intended
"$CXX" -std=c++20 -O2 -Wall -Wextra "${san[@]}" -o "$tmp/tail_sleep" "$src_dir/tail_sleep.cpp" $flags
trace=$("$tmp/tail_sleep")
sleeper=$(awk '/^goroutine [0-9]+ \[sleep\]:$/ { on = 1; next } on && /^$/ { exit } on' <<<"$trace")
if [[ "$sleeper" != gort::sleep\(* || "$sleeper" != *$'\n\t'/*/stdlib/sync/time.cpp:[0-9]* ||
      "$trace" == *gort::internal::* || "$sleeper" != *$'\n'"created by main::"* ]]; then
  printf 'FAIL: the traceback of a goroutine that tail-calls gort::sleep (wanted gort::sleep at stdlib/sync/time.cpp:N, created by main::..., nothing of gort::internal::):\n%s\n' "$trace"
  exit 1
fi
printf 'traceback of a tail-called gort::sleep:\n%s\n' "$sleeper"

# The static library, linked as `pkg-config --static --libs gort` says,
# with -lgort read as the installed libgort.a. PKG_CONFIG_SYSROOT_DIR does
# not fit --static (it would also move the absolute library paths of
# Libs.private into DESTDIR, and it leaves the -Wl paths of the export list
# and the linker script where they are): gort's own paths are moved here.
# Not with a sanitizer, whose runtime defines the interposed libc calls
# itself (docs/blocking-libraries.md, "Static links").
if [[ -z "${GORT_SANITIZE:-}" || "$GORT_SANITIZE" == none ]]; then
  static_flags=$(env -u PKG_CONFIG_SYSROOT_DIR pkg-config --static --cflags --libs gort)
  inst_libdir=$pc_libdir
  if [[ "$prefix" != "$destdir"* ]]; then
    inst_libdir=$destdir$pc_libdir
    static_flags="-I$destdir$pc_includedir ${static_flags//$pc_libdir\/gort\//$inst_libdir/gort/}"
  fi
  static_flags=$(sed "s|-lgort\b|$inst_libdir/libgort.a|" <<<"$static_flags")
  echo "pkg-config --static --cflags --libs gort, -lgort as libgort.a: $static_flags"
  # shellcheck disable=SC2086 # word splitting of the flags is intended
  "$CXX" -std=c++20 -Wall -Wextra -o "$tmp/spinner" "$src_dir/spinner.cpp" $static_flags
  libs=$(ldd "$tmp/spinner")
  if [[ "$libs" == *libgort* ]]; then
    printf 'FAIL: spinner loads a shared libgort:\n%s\n' "$libs"
    exit 1
  fi
  out=$("$tmp/spinner") || { printf 'FAIL: spinner (linked with libgort.a): %s\n' "$out"; exit 1; }
  echo "$out"
  [[ "$out" == "the spinner was preempted" ]] || { echo "FAIL: unexpected output from spinner"; exit 1; }
fi

# The gdb extension lies where gdb auto-loads it for the installed library:
# <datadir>/gdb/auto-load/<the library's absolute path>-gdb.py, the name
# being that of the library's real file (gdb resolves symlinks).
read -r opt_prefix opt_datadir opt_libdir < <("$MESON" introspect "$build_dir" --buildoptions |
  python3 -c 'import json, sys; o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(o["prefix"], o["datadir"], o["libdir"])')
abs() { [[ "$1" == /* ]] && echo "$1" || echo "$opt_prefix/$1"; }
libdir=$(abs "$opt_libdir")
libfile=$(basename "$(readlink -f "$lib")")
script="$destdir$(abs "$opt_datadir")/gdb/auto-load$libdir/$libfile-gdb.py"
if [[ ! -f "$script" ]]; then
  printf 'FAIL: the gdb extension is not at %s; installed:\n' "$script"
  find "$destdir" -name '*-gdb.py'
  exit 1
fi
echo "gdb extension: $script"
# gdb finds it by that rule: an auto-load directory that mirrors the
# installed tree without DESTDIR (a symlink to the installed script), and
# gdb loading the installed library.
if command -v gdb >/dev/null 2>&1; then
  mirror="$tmp/auto-load$destdir$libdir"
  mkdir -p "$mirror"
  ln -s "$script" "$mirror/$libfile-gdb.py"
  loaded=$(gdb -batch -nx -iex "set auto-load safe-path /" \
    -iex "add-auto-load-scripts-directory $tmp/auto-load" \
    -ex 'help info goroutines' "$destdir$libdir/$libfile" 2>&1)
  if [[ "$loaded" != *"List gort's goroutines"* ]]; then
    printf 'FAIL: gdb did not auto-load the extension for %s:\n%s\n' "$libfile" "$loaded"
    exit 1
  fi
  echo "gdb auto-loads it for $libfile"
else
  echo "no gdb: not checking that gdb auto-loads the extension"
fi
echo "PASS"
