// Module entry: GUCs and version. _PG_init runs in the postmaster when the
// library is preloaded, so it must not touch CUDA.
#include <cfloat>

#include "am/ordered_projection.h"
#include "device.h"
#include "gknn/runtime.h"
#include "graph/graph.h"
#include "ivfpq/ivfpq.h"
#include "pg.h"
#include "service/service.h"
#include "topk/topk.h"
#include "topk/topk_cache.h"

extern "C" {
#include "utils/guc.h"
PG_MODULE_MAGIC;
}

#define GKNN_VERSION "0.1.0"

int gknn_device_mode = GKNN_DEVICE_AUTO;
int gknn_gpu_id = 0;

static const struct config_enum_entry device_options[] = {{"auto", GKNN_DEVICE_AUTO, false},
                                                          {"gpu", GKNN_DEVICE_GPU, false},
                                                          {"cpu", GKNN_DEVICE_CPU, false},
                                                          {nullptr, 0, false}};

extern "C" {

void _PG_init(void) {
  DefineCustomEnumVariable(
      "gknn.device", "Where gknn runs its searches.",
      "auto: a GPU when one is usable, else the CPU; gpu: a GPU or an error; cpu: the CPU.",
      &gknn_device_mode, GKNN_DEVICE_AUTO, device_options, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  // Superuser only (and ALTER ROLE/DATABASE ... SET): which GPU a backend
  // opens a CUDA context on (device memory of its own, then its kernels) is
  // the administrator's choice on a shared host, not each session's.
  DefineCustomIntVariable("gknn.gpu_id", "Ordinal of the GPU gknn uses (as in gknn_devices()).", nullptr,
                          &gknn_gpu_id, 0, 0, 1023, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable("gknn.enable_topk",
                           "Lets the planner use GpuTopK for ORDER BY ... LIMIT over one table.", nullptr,
                           &gknn_enable_topk, true, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("gknn.topk_min_rows",
                          "Tables with fewer rows (planner estimate) never use GpuTopK.", nullptr,
                          &gknn_topk_min_rows, 10000, 0, INT_MAX, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("gknn.max_k", "GpuTopK is not planned when LIMIT + OFFSET is above this.", nullptr,
                          &gknn_max_k, 100000, 0, INT_MAX, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomRealVariable(
      "gknn.topk_gpu_setup_cost",
      "Planner's cost of setting up GpuTopK on a GPU (a session in the GPU service: its batches "
      "and device buffers), per query and per participant of a parallel plan.",
      nullptr, &gknn_topk_gpu_setup_cost, 5000, 0, DBL_MAX, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  // The GPU service's budget (a server setting): the cache holds service
  // memory between queries, for every session.
  DefineCustomIntVariable("gknn.topk_cache_mb", "Size of the GPU service's GpuTopK table cache (0: off).",
                          "A serial GpuTopK whose quals all compile keeps the ranked columns of the table's "
                          "all-visible pages in the GPU service, shared by every session, and later queries "
                          "read only the pages the visibility map does not vouch for.",
                          &gknn_topk_cache_mb, 0, 0, INT_MAX / 2, PGC_SIGHUP, GUC_UNIT_MB, nullptr, nullptr,
                          nullptr);
  gknn_topk_register();
  gknn_ivfpq_register();
  gknn_graph_register();
  ordered_projection_register();
  gknn_service_register();
  // Last: reserving the prefix drops every placeholder not defined by now,
  // and a SET made before the library loaded lives in such a placeholder.
  MarkGUCPrefixReserved("gknn");
}

PG_FUNCTION_INFO_V1(gknn_version);
Datum gknn_version(PG_FUNCTION_ARGS) {
  int cuda = gknn::cuda_runtime_version();
  PG_RETURN_TEXT_P(
      cstring_to_text(psprintf(GKNN_VERSION " (CUDA runtime %d.%d)", cuda / 1000, cuda % 1000 / 10)));
}

}  // extern "C"
