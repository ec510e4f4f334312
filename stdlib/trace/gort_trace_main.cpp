// gort-trace — converts a raw gort trace (a ".gtrace": what a fatal error or
// a stall report's flight recorder dump writes, or a trace started with a
// ".gtrace" name) to a file Perfetto UI opens (docs/tracing-and-profiling.md):
//
//   gort-trace gort-flight-1234.gtrace out.perfetto-trace
//   gort-trace gort-flight-1234.gtrace out.json
//
// PCs are named from the binaries the dump's process had mapped, read
// from this machine's files: convert where the program was built.
#include <cstdio>
#include <cstring>
#include <string>

#include "gort/trace.hpp"

int main(int argc, char** argv) {
  if (argc != 3 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: gort-trace IN.gtrace OUT\n"
                 "  OUT's name picks the format: .json (Trace Event Format), anything else\n"
                 "  Perfetto's protobuf trace (open both at https://ui.perfetto.dev)\n");
    return 2;
  }
  absl::Status s = gort::trace::convert(argv[1], argv[2]);
  if (!s.ok()) {
    std::fprintf(stderr, "gort-trace: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
