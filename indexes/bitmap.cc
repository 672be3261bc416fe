#include "indexes/bitmap.h"
