// NbdDevice: a BlockDevice over an NBD export through libnbd's asynchronous
// API (see fs/device/nbd_device.h for the I/O path, threads and errors).
#include "fs/device/nbd_device.h"

#include <libnbd.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace mmfs::fs {

bool is_nbd_uri(const std::string& target) {
  for (const char* scheme : {"nbd://", "nbds://", "nbd+unix://", "nbds+unix://", "nbd+vsock://", "nbds+vsock://"}) {
    if (target.rfind(scheme, 0) == 0) return true;
  }
  return false;
}

struct NbdDevice::Connection {
  nbd_handle* h = nullptr;
  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (h == nullptr) return;
    // A polite NBD_CMD_DISC when the connection is idle and healthy; never
    // waits for the server (nbd_shutdown would, on a hung one).
    if (nbd_aio_is_ready(h) == 1) (void)nbd_aio_disconnect(h, 0);
    nbd_close(h);
  }
};

struct NbdDevice::Command {
  std::size_t request = 0;  // index into the batch (unused for a flush)
  enum class Kind { Read, Write, Flush } kind = Kind::Read;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
  char* buffer = nullptr;
  int state = 0;      // 0 not sent, 1 in flight, 2 done
  int error = 0;      // the server's (or libnbd's) errno when done
  bool lost = false;  // the connection died before the command completed
  unsigned* in_flight = nullptr;    // run()'s counters, updated by the callback
  std::uint64_t* completed = nullptr;
};

namespace {

// libnbd's completion callback: records the outcome; returns 1 so libnbd
// retires the command itself (no nbd_aio_command_completed needed).
int on_complete(void* user_data, int* error) {
  auto* c = static_cast<NbdDevice::Command*>(user_data);
  if (c->state == 1) {
    c->state = 2;
    c->error = *error;
    --*c->in_flight;
    ++*c->completed;
  }
  return 1;
}

// True when the handle can carry no more commands.
bool connection_down(nbd_handle* h) { return nbd_aio_is_dead(h) == 1 || nbd_aio_is_closed(h) == 1; }

// Errors that say the connection failed, not the server's verdict on a command.
bool is_connection_errno(int e) {
  switch (e) {
    case ENOTCONN:
    case ESHUTDOWN:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case ETIMEDOUT:
    case EBADF:
      return true;
    default:
      return false;
  }
}

std::string nbd_error_text() {
  const char* e = nbd_get_error();
  return e != nullptr && *e != '\0' ? std::string(e) : std::string("unknown libnbd error");
}

// A connected handle for `uri`; nullptr with *err and *msg on failure.
std::unique_ptr<NbdDevice::Connection> open_connection(const std::string& uri, int* err, std::string* msg) {
  auto conn = std::make_unique<NbdDevice::Connection>();
  conn->h = nbd_create();
  if (conn->h == nullptr) {
    *err = nbd_get_errno() != 0 ? nbd_get_errno() : ENOMEM;
    *msg = nbd_error_text();
    return nullptr;
  }
  // The buffer of a failed read is never used (the request carries the
  // errno), so libnbd need not clear every read buffer first.
  (void)nbd_set_pread_initialize(conn->h, false);
  // A URI naming a local file (tls-psk-file=...) is refused: targets come
  // from command lines, and mmfs reads no files on a URI's say.
  (void)nbd_set_uri_allow_local_file(conn->h, false);
  if (nbd_connect_uri(conn->h, uri.c_str()) == -1) {
    *err = nbd_get_errno() != 0 ? nbd_get_errno() : ECONNREFUSED;
    *msg = nbd_error_text();
    return nullptr;
  }
  return conn;
}

}  // namespace

NbdDevice::NbdDevice(std::string uri, std::uint64_t size, std::uint32_t block_size, std::uint32_t max_request,
                     std::uint32_t iodepth, bool read_only, bool can_flush, unsigned max_connections,
                     std::unique_ptr<Connection> first)
    : uri_(std::move(uri)),
      size_(size),
      block_size_(block_size),
      max_request_(max_request),
      iodepth_(iodepth == 0 ? 1 : iodepth),
      read_only_(read_only),
      can_flush_(can_flush),
      max_connections_(max_connections) {
  free_.push_back(std::move(first));
  alive_ = 1;
}

