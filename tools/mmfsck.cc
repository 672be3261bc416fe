// mmfsck: checks (and repairs) an unmounted mmfs volume (docs/reference.md §3).
// Exit codes as e2fsck's: 0 clean, 1 errors corrected, 4 errors left
// uncorrected, 8 operational error.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "fs/device/block_device.h"
#include "fs/volume/fsck.h"
#include "fs/device/striped_device.h"
#include "fs/volume/volume.h"

int main(int argc, char** argv) {
  CLI::App app{"mmfsck: check an unmounted mmfs volume; -n reports only, -y repairs what can be repaired"};
  bool no = false, yes = false;
  std::vector<std::string> target_args;
  std::string rebuild;
  app.add_flag("-n", no, "Check only; change nothing (the default)");
  app.add_flag("-y", yes, "Repair every problem that can be repaired");
  app.add_option("--rebuild", rebuild,
                 "RAID 1: restore redundancy onto NEW_TARGET, which replaces the failed (or missing) member: the "
                 "member's metadata and allocated extents are copied from its mirror, and NEW_TARGET takes its place "
                 "(mount the volume with NEW_TARGET in the failed member's stead afterwards)")
      ->type_name("NEW_TARGET");
  app.add_option("TARGET", target_args,
                 "Block device, image file or NBD URI; a volume of several devices: all its members (separate or "
                 "comma-separated; with --rebuild the failed one may be left out)")
      ->required();
  CLI11_PARSE(app, argc, argv);
  if (no && yes) {
    fmt::print(stderr, "mmfsck: -n and -y exclude each other\n");
    return 8;
  }
  const std::vector<std::string> targets = mmfs::fs::split_targets(target_args);
  std::string target;
  for (const auto& t : targets) target += (target.empty() ? "" : ",") + t;
  mmfs::fs::OpenOptions opt;
  opt.read_only = !yes && rebuild.empty();
  int err = 0;
  std::string msg;
  std::vector<mmfs::fs::MemberTarget> members;
  if (!mmfs::fs::open_targets(targets, opt, &members, &err, &msg)) {
    fmt::print(stderr, "mmfsck: {}\n", msg.empty() ? std::strerror(err) : msg);
    return 8;
  }
  if (!rebuild.empty()) {
    std::vector<mmfs::fs::MemberTarget> fresh;
    if (!mmfs::fs::open_targets({rebuild}, opt, &fresh, &err, &msg)) {
      fmt::print(stderr, "mmfsck: {}\n", msg.empty() ? std::strerror(err) : msg);
      return 8;
    }
    std::string report;
    if (mmfs::fs::rebuild_member(std::move(members), std::move(fresh[0]), &report, &msg)) {
      fmt::print(stderr, "mmfsck: {}: {}\n", target, msg);
      return 8;
    }
    fmt::print("{}", report);
    return 0;
  }
  // Both copies of the metadata are compared; -y rewrites a damaged copy from
  // its twin and salvages the longest consistent prefix of a log damaged in
  // both copies.
  mmfs::fs::MetaOpenOptions meta;
  meta.verify_copies = true;
  meta.repair = meta.salvage = yes;
  mmfs::fs::Volume::MembersOptions mo;
  mo.for_check = true;
  mo.metadata = meta;
  auto vol = mmfs::fs::Volume::open(std::move(members), &err, &msg, mo);
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
