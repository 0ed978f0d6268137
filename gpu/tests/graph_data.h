// Helpers shared by the graph tests: clustered data (ivfpq_data.h), exact
// ground truth, recall of a graph search.
#pragma once

#include <vector>

#include "gknn/graph.h"
#include "tests/ivfpq_data.h"

namespace gknn::test {

// Recall@k of search_cpu over g against exact search (CPU reference).
inline double graph_recall(const graph::Graph& g, const std::vector<float>& x, const std::vector<float>& q,
                           int dim, Metric metric, int k, int ef, std::uint64_t seed = 0, int width = 1) {
  const std::int64_t nq = std::int64_t(q.size()) / dim;
  std::vector<std::int64_t> ids(nq * k);
  std::vector<double> d(nq * k);
  graph::SearchParams sp;
  sp.k = k;
  sp.ef = ef;
  sp.seed = seed;
  sp.width = width;
  graph::search_cpu(g, x.data(), dim, metric, q.data(), nq, sp, ids.data(), d.data());
  return recall(exact_ids(x, q, dim, k, metric), ids, k);
}

// Rows of x whose flag is 0, in order (the live part after deletions).
inline std::vector<float> live_rows(const std::vector<float>& x, int dim,
                                    const std::vector<std::uint8_t>& dead) {
  std::vector<float> out;
  for (std::size_t i = 0; i < dead.size(); ++i)
    if (!dead[i]) out.insert(out.end(), x.begin() + i * dim, x.begin() + (i + 1) * dim);
  return out;
}

// A fixed pseudo-random value of i (which rows a test deletes).
inline std::uint64_t mix_for_test(std::uint64_t i) {
  i = (i ^ (i >> 31)) * 0x7FB5D329728EA185ull;
  i = (i ^ (i >> 27)) * 0x81DADEF4BC2DD44Dull;
  return i ^ (i >> 33);
}

}  // namespace gknn::test
