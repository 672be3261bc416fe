#include "indexes/condition.h"
