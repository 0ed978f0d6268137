// Piece iteration shared by layout_batch and for_each_filled.
#pragma once

namespace gknn::expr {

namespace layout {

inline std::size_t align16(std::size_t x) { return (x + 15) & ~std::size_t(15); }

// fn(piece offset, bytes per row) for row ids, then per column: values,
// nulls, and vector dims.
template <typename Fn>
std::size_t walk(const std::vector<ColumnSpec>& columns, std::int64_t capacity, Fn&& fn) {
  std::size_t at = 0;
  auto piece = [&](std::size_t per_row, int column, int which) {
    fn(at, per_row, column, which);
    at += align16(per_row * static_cast<std::size_t>(capacity));
  };
  piece(sizeof(std::uint64_t), -1, 0);
  for (int c = 0; c < static_cast<int>(columns.size()); ++c) {
    piece(value_bytes(columns[c]), c, 0);
    piece(1, c, 1);
    if (columns[c].type == Type::Vector) piece(sizeof(std::int32_t), c, 2);
  }
  return at;
}

}  // namespace layout

template <typename Fn>
void for_each_filled(const std::vector<ColumnSpec>& columns, std::int64_t capacity, std::int64_t n, Fn&& fn) {
  layout::walk(columns, capacity, [&](std::size_t at, std::size_t per_row, int, int) {
    fn(at, per_row * static_cast<std::size_t>(n));
  });
}

}  // namespace gknn::expr
