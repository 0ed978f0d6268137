// Typed errors thrown by the core library. The extension maps each code to a
// SQLSTATE at its boundary; nothing here knows about PostgreSQL.
#pragma once

#include <stdexcept>
#include <string>

namespace gknn {

enum class ErrorCode {
  InvalidArgument,  // bad sizes or parameters from the caller
  NoDevice,         // a GPU was required and none is usable
  OutOfMemory,      // host or device allocation failed
  DeviceFault,      // any other CUDA failure
  Cancelled,        // a progress callback asked to stop (query cancel)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace gknn
