// Devices: FileDevice (io_uring over an image file) and what every
// BlockDevice shares (AlignedBuffer, submit_streaming, open_device).
// MemoryDevice and FaultInjectingDevice are tested in test_fault_device.cc.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

#include <algorithm>
#include <atomic>
#include <bit>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "fs/device/block_device.h"
#include "fs/device/fault_device.h"
#include "fs/device/file_device.h"
#include "tests/unit/support/device_test_support.h"

using namespace mmfs::fs;
namespace stdfs = std::filesystem;

namespace {

using namespace testing::devices;

constexpr std::uint64_t kImageSize = 64ull << 20;

// Turns a batch of writes from `data` into reads of the same blocks into
// the same places of `back`.
void reads_into(std::vector<IoRequest>& batch, const AlignedBuffer& data, AlignedBuffer& back) {
  for (auto& r : batch) {
    r.op = IoRequest::Op::Read;
    r.buffer = static_cast<std::byte*>(r.buffer) - data.data() + back.data();
    r.result = -1;
  }
}

// A directory of scratch images, removed with everything in it.
struct ScratchDir {
  std::string path;
  explicit ScratchDir(const std::string& parent) {
    std::string tmpl = parent + "/mmfs-device-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~ScratchDir() {
    if (!path.empty()) {
      std::error_code ec;
      stdfs::remove_all(path, ec);
    }
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

std::string exe_dir() {
  std::error_code ec;
  auto p = stdfs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

// A 64 MiB image opened with O_DIRECT on the first candidate filesystem that
// supports it (/var/tmp, then the build directory); without O_DIRECT if none does.
struct Image {
  std::unique_ptr<ScratchDir> dir;
  std::string path;
  OpenOptions options;
  std::unique_ptr<BlockDevice> dev;

  explicit Image(std::uint32_t iodepth = 32) {
    options.create = true;
    options.create_size = kImageSize;
    options.iodepth = iodepth;
    for (bool direct : {true, false}) {
      options.direct = direct;
      for (const std::string& parent : {std::string("/var/tmp"), exe_dir()}) {
        auto d = std::make_unique<ScratchDir>(parent);
        if (d->path.empty()) continue;
        path = d->path + "/image";
        int err = 0;
        std::string msg;
        dev = open_device(path, options, &err, &msg);
        if (dev) {
          dir = std::move(d);
          if (!direct) WARN("no candidate filesystem supports O_DIRECT; testing FileDevice with buffered I/O");
          return;
        }
        UNSCOPED_INFO("open_device(" << path << "): " << msg);
      }
    }
    FAIL("cannot create a scratch image");
  }

  std::unique_ptr<BlockDevice> reopen(std::uint32_t iodepth) const {
    OpenOptions o = options;
    o.create = false;
    o.iodepth = iodepth;
    o.lock = false;  // a second device on the same image, on purpose
    int err = 0;
    std::string msg;
    auto d = open_device(path, o, &err, &msg);
    INFO(msg);
    REQUIRE(d);
    return d;
  }
};

// Reads bytes of the image file behind the device's back (buffered).
std::vector<std::byte> pread_file(const std::string& path, std::uint64_t offset, std::size_t length) {
  std::vector<std::byte> out(length);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::pread(fd, out.data(), length, static_cast<off_t>(offset)) == static_cast<ssize_t>(length));
  ::close(fd);
  return out;
}

}  // namespace

TEST_CASE("AlignedBuffer is aligned, zero-filled and movable", "[device]") {
  AlignedBuffer a(5000);
  REQUIRE(a.size() == 5000);
  REQUIRE(reinterpret_cast<std::uintptr_t>(a.data()) % kBufferAlignment == 0);
  REQUIRE(std::all_of(a.data(), a.data() + a.size(), [](std::byte b) { return b == std::byte{0}; }));
  a.data()[4999] = std::byte{7};
  AlignedBuffer b(std::move(a));
  REQUIRE(a.data() == nullptr);
  REQUIRE(a.size() == 0);
  REQUIRE(b.size() == 5000);
  REQUIRE(b.data()[4999] == std::byte{7});
  AlignedBuffer c;
  c = std::move(b);
  REQUIRE(c.span().size() == 5000);
  REQUIRE(AlignedBuffer(0).data() == nullptr);
}

TEST_CASE("FileDevice: random writes, flush, shuffled read-back in one batch", "[device]") {
  Image img;
  BlockDevice& dev = *img.dev;
  auto* fdev = dynamic_cast<FileDevice*>(&dev);
  REQUIRE(fdev != nullptr);
  if (!fdev->uses_io_uring()) WARN("io_uring unavailable: FileDevice uses the pread/pwrite fallback");
  REQUIRE(dev.size_bytes() == kImageSize);
  REQUIRE(dev.block_size() >= 512);
  REQUIRE(kBlock % dev.block_size() == 0);

  std::mt19937_64 rng(42);
  std::vector<std::uint64_t> blocks(kImageSize / kBlock);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  blocks.resize(64);

  AlignedBuffer data(64 * kBlock), back(64 * kBlock);
  fill_random(data.span(), rng);
  std::vector<IoRequest> writes;
  for (std::size_t i = 0; i < 64; ++i) {
    writes.push_back(req(IoRequest::Op::Write, blocks[i] * kBlock, data.data() + i * kBlock, kBlock));
  }
  REQUIRE(dev.submit(writes) == 0);
  for (const auto& w : writes) REQUIRE(w.result == 0);
  REQUIRE(dev.flush() == 0);

  std::vector<std::size_t> order(64);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<IoRequest> reads;
  for (std::size_t i : order) {
    reads.push_back(req(IoRequest::Op::Read, blocks[i] * kBlock, back.data() + i * kBlock, kBlock));
  }
  REQUIRE(dev.submit(reads) == 0);
  REQUIRE(equal(data.span(), back.span()));

  // The bytes are really in the file.
  for (std::size_t i = 0; i < 64; i += 9) {
    auto f = pread_file(img.path, blocks[i] * kBlock, kBlock);
    REQUIRE(equal(f, std::span<const std::byte>(data.data() + i * kBlock, kBlock)));
  }

  // The convenience wrappers.
  AlignedBuffer one(kBlock);
  REQUIRE(dev.read(blocks[3] * kBlock, one.data(), kBlock) == 0);
  REQUIRE(equal(one.span(), std::span<const std::byte>(data.data() + 3 * kBlock, kBlock)));
  fill(one.span(), 0x5A);
  REQUIRE(dev.write(0, one.data(), kBlock) == 0);
  REQUIRE(pread_file(img.path, 0, 1)[0] == std::byte{0x5A});
}

TEST_CASE("FileDevice: reads past the end fail, never return bytes", "[device]") {
  Image img;
  BlockDevice& dev = *img.dev;
  AlignedBuffer buf(2 * kBlock);
  fill(buf.span(), 0xAB);

  SECTION("out of bounds: EINVAL before anything runs") {
    auto r1 = req(IoRequest::Op::Read, dev.size_bytes(), buf.data(), kBlock);
    auto r2 = req(IoRequest::Op::Read, dev.size_bytes() - kBlock, buf.data(), 2 * kBlock);
    auto r3 = req(IoRequest::Op::Read, UINT64_MAX - kBlock + 1, buf.data(), kBlock);  // offset + length overflows
    std::vector<IoRequest> batch{r1, r2, r3};
    REQUIRE(dev.submit(batch) == EINVAL);
    for (const auto& r : batch) REQUIRE(r.result == EINVAL);
    REQUIRE(dev.write(dev.size_bytes(), buf.data(), kBlock) == EINVAL);
    REQUIRE(std::all_of(buf.data(), buf.data() + buf.size(), [](std::byte b) { return b == std::byte{0xAB}; }));
  }

  SECTION("image shrunk under the device: end of file is EIO, not zeroes") {
    REQUIRE(::truncate(img.path.c_str(), static_cast<off_t>(kImageSize / 2)) == 0);
    const int rc = dev.read(kImageSize - kBlock, buf.data(), kBlock);
    REQUIRE(rc == EIO);
    // Straddling the new end: a short read, then nothing: still EIO.
    REQUIRE(dev.read(kImageSize / 2 - kBlock, buf.data(), 2 * kBlock) == EIO);
  }
}

TEST_CASE("FileDevice: invalid requests fail with EINVAL and are not executed", "[device]") {
  Image img;
  BlockDevice& dev = *img.dev;
  const std::uint32_t bs = dev.block_size();
  AlignedBuffer known(2 * kBlock), junk(2 * kBlock), good(kBlock);
  std::mt19937_64 rng(7);
  fill_random(known.span(), rng);
  fill(junk.span(), 0xEE);
  fill(good.span(), 0x11);
  const std::uint64_t at = 100 * kBlock;
  REQUIRE(dev.write(at, known.data(), 2 * kBlock) == 0);

  std::vector<IoRequest> batch{
      req(IoRequest::Op::Write, at + bs / 2, junk.data(), kBlock),               // misaligned offset
      req(IoRequest::Op::Write, at, junk.data(), kBlock + bs / 2),               // misaligned length
      req(IoRequest::Op::Write, at, junk.data() + bs / 2, kBlock),               // misaligned buffer
      req(IoRequest::Op::Write, at, nullptr, kBlock),                            // no buffer
      req(IoRequest::Op::Write, at, junk.data(), 0),                             // empty
      req(IoRequest::Op::Write, 200 * kBlock, good.data(), kBlock),              // valid: runs
      req(IoRequest::Op::Write, dev.size_bytes() - kBlock, junk.data(), 2 * kBlock),  // crosses the end
  };
  REQUIRE(dev.submit(batch) == EINVAL);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    INFO("request " << i);
    REQUIRE(batch[i].result == (i == 5 ? 0 : EINVAL));
  }
  AlignedBuffer back(2 * kBlock);
  REQUIRE(dev.read(at, back.data(), 2 * kBlock) == 0);
  REQUIRE(equal(back.span(), known.span()));
  REQUIRE(dev.read(dev.size_bytes() - kBlock, back.data(), kBlock) == 0);
  REQUIRE(std::none_of(back.data(), back.data() + kBlock, [](std::byte b) { return b == std::byte{0xEE}; }));
  REQUIRE(dev.read(200 * kBlock, back.data(), kBlock) == 0);
  REQUIRE(back.data()[0] == std::byte{0x11});
}

TEST_CASE("FileDevice: batches much larger than the queue depth", "[device]") {
  Image img;
  auto dev = img.reopen(8);
  constexpr std::size_t n = 1000;
  AlignedBuffer data(n * kBlock), back(n * kBlock);
  std::mt19937_64 rng(3);
  fill_random(data.span(), rng);
  std::vector<IoRequest> batch;
  for (std::size_t i = 0; i < n; ++i) {
    batch.push_back(req(IoRequest::Op::Write, (n - 1 - i) * kBlock + kBlock, data.data() + i * kBlock, kBlock));
  }
  REQUIRE(dev->submit(batch) == 0);
  reads_into(batch, data, back);
  std::shuffle(batch.begin(), batch.end(), rng);
  REQUIRE(dev->submit(batch) == 0);
  for (const auto& r : batch) REQUIRE(r.result == 0);
  REQUIRE(equal(data.span(), back.span()));
}

TEST_CASE("FileDevice: submit_streaming tells each read as it arrives, with its bytes", "[device]") {
  Image img;
  auto dev = img.reopen(8);
  constexpr std::size_t n = 200;
  AlignedBuffer data(n * kBlock), back(n * kBlock);
  std::mt19937_64 rng(11);
  fill_random(data.span(), rng);
  for (std::size_t i = 0; i < n; ++i) data.data()[i * kBlock] |= std::byte{1};  // unlike an unread block
  std::vector<IoRequest> batch;
  for (std::size_t i = 0; i < n; ++i)
    batch.push_back(req(IoRequest::Op::Write, (2 * i + 1) * kBlock, data.data() + i * kBlock, kBlock));
  REQUIRE(dev->submit(batch) == 0);
  reads_into(batch, data, back);
  std::shuffle(batch.begin(), batch.end(), rng);
  AlignedBuffer spare(kBlock);
  batch.insert(batch.begin() + 50, req(IoRequest::Op::Read, 1, spare.data(), kBlock));  // invalid: never told
  fill(back.span(), 0);
  std::vector<int> told(batch.size(), 0);
  std::size_t unread_at_first = 0;
  bool bytes_there = true;
  const int rc = dev->submit_streaming(batch, [&](std::size_t i) {
    ++told[i];
    const auto* at = static_cast<const std::byte*>(batch[i].buffer);
    bytes_there = bytes_there && equal({at, kBlock}, {data.data() + (at - back.data()), kBlock});
    if (std::count(told.begin(), told.end(), 1) == 1)
      for (std::size_t k = 0; k < n; ++k) unread_at_first += back.data()[k * kBlock] == std::byte{0};
  });
  REQUIRE(rc == EINVAL);
  REQUIRE(bytes_there);
  for (std::size_t i = 0; i < batch.size(); ++i) REQUIRE(told[i] == (i == 50 ? 0 : 1));
  REQUIRE(equal(data.span(), back.span()));
  // The first was told while most of the batch (200 reads, 8 in flight) had
  // not been read yet: the caller works beside the device, not after it.
  REQUIRE(unread_at_first > n / 2);
}

TEST_CASE("BlockDevice: submit_streaming of other devices tells each success once, after the batch", "[device]") {
  MemoryDevice dev(1 << 20);
  std::vector<std::byte> pattern(kBlock, std::byte{0x5a});
  std::memcpy(dev.bytes().data() + kBlock, pattern.data(), kBlock);
  AlignedBuffer back(3 * kBlock);
  std::vector<IoRequest> batch{req(IoRequest::Op::Read, kBlock, back.data(), kBlock),
                               req(IoRequest::Op::Read, 2 * kBlock + 1, back.data() + kBlock, kBlock),
                               req(IoRequest::Op::Read, 0, back.data() + 2 * kBlock, kBlock)};
  std::vector<std::size_t> told;
  REQUIRE(dev.submit_streaming(batch, [&](std::size_t i) { told.push_back(i); }) == EINVAL);
  REQUIRE(told == std::vector<std::size_t>{0, 2});
  REQUIRE(equal({back.data(), kBlock}, pattern));
}

TEST_CASE("FileDevice: concurrent submit from several threads", "[device]") {
  Image img(16);
  BlockDevice& dev = *img.dev;
  constexpr int kThreads = 4, kRounds = 20, kPerBatch = 48;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      AlignedBuffer data(kPerBatch * kBlock), back(kPerBatch * kBlock);
      const std::uint64_t base = std::uint64_t(t) * (kImageSize / kThreads);
      for (int round = 0; round < kRounds; ++round) {
        fill_random(data.span(), rng);
        std::vector<IoRequest> w, r;
        for (int i = 0; i < kPerBatch; ++i) {
          const std::uint64_t off = base + std::uint64_t(round * kPerBatch + i) * kBlock;
          w.push_back(req(IoRequest::Op::Write, off, data.data() + i * kBlock, kBlock));
          r.push_back(req(IoRequest::Op::Read, off, back.data() + i * kBlock, kBlock));
        }
        std::shuffle(r.begin(), r.end(), rng);
        if (dev.submit(w) != 0 || dev.submit(r) != 0 || !equal(data.span(), back.span())) ++failures;
        if (round % 5 == 0 && dev.flush() != 0) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(failures == 0);
}

TEST_CASE("FileDevice: falls back to pread/pwrite when io_uring is unavailable", "[device]") {
  // Open the device on a thread whose seccomp filter refuses io_uring_setup
  // (filters are per thread: the rest of the process is not affected).
  Image img;
  std::unique_ptr<BlockDevice> dev;
  std::string why;
  std::thread([&] {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(std::size(filter)), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      why = std::string("cannot install a seccomp filter: ") + std::strerror(errno);
      return;
    }
    OpenOptions o = img.options;
    o.create = false;
    o.lock = false;  // img.dev stays open beside it
    int err = 0;
    dev = open_device(img.path, o, &err, &why);
  }).join();
  if (!dev && why.rfind("cannot install", 0) == 0) {
    WARN(why);
    return;
  }
  INFO(why);
  REQUIRE(dev);
  REQUIRE_FALSE(dynamic_cast<FileDevice&>(*dev).uses_io_uring());
  REQUIRE(dynamic_cast<FileDevice&>(*img.dev).uses_io_uring());

  AlignedBuffer data(16 * kBlock), back(16 * kBlock);
  std::mt19937_64 rng(5);
  fill_random(data.span(), rng);
  std::vector<IoRequest> batch;
  for (std::uint64_t i = 0; i < 16; ++i) {
    batch.push_back(req(IoRequest::Op::Write, (3 * i + 1) * kBlock, data.data() + i * kBlock, kBlock));
  }
  batch.push_back(req(IoRequest::Op::Write, 1, data.data(), kBlock));  // invalid
  REQUIRE(dev->submit(batch) == EINVAL);
  REQUIRE(dev->flush() == 0);
  reads_into(batch, data, back);
  batch.pop_back();
  REQUIRE(dev->submit(batch) == 0);
  REQUIRE(equal(data.span(), back.span()));
  // The io_uring device sees the same bytes.
  fill(back.span(), 0);
  REQUIRE(img.dev->submit(batch) == 0);
  REQUIRE(equal(data.span(), back.span()));
  REQUIRE(::truncate(img.path.c_str(), static_cast<off_t>(kImageSize / 2)) == 0);
  REQUIRE(dev->read(kImageSize - kBlock, back.data(), kBlock) == EIO);
}

TEST_CASE("open_device: errors name the path and the cause", "[device]") {
  ScratchDir dir("/var/tmp");
  REQUIRE(!dir.path.empty());
  int err = 0;
  std::string msg;

  SECTION("missing image without create") {
    const std::string path = dir.path + "/missing.img";
    OpenOptions o;
    o.direct = false;
    REQUIRE(open_device(path, o, &err, &msg) == nullptr);
    REQUIRE(err == ENOENT);
    REQUIRE_THAT(msg, Catch::Contains(path) && Catch::Contains("No such file"));
    REQUIRE(!stdfs::exists(path));
  }
  SECTION("a directory") {
    OpenOptions o;
    o.direct = false;
    REQUIRE(open_device(dir.path, o, &err, &msg) == nullptr);
    REQUIRE(err == EISDIR);
    REQUIRE_THAT(msg, Catch::Contains(dir.path) && Catch::Contains("directory"));
  }
  SECTION("a character device") {
    OpenOptions o;
    o.direct = false;
    REQUIRE(open_device("/dev/null", o, &err, &msg) == nullptr);
    REQUIRE(err == ENODEV);
    REQUIRE_THAT(msg, Catch::Contains("/dev/null") && Catch::Contains("not an image file or a block device"));
  }
  SECTION("create, grow sparsely, reopen read-only") {
    const std::string path = dir.path + "/new.img";
    OpenOptions o;
    o.direct = false;
    o.create = true;
    o.create_size = 1ull << 30;
    auto dev = open_device(path, o, &err, &msg);
    INFO(msg);
    REQUIRE(dev);
    REQUIRE(dev->size_bytes() == 1ull << 30);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    REQUIRE(st.st_size == 1ll << 30);
    REQUIRE(st.st_blocks * 512 < (1ll << 20));  // sparse
    dev.reset();

    OpenOptions ro;
    ro.direct = false;
    ro.read_only = true;
    dev = open_device(path, ro, &err, &msg);
    REQUIRE(dev);
    AlignedBuffer buf(kBlock);
    REQUIRE(dev->read(0, buf.data(), kBlock) == 0);
    REQUIRE(dev->write(0, buf.data(), kBlock) == EROFS);
    REQUIRE(dev->flush() == 0);
  }
  SECTION("one writer at a time: a second open of the same image is refused") {
    const std::string path = dir.path + "/busy.img";
    OpenOptions o;
    o.direct = false;
    o.create = true;
    o.create_size = 1ull << 20;
    auto first = open_device(path, o, &err, &msg);
    REQUIRE(first);
    REQUIRE(open_device(path, o, &err, &msg) == nullptr);
    CHECK(err == EBUSY);
    CHECK_THAT(msg, Catch::Contains(path) && Catch::Contains("in use"));
    OpenOptions ro;
    ro.direct = false;
    ro.read_only = true;
    CHECK(open_device(path, ro, &err, &msg) == nullptr);  // a checker would read a moving volume
    CHECK(err == EBUSY);
    first.reset();
    auto reader = open_device(path, ro, &err, &msg);
    REQUIRE(reader);
    CHECK(open_device(path, ro, &err, &msg) != nullptr);  // readers share
    CHECK(open_device(path, o, &err, &msg) == nullptr);   // not with a writer
    reader.reset();
    CHECK(open_device(path, o, &err, &msg) != nullptr);
  }
  SECTION("permission denied") {
    if (::geteuid() == 0) {
      WARN("running as root: permission checks do not apply");
    } else {
      const std::string path = dir.path + "/locked.img";
      REQUIRE(::close(::open(path.c_str(), O_CREAT | O_WRONLY, 0400)) == 0);
      OpenOptions o;
      o.direct = false;
      REQUIRE(open_device(path, o, &err, &msg) == nullptr);
      REQUIRE(err == EACCES);
      REQUIRE_THAT(msg, Catch::Contains(path) && Catch::Contains("Permission denied"));
    }
  }
}
