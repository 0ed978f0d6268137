// Device choice and the gknn_devices() / gknn_current_device() functions.
#include <vector>

#include "core_call.h"
#include "device.h"
#include "gknn/runtime.h"

extern "C" {
#include "funcapi.h"
#include "utils/tuplestore.h"
}

namespace {

// Discovery initialises CUDA (tens to hundreds of milliseconds), so a
// backend does it once. Devices do not come and go under a running driver.
// Functions below that call PostgreSQL hold no C++ objects with destructors
// (an ereport would jump over them).
const std::vector<gknn::DeviceInfo>& devices() {
  static std::vector<gknn::DeviceInfo>* cached = nullptr;
  if (!cached) gknn_pg::core_call([] { cached = new std::vector<gknn::DeviceInfo>(gknn::list_devices()); });
  return *cached;
}

}  // namespace

int gknn_resolve_device() {
  if (gknn_device_mode == GKNN_DEVICE_CPU) return -1;
  int count = static_cast<int>(devices().size());
  if (gknn_gpu_id < count) return gknn_gpu_id;
  if (gknn_device_mode == GKNN_DEVICE_AUTO) return -1;
  if (count == 0)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("gknn.device is \"gpu\" but no usable GPU is visible"),
                    errhint("Set gknn.device to \"auto\" or \"cpu\" to run on the CPU.")));
  ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                  errmsg("gknn.gpu_id is %d but only %d GPU(s) are visible", gknn_gpu_id, count)));
  return -1;
}

extern "C" {

PG_FUNCTION_INFO_V1(gknn_devices);
Datum gknn_devices(PG_FUNCTION_ARGS) {
  ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  InitMaterializedSRF(fcinfo, 0);
  bool active = gknn_device_mode != GKNN_DEVICE_CPU;
  for (const gknn::DeviceInfo& d : devices()) {
    Datum values[5] = {Int32GetDatum(d.ordinal), CStringGetTextDatum(d.name.c_str()),
                       Int64GetDatum(static_cast<int64>(d.total_memory)),
                       CStringGetTextDatum(psprintf("%d.%d", d.cc_major, d.cc_minor)),
                       BoolGetDatum(active && d.ordinal == gknn_gpu_id)};
    bool nulls[5] = {false, false, false, false, false};
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
  }
  return (Datum)0;
}

PG_FUNCTION_INFO_V1(gknn_current_device);
Datum gknn_current_device(PG_FUNCTION_ARGS) {
  int gpu = gknn_resolve_device();
  if (gpu < 0) PG_RETURN_TEXT_P(cstring_to_text("cpu"));
  PG_RETURN_TEXT_P(cstring_to_text(psprintf("gpu %d: %s", gpu, devices()[gpu].name.c_str())));
}

}  // extern "C"
