// mmfsck: checks (and repairs) an unmounted mmfs volume (SPEC §3).
// Exit codes as e2fsck's: 0 clean, 1 errors corrected, 4 errors left
// uncorrected, 8 operational error.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "fs/block_device.h"
#include "fs/fsck.h"
#include "fs/volume.h"

int main(int argc, char** argv) {
  CLI::App app{"mmfsck: check an unmounted mmfs volume; -n reports only, -y repairs what can be repaired"};
  bool no = false, yes = false;
  std::string target;
  app.add_flag("-n", no, "Check only; change nothing (the default)");
  app.add_flag("-y", yes, "Repair every problem that can be repaired");
  app.add_option("TARGET", target, "Block device, image file or NBD URI")->required();
  CLI11_PARSE(app, argc, argv);
  if (no && yes) {
    fmt::print(stderr, "mmfsck: -n and -y exclude each other\n");
    return 8;
  }
  mmfs::fs::OpenOptions opt;
  opt.read_only = !yes;
  int err = 0;
  std::string msg;
  auto dev = mmfs::fs::open_device(target, opt, &err, &msg);
  if (!dev && err == EINVAL) {
    opt.direct = false;
    dev = mmfs::fs::open_device(target, opt, &err, &msg);
  }
  if (!dev) {
    fmt::print(stderr, "mmfsck: {}\n", msg.empty() ? std::strerror(err) : msg);
    return 8;
  }
  // Both copies of the metadata are compared; -y rewrites a damaged copy from
  // its twin and salvages the longest consistent prefix of a log damaged in
  // both copies.
  mmfs::fs::MetaOpenOptions meta;
  meta.verify_copies = true;
  meta.repair = meta.salvage = yes;
  auto vol = mmfs::fs::Volume::open(std::move(dev), &err, &msg, /*for_check=*/true, meta);
  if (!vol) {
    fmt::print(stderr, "mmfsck: {}: {}\n", target, msg);
    return err == EUCLEAN ? 4 : 8;
  }
  auto report = mmfs::fs::check_volume(*vol, yes);
  for (const auto& p : report.problems) fmt::print("{}: {}\n", target, p);
  for (const auto& r : report.repairs) fmt::print("{}: {}\n", target, r);
  int code = report.exit_code();
  fmt::print("{}: {} — {} problem(s), {} repaired, {} left\n", target,
             code == 0 ? "clean" : code == 1 ? "errors corrected" : "errors left uncorrected", report.problems.size(),
             report.repairs.size(), report.problems.size() - report.repairs.size());
  return code;
}
