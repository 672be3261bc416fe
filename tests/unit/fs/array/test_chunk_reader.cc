// The read side of an array file (fs/array/chunk_reader.h) over a fake
// source: a chunk is loaded once and then served from the cache until the
// contents' generation changes or the cache is cleared; a failed load is
// reported and tried again by the next reader; a sequential reader gets the
// chunks after its own loaded ahead, each chunk still loaded once.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "fs/array/chunk_reader.h"
#include "layouts/selection.h"

using namespace mmfs::fs;

namespace {

// Chunk i of generation g is chunk_bytes bytes of (i + 16 g) & 0xff.
class FakeSource final : public ChunkSource {
 public:
  int load_chunk(const DataView& view, std::uint64_t index, AlignedBuffer* out, std::string* message,
                 const std::function<void()>& device_done) override {
    {
      std::lock_guard lock(mu);
      ++loads[{view.spelling, index}];
      if (failing.count(index)) {
        *message = "bad sector";
        return EIO;
      }
    }
    *out = AlignedBuffer(view.chunk_bytes);
    std::memset(out->data(), int((index + 16 * gen) & 0xff), view.chunk_bytes);
    if (device_done) device_done();
    return 0;
  }
  std::uint64_t generation() const override { return gen; }

  std::uint64_t loads_of(const std::string& spelling, std::uint64_t index) {
    std::lock_guard lock(mu);
    return loads[{spelling, index}];
  }

  std::mutex mu;
  std::map<std::pair<std::string, std::uint64_t>, std::uint64_t> loads;
  std::set<std::uint64_t> failing;
  std::uint64_t gen = 0;
};

DataView view_of(const std::string& spelling, std::uint64_t chunk_bytes) {
  DataView v;
  v.spelling = spelling;
  v.chunk_bytes = chunk_bytes;
  return v;
}

// The byte every byte of the chunk holds (checked to be the same throughout).
int filled_with(const ChunkReader::Chunk& c) {
  REQUIRE(c);
  const auto* p = reinterpret_cast<const unsigned char*>(c->data());
  std::size_t other = 0;
  for (std::size_t i = 1; i < c->size(); ++i) other += p[i] != p[0];
  REQUIRE(other == 0);
  return p[0];
}

}  // namespace

TEST_CASE("chunk reader: a chunk is loaded once, then cached until its generation or a clear", "[chunk_reader]") {
  auto source = std::make_shared<FakeSource>();
  ChunkReader reader(1 << 20);
  reader.quiesce();  // no prefetching here
  const DataView v = view_of("slice/0/1", 4096);
  ChunkReader::Chunk c;
  std::string msg;
  REQUIRE(reader.reader_chunk(source, v, 5, 100, &c, &msg) == 0);
  CHECK(filled_with(c) == 5);
  CHECK(c->size() == 4096);
  REQUIRE(reader.reader_chunk(source, v, 5, 100, &c, &msg) == 0);
  CHECK(source->loads_of("slice/0/1", 5) == 1);
  CHECK(reader.stats().loads == 1);
  // Another view, another chunk.
  REQUIRE(reader.reader_chunk(source, view_of("slice/0/2", 4096), 5, 100, &c, &msg) == 0);
  CHECK(source->loads_of("slice/0/2", 5) == 1);
  // The contents changed: never the older chunk again.
  source->gen = 1;
  REQUIRE(reader.reader_chunk(source, v, 5, 100, &c, &msg) == 0);
  CHECK(filled_with(c) == 5 + 16);
  CHECK(source->loads_of("slice/0/1", 5) == 2);
  reader.clear();
  REQUIRE(reader.reader_chunk(source, v, 5, 100, &c, &msg) == 0);
  CHECK(source->loads_of("slice/0/1", 5) == 3);
  CHECK(reader.stats().loads == 4);
  CHECK(reader.stats().prefetched == 0);
}

TEST_CASE("chunk reader: a failed load is reported and tried again by the next reader", "[chunk_reader]") {
  auto source = std::make_shared<FakeSource>();
  ChunkReader reader(1 << 20);
  reader.quiesce();
  const DataView v = view_of("all", 512);
  source->failing = {7};
  ChunkReader::Chunk c;
  std::string msg;
  CHECK(reader.reader_chunk(source, v, 7, 10, &c, &msg) == EIO);
  CHECK(msg == "bad sector");
  msg.clear();
  CHECK(reader.reader_chunk(source, v, 7, 10, &c, &msg) == EIO);
  CHECK(source->loads_of("all", 7) == 2);  // nothing of the failure was kept
  source->failing.clear();
  REQUIRE(reader.reader_chunk(source, v, 7, 10, &c, &msg) == 0);
  CHECK(filled_with(c) == 7);
}

TEST_CASE("chunk reader: a sequential reader's next chunks are loaded ahead, each once", "[chunk_reader]") {
  auto source = std::make_shared<FakeSource>();
  ChunkReader reader(1 << 20);
  const DataView v = view_of("box/0:20", 1 << 20);
  const std::uint64_t chunks = 20;
  for (std::uint64_t i = 0; i < chunks; ++i) {
    ChunkReader::Chunk c;
    std::string msg;
    REQUIRE(reader.reader_chunk(source, v, i, chunks, &c, &msg) == 0);
    CHECK(filled_with(c) == int(i));
  }
  reader.wait_for_prefetches();
  for (std::uint64_t i = 0; i < chunks; ++i) {
    INFO("chunk " << i);
    CHECK(source->loads_of("box/0:20", i) == 1);
  }
  CHECK(source->loads_of("box/0:20", chunks) == 0);  // none past the end
  const ChunkStats st = reader.stats();
  CHECK(st.loads == chunks);
  CHECK(st.prefetched >= 3);  // at least those queued after the first chunk
  CHECK(st.prefetched < chunks);
  reader.quiesce();
}
