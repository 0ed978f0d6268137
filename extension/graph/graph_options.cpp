// gpu_graph reloptions: WITH (degree, intermediate_degree), and the checks
// of a parameter set against the indexed dimension.
#include "graph.h"

extern "C" {
#include "access/reloptions.h"
}

static relopt_kind graph_relopt_kind;

void graph_register_options() {
  graph_relopt_kind = add_reloption_kind();
  add_int_reloption(graph_relopt_kind, "degree", "Out-degree of every node of the graph (even)",
                    kGraphDefaultDegree, 2, kGraphMaxDegree, AccessExclusiveLock);
  add_int_reloption(graph_relopt_kind, "intermediate_degree",
                    "Degree of the build's initial kNN graph, pruned to degree (0: 2 x degree)", 0, 0,
                    kGraphMaxIntermediateDegree, AccessExclusiveLock);
}

void graph_check_options(const GraphOptions& o) {
  if (o.degree % 2 != 0)
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
             errmsg("gpu_graph option degree must be even, not %d", o.degree),
             errdetail("Half of each list comes from the nearest neighbours, half from reverse edges.")));
  if (o.intermediate_degree != 0 && o.intermediate_degree < o.degree)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("gpu_graph option intermediate_degree (%d) must be at least degree (%d), or 0",
                           o.intermediate_degree, o.degree)));
}

bytea* graph_options(Datum reloptions, bool validate) {
  static const relopt_parse_elt tab[] = {
      {"degree", RELOPT_TYPE_INT, offsetof(GraphOptions, degree)},
      {"intermediate_degree", RELOPT_TYPE_INT, offsetof(GraphOptions, intermediate_degree)},
  };
  auto* o = static_cast<GraphOptions*>(
      build_reloptions(reloptions, validate, graph_relopt_kind, sizeof(GraphOptions), tab, lengthof(tab)));
  // CREATE INDEX and ALTER INDEX ... SET both validate here.
  if (validate && o != nullptr) graph_check_options(*o);
  return reinterpret_cast<bytea*>(o);
}

GraphOptions graph_get_options(Relation index) {
  GraphOptions o{};
  o.degree = kGraphDefaultDegree;
  o.intermediate_degree = 0;
  if (index->rd_options) o = *reinterpret_cast<GraphOptions*>(index->rd_options);
  return o;
}

void graph_check_dim(int dim, int degree) {
  if (dim < 1)
    ereport(ERROR,
            (errcode(ERRCODE_DATA_EXCEPTION), errmsg("gpu_graph cannot index a vector of %d dimensions", dim),
             errdetail("A vector has 1 to %d dimensions.", kGraphMaxDim),
             errhint("Find the row with vector_dims() and correct or delete it.")));
  if (dim > kGraphMaxDim || graph_nodes_per_page(dim, degree) == 0)
    ereport(ERROR,
            (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
             errmsg("gpu_graph cannot index vectors of %d dimensions at degree %d", dim, degree),
             errdetail("A node (its vector and its %d neighbours) takes %zu bytes; a page holds %zu.", degree,
                       graph_node_bytes(Min(dim, kGraphMaxDim + 1), degree), kGraphContentBytes),
             errhint("Use a lower degree, or a gpu_ivfpq index for vectors this wide.")));
}
