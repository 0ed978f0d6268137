// gpu_graph: the access method's handler, its GUC and build phase names.
#include "device.h"
#include "graph.h"

extern "C" {
#include "commands/progress.h"
#include "commands/vacuum.h"
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
  IndexAmRoutine* am = makeNode(IndexAmRoutine);
  am->amstrategies = 1;
  am->amsupport = 1;
  am->amoptsprocnum = 0;
  am->amcanorder = false;
  am->amcanorderbyop = true;
  am->amcanbackward = false;
  am->amcanunique = false;
  am->amcanmulticol = false;
  am->amoptionalkey = true;  // ordered scans have no quals
  am->amsearcharray = false;
  am->amsearchnulls = false;
  am->amstorage = false;
  am->amclusterable = false;
  am->ampredlocks = false;
  am->amcanparallel = false;
  am->amcaninclude = false;
  am->amusemaintenanceworkmem = false;
  am->amparallelvacuumoptions = VACUUM_OPTION_NO_PARALLEL;
  am->amkeytype = InvalidOid;

  am->ambuild = graph_build;
  am->ambuildempty = graph_buildempty;
  am->aminsert = graph_insert;
  am->ambulkdelete = graph_bulkdelete;
  am->amvacuumcleanup = graph_vacuumcleanup;
  am->amcanreturn = nullptr;
  am->amcostestimate = graph_costestimate;
  am->amoptions = graph_options;
  am->amproperty = nullptr;
  am->ambuildphasename = graph_phasename;
  am->amvalidate = graph_validate;
  am->amadjustmembers = nullptr;
  am->ambeginscan = graph_beginscan;
  am->amrescan = graph_rescan;
  am->amgettuple = graph_gettuple;
  am->amgetbitmap = nullptr;
  am->amendscan = graph_endscan;
  am->ammarkpos = nullptr;
  am->amrestrpos = nullptr;
  am->amestimateparallelscan = nullptr;
  am->aminitparallelscan = nullptr;
  am->amparallelrescan = nullptr;
  PG_RETURN_POINTER(am);
}

}  // extern "C"
