// Finding a mount's backing device in /proc/self/mountinfo (daemon/mount_readahead.h).
#include <catch2/catch.hpp>

#include "daemon/mount_readahead.h"

using mmfs::daemon::mount_device;

TEST_CASE("mount_device finds the topmost mount on a path in mountinfo", "[readahead]") {
  const std::string info =
      "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
      "40 22 0:39 / /var/tmp/mnt rw,nosuid,nodev,relatime shared:20 - fuse.mmfs /var/tmp/a.img rw,user_id=0\n"
      "41 22 0:40 / /var/tmp/with\\040space rw,relatime shared:21 - fuse.mmfs /x.img rw\n"
      "42 40 0:41 / /var/tmp/mnt rw,relatime shared:22 - fuse.mmfs /var/tmp/b.img rw\n"
      "43 22 0:42 / /var/tmp/back\\134slash rw - tmpfs tmpfs rw";  // no final newline
  CHECK(mount_device(info, "/var/tmp/mnt") == "0:41");  // mounted over 0:39
  CHECK(mount_device(info, "/var/tmp/with space") == "0:40");
  CHECK(mount_device(info, "/var/tmp/back\\slash") == "0:42");
  CHECK(mount_device(info, "/") == "254:0");
  CHECK(mount_device(info, "/var/tmp").empty());
  CHECK(mount_device(info, "/var/tmp/mn").empty());
  CHECK(mount_device("", "/").empty());
  CHECK(mount_device("garbage line\n\n12 3\n", "/").empty());
}
