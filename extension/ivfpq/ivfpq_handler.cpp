// gpu_ivfpq: the access method's handler, its GUCs and build phase names.
#include "am/am_routine.h"
#include "ivfpq.h"

extern "C" {
#include "commands/progress.h"
#include "utils/guc.h"
}

int gknn_ivfpq_probes = 10;
int gknn_ivfpq_refine = 10;
bool gknn_ivfpq_exact = false;
bool gknn_ivfpq_delta = true;

void gknn_ivfpq_register() {
  DefineCustomIntVariable("gknn.ivfpq_probes", "Lists a gpu_ivfpq scan searches first.",
                          "More lists: better recall, slower. Clamped to the index's lists.",
                          &gknn_ivfpq_probes, 10, 1, kIvfpqMaxLists, PGC_USERSET, 0, nullptr, nullptr,
                          nullptr);
  DefineCustomIntVariable("gknn.ivfpq_refine",
                          "A gpu_ivfpq scan re-ranks refine x LIMIT candidates by their exact distance.",
                          "Candidates are chosen by PQ distance, then ordered by their exact distance (from "
                          "the vectors the index stores, or read from the table when it stores none).",
                          &gknn_ivfpq_refine, 10, 1, 100000, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable("gknn.ivfpq_exact",
                           "A gpu_ivfpq scan ranks every entry by its exact distance (recall 1).",
                           "Uses the vectors the index stores, on the GPU service when it runs; probes and "
                           "refine play no part.",
                           &gknn_ivfpq_exact, false, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable(
      "gknn.ivfpq_delta",
      "A changed gpu_ivfpq index's image is brought up to date from the pages that changed.",
      "Off: every change makes the next scan read the whole index again, and ship it whole "
      "to the GPU service (as before gknn kept a change log).",
      &gknn_ivfpq_delta, true, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  ivfpq_register_options();
  ivfpq_register_limit_hook();
  ivfpq_register_explain();
}

namespace {

char* ivfpq_phasename(int64 phase) {
  switch (phase) {
    case PROGRESS_CREATEIDX_SUBPHASE_INITIALIZE:
      return pstrdup("initializing");
    case kIvfpqPhaseSample:
      return pstrdup("sampling table");
    case kIvfpqPhaseCoarse:
      return pstrdup("training coarse quantizer");
    case kIvfpqPhasePq:
      return pstrdup("training product quantizer");
    case kIvfpqPhaseEncode:
      return pstrdup("encoding and writing lists");
    case kIvfpqPhaseWal:
      return pstrdup("writing WAL");
  }
  return nullptr;
}

}  // namespace

bool ivfpq_interrupt_pending() { return QueryCancelPending || ProcDiePending; }

extern "C" {

PG_FUNCTION_INFO_V1(gknn_ivfpq_handler);
Datum gknn_ivfpq_handler(PG_FUNCTION_ARGS) {
  IndexAmRoutine* am = ordered_index_am_routine();
  am->ambuild = ivfpq_build;
  am->ambuildempty = ivfpq_buildempty;
  am->aminsert = ivfpq_insert;
  am->ambulkdelete = ivfpq_bulkdelete;
  am->amvacuumcleanup = ivfpq_vacuumcleanup;
  am->amcostestimate = ivfpq_costestimate;
  am->amoptions = ivfpq_options;
  am->ambuildphasename = ivfpq_phasename;
  am->amvalidate = ivfpq_validate;
  am->ambeginscan = ivfpq_beginscan;
  PG_RETURN_POINTER(am);
}

}  // extern "C"
