// The BlockDevice of an NBD export (open_device() in fs/device/block_device.h
// returns one for a target that is an NBD URI: nbd://HOST[:PORT]/EXPORT,
// nbds://..., nbd+unix:///EXPORT?socket=PATH, nbds+unix://...). The client is
// libnbd; the network protocol is NBD's, nothing of our own.
//
// I/O path: libnbd's asynchronous API. Each submit() call borrows one
// connection (an nbd_handle) from a per-device pool for its whole batch and
// keeps up to `iodepth` NBD commands of that batch in flight
// (nbd_aio_pread / nbd_aio_pwrite with completion callbacks), driving the
// handle itself: poll(2) on nbd_aio_get_fd() in the direction
// nbd_aio_get_direction() asks, then nbd_aio_notify_read/write. A request
// longer than the server's maximum block size (nbd_get_block_size, 32 MiB
// when the server names none) is split into several commands; its `result`
// is the first error of any of them.
//
// Threads: a connection is used by one submit() or flush() at a time, so
// concurrent calls from several threads each get their own connection
// (opened on demand, at most kMaxConnections) when the server advertises
// multi-conn (NBD_FLAG_CAN_MULTI_CONN: what one connection completes is seen
// by the others, and a flush on one covers them all). Without multi-conn the
// pool has one connection and concurrent calls take turns with it (the NBD
// spec promises no consistency between connections then).
//
// Errors: every request is validated as FileDevice does (EINVAL for
// misalignment, EROFS for a write on a read-only device) before anything is
// sent. An error the server reports for a command is that request's errno. A
// connection that dies (the server exits, the socket closes, or no reply
// arrives for kStallSeconds while commands are in flight) fails its
// unfinished requests; they are retried once on a fresh connection, and if
// none can be opened (the server is gone) they end with EIO. The dead
// connection is dropped; a later call connects again, so a server that comes
// back (with an export of the same size) is used again. Nothing here
// throws or aborts on a dead server; libnbd sends with MSG_NOSIGNAL.
//
// Flush: NBD_CMD_FLUSH when the server advertises it (nbd_can_flush);
// otherwise flush() returns 0: a server that offers no flush has no volatile
// write cache to flush (NBD spec, "NBD_FLAG_SEND_FLUSH").
//
// What does not apply to NBD targets: flock (the server decides who may
// connect; a second writer is not detected), O_DIRECT (the server caches or
// not), creating or growing (an export has the size its server gives it:
// OpenOptions::create_size larger than the export is refused with ENOSPC).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fs/device/block_device.h"

namespace mmfs::fs {

// True when `target` names an NBD export (nbd://, nbds://, nbd+unix://,
// nbds+unix://, nbd+vsock://, nbds+vsock://) rather than a path.
bool is_nbd_uri(const std::string& target);

class NbdDevice final : public BlockDevice {
 public:
  static constexpr unsigned kMaxConnections = 8;
  static constexpr int kStallSeconds = 60;                 // no reply this long: the connection is dead
  static constexpr std::uint32_t kDefaultMaxRequest = 32u << 20;  // the server names no maximum

  // Connects to `uri` and checks the export (size, block sizes, read-only).
  // Returns nullptr and sets *error (errno) and *message on failure.
  static std::unique_ptr<NbdDevice> open(const std::string& uri, const OpenOptions& options, int* error,
                                         std::string* message);
  ~NbdDevice() override;
  NbdDevice(const NbdDevice&) = delete;
  NbdDevice& operator=(const NbdDevice&) = delete;

  std::uint64_t size_bytes() const override { return size_; }
  std::uint32_t block_size() const override { return block_size_; }
  int submit(std::span<IoRequest> batch) override;
  int flush() override;

  // For tests and tools: the largest command sent, whether the server flushes
  // and shares state between connections, and the queue depth of one submit().
  std::uint32_t max_request() const { return max_request_; }
  bool can_flush() const { return can_flush_; }
  bool multi_conn() const { return max_connections_ > 1; }
  std::uint32_t iodepth() const { return iodepth_; }
  const std::string& uri() const { return uri_; }

  struct Connection;  // one nbd_handle (defined in nbd_device.cc)
  struct Command;     // one NBD command of a batch

 private:
  NbdDevice(std::string uri, std::uint64_t size, std::uint32_t block_size, std::uint32_t max_request,
            std::uint32_t iodepth, bool read_only, bool can_flush, unsigned max_connections,
            std::unique_ptr<Connection> first);

  int validate(const IoRequest& r) const;
  // Runs `commands` on `conn`, up to iodepth in flight. Returns false when the
  // connection died (it must then be dropped); commands it could not finish
  // are marked lost.
  bool run(Connection& conn, std::vector<Command>& commands);
  std::unique_ptr<Connection> connect_again();  // a new connection to the same export, or nullptr
  std::unique_ptr<Connection> acquire();        // nullptr: no connection can be made
  void release(std::unique_ptr<Connection> conn);  // nullptr: the borrowed one died

  std::string uri_;
  std::uint64_t size_;
  std::uint32_t block_size_;
  std::uint32_t max_request_;
  std::uint32_t iodepth_;
  bool read_only_;
  bool can_flush_;
  unsigned max_connections_;

  std::mutex mu_;                                // guards free_ and alive_
  std::condition_variable cv_;                   // signalled when a connection is released
  std::vector<std::unique_ptr<Connection>> free_;  // GUARDED_BY(mu_)
  unsigned alive_ = 0;                           // GUARDED_BY(mu_): free + borrowed + being opened
};

}  // namespace mmfs::fs
