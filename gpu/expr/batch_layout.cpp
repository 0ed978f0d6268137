// Batch layout (batch_layout.h).
#include "expr/batch_layout.h"

#include "gknn/error.h"

namespace gknn::expr {

std::size_t value_bytes(const ColumnSpec& c) {
  switch (c.type) {
    case Type::Bool:
      return 1;
    case Type::I16:
      return 2;
    case Type::I32:
    case Type::Date:
    case Type::F32:
      return 4;
    case Type::Vector:
      return sizeof(float) * static_cast<std::size_t>(c.dim);
    default:
      return 8;
  }
}

std::size_t batch_bytes(const std::vector<ColumnSpec>& columns, std::int64_t capacity) {
  return layout::walk(columns, capacity, [](std::size_t, std::size_t, int, int) {});
}

void layout_batch(BatchView& view, const std::vector<ColumnSpec>& columns, std::int64_t capacity,
                  unsigned char* base) {
  if (columns.size() > static_cast<std::size_t>(kMaxColumns))
    throw Error(ErrorCode::InvalidArgument, "too many columns in a batch");
  view = BatchView{};
  view.capacity = capacity;
  view.columns = static_cast<int>(columns.size());
  layout::walk(columns, capacity, [&](std::size_t at, std::size_t, int c, int which) {
    unsigned char* p = base + at;
    if (c < 0) {
      view.row_ids = reinterpret_cast<std::uint64_t*>(p);
      return;
    }
    ColumnView& col = view.column[c];
    col.type = columns[c].type;
    col.dim = columns[c].dim;
    if (which == 0) col.data = p;
    if (which == 1) col.nulls = p;
    if (which == 2) col.dims = reinterpret_cast<std::int32_t*>(p);
  });
}

}  // namespace gknn::expr
