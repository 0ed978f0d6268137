# gknn: PGXS build of the PostgreSQL extension. The core library (gpu/) is
# built by CMake and linked statically, together with the CUDA runtime, into
# gknn.so, so the module needs only the NVIDIA driver, and loads without one.
#
#   make / make install     build and install the extension
#   make test               every test (installs what it needs; see README)
#   make demo               gknn's index, its plan and recall on real data (README)
#   make fuzz               every libFuzzer target for FUZZ_SECONDS (default 60) each
#   make GKNN_SANITIZE=address,undefined [install]
#                           gknn.so and its core library built with sanitizers
#                           (core in build/asan); run the server with ASan's
#                           runtime preloaded (README: "Sanitizers")

EXTENSION = gknn
EXTVERSION = 0.1.0
MODULE_big = gknn
OBJS = \
	extension/gknn.o \
	extension/device.o \
	$(patsubst %.cpp,%.o,$(sort $(wildcard extension/types/*.cpp))) \
	$(patsubst %.cpp,%.o,$(sort $(wildcard extension/topk/*.cpp))) \
	$(patsubst %.cpp,%.o,$(sort $(wildcard extension/am/*.cpp))) \
	$(patsubst %.cpp,%.o,$(sort $(wildcard extension/ivfpq/*.cpp))) \
	$(patsubst %.cpp,%.o,$(sort $(wildcard extension/graph/*.cpp))) \
	$(patsubst %.cpp,%.o,$(sort $(wildcard extension/service/*.cpp)))
DATA = extension/gknn--$(EXTVERSION).sql
REGRESS = $(sort $(basename $(notdir $(wildcard sql/*.sql))))
REGRESS_OPTS = --load-extension=gknn

CUDA_HOME ?= /usr/local/cuda
CORE_BUILD = build/cmake
CORE_CMAKE_FLAGS = -DCMAKE_BUILD_TYPE=Release
# The sanitizer build of the core (regress/run-all.sh's asan stage reads this
# line too): host code at -O1 with GKNN_SANITIZE, PTX of one architecture.
ASAN_CMAKE_FLAGS = -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1 -DCMAKE_CUDA_FLAGS=-Xcompiler=-O1 -DGKNN_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=80-virtual
FUZZ_SECONDS ?= 60
CORE_LIB = $(CORE_BUILD)/gpu/libgknn_core.a
PG_CPPFLAGS = -Igpu/include -Iextension
PG_CXXFLAGS = -std=c++17 -Wno-register
SHLIB_LINK = $(CORE_LIB) -L$(CUDA_HOME)/lib64 -lcudart_static -lrt -ldl -lpthread -lstdc++
EXTRA_CLEAN = build

ifdef GKNN_SANITIZE
CORE_BUILD = build/asan
CORE_CMAKE_FLAGS = $(ASAN_CMAKE_FLAGS) -DGKNN_SANITIZE=$(GKNN_SANITIZE)
PG_CXXFLAGS += -fsanitize=$(GKNN_SANITIZE) -fno-omit-frame-pointer
SHLIB_LINK += -fsanitize=$(GKNN_SANITIZE)
endif

# Bitcode for PostgreSQL's JIT is not built: gknn's work is not in SQL
# expressions the JIT would inline.
override with_llvm = no

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

.DEFAULT_GOAL := all
.PHONY: test demo core fuzz
test:
	./regress/run-all.sh
demo:
	./scripts/demo.sh
fuzz:
	./fuzz/run.sh -t $(FUZZ_SECONDS)

# Without the server headers only `make test` and `make demo` work (they
# install them first).
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)

core:
	cmake -S . -B $(CORE_BUILD) $(CORE_CMAKE_FLAGS) >/dev/null
	cmake --build $(CORE_BUILD) --target gknn_core

# GKNN_CORE_LIB=path links a core library built elsewhere (another checkout
# of the same gpu/) instead of building one here.
ifdef GKNN_CORE_LIB
CORE_LIB = $(GKNN_CORE_LIB)
else
$(CORE_LIB): core
endif
$(shlib): $(CORE_LIB)
$(OBJS): $(wildcard extension/*.h extension/*/*.h) $(wildcard gpu/include/gknn/*.h)
endif
