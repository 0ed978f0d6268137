#include "vecfile.h"

#include <algorithm>
#include <stdexcept>
#include <sys/stat.h>

namespace gknn_bench {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

template <typename T>
Matrix<T> read_vecs(const std::string& path, std::int64_t first, std::int64_t max_rows) {
  Matrix<T> m;
  std::int64_t rows = 0;
  vecs_shape(path, sizeof(T), &rows, &m.dim);
  first = std::min(std::max<std::int64_t>(first, 0), rows);
  m.rows = max_rows < 0 ? rows - first : std::min(rows - first, max_rows);
  m.data.resize(static_cast<std::size_t>(m.rows) * m.dim);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(path, "cannot open");
  const auto row_bytes = static_cast<off_t>(sizeof(std::int32_t) + m.dim * sizeof(T));
  if (fseeko(f, first * row_bytes, SEEK_SET) != 0) {
    std::fclose(f);
    fail(path, "cannot seek");
  }
  for (std::int64_t i = 0; i < m.rows; ++i) {
    std::int32_t d = 0;
    bool ok = std::fread(&d, sizeof d, 1, f) == 1 && d == m.dim &&
              std::fread(m.data.data() + i * m.dim, sizeof(T), m.dim, f) == static_cast<std::size_t>(m.dim);
    if (!ok) {
      std::fclose(f);
      fail(path, "row " + std::to_string(i) + " is short or has another dimension");
    }
  }
  std::fclose(f);
  return m;
}

}  // namespace

void vecs_shape(const std::string& path, std::size_t elem_size, std::int64_t* rows, int* dim) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) fail(path, "cannot stat");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(path, "cannot open");
  std::int32_t d = 0;
  bool ok = std::fread(&d, sizeof d, 1, f) == 1;
  std::fclose(f);
  if (!ok || d <= 0) fail(path, "no valid first row");
  const auto row_bytes = static_cast<std::int64_t>(sizeof(std::int32_t) + d * elem_size);
  if (st.st_size % row_bytes != 0) fail(path, "size is not a whole number of rows");
  *rows = st.st_size / row_bytes;
  *dim = d;
}

FloatMatrix read_fvecs(const std::string& path, std::int64_t max_rows) {
  return read_vecs<float>(path, 0, max_rows);
}

FloatMatrix read_fvecs_range(const std::string& path, std::int64_t first, std::int64_t max_rows) {
  return read_vecs<float>(path, first, max_rows);
}

IntMatrix read_ivecs(const std::string& path, std::int64_t max_rows) {
  return read_vecs<std::int32_t>(path, 0, max_rows);
}

VecsWriter::VecsWriter(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "wb")) {
  if (!file_) fail(path, "cannot create");
}

VecsWriter::~VecsWriter() {
  if (file_) std::fclose(file_);
}

void VecsWriter::write_raw(const void* values, int dim, std::size_t elem_size) {
  const std::int32_t d = dim;
  if (std::fwrite(&d, sizeof d, 1, file_) != 1 ||
      std::fwrite(values, elem_size, dim, file_) != static_cast<std::size_t>(dim))
    fail(path_, "write failed");
}

void VecsWriter::write_row(const float* values, int dim) { write_raw(values, dim, sizeof(float)); }
void VecsWriter::write_row(const std::int32_t* values, int dim) {
  write_raw(values, dim, sizeof(std::int32_t));
}

void VecsWriter::close() {
  if (!file_) return;
  const bool ok = std::fflush(file_) == 0;
  std::fclose(file_);
  file_ = nullptr;
  if (!ok) fail(path_, "write failed");
}

}  // namespace gknn_bench
