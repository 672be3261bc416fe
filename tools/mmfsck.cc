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
#include "fs/scrub/member_repair.h"
#include "fs/volume/volume.h"

namespace {

// After a rebuild: the volume whole again, the data that lay on the rebuilt
// member put back from other copies where it has any (a RAID 0 member; a
// RAID 1 member was copied whole from its mirror). 0, or 4 when some data
// had no second copy or could not be repaired.
int repair_rebuilt(const std::vector<std::string>& targets, const std::string& rebuilt,
                   const mmfs::fs::OpenOptions& opt) {
  std::vector<std::string> all = targets;
  all.push_back(rebuilt);
  std::vector<mmfs::fs::MemberTarget> members;
  int err = 0;
  std::string msg;
  if (!mmfs::fs::open_targets(all, opt, &members, &err, &msg)) {
    fmt::print(stderr, "mmfsck: {}\n", msg.empty() ? std::strerror(err) : msg);
    return 8;
  }
  auto vol = mmfs::fs::Volume::open(std::move(members), &err, &msg, {});
  if (!vol) {
    fmt::print(stderr, "mmfsck: reopening the rebuilt volume: {}\n", msg);
    return 8;
  }
  mmfs::fs::StripedDevice* s = vol->striped();
  if (!s || s->raid() != 0) return 0;
  std::uint32_t member = UINT32_MAX;
  for (std::uint32_t d = 0; d < s->devices(); ++d)
    if (s->target(d) == rebuilt) member = d;
  if (member == UINT32_MAX) return 0;
  mmfs::fs::MemberRepairReport rep;
  if (int r = mmfs::fs::repair_member_data(*vol, member, &rep, &msg)) {
    fmt::print(stderr, "mmfsck: {}\n", msg.empty() ? std::strerror(r) : msg);
    return 8;
  }
  fmt::print("repaired {} cell(s) of {} array(s) with copies from their copies on other members\n", rep.cells,
             rep.arrays);
  if (rep.indexes) fmt::print("built {} bitmap index(es) that lay on the member anew from their data\n", rep.indexes);
  for (const auto& l : rep.lost) fmt::print("lost (no second copy): {}\n", l);
  for (const auto& f : rep.failed) fmt::print("not repaired: {}\n", f);
  return rep.lost.empty() && rep.failed.empty() ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mmfsck: check an unmounted mmfs volume; -n reports only, -y repairs what can be repaired"};
  bool no = false, yes = false;
  std::vector<std::string> target_args;
  std::string rebuild;
  app.add_flag("-n", no, "Check only; change nothing (the default)");
  app.add_flag("-y", yes, "Repair every problem that can be repaired");
  app.add_option("--rebuild", rebuild,
                 "Restore redundancy onto NEW_TARGET, which replaces the failed (or missing) member. RAID 1: the "
                 "member's share is copied from its mirror. RAID 0: its metadata copy is written from the other copy, "
                 "arrays with copies get the cells that lay on it back from their copies on other members, and bitmap "
                 "indexes that lay on it are built anew from their data; other data that lay on it is listed as "
                 "lost (exit 4). NEW_TARGET then takes the member's place (mount "
                 "the volume with NEW_TARGET in its stead)")
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
    return repair_rebuilt(targets, rebuild, opt);
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