NbdDevice::~NbdDevice() { free_.clear(); }  // every connection is back: submit() calls have returned

std::unique_ptr<NbdDevice> NbdDevice::open(const std::string& uri, const OpenOptions& options, int* error,
                                           std::string* message) {
  auto fail = [&](int err, std::string msg) -> std::unique_ptr<NbdDevice> {
    if (error) *error = err;
    if (message) *message = std::move(msg);
    return nullptr;
  };
  if (error) *error = 0;
  if (message) message->clear();
  if (!is_nbd_uri(uri)) return fail(EINVAL, fmt::format("{}: not an NBD URI", uri));

  int err = 0;
  std::string msg;
  auto conn = open_connection(uri, &err, &msg);
  if (!conn) return fail(err, fmt::format("{}: cannot connect to the NBD server: {}", uri, msg));
  nbd_handle* h = conn->h;

  const std::int64_t size = nbd_get_size(h);
  if (size < 0) return fail(EIO, fmt::format("{}: the NBD server gives no export size: {}", uri, nbd_error_text()));
  if (!options.read_only && nbd_is_read_only(h) == 1) {
    return fail(EROFS, fmt::format("{}: the NBD server exports it read-only, so it cannot be opened for writing "
                                   "(mount it with -o ro, check it with mmfsck -n, or serve the export writable)",
                                   uri));
  }
  const std::int64_t min_block = std::max<std::int64_t>(0, nbd_get_block_size(h, LIBNBD_SIZE_MINIMUM));
  const std::uint32_t block = static_cast<std::uint32_t>(std::max<std::int64_t>(512, min_block));
  if (block > kBufferAlignment || (block & (block - 1)) != 0) {
    return fail(EINVAL, fmt::format("{}: unsupported minimum block size {} of the NBD export (need a power of two "
                                    "up to {})",
                                    uri, block, kBufferAlignment));
  }
  std::int64_t max_block = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
  if (max_block <= 0 || max_block > kDefaultMaxRequest) max_block = kDefaultMaxRequest;
  const auto max_request = static_cast<std::uint32_t>(max_block - max_block % block);
  if (max_request < block) {
    return fail(EINVAL, fmt::format("{}: the NBD server's maximum request ({} bytes) is below its block size ({})",
                                    uri, max_block, block));
  }
  std::uint64_t usable = static_cast<std::uint64_t>(size);
  usable -= usable % block;  // a partial last block is not addressable
  if (options.create_size > usable) {
    return fail(ENOSPC, fmt::format("{}: the NBD export is {} bytes, less than the {} asked for; an export has the "
                                    "size its server gives it (serve a bigger one, or leave out -s)",
                                    uri, usable, options.create_size));
  }
  const bool can_flush = nbd_can_flush(h) == 1;
  const bool multi = nbd_can_multi_conn(h) == 1;
  return std::unique_ptr<NbdDevice>(new NbdDevice(uri, usable, block, max_request, options.iodepth,
                                                  options.read_only, can_flush, multi ? kMaxConnections : 1,
                                                  std::move(conn)));
}

int NbdDevice::validate(const IoRequest& r) const {
  if (r.op == IoRequest::Op::Write && read_only_) return EROFS;
  if (r.length == 0 || r.buffer == nullptr) return EINVAL;
  if (r.offset % block_size_ != 0 || r.length % block_size_ != 0) return EINVAL;
  if (reinterpret_cast<std::uintptr_t>(r.buffer) % block_size_ != 0) return EINVAL;
  if (r.offset > size_ || r.length > size_ - r.offset) return EINVAL;
  return 0;
}

