// What both index access methods (gpu_ivfpq, gpu_graph) read from an
// index's operator class, and how they name its metric.
#pragma once

#include "pg.h"

extern "C" {
#include "utils/rel.h"
}

// The C symbol of support function 1 (the distance function) of `index`'s
// operator class, palloc'd ("" for a function with no source); ERROR 42883
// naming access method `am` when the operator class has none. Each access
// method maps the symbol to what it searches by.
char* am_distance_symbol(Relation index, const char* am);

// A gknn::Metric's name as gknn_ivfpq_info and gknn_graph_info report it.
const char* am_metric_name(int metric);
