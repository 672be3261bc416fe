#include "indexes/values.h"
