// The IndexAmRoutine fields gpu_ivfpq and gpu_graph share (am_routine.h).
#include "am/am_routine.h"

#include "am/ordered_scan.h"

extern "C" {
#include "commands/vacuum.h"
}

IndexAmRoutine* ordered_index_am_routine() {
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

  am->amcanreturn = nullptr;
  am->amproperty = nullptr;
  am->amadjustmembers = nullptr;
  am->amrescan = ordered_scan_rescan;
  am->amgettuple = ordered_scan_gettuple;
  am->amgetbitmap = nullptr;
  am->amendscan = ordered_scan_endscan;
  am->ammarkpos = nullptr;
  am->amrestrpos = nullptr;
  am->amestimateparallelscan = nullptr;
  am->aminitparallelscan = nullptr;
  am->amparallelrescan = nullptr;
  return am;
}
