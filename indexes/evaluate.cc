#include "indexes/evaluate.h"
