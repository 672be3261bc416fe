#include "indexes/scan.h"
