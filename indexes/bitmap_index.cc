#include "indexes/bitmap_index.h"
