// /.mmfs/scrub (docs/daemon.md, "Scrub"): the Filesystem's side
// of the scrub. Reading the file gives the status (JSON); writing it takes
// commands. The scrub itself is fs/scrub/scrub_runner.h over fs/scrub/scrub.h.
#include <fmt/format.h>
#include <fcntl.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <new>
#include <set>
#include <shared_mutex>
#include <thread>

#include "daemon/filesystem.h"
#include "daemon/filesystem_detail.h"
#include "fs/scrub/scrub.h"
#include "fs/scrub/scrub_runner.h"

namespace mmfs::daemon {

namespace {

constexpr const char* kCommands = "start, start idle-time, start free-bandwidth, stop, recheck";

// A command as the error line shows it: printable, at most 40 characters.
std::string shown(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 40)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  return text.size() > 40 ? out + "..." : out;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Filesystem::ScrubSlot::~ScrubSlot() {
  if (runner) runner->stop();
  repairs_stop = true;
  if (repairs.joinable()) repairs.join();
}

void Filesystem::for_each_scrubbed_array(const std::vector<fs::keys::Kind>& kinds,
                                         const std::function<void(Ino, fs::ArrayFile&)>& visit) {
  std::set<Ino> arrays;
  for (const fs::keys::Kind kind : kinds)
    volume_->store().scan(fs::keys::scan_prefix(kind), [&](std::string_view k, std::string_view) {
      if (auto parsed = fs::keys::parse(k); parsed && parsed->kind == kind) arrays.insert(parsed->ino);
      return true;
    });
  for (Ino ino : arrays) {
    if (scrub_.repairs_stop) break;
    std::shared_ptr<fs::ArrayFile> array;
    std::string msg;
    if (const int r = array_for(ino, &array, &msg); r != 0) {
      if (r != ENOENT) errors_.record(r, path_of(ino), "scrub: " + msg);  // ENOENT: a plain file's checksums, or removed
      continue;
    }
    visit(ino, *array);
  }
}

void Filesystem::repair_copies() {
  // The arrays with copies (those with a copy's extent map); on a RAID 1
  // volume every array whose cells hold data (a checksum), repaired from the mirror.
  std::vector<fs::keys::Kind> kinds{fs::keys::Kind::CopyExtents};
  if (volume_->device().mirror_sides() > 1) kinds.push_back(fs::keys::Kind::Checksums);
  for_each_scrubbed_array(kinds, [&](Ino ino, fs::ArrayFile& array) {
    std::uint64_t repaired = 0;
    std::string msg;
    if (int r = array.repair_placements(scrub_.repairs_stop, &repaired, &msg))
      errors_.record(r, path_of(ino), "scrub: " + msg);
    scrub_.copies_repaired += repaired;
    ++scrub_.copies_arrays;
  });
  scrub_.copies_running = false;
  verify_indexes();
}

void Filesystem::verify_indexes() {
  // Every array with an index record or an index extent map (a record that
  // no longer decodes still has its extents).
  for_each_scrubbed_array({fs::keys::Kind::IndexRecord, fs::keys::Kind::IndexExtents},
                          [&](Ino ino, fs::ArrayFile& array) {
                            bool rebuilt = false;
                            std::uint64_t bytes = 0;
                            std::string msg;
                            if (int r = array.verify_index(scrub_.repairs_stop, &rebuilt, &bytes, &msg))
                              errors_.record(r, path_of(ino), "scrub: " + msg);
                            if (rebuilt) ++scrub_.indexes_rebuilt;
                            scrub_.indexes_bytes_read += bytes;
                            ++scrub_.indexes_checked;
                          });
  scrub_.indexes_running = false;
}

void Filesystem::recheck_findings(fs::ScrubRunner& runner) {
  // The device scrub may run long after the repairs: its findings are read
  // again once it is done (not when it was stopped: its list is partial).
  while (runner.state() == fs::ScrubState::Running && !scrub_.repairs_stop)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (runner.state() == fs::ScrubState::Done && !scrub_.repairs_stop) runner.recheck_findings(scrub_.repairs_stop);
  scrub_.recheck_running = false;
}

bool Filesystem::is_scrub_node(Ino ino) const {
  if (!(ino & kVirtualBit)) return false;
  VNode v;
  return vnodes_.get(ino, &v) && !v.table && v.array == 0 && v.components.size() == 1 && v.components[0] == "scrub";
}

std::string Filesystem::scrub_status_text() {
  nlohmann::json j;
  {
    std::lock_guard lock(scrub_mu_);
    if (scrub_.runner) j = scrub_.runner->status();
  }
  if (j.is_null()) {
    // Never started on this mount.
    const geom::Geometry& g = volume_->geometry();
    const fs::ScrubMode mode = fs::default_scrub_mode(g);
    j["state"] = "idle";
    j["mode"] = fs::to_string(mode);
    j["how"] = fs::scrub_how(mode, g);
    j["sectors_total"] = std::min(volume_->superblock().volume_bytes, volume_->device().size_bytes()) / g.sector_size();
    j["sectors_scanned"] = 0;
    j["progress"] = 0.0;
    j["cells_verified"] = 0;
    j["errors"] = 0;
    j["error_list"] = nlohmann::json::array();
  }
  j["copies"] = {{"state", scrub_.copies_running ? "running" : "idle"},
                {"arrays_checked", scrub_.copies_arrays.load()},
                {"cells_repaired", scrub_.copies_repaired.load()}};
  j["recheck"] = {{"state", scrub_.recheck_running ? "running" : "idle"}};
  j["indexes"] = {{"state", scrub_.indexes_running ? "running" : "idle"},
                 {"checked", scrub_.indexes_checked.load()},
                 {"rebuilt", scrub_.indexes_rebuilt.load()},
                 {"bytes_read", scrub_.indexes_bytes_read.load()}};
  j["commands"] = kCommands;
  return j.dump(2) + "\n";
}

void Filesystem::scrub_stat(struct stat* st) {
  if (!is_scrub_node(st->st_ino)) return;
  st->st_mode = S_IFREG | 0600;  // root's: its commands, and a status that names damaged files
  st->st_size = std::int64_t(scrub_status_text().size());
}

int Filesystem::open_scrub(Ino ino, int flags, std::unique_ptr<Handle>* out) {
  (void)flags;  // read for the status, write for commands: both are served
  auto h = std::make_unique<Handle>();
  h->ino = ino;
  h->is_virtual_text = true;
  h->writable = (flags & O_ACCMODE) != O_RDONLY;
  h->content = std::make_shared<const std::string>(scrub_status_text());
  *out = std::move(h);
  return 0;
}

int Filesystem::scrub_setattr(Ino ino, int to_set, struct stat* out) {
  // `echo start > .mmfs/scrub` truncates the file on open (a size of 0) and
  // may stamp its times; nothing else of it can change.
  using namespace detail;
  const int allowed = kSetSize | kSetAtime | kSetMtime | kSetAtimeNow | kSetMtimeNow | kSetCtime;
  if (to_set & ~allowed)
    return record(EROFS, ino, "only commands can be written to the scrub file; its mode, owner and times are fixed");
  std::string content, msg;
  if (int r = vnode_stat(ino, Caller::daemon(), out, &content, &msg)) return record(r, ino, msg);
  scrub_stat(out);
  return 0;
}

int Filesystem::scrub_command(Handle& h, const std::byte* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string_view rest = text;
  bool any = false;
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    const std::string_view line = trimmed(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (line.empty()) continue;
    any = true;
    int r = 0;
    if (line == "start") r = start_scrub(h.ino, "");
    else if (line == "start idle-time") r = start_scrub(h.ino, "idle-time");
    else if (line == "start free-bandwidth") r = start_scrub(h.ino, "free-bandwidth");
    else if (line == "stop") stop_scrub();
    else if (line == "recheck") r = start_recheck(h.ino);
    else r = record(EINVAL, h.ino, fmt::format("unknown command '{}'; accepted: {}", shown(line), kCommands));
    if (r) return r;
  }
  if (!any) return record(EINVAL, h.ino, fmt::format("an empty command; accepted: {}", kCommands));
  return 0;
}

int Filesystem::start_recheck(Ino ino) {
  std::lock_guard lock(scrub_mu_);
  if (!scrub_.runner) return record(EINVAL, ino, "recheck: no scrub has run on this mount ('start' one)");
  if (scrub_.runner->state() == fs::ScrubState::Running || scrub_.copies_running || scrub_.indexes_running ||
      scrub_.recheck_running)
    return record(EBUSY, ino, "recheck: the scrub or its repairs are still running; they recheck when done");
  if (scrub_.runner->state() != fs::ScrubState::Done)
    return record(EINVAL, ino, "recheck: the last scrub was stopped, so its findings are partial ('start' a new one)");
  if (scrub_.repairs.joinable()) scrub_.repairs.join();  // done: it cleared recheck_running last
  scrub_.repairs_stop = false;
  scrub_.recheck_running = true;
  scrub_.repairs = std::thread([this, runner = scrub_.runner] { recheck_findings(*runner); });
  return 0;
}

int Filesystem::start_scrub(Ino ino, const std::string& how) {
  const geom::Geometry& g = volume_->geometry();
  fs::ScrubMode mode = fs::default_scrub_mode(g);
  if (how == "idle-time") mode = fs::ScrubMode::IdleTime;
  if (how == "free-bandwidth") mode = fs::ScrubMode::FreeBandwidth;
  if (mode == fs::ScrubMode::FreeBandwidth && g.kind() != geom::DeviceKind::Mems)
    return record(ENOTSUP, ino,
                  fmt::format("start free-bandwidth: needs a MEMS volume (equivalence classes); this volume's "
                              "geometry '{}' is a {}: use 'start' or 'start idle-time'",
                              g.name(), geom::to_string(g.kind())));
  auto running = [this] { return scrub_.runner && scrub_.runner->state() == fs::ScrubState::Running; };
  {
    std::lock_guard lock(scrub_mu_);
    if (running()) return record(EBUSY, ino, "start: a scrub is running already ('stop' it first)");
  }
  std::unique_ptr<fs::ScrubEngine> engine;
  try {
    // The map is built outside scrub_mu_: the status stays readable meanwhile.
    // Arrays are placed as the daemon serves them (ArrayFile::cells_locked).
    fs::OwnerMap::PlacementSource placements = [this](Ino array_ino,
                                                      const std::function<void(const layouts::Layout&)>& visit) {
      std::shared_ptr<fs::ArrayFile> array;
      std::string why;
      if (array_for(array_ino, &array, &why) != 0) return false;
      std::shared_lock placement(array->placement_mutex());
      const fs::ArrayState* state = array->cells_locked();
      // A placement on a member set maps cells to its set's LBNs: its
      // sectors are scrubbed as readable data, not cell by cell.
      if (state == nullptr || state->site() != nullptr) return false;
      visit(state->layout());
      return true;
    };
    auto map = fs::OwnerMap::from_volume(*volume_, placements);
    engine = std::make_unique<fs::ScrubEngine>(
        std::move(map), fs::store_metadata(volume_->store()), fs::ScrubOptions{},
        [this](const fs::ScrubFinding& f) {
          std::string where;
          for (const auto& r : f.runs)
            where += r.sectors == 1 ? fmt::format("{}{}", where.empty() ? "" : ", ", r.lbn)
                                    : fmt::format("{}{}-{}", where.empty() ? "" : ", ", r.lbn, r.lbn + r.sectors - 1);
          errors_.record(EIO, f.path, fmt::format("scrub: {} (LBN {})", f.what, where));
        });
  } catch (const std::bad_alloc&) {
    return record(ENOMEM, ino, "start: not enough memory for the scrub's map of the volume");
  }
  std::lock_guard lock(scrub_mu_);
  if (running()) return record(EBUSY, ino, "start: a scrub is running already ('stop' it first)");
  if (scrub_.runner) scrub_.runner->stop();
  std::string msg;
  std::shared_ptr<fs::ScrubRunner> runner;
  if (int r = fs::ScrubRunner::start(io_, g, mode, std::move(engine), fs::ScrubRunnerOptions{}, &runner, &msg))
    return record(r, ino, "start: " + msg);
  scrub_.runner = std::move(runner);
  scrub_.repairs_stop = true;
  if (scrub_.repairs.joinable()) scrub_.repairs.join();
  scrub_.repairs_stop = false;
  scrub_.copies_running = true;
  scrub_.indexes_running = true;
  scrub_.recheck_running = true;
  scrub_.copies_arrays = 0;
  scrub_.copies_repaired = 0;
  scrub_.indexes_checked = 0;
  scrub_.indexes_rebuilt = 0;
  scrub_.indexes_bytes_read = 0;
  scrub_.repairs = std::thread([this, runner = scrub_.runner] {
    repair_copies();
    recheck_findings(*runner);
  });
  return 0;
}

void Filesystem::stop_scrub() {
  std::shared_ptr<fs::ScrubRunner> runner;
  {
    std::lock_guard lock(scrub_mu_);
    runner = scrub_.runner;
  }
  if (runner) runner->stop();
  std::thread repairs;
  {
    std::lock_guard lock(scrub_mu_);
    scrub_.repairs_stop = true;
    repairs = std::move(scrub_.repairs);
  }
  if (repairs.joinable()) repairs.join();
}

}  // namespace mmfs::daemon
