// After mmfsck --rebuild of a RAID 0 member (fs/volume/volume_members.cc):
// the data that lay on the member, put back where a second copy exists.
//
// A RAID 0 member's data has no mirror, but an array's copies lie on other
// members (fs/array/member_sets.h): every array with copies whose sectors
// touch the member is opened, its copies caught up, and every cell that
// fails its checksum in any placement (the new member holds no bytes of
// its own) rewritten from a placement that reads it clean
// (ArrayFile::repair_placements; an mloc image, the primary's or a copy's,
// is encoded anew). A bitmap index that lay on the member is built anew
// from its array's data once that reads whole (the data did not lie on the
// member, or its copies put it back). What lay on the member without a
// second copy — plain files, arrays without copies (their mloc images and
// indexes too) — is listed as lost: its reads fail their checksums (EIO).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fs/volume/volume.h"

namespace mmfs::fs {

struct MemberRepairReport {
  std::uint64_t arrays = 0;          // arrays with copies repaired
  std::uint64_t cells = 0;           // cells rewritten from another placement
  std::uint64_t indexes = 0;         // bitmap indexes built anew from their data
  std::vector<std::string> lost;     // "path: what" for data that had no second copy
  std::vector<std::string> failed;   // "path: why" for arrays whose repair failed
};

// Repairs what lay on stripe member `member` of `volume` (opened whole).
// 0, or an errno with *message when the volume is not one of several members.
int repair_member_data(Volume& volume, std::uint32_t member, MemberRepairReport* report, std::string* message);

}  // namespace mmfs::fs
