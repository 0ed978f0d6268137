// The benchmark's cached data format: the fvecs / ivecs files of the
// TEXMEX / ann-benchmarks tradition, so that other tools read our datasets and
// we read theirs. Each row is a little-endian int32 dimension followed by that
// many float32 (fvecs) or int32 (ivecs) values; every row of a file has the
// same dimension.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gknn_bench {

// A whole file in memory, row-major (rows x dim).
template <typename T>
struct Matrix {
  std::int64_t rows = 0;
  int dim = 0;
  std::vector<T> data;
  const T* row(std::int64_t i) const { return data.data() + i * dim; }
};

using FloatMatrix = Matrix<float>;
using IntMatrix = Matrix<std::int32_t>;

// Read at most max_rows rows (all when negative). Throws std::runtime_error
// with the path on a short or inconsistent file.
FloatMatrix read_fvecs(const std::string& path, std::int64_t max_rows = -1);
// Rows [first, first + max_rows) (to the end when max_rows is negative).
FloatMatrix read_fvecs_range(const std::string& path, std::int64_t first, std::int64_t max_rows);
IntMatrix read_ivecs(const std::string& path, std::int64_t max_rows = -1);

// Rows and dimension from the file size and the first row, without reading it.
void vecs_shape(const std::string& path, std::size_t elem_size, std::int64_t* rows, int* dim);

// Appending writer, row by row, for files larger than memory.
class VecsWriter {
 public:
  explicit VecsWriter(const std::string& path);
  ~VecsWriter();
  VecsWriter(const VecsWriter&) = delete;
  VecsWriter& operator=(const VecsWriter&) = delete;
  void write_row(const float* values, int dim);
  void write_row(const std::int32_t* values, int dim);
  void close();  // flushes and checks for write errors

 private:
  void write_raw(const void* values, int dim, std::size_t elem_size);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace gknn_bench
