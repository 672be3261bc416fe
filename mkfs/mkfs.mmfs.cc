// mkfs.mmfs: formats a block device or an image file (docs/reference.md §2).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "fs/device/block_device.h"
#include "fs/device/device_probe.h"
#include "fs/device/nbd_device.h"
#include "fs/util/size_text.h"
#include "fs/device/striped_device.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "probes/host_probe.h"

int main(int argc, char** argv) {
  CLI::App app{"mkfs.mmfs: format a block device or an image file as an mmfs volume (docs/reference.md §2)"};
  std::string size_text, geometry = "ssd", label;
  std::vector<std::string> target_args;
  int raid = -1;
  bool force = false, quiet = false;
  app.add_option("-s,--size", size_text, "Create or grow the image file to SIZE first (4G, 512M, bytes); an NBD export must already be this big");
  double measure_seconds = 60;
  app.add_option("-g,--geometry", geometry,
                 "Built-in profile (atlas10k3, cheetah36es, mems-g2, ssd), a JSON geometry file, or 'measure': "
                 "time TARGET (reads only) and use a flash geometry fitted to it (as mmfs-geom measure)")
      ->default_val("ssd");
  app.add_option("--measure-seconds", measure_seconds, "Time budget of -g measure")->default_val(60)
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("-L,--label", label, "Volume label (at most 63 bytes)");
  std::string image_mode = "0600";
  app.add_option("--image-mode", image_mode,
                 "Mode (octal) of an image file that -s creates, less the umask: the image holds every array "
                 "whatever their modes, so it is its owner's alone unless told otherwise")
      ->default_val("0600");
  app.add_flag("-f,--force", force, "Overwrite an existing filesystem signature");
  app.add_flag("-q,--quiet", quiet, "Print nothing on success");
  app.add_option("--raid", raid,
                 "With several targets: 0 stripes the volume track by track over all of them (the default), 1 "
                 "mirrors targets 1+2, 3+4, ... and stripes over the pairs (an even number of targets)")
      ->check(CLI::IsMember({0, 1}));
  app.add_option("TARGET", target_args,
                 "Block device, image file or NBD URI (nbd://HOST[:PORT]/EXPORT, nbd+unix:///EXPORT?socket=PATH); "
                 "several (or one comma-separated list) make one volume of that many devices of the geometry")
      ->required();
  app.footer("Several targets: every one gets superblocks naming the volume and its place in it; mount them all with\n"
             "  mmfs T1,T2,... MOUNTPOINT   (or mount -t fuse.mmfs T1,T2,... MOUNTPOINT)");
  CLI11_PARSE(app, argc, argv);
  const std::vector<std::string> targets = mmfs::fs::split_targets(target_args);
  if (targets.empty()) {
    fmt::print(stderr, "mkfs.mmfs: no target given\n");
    return 1;
  }
  const std::string target = targets[0];

  auto die = [](const std::string& msg) {
    fmt::print(stderr, "mkfs.mmfs: {}\n", msg);
    return 1;
  };
  const bool measure = geometry == "measure";
  std::unique_ptr<mmfs::geom::Geometry> g;
  if (!measure) {
    try {
      g = mmfs::geom::load_geometry(geometry);
    } catch (const std::exception& e) {
      return die(e.what());
    }
  }
  mmfs::fs::OpenOptions opt;
  {
    char* end = nullptr;
    const unsigned long mode = std::strtoul(image_mode.c_str(), &end, 8);
    if (image_mode.empty() || *end != '\0' || mode > 07777)
      return die(fmt::format("--image-mode '{}' is not an octal mode (e.g. 0600, 0640)", image_mode));
    opt.create_mode = std::uint32_t(mode);
  }
  if (!size_text.empty()) {
    opt.create = true;
    opt.create_size = mmfs::fs::parse_size(size_text);
    if (opt.create_size == 0) return die(fmt::format("malformed size '{}' (use e.g. 4G, 512M or a byte count)", size_text));
  }
  int err = 0;
  std::string msg;
  if (targets.size() > 1 || raid >= 0) {
    if (targets.size() == 1) return die("--raid needs several targets (RAID 1: an even number)");
    if (measure) return die("-g measure times one device; give a volume of several devices a profile or a JSON geometry");
    std::vector<mmfs::fs::MemberTarget> members;
    if (!mmfs::fs::open_targets(targets, opt, &members, &err, &msg)) return die(msg);
    mmfs::fs::FormatOptions fo;
    fo.label = label;
    fo.force = force;
    mmfs::fs::FormatSummary summary;
    if (mmfs::fs::format_members(std::move(members), *g, std::uint32_t(std::max(raid, 0)), fo, &summary, &msg))
      return die(msg);
    if (!quiet) fmt::print("{}", summary.text);
    return 0;
  }
  auto dev = mmfs::fs::open_device(target, opt, &err, &msg);
  if (!dev && err == EINVAL) {  // a filesystem without O_DIRECT (tmpfs): format through the page cache
    opt.direct = false;
    dev = mmfs::fs::open_device(target, opt, &err, &msg);
  }
  if (!dev) return die(msg.empty() ? std::string(std::strerror(err)) : msg);
  if (measure && mmfs::fs::is_nbd_uri(target))  // the probe times a local file or block device
    return die(fmt::format("{}: -g measure needs a local block device or image file; give an NBD target a "
                           "profile or a JSON geometry (e.g. -g ssd)",
                           target));
  if (measure) {
    // Refuse before spending the measurement's time, as format_volume would after it.
    if (std::string sig = mmfs::fs::detect_signature(*dev); !sig.empty() && !force)
      return die(fmt::format("{}: the target already holds a filesystem ({} signature); use -f to overwrite it",
                             target, sig));
    mmfs::fs::ProbeOptions po;
    po.seconds = measure_seconds;
    po.verbose = !quiet;
    mmfs::fs::ProbeResult probe;
    if (!quiet) fmt::print("measuring {} for at most {:.0f} s (reads only)\n", target, measure_seconds);
    if (mmfs::fs::probe_device(target, po, &probe, &msg) != 0) return die(msg);
    std::string summary;
    try {
      nlohmann::json measured = mmfs::fs::measured_geometry(probe, &summary);
      mmfs::probes::measure_host_into(&measured, &summary, !quiet);
      g = mmfs::geom::load_geometry(measured);
    } catch (const std::exception& e) {
      return die(e.what());
    }
    if (!quiet) fmt::print("{}", summary);
  }
  mmfs::fs::FormatOptions fo;
  fo.label = label;
  fo.force = force;
  mmfs::fs::FormatSummary summary;
  if (int r = mmfs::fs::format_volume(*dev, *g, fo, &summary, &msg)) {
    (void)r;
    return die(fmt::format("{}: {}", target, msg));
  }
  if (!quiet) fmt::print("{}", summary.text);
  return 0;
}
