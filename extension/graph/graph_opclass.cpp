// gpu_graph: the metric of an index's operator class, from its support
// function 1 (the distance function the graph is built and searched for).
#include <cstring>

#include "am/am_opclass.h"
#include "graph.h"

namespace {

// Support function 1 of each operator class, by its C symbol (the install
// script's; a function of another library cannot be a gpu_graph distance).
struct KnownDistance {
  const char* symbol;
  gknn::Metric metric;
};
constexpr KnownDistance kKnown[] = {
    {"l2_distance", gknn::Metric::L2},
    {"vector_negative_inner_product", gknn::Metric::InnerProduct},
    {"cosine_distance", gknn::Metric::Cosine},
};

}  // namespace

gknn::Metric graph_index_metric(Relation index) {
  char* symbol = am_distance_symbol(index, "gpu_graph");
  for (const KnownDistance& k : kKnown)
    if (strcmp(symbol, k.symbol) == 0) return k.metric;
  ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                  errmsg("gpu_graph does not support the distance function \"%s\" of index \"%s\"", symbol,
                         RelationGetRelationName(index)),
                  errhint("Use vector_l2_ops, vector_ip_ops or vector_cosine_ops.")));
  pg_unreachable();
}
