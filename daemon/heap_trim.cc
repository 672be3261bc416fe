#include "daemon/heap_trim.h"

#include <malloc.h>

namespace mmfs::daemon {

bool trim_free_heap(std::size_t reserve) {
  struct mallinfo2 info = mallinfo2();
  if (info.fordblks <= reserve) return false;
  malloc_trim(0);
  return true;
}

}  // namespace mmfs::daemon
