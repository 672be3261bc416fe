// libFuzzer target over every decoder of on-disk bytes: the superblock, the
// metadata region header, log chunks, checkpoints, inode and extent records, keys,
// and a whole MetaStore::open + Volume metadata walk on a device built from
// the input. Run it with tools/fuzz.sh (not part of CI).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fs/device/fault_device.h"
#include "fs/meta/keys.h"
#include "fs/meta/meta_codec.h"
#include "fs/meta/meta_store.h"
#include "fs/meta/metadata.h"
#include "fs/meta/superblock.h"

using namespace mmfs::fs;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  SuperblockStatus status;
  (void)decode_superblock(in, &status);
  (void)meta::decode_region_header(in);
  (void)meta::decode_chunk_header(in);
  (void)meta::decode_chunk(in);
  (void)meta::decode_checkpoint_header(in);
  (void)meta::decode_checkpoint(in);
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)decode_inode(text);
  (void)decode_extents(text);
  (void)keys::parse(text);

  // The input as the first bytes of a metadata region on a 256 KiB device.
  MemoryDevice dev(256 * 1024, 512);
  std::memcpy(dev.bytes().data(), data, std::min<std::size_t>(size, dev.bytes().size()));
  int err = 0;
  std::string message;
  if (auto store = MetaStore::open(dev, {0, 256 * 1024}, &err, &message)) {
    store->scan("", [](std::string_view key, std::string_view value) {
      if (key.starts_with(keys::scan_prefix(keys::Kind::Inode))) (void)decode_inode(value);
      if (key.starts_with(keys::scan_prefix(keys::Kind::Extents))) (void)decode_extents(value);
      return true;
    });
  }
  return 0;
}
