// The boundary between PostgreSQL and the core library. Core calls may throw;
// ereport() longjmps. Neither may cross the other's frames, so a core call
// runs inside try/catch with no PostgreSQL calls of its own, and the error is
// raised with ereport only after every C++ frame has unwound.
#pragma once

#include <cstring>
#include <exception>
#include <new>

#include "gknn/error.h"
#include "pg.h"

extern "C" {
#include "utils/elog.h"
}

namespace gknn_pg {

inline int sqlstate_for(gknn::ErrorCode code) {
  switch (code) {
    case gknn::ErrorCode::InvalidArgument:
      return ERRCODE_INVALID_PARAMETER_VALUE;
    case gknn::ErrorCode::NoDevice:
      return ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
    case gknn::ErrorCode::OutOfMemory:
      return ERRCODE_OUT_OF_MEMORY;
    case gknn::ErrorCode::DeviceFault:
      return ERRCODE_SYSTEM_ERROR;
    case gknn::ErrorCode::Cancelled:
      return ERRCODE_QUERY_CANCELED;
  }
  return ERRCODE_INTERNAL_ERROR;
}

struct CoreFailure {
  bool failed = false;
  int sqlstate = 0;
  char message[512];
};

// Runs `fn` (core library code only: no palloc, no ereport) and reports a
// thrown error as a SQL error once the C++ frames are gone.
template <typename Fn>
void core_call(Fn&& fn) {
  CoreFailure f;
  auto record = [&f](int sqlstate, const char* what) {
    f.failed = true;
    f.sqlstate = sqlstate;
    strlcpy(f.message, what, sizeof(f.message));
  };
  try {
    fn();
  } catch (const gknn::Error& e) {
    record(sqlstate_for(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    record(ERRCODE_OUT_OF_MEMORY, "out of memory in gknn core library");
  } catch (const std::exception& e) {
    record(ERRCODE_INTERNAL_ERROR, e.what());
  } catch (...) {
    record(ERRCODE_INTERNAL_ERROR, "unknown error in gknn core library");
  }
  if (f.failed) ereport(ERROR, (errcode(f.sqlstate), errmsg("gknn: %s", f.message)));
}

}  // namespace gknn_pg
