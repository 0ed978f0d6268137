# gknn: PGXS build of the PostgreSQL extension. The core library (gpu/) is
# built by CMake and linked statically, together with the CUDA runtime, into
# gknn.so, so the module needs only the NVIDIA driver, and loads without one.
#
#   make / make install     build and install the extension
#   make test               every test (installs what it needs; see README)
#   make demo               nearest neighbours of real data on a throwaway cluster

EXTENSION = gknn
EXTVERSION = 0.1.0
MODULE_big = gknn
OBJS = \
	extension/gknn.o \
	extension/device.o \
	extension/vector_io.o \
	extension/vector_cast.o \
	extension/vector_ops.o \
	extension/vector_cmp.o \
	extension/vector_agg.o \
	extension/topk_compile.o \
	extension/topk_planner.o \
	extension/topk_exec.o \
	extension/topk_cache.o \
	extension/topk_explain.o \
	extension/ivfpq_handler.o \
	extension/ivfpq_options.o \
	extension/ivfpq_pages.o \
	extension/ivfpq_build.o \
	extension/ivfpq_insert.o \
	extension/ivfpq_image.o \
	extension/ivfpq_scan.o \
	extension/ivfpq_limit.o \
	extension/ivfpq_vacuum.o \
	extension/ivfpq_cost.o \
	extension/ivfpq_validate.o \
	extension/ivfpq_info.o
DATA = extension/gknn--$(EXTVERSION).sql
REGRESS = $(sort $(basename $(notdir $(wildcard sql/*.sql))))
REGRESS_OPTS = --load-extension=gknn

CUDA_HOME ?= /usr/local/cuda
CORE_BUILD = build/cmake
CORE_LIB = $(CORE_BUILD)/gpu/libgknn_core.a
PG_CPPFLAGS = -Igpu/include
PG_CXXFLAGS = -std=c++17 -Wno-register
SHLIB_LINK = $(CORE_LIB) -L$(CUDA_HOME)/lib64 -lcudart_static -lrt -ldl -lpthread -lstdc++
EXTRA_CLEAN = build

# Bitcode for PostgreSQL's JIT is not built: gknn's work is not in SQL
# expressions the JIT would inline.
override with_llvm = no

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

.DEFAULT_GOAL := all
.PHONY: test demo core
test:
	./regress/run-all.sh
demo:
	./scripts/demo.sh

# Without the server headers only `make test` and `make demo` work (they
# install them first).
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)

core:
	cmake -S . -B $(CORE_BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(CORE_BUILD) --target gknn_core

$(CORE_LIB): core
$(shlib): $(CORE_LIB)
$(OBJS): $(wildcard extension/*.h) $(wildcard gpu/include/gknn/*.h)
endif
