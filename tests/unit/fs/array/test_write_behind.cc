// Write-behind (fs/array/write_behind.h): queued writes are applied in order by one
// worker; whatever locks the array first waits for the writes queued before
// it; a failed queued write is reported once, by the next write, FLUSH or
// fsync; the array file's daemon path (ArrayFile::write_behind) against a
// byte model, EFBIG at once, and a device that fails under queued writes.
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "tests/unit/support/array_test_support.h"
#include "fs/array/array_file.h"
#include "fs/device/fault_device.h"
#include "fs/array/write_behind.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/write_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace testing::arrays;

using namespace testing::writes;

TEST_CASE("write-behind applies writes in order and drain waits for the queued ones", "[write_behind]") {
  std::vector<std::pair<std::uint64_t, std::uint8_t>> seen;  // (offset, first byte), in apply order
  std::mutex seen_mu;
  std::atomic<bool> slow{true};
  WriteBehind wb([&](std::uint64_t off, const std::byte* data, std::size_t, std::string*) {
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard lock(seen_mu);
    seen.push_back({off, std::uint8_t(data[0])});
    return 0;
  });
  std::string msg;
  for (std::uint8_t i = 0; i < 20; ++i) {
    Bytes b(1000, i);
    REQUIRE(wb.submit(i * 1000, as_bytes(b), b.size(), &msg) == 0);
    b.assign(b.size(), 0xFF);  // the queue holds a copy
  }
  wb.drain();
  {
    std::lock_guard lock(seen_mu);
    REQUIRE(seen.size() == 20);
    for (std::uint8_t i = 0; i < 20; ++i) CHECK(seen[i] == std::make_pair(std::uint64_t(i) * 1000, i));
  }
  CHECK(wb.take_error(&msg) == 0);
  // The worker stops when idle and starts again with the next write.
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  Bytes b(10, 42);
  REQUIRE(wb.submit(7, as_bytes(b), b.size(), &msg) == 0);
  wb.drain();
  std::lock_guard lock(seen_mu);
  REQUIRE(seen.size() == 21);
  CHECK(seen.back() == std::make_pair(std::uint64_t(7), std::uint8_t(42)));
}

TEST_CASE("a draining mutex sees every write queued before it; the worker takes it without waiting for itself",
          "[write_behind]") {
  DrainingSharedMutex mu;
  int applied = 0;  // guarded by mu
  WriteBehind wb([&](std::uint64_t, const std::byte*, std::size_t, std::string*) {
    // The worker locks the same mutex, as ArrayFile::write does: no drain, no deadlock.
    std::unique_lock lock(mu);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++applied;
    return 0;
  });
  mu.set_write_behind(&wb);
  std::string msg;
  Bytes b(64, 1);
  for (int i = 0; i < 50; ++i) REQUIRE(wb.submit(0, as_bytes(b), b.size(), &msg) == 0);
  {
    std::shared_lock lock(mu);
    CHECK(applied == 50);
  }
  for (int i = 0; i < 10; ++i) REQUIRE(wb.submit(0, as_bytes(b), b.size(), &msg) == 0);
  std::unique_lock lock(mu);
  CHECK(applied == 60);
}

TEST_CASE("a failed queued write is reported once, by the next write or take_error", "[write_behind]") {
  std::atomic<int> calls{0};
  WriteBehind wb([&](std::uint64_t off, const std::byte*, std::size_t, std::string* message) {
    ++calls;
    if (off == 13) {
      *message = "cells could not be written back";
      return EIO;
    }
    return 0;
  });
  std::string msg;
  Bytes b(8, 0);
  REQUIRE(wb.submit(13, as_bytes(b), b.size(), &msg) == 0);  // its reply went out before it failed
  wb.drain();
  CHECK(wb.submit(0, as_bytes(b), b.size(), &msg) == EIO);  // the next write reports it, and is not queued
  CHECK(msg == "cells could not be written back");
  CHECK(wb.take_error(&msg) == 0);  // once
  REQUIRE(wb.submit(13, as_bytes(b), b.size(), &msg) == 0);
  msg.clear();
  CHECK(wb.take_error(&msg) == EIO);  // take_error waits for it
  CHECK(msg == "cells could not be written back");
  CHECK(wb.take_error(&msg) == 0);
  CHECK(calls == 2);
}

