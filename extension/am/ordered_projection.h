// gpu_ivfpq's and gpu_graph's ordered scans: the planner hook that keeps the
// executor from computing each returned row's ORDER BY distance again
// (ordered_projection.cpp).
#pragma once

void ordered_projection_register();
