#include "indexes/binning.h"
