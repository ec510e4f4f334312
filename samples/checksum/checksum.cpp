// checksum — Go's errgroup "pipeline" example: checksum every regular file
// under a directory with a bounded number of goroutines, and stop
// everything at the first error.
//
// One goroutine walks the tree and sends paths; `readers` goroutines read
// and hash files (regular files are read inside gort::blocking, so a slow
// disk never stalls the other goroutines); main collects the results. All
// run in one errgroup::Group: the first failure (an unreadable file, a
// walk error) cancels the group's context, every stage sees it in its
// select and returns, and wait() reports that first error.
//
// Usage: checksum DIR [readers]
// Prints "<64-bit FNV-1a in hex>  <path>" per file, sorted by path; exit
// status 1 and the error on stderr if anything failed.
#include <gort/gort.hpp>
#include <gort/errgroup.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <system_error>

namespace {

namespace fs = std::filesystem;

struct Result {
  std::string path;
  uint64_t sum;
};

// FNV-1a: small, dependency-free, and easy to check from a test.
absl::Status hash_file(const std::string& path, uint64_t* out) {
  return gort::blocking([&]() -> absl::Status {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError("open " + path + ": cannot read");
    uint64_t h = 14695981039346656037ull;
    char buf[1 << 14];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      for (std::streamsize i = 0; i < in.gcount(); i++) {
        h = (h ^ static_cast<unsigned char>(buf[i])) * 1099511628211ull;
      }
    }
    if (in.bad()) return absl::DataLossError("read " + path + ": I/O error");
    *out = h;
    return absl::OkStatus();
  });
}

// Go's MD5All: the checksums of every regular file under root.
absl::Status checksum_all(const std::string& root, int readers, std::map<std::string, uint64_t>* sums) {
  gort::errgroup::Group g(gort::background());
  const gort::Context& ctx = g.context();
  auto paths = gort::make_chan<std::string>();
  g.go([&]() -> absl::Status {
    std::error_code ec;
    auto it = fs::recursive_directory_iterator(root, ec);
    absl::Status result;
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      bool cancelled = false;
      gort::select(gort::on_send(paths, it->path().string()), gort::on_recv(ctx.done(), [&] { cancelled = true; }));
      if (cancelled) break;
    }
    if (ec) result = absl::NotFoundError("walk " + root + ": " + ec.message());
    paths.close();
    return result;
  });

  auto results = gort::make_chan<Result>();
  gort::WaitGroup readers_done;
  readers_done.add(readers);
  for (int i = 0; i < readers; i++) {
    g.go([&]() -> absl::Status {
      absl::Status result;
      for (std::string path : paths) {
        uint64_t sum = 0;
        result = hash_file(path, &sum);
        if (!result.ok()) break;
        bool cancelled = false;
        gort::select(gort::on_send(results, Result{path, sum}), gort::on_recv(ctx.done(), [&] { cancelled = true; }));
        if (cancelled) break;
      }
      readers_done.done();
      return result;
    });
  }
  g.go([&] {
    readers_done.wait();
    results.close();
  });

  for (Result r : results) (*sums)[r.path] = r.sum;
  return g.wait();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: checksum DIR [readers]\n");
    return 2;
  }
  std::string root = argv[1];
  int readers = argc > 2 ? std::atoi(argv[2]) : 8;
  if (readers < 1) readers = 1;
  return gort::run([&] {
    std::map<std::string, uint64_t> sums;
    absl::Status err = checksum_all(root, readers, &sums);
    if (!err.ok()) {
      std::fprintf(stderr, "checksum: %s\n", gort::error_text(err).c_str());
      return 1;
    }
    for (const auto& [path, sum] : sums) std::printf("%016llx  %s\n", static_cast<unsigned long long>(sum), path.c_str());
    return 0;
  });
}
