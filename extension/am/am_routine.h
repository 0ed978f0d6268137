// The IndexAmRoutine of gknn's index access methods (gpu_ivfpq, gpu_graph):
// what they share is set here once, each handler adds its own callbacks.
#pragma once

#include "pg.h"

extern "C" {
#include "access/amapi.h"
}

// A new IndexAmRoutine for an index that serves only ORDER BY column <op>
// value (one column, one order-by operator, no quals, forward only, no
// bitmap, parallel or index-only scans), with the shared scan callbacks of
// am/ordered_scan.h. The caller sets ambuild, ambuildempty, aminsert,
// ambulkdelete, amvacuumcleanup, amcostestimate, amoptions,
// ambuildphasename, amvalidate and ambeginscan.
IndexAmRoutine* ordered_index_am_routine();