TEST_CASE("write-behind bounds the bytes queued: a writer past the limit waits for the worker", "[write_behind]") {
  std::atomic<std::size_t> most{0};
  std::atomic<std::size_t> queued{0};
  WriteBehind wb([&](std::uint64_t, const std::byte*, std::size_t n, std::string*) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    queued -= n;
    return 0;
  });
  std::string msg;
  Bytes b(1 << 20, 3);
  for (int i = 0; i < 64; ++i) {
    queued += b.size();
    REQUIRE(wb.submit(0, as_bytes(b), b.size(), &msg) == 0);
    most = std::max<std::size_t>(most, queued);
  }
  wb.drain();
  // What submit() returned on top of what the worker had not finished: the
  // limit, plus the write being applied.
  CHECK(most <= WriteBehind::kMaxQueuedBytes + b.size());
}

TEST_CASE("array file: queued writes match a byte model; EFBIG at once; reads and views wait for them",
          "[write_behind][array_file]") {
  auto g = toy_disk();
  auto golden = formatted(*g);
  for (const char* layout : {"naive", "hilbert", "multimap"}) {
    INFO("layout " << layout);
    Mount m = mount(copy_of(*golden));
    auto a = create_array(m, "wb", make_schema({24, 20, 18}, "float64", layout));
    const std::uint64_t N = a->size();
    Bytes model(N, 0);
    std::mt19937_64 rng(5);
    std::string msg;
    for (int i = 0; i < 200; ++i) {
      const std::uint64_t at = rng() % N, n = 1 + rng() % std::min<std::uint64_t>(N - at, 5000);
      Bytes piece(n);
      for (auto& x : piece) x = std::uint8_t(rng());
      REQUIRE(a->write_behind(at, as_bytes(piece), n, &msg) == 0);
      std::copy(piece.begin(), piece.end(), model.begin() + std::ptrdiff_t(at));
      if (i % 50 == 49) {  // a read right after the writes sees all of them
        Bytes got(N);
        std::size_t read = 0;
        REQUIRE(a->read(0, N, reinterpret_cast<std::byte*>(got.data()), &read, &msg) == 0);
        REQUIRE(read == N);
        CHECK(differing(got, model) == 0);
      }
    }
    CHECK(a->write_behind(N - 3, as_bytes(Bytes(4, 1)), 4, &msg) == EFBIG);
    CHECK(a->write_behind(N + 1, as_bytes(Bytes(1, 1)), 1, &msg) == EFBIG);
    REQUIRE(a->flush(true, &msg) == 0);
    auto b = open_stored(m, a->ino());
    Bytes got(N);
    std::size_t read = 0;
    REQUIRE(b->read(0, N, reinterpret_cast<std::byte*>(got.data()), &read, &msg) == 0);
    CHECK(differing(got, model) == 0);
  }
}

TEST_CASE("array file: a device that fails under queued writes is reported by the next write or fsync",
          "[write_behind][array_file]") {
  auto g = toy_disk();
  auto golden = formatted(*g);
  auto* fault = new FaultInjectingDevice(copy_of(*golden), 3);
  Mount m = mount(std::unique_ptr<BlockDevice>(fault));
  auto a = create_array(m, "wb", make_schema({64, 64, 64}, "float64", "naive"));  // 2 MiB
  fault->fail_after(fault->events());  // every write and flush from now on fails with EIO
  std::string msg;
  Bytes chunk(256 << 10, 7);
  int r = 0;
  // Enough to pass the dirty limit (64 MiB) many times over would take long;
  // fsync writes the cells back instead.
  for (std::uint64_t off = 0; off < a->size() && r == 0; off += chunk.size())
    r = a->write_behind(off, as_bytes(chunk), chunk.size(), &msg);
  CHECK(r == 0);
  msg.clear();
  CHECK(a->flush(true, &msg) == EIO);
  CHECK_FALSE(msg.empty());
}