std::unique_ptr<NbdDevice::Connection> NbdDevice::connect_again() {
  int err = 0;
  std::string msg;
  auto conn = open_connection(uri_, &err, &msg);
  if (!conn) return nullptr;
  // The same export, or nothing: a different size or block size means the
  // server now serves something else, and writing to it would be wrong.
  const std::int64_t size = nbd_get_size(conn->h);
  if (size < 0 || static_cast<std::uint64_t>(size) - static_cast<std::uint64_t>(size) % block_size_ != size_) {
    return nullptr;
  }
  if (!read_only_ && nbd_is_read_only(conn->h) == 1) return nullptr;
  if (std::max<std::int64_t>(0, nbd_get_block_size(conn->h, LIBNBD_SIZE_MINIMUM)) > block_size_) return nullptr;
  const std::int64_t max_block = nbd_get_block_size(conn->h, LIBNBD_SIZE_MAXIMUM);
  if (max_block > 0 && max_block < max_request_) return nullptr;
  return conn;
}

std::unique_ptr<NbdDevice::Connection> NbdDevice::acquire() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (!free_.empty()) {
      auto conn = std::move(free_.back());
      free_.pop_back();
      return conn;
    }
    if (alive_ < max_connections_) {
      ++alive_;  // reserve the slot, connect outside the lock
      lock.unlock();
      if (auto conn = connect_again()) return conn;
      lock.lock();
      --alive_;
      // Others may be waiting on the slot this thread held: let them look
      // again (without this, a waiter whose last hope was this reconnect
      // slept forever once the server was gone).
      cv_.notify_all();
      // The server cannot be reached: wait for a connection in use, unless
      // there is none (then the server is gone, as far as we can tell).
      if (alive_ == 0) return nullptr;
    }
    cv_.wait(lock);
  }
}

void NbdDevice::release(std::unique_ptr<Connection> conn) {
  {
    std::lock_guard lock(mu_);
    if (conn) {
      free_.push_back(std::move(conn));
    } else {
      --alive_;  // a dead connection was closed by its user
    }
  }
  cv_.notify_all();  // a dead one changes what every waiter should do
}

