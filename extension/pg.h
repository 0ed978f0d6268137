// The one include of PostgreSQL's C headers for gknn's C++ files.
#pragma once

extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
}
