#include "runtime/cublas_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace gknn {

namespace {

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  return *out != nullptr;
}

}  // namespace

const Cublas* load_cublas(const char** why) {
  static std::once_flag once;
  static Cublas table;
  static const Cublas* loaded = nullptr;
  static const char* failure = "libcublas not found (set GKNN_CUBLAS to its path)";
  std::call_once(once, [] {
    const char* candidates[] = {std::getenv("GKNN_CUBLAS"), "libcublas.so.13", "libcublas.so"};
    void* lib = nullptr;
    for (const char* c : candidates)
      if (c && *c && (lib = dlopen(c, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) return;
    if (resolve(lib, "cublasCreate_v2", &table.create) && resolve(lib, "cublasDestroy_v2", &table.destroy) &&
        resolve(lib, "cublasSetStream_v2", &table.set_stream) && resolve(lib, "cublasGemmEx", &table.gemm_ex))
      loaded = &table;
    else
      failure = "libcublas lacks an expected symbol";
  });
  if (!loaded && why) *why = failure;
  return loaded;
}

}  // namespace gknn