bool NbdDevice::run(Connection& conn, std::vector<Command>& commands) {
  using Clock = std::chrono::steady_clock;
  nbd_handle* h = conn.h;
  unsigned in_flight = 0;
  std::uint64_t completed = 0;
  std::size_t next = 0;
  bool dead = connection_down(h);
  std::uint64_t completed_at_check = 0;
  auto last_progress = Clock::now();

  while (!dead) {
    while (next < commands.size() && in_flight < iodepth_) {
      Command& c = commands[next++];
      c.in_flight = &in_flight;
      c.completed = &completed;
      nbd_completion_callback cb{};
      cb.callback = on_complete;
      cb.user_data = &c;
      c.state = 1;
      ++in_flight;
      std::int64_t cookie = -1;
      switch (c.kind) {
        case Command::Kind::Read:
          cookie = nbd_aio_pread(h, c.buffer, c.length, c.offset, cb, 0);
          break;
        case Command::Kind::Write:
          cookie = nbd_aio_pwrite(h, c.buffer, c.length, c.offset, cb, 0);
          break;
        case Command::Kind::Flush:
          cookie = nbd_aio_flush(h, cb, 0);
          break;
      }
      if (cookie == -1) {
        const int e = nbd_get_errno();
        if (c.state == 1) {  // not sent: the callback will not run
          c.state = 2;
          c.error = e != 0 ? e : EIO;
          --in_flight;
        }
        if (connection_down(h)) {  // refused because the connection is gone, not by the server
          c.lost = true;
          dead = true;
          break;
        }
      }
    }
    if (dead || (next == commands.size() && in_flight == 0)) break;
    if (in_flight == 0) continue;
    if (connection_down(h)) {
      dead = true;
      break;
    }

    const int fd = nbd_aio_get_fd(h);
    const unsigned dir = nbd_aio_get_direction(h);
    if (fd < 0) {
      dead = true;
      break;
    }
    pollfd p{};
    p.fd = fd;
    if (dir & LIBNBD_AIO_DIRECTION_READ) p.events |= POLLIN;
    if (dir & LIBNBD_AIO_DIRECTION_WRITE) p.events |= POLLOUT;
    // A bounded wait: the direction is asked again each time, and a server
    // that stops answering is noticed (kStallSeconds).
    const int r = ::poll(&p, 1, 1000);
    if (r < 0 && errno != EINTR) {
      dead = true;
      break;
    }
    if (r > 0) {
      const bool broken = (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
      int rc = 0;
      if ((p.revents & POLLIN) || (broken && (dir & LIBNBD_AIO_DIRECTION_READ))) rc = nbd_aio_notify_read(h);
      if (rc != -1 && ((p.revents & POLLOUT) || (broken && (dir & LIBNBD_AIO_DIRECTION_WRITE))))
        rc = nbd_aio_notify_write(h);
      if ((rc == -1 || (p.revents & POLLNVAL)) && connection_down(h)) {
        dead = true;
        break;
      }
      if (p.revents & POLLNVAL) {  // should not happen: the handle's socket is gone
        dead = true;
        break;
      }
    }
    const auto now = Clock::now();
    if (completed != completed_at_check) {
      completed_at_check = completed;
      last_progress = now;
    } else if (now - last_progress > std::chrono::seconds(kStallSeconds)) {
      dead = true;  // no reply for a long time: treat the server as gone
    }
  }

  // A command that failed for want of a connection means the connection is
  // gone, even where libnbd's state does not say so yet.
  for (std::size_t i = 0; i < next && !dead; ++i) {
    if (commands[i].state == 2 && is_connection_errno(commands[i].error)) dead = true;
  }
  if (dead) {
    for (std::size_t i = 0; i < commands.size(); ++i) {
      Command& c = commands[i];
      if (i >= next || c.state != 2 || c.lost || is_connection_errno(c.error)) {
        c.lost = true;
        c.state = 2;
      }
    }
  }
  return !dead;
}

int NbdDevice::submit(std::span<IoRequest> batch) {
  std::vector<Command> commands;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    IoRequest& q = batch[i];
    q.result = validate(q);
    if (q.result != 0) continue;
    for (std::uint32_t done = 0; done < q.length;) {
      Command c;
      c.request = i;
      c.kind = q.op == IoRequest::Op::Read ? Command::Kind::Read : Command::Kind::Write;
      c.offset = q.offset + done;
      c.length = std::min(max_request_, q.length - done);
      c.buffer = static_cast<char*>(q.buffer) + done;
      commands.push_back(c);
      done += c.length;
    }
  }
  if (!commands.empty()) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::vector<Command> todo;
      std::vector<std::size_t> where;  // index in `commands` of each of todo
      for (std::size_t k = 0; k < commands.size(); ++k) {
        if (attempt == 0 || commands[k].lost) {
          Command c = commands[k];
          c.state = 0;
          c.error = 0;
          c.lost = false;
          todo.push_back(c);
          where.push_back(k);
        }
      }
      if (todo.empty()) break;
      if (auto conn = acquire()) {
        if (!run(*conn, todo)) conn.reset();  // dead: closed now, while `todo` is alive for its callbacks
        release(std::move(conn));
      } else {
        for (Command& c : todo) c.lost = true;
      }
      for (std::size_t j = 0; j < todo.size(); ++j) commands[where[j]] = todo[j];
    }
    for (const Command& c : commands) {
      IoRequest& q = batch[c.request];
      if (q.result != 0) continue;
      if (c.lost) {
        q.result = EIO;
      } else if (c.error != 0) {
        q.result = c.error;
      }
    }
  }
  for (const IoRequest& r : batch) {
    if (r.result != 0) return r.result;
  }
  return 0;
}

int NbdDevice::flush() {
  if (read_only_ || !can_flush_) return 0;
  std::vector<Command> commands(1);
  commands[0].kind = Command::Kind::Flush;
  auto conn = acquire();
  if (!conn) return EIO;
  if (!run(*conn, commands)) conn.reset();  // dead: closed while `commands` is alive
  release(std::move(conn));
  // Not retried: a flush on a fresh connection would not cover the writes
  // the dead one completed (they may be gone with the server's cache).
  if (commands[0].lost) return EIO;
  return commands[0].error;
}

}  // namespace mmfs::fs
