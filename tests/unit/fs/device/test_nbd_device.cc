// NbdDevice (fs/device/nbd_device.h) against real NBD servers: nbdkit's memory and
// file plugins on unix sockets in a scratch directory, started as children
// and always stopped (NbdServer's destructor), whatever the test's outcome.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "fs/device/block_device.h"
#include "fs/device/nbd_device.h"
#include "tests/unit/support/device_test_support.h"

extern char** environ;

using namespace mmfs::fs;
namespace stdfs = std::filesystem;

namespace {

using testing::devices::fill_random;
using testing::devices::req;

// A scratch directory (for sockets and image files), removed with its contents.
struct NbdScratch {
  std::string path;
  NbdScratch() {
    char tmpl[] = "/tmp/mmfs-nbd-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~NbdScratch() {
    std::error_code ec;
    stdfs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

// `nbdkit --foreground --exit-with-parent --unix SOCKET -P PIDFILE ARGS...`
// (nbdkit writes the pid file once it listens), stopped
// (SIGTERM, then SIGKILL) and reaped by the destructor or by kill().
class NbdServer {
 public:
  NbdServer(std::string socket_path, std::vector<std::string> args) : socket_(std::move(socket_path)) {
    const std::string pidfile = socket_ + ".pid";
    ::unlink(pidfile.c_str());
    std::vector<std::string> argv = {"nbdkit", "--foreground", "--exit-with-parent", "--unix", socket_, "-P", pidfile};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::unlink(socket_.c_str());
    const int rc = ::posix_spawnp(&pid_, "nbdkit", nullptr, nullptr, cargv.data(), environ);
    if (rc != 0) {
      pid_ = -1;
      FAIL("cannot start nbdkit (Debian: apt-get install nbdkit): " << std::strerror(rc));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    for (;;) {
      struct stat st {};
      if (::stat(pidfile.c_str(), &st) == 0 && st.st_size > 0) break;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL("nbdkit exited before listening on " << socket_);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(SIGKILL);
        FAIL("nbdkit did not listen on " << socket_ << " within 15 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~NbdServer() { stop(); }
  NbdServer(const NbdServer&) = delete;
  NbdServer& operator=(const NbdServer&) = delete;

  std::string uri() const { return "nbd+unix:///?socket=" + socket_; }

  // Sends `sig` to the server and reaps it.
  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    ::unlink(socket_.c_str());
    ::unlink((socket_ + ".pid").c_str());
  }
  void stop() { kill(SIGTERM); }

 private:
  std::string socket_;
  pid_t pid_ = -1;
};

std::unique_ptr<BlockDevice> open_nbd(const std::string& uri, bool read_only = false, std::uint32_t iodepth = 32) {
  OpenOptions o;
  o.read_only = read_only;
  o.iodepth = iodepth;
  int err = 0;
  std::string msg;
  auto dev = open_device(uri, o, &err, &msg);
  INFO(uri << ": " << msg);
  REQUIRE(dev != nullptr);
  return dev;
}

}  // namespace

TEST_CASE("NBD URIs are told from paths", "[nbd]") {
  CHECK(is_nbd_uri("nbd://127.0.0.1:10809/"));
  CHECK(is_nbd_uri("nbds://host/export"));
  CHECK(is_nbd_uri("nbd+unix:///?socket=/tmp/s"));
  CHECK(is_nbd_uri("nbds+unix:///e?socket=/tmp/s"));
  CHECK_FALSE(is_nbd_uri("/var/tmp/vol.img"));
  CHECK_FALSE(is_nbd_uri("nbd.img"));
  CHECK_FALSE(is_nbd_uri("./nbd://x"));
}

TEST_CASE("NbdDevice: reads and writes of many sizes and offsets match a model", "[nbd]") {
  NbdScratch dir;
  NbdServer server(dir.file("mem.sock"), {"memory", "64M"});
  auto dev = open_nbd(server.uri());
  REQUIRE(dev->size_bytes() == (64ull << 20));
  REQUIRE(dev->block_size() == 512);
  auto* nbd = dynamic_cast<NbdDevice*>(dev.get());
  REQUIRE(nbd != nullptr);

  const std::uint64_t size = dev->size_bytes();
  std::vector<std::byte> model(size);  // the memory plugin starts zeroed
  std::mt19937_64 rng(16);
  const std::uint32_t sizes[] = {512, 1024, 4096, 4096 + 512, 65536, 131072 - 512, 1u << 20, 3u << 20};
  for (int round = 0; round < 60; ++round) {
    const std::uint32_t len = sizes[rng() % std::size(sizes)];
    const std::uint64_t off = (rng() % ((size - len) / 512 + 1)) * 512;
    AlignedBuffer buf(len);
    if (round % 2 == 0) {
      fill_random(buf.span(), rng);
      REQUIRE(dev->write(off, buf.data(), len) == 0);
      std::memcpy(model.data() + off, buf.data(), len);
    } else {
      REQUIRE(dev->read(off, buf.data(), len) == 0);
      REQUIRE(std::memcmp(buf.data(), model.data() + off, len) == 0);
    }
  }
  // Every byte, in 4 MiB reads.
  AlignedBuffer all(4u << 20);
  for (std::uint64_t off = 0; off < size; off += all.size()) {
    REQUIRE(dev->read(off, all.data(), static_cast<std::uint32_t>(all.size())) == 0);
    REQUIRE(std::memcmp(all.data(), model.data() + off, all.size()) == 0);
  }

  SECTION("invalid requests fail alone with EINVAL; the valid ones of the batch run") {
    AlignedBuffer a(8192), b(8192);
    fill_random(a.span(), rng);
    std::vector<IoRequest> batch = {
        req(IoRequest::Op::Write, 0, a.data(), 8192),
        req(IoRequest::Op::Write, 100, a.data(), 512),         // misaligned offset
        req(IoRequest::Op::Read, size - 512, b.data(), 1024),  // past the end
        req(IoRequest::Op::Read, 4096, b.data() + 1, 512),     // misaligned buffer
        req(IoRequest::Op::Read, 0, b.data(), 0),              // empty
    };
    CHECK(dev->submit(batch) == EINVAL);
    CHECK(batch[0].result == 0);
    for (std::size_t i = 1; i < batch.size(); ++i) CHECK(batch[i].result == EINVAL);
    REQUIRE(dev->read(0, b.data(), 8192) == 0);
    CHECK(std::memcmp(a.data(), b.data(), 8192) == 0);
  }
}

TEST_CASE("NbdDevice: a batch of hundreds of requests, and several threads at once", "[nbd]") {
  NbdScratch dir;
  NbdServer server(dir.file("mem.sock"), {"memory", "64M"});
  auto dev = open_nbd(server.uri(), false, 64);
  std::mt19937_64 rng(7);

  // 600 writes of 4..60 KiB at random disjoint places, in one batch.
  constexpr int kRequests = 600;
  constexpr std::uint64_t kSlot = 64 << 10;
  std::vector<std::uint64_t> slots(dev->size_bytes() / kSlot);
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = i;
  std::shuffle(slots.begin(), slots.end(), rng);
  std::vector<AlignedBuffer> data, back;
  std::vector<IoRequest> writes, reads;
  for (int i = 0; i < kRequests; ++i) {
    const auto len = static_cast<std::uint32_t>((1 + rng() % 15) * 4096);
    data.emplace_back(len);
    back.emplace_back(len);
    fill_random(data.back().span(), rng);
  }
  for (int i = 0; i < kRequests; ++i) {
    writes.push_back(req(IoRequest::Op::Write, slots[i] * kSlot, data[i].data(),
                         static_cast<std::uint32_t>(data[i].size())));
    reads.push_back(req(IoRequest::Op::Read, slots[i] * kSlot, back[i].data(),
                        static_cast<std::uint32_t>(back[i].size())));
  }
  REQUIRE(dev->submit(writes) == 0);
  std::shuffle(reads.begin(), reads.end(), rng);
  REQUIRE(dev->submit(reads) == 0);
  for (int i = 0; i < kRequests; ++i) {
    INFO("request " << i);
    REQUIRE(std::memcmp(data[i].data(), back[i].data(), data[i].size()) == 0);
  }

  // Four threads, each its own quarter of the export, each many batches.
  const std::uint64_t quarter = dev->size_bytes() / 4;
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 r(100 + t);
      for (int round = 0; round < 20; ++round) {
        std::vector<AlignedBuffer> w, b;
        std::vector<IoRequest> ws, rs;
        for (int i = 0; i < 16; ++i) {
          w.emplace_back(8192);
          b.emplace_back(8192);
          fill_random(w.back().span(), r);
        }
        for (int i = 0; i < 16; ++i) {
          const std::uint64_t off = t * quarter + ((round * 16 + i) * 8192) % quarter;
          ws.push_back(req(IoRequest::Op::Write, off, w[i].data(), 8192));
          rs.push_back(req(IoRequest::Op::Read, off, b[i].data(), 8192));
        }
        if (dev->submit(ws) != 0 || dev->submit(rs) != 0) ++failures[t];
        for (int i = 0; i < 16; ++i) {
          if (std::memcmp(w[i].data(), b[i].data(), 8192) != 0) ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == std::vector<int>(4, 0));
}

TEST_CASE("NbdDevice: the requests of a batch are in flight together", "[nbd]") {
  NbdScratch dir;
  // Every read takes 20 ms at the server (nbdkit serves up to 16 at a time
  // per connection): 96 reads one after the other would take 1.9 s.
  NbdServer server(dir.file("slow.sock"), {"--filter=delay", "memory", "16M", "delay-read=20ms"});
  auto dev = open_nbd(server.uri(), false, 32);
  std::vector<AlignedBuffer> bufs;
  std::vector<IoRequest> reads;
  for (int i = 0; i < 96; ++i) bufs.emplace_back(4096);
  for (int i = 0; i < 96; ++i) reads.push_back(req(IoRequest::Op::Read, i * 4096ull, bufs[i].data(), 4096));
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(dev->submit(reads) == 0);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  INFO("96 reads of 20 ms took " << ms << " ms");
  CHECK(ms < 900);
}

TEST_CASE("NbdDevice: a request larger than the server's maximum block size is split", "[nbd]") {
  NbdScratch dir;
  // The server advertises (and enforces) a 64 KiB maximum request.
  NbdServer server(dir.file("small.sock"), {"--filter=blocksize-policy", "memory", "16M", "blocksize-maximum=65536",
                                            "blocksize-error-policy=error"});
  auto dev = open_nbd(server.uri());
  auto* nbd = dynamic_cast<NbdDevice*>(dev.get());
  REQUIRE(nbd != nullptr);
  CHECK(nbd->max_request() == 65536);
  std::mt19937_64 rng(3);
  AlignedBuffer big(3u << 20), back(3u << 20);
  fill_random(big.span(), rng);
  REQUIRE(dev->write(512 * 7, big.data(), static_cast<std::uint32_t>(big.size())) == 0);
  REQUIRE(dev->read(512 * 7, back.data(), static_cast<std::uint32_t>(back.size())) == 0);
  CHECK(std::memcmp(big.data(), back.data(), big.size()) == 0);
}

TEST_CASE("NbdDevice: the file plugin, flush, and a read-only server", "[nbd]") {
  NbdScratch dir;
  const std::string image = dir.file("disk.img");
  {
    std::ofstream f(image, std::ios::binary);
    f.seekp((8 << 20) - 1);
    f.put('\0');
  }
  std::mt19937_64 rng(11);
  AlignedBuffer data(1u << 20);
  fill_random(data.span(), rng);
  {
    NbdServer server(dir.file("file.sock"), {"file", image});
    auto dev = open_nbd(server.uri());
    CHECK(dev->size_bytes() == (8u << 20));
    auto* nbd = dynamic_cast<NbdDevice*>(dev.get());
    REQUIRE(nbd != nullptr);
    CHECK(nbd->can_flush());
    REQUIRE(dev->write(1u << 20, data.data(), static_cast<std::uint32_t>(data.size())) == 0);
    REQUIRE(dev->flush() == 0);
  }
  // The bytes are in the file behind the server.
  {
    std::ifstream f(image, std::ios::binary);
    std::vector<char> got(data.size());
    f.seekg(1 << 20);
    f.read(got.data(), static_cast<std::streamsize>(got.size()));
    REQUIRE(f.good());
    CHECK(std::memcmp(got.data(), data.data(), data.size()) == 0);
  }
  // A read-only server: refused for writing with a message, served for reading.
  NbdServer ro(dir.file("ro.sock"), {"--readonly", "file", image});
  OpenOptions o;
  int err = 0;
  std::string msg;
  CHECK(open_device(ro.uri(), o, &err, &msg) == nullptr);
  CHECK(err == EROFS);
  CHECK_THAT(msg, Catch::Contains("read-only"));
  auto dev = open_nbd(ro.uri(), /*read_only=*/true);
  AlignedBuffer back(data.size());
  REQUIRE(dev->read(1u << 20, back.data(), static_cast<std::uint32_t>(back.size())) == 0);
  CHECK(std::memcmp(back.data(), data.data(), data.size()) == 0);
  CHECK(dev->write(0, back.data(), 4096) == EROFS);
  CHECK(dev->flush() == 0);
}

TEST_CASE("NbdDevice: open errors are messages, -s larger than the export is refused", "[nbd]") {
  NbdScratch dir;
  OpenOptions o;
  int err = 0;
  std::string msg;
  CHECK(open_device("nbd+unix:///?socket=" + dir.file("nobody.sock"), o, &err, &msg) == nullptr);
  CHECK(err != 0);
  CHECK_THAT(msg, Catch::Contains("cannot connect"));

  NbdServer server(dir.file("mem.sock"), {"memory", "16M"});
  o.create = true;
  o.create_size = 32ull << 20;
  CHECK(open_device(server.uri(), o, &err, &msg) == nullptr);
  CHECK(err == ENOSPC);
  CHECK_THAT(msg, Catch::Contains("16777216"));
  o.create_size = 16ull << 20;  // big enough already: fine
  auto dev = open_device(server.uri(), o, &err, &msg);
  CHECK(dev != nullptr);
}

TEST_CASE("NbdDevice: a killed server gives EIO, and a server that returns is used again", "[nbd]") {
  NbdScratch dir;
  const std::string image = dir.file("disk.img");
  {
    std::ofstream f(image, std::ios::binary);
    f.seekp((16 << 20) - 1);
    f.put('\0');
  }
  const std::string sock = dir.file("file.sock");
  std::mt19937_64 rng(5);
  AlignedBuffer data(256 << 10), back(256 << 10);
  fill_random(data.span(), rng);

  auto server = std::make_unique<NbdServer>(sock, std::vector<std::string>{"file", image});
  auto dev = open_nbd(server->uri());
  REQUIRE(dev->write(0, data.data(), static_cast<std::uint32_t>(data.size())) == 0);
  REQUIRE(dev->flush() == 0);

  server->kill(SIGKILL);
  std::vector<IoRequest> batch;
  for (int i = 0; i < 64; ++i) batch.push_back(req(IoRequest::Op::Read, i * 4096ull, back.data() + i * 4096, 4096));
  CHECK(dev->submit(batch) == EIO);
  for (const auto& r : batch) CHECK(r.result == EIO);
  CHECK(dev->write(0, data.data(), 4096) == EIO);
  CHECK(dev->flush() == EIO);
  CHECK(dev->read(0, back.data(), 4096) == EIO);  // still down: no crash, no hang

  // The same export served again: the device reconnects and reads it back.
  server = std::make_unique<NbdServer>(sock, std::vector<std::string>{"file", image});
  REQUIRE(dev->read(0, back.data(), static_cast<std::uint32_t>(back.size())) == 0);
  CHECK(std::memcmp(back.data(), data.data(), data.size()) == 0);

  // A server killed while a large batch is in flight.
  std::vector<AlignedBuffer> bufs;
  std::vector<IoRequest> reads;
  for (int i = 0; i < 256; ++i) bufs.emplace_back(64 << 10);
  for (int i = 0; i < 256; ++i)
    reads.push_back(req(IoRequest::Op::Read, (i % 256) * (64ull << 10), bufs[i].data(), 64 << 10));
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    server->kill(SIGKILL);
  });
  for (int round = 0; round < 50; ++round) {
    const int rc = dev->submit(reads);
    if (rc != 0) {
      CHECK(rc == EIO);
      break;
    }
  }
  killer.join();
  CHECK(dev->read(0, back.data(), 4096) == EIO);
}
