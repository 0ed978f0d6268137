// gpu_graph: the access method's handler, its GUC and build phase names.
#include "am/am_routine.h"
#include "device.h"
#include "graph.h"

extern "C" {
#include "commands/progress.h"
#include "utils/guc.h"
}

int gknn_graph_ef_search = kGraphDefaultEfSearch;

void gknn_graph_register() {
  DefineCustomIntVariable(
      "gknn.graph_ef_search", "Candidate list size of a gpu_graph search.",
      "Larger: better recall, slower. A scan's list is at least its LIMIT (+ OFFSET); rounds that "
      "need more rows (filters, dead tuples) widen it.",
      &gknn_graph_ef_search, kGraphDefaultEfSearch, 1, kGraphMaxEfSearch, PGC_USERSET, 0, nullptr, nullptr,
      nullptr);
  graph_register_options();
}

namespace {

char* graph_phasename(int64 phase) {
  switch (phase) {
    case PROGRESS_CREATEIDX_SUBPHASE_INITIALIZE:
      return pstrdup("initializing");
    case kGraphPhaseLoad:
      return pstrdup("loading tuples");
    case kGraphPhaseKnn:
      return pstrdup("building kNN graph");
    case kGraphPhaseOptimize:
      return pstrdup("optimizing graph");
    case kGraphPhaseWrite:
      return pstrdup("writing pages");
    case kGraphPhaseWal:
      return pstrdup("writing WAL");
  }
  return nullptr;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(gknn_graph_handler);
Datum gknn_graph_handler(PG_FUNCTION_ARGS) {
  IndexAmRoutine* am = ordered_index_am_routine();
  am->ambuild = graph_build;
  am->ambuildempty = graph_buildempty;
  am->aminsert = graph_insert;
  am->ambulkdelete = graph_bulkdelete;
  am->amvacuumcleanup = graph_vacuumcleanup;
  am->amcostestimate = graph_costestimate;
  am->amoptions = graph_options;
  am->ambuildphasename = graph_phasename;
  am->amvalidate = graph_validate;
  am->ambeginscan = graph_beginscan;
  PG_RETURN_POINTER(am);
}

}  // extern "C"
