// A ring of request slots in host memory as RingLayout lays it out, and
// requests written into it by hand as the GPU service's backends write
// them: GraphServer's (GPU) and CpuGraphServer's tests share it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "gknn/graph.h"

namespace gknn::test {

constexpr std::uint32_t kNotAnswered = 99;  // request()'s status for no answer in kAnswerWithin

// A hang detector, not a latency bound: CpuGraphServer's one thread serves
// 64 slots whose callers all wait at once; under the sanitizers on a loaded
// 2-core host the 64 callers' 256 answers took 5.3 s, against the 2 s a
// request had before (the likely cause of a CI failure whose log we lack).
constexpr std::chrono::seconds kAnswerWithin{60};

struct Ring {
  graph::RingSpec spec;
  std::size_t bytes = 0;  // the allocation, whole pages (what a GPU test registers)
  std::unique_ptr<unsigned char, decltype(&std::free)> memory{nullptr, &std::free};

  Ring(int slots, int max_dim, int max_k, std::uint32_t epoch, const std::int64_t* row_ids) {
    spec.slots = slots;
    spec.layout.max_dim = max_dim;
    spec.layout.max_k = max_k;
    spec.epoch = epoch;
    spec.row_ids = row_ids;
    bytes = (spec.layout.ring_bytes(slots) + 4095) / 4096 * 4096;
    memory.reset(static_cast<unsigned char*>(std::aligned_alloc(4096, bytes)));
    std::memset(memory.get(), 0, bytes);
    spec.host = memory.get();
  }
  unsigned char* slot(int s) const { return memory.get() + std::size_t(s) * spec.layout.slot_bytes(); }

  // Writes a request into slot s, rings its doorbell and waits for its
  // answer (kAnswerWithin at most, keeping the server alive); returns its
  // status (0 answered, 1 refused, kNotAnswered). After the first polls it
  // sleeps between them, leaving the cores to the server (64 callers that
  // only yield starve CpuGraphServer's thread on a small host).
  template <typename Server>
  std::uint32_t request(Server& srv, int s, const float* q, int dim, std::int32_t ef, std::int32_t k,
                        std::uint32_t epoch) const {
    using graph::RingLayout;
    unsigned char* at = slot(s);
    std::memcpy(at + RingLayout::kQueryAt, q, sizeof(float) * std::size_t(dim));
    std::memcpy(at + RingLayout::kEfAt, &ef, sizeof ef);
    std::memcpy(at + RingLayout::kKAt, &k, sizeof k);
    std::memcpy(at + RingLayout::kEpochAt, &epoch, sizeof epoch);
    auto* bell = reinterpret_cast<std::uint32_t*>(memory.get() + spec.layout.doorbell_at(spec.slots)) + s;
    const std::uint32_t number = __atomic_load_n(bell, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(bell, number, __ATOMIC_SEQ_CST);
    const auto until = std::chrono::steady_clock::now() + kAnswerWithin;
    const auto* answered = reinterpret_cast<const std::uint32_t*>(at + RingLayout::kAnsweredAt);
    for (int polls = 0; __atomic_load_n(answered, __ATOMIC_ACQUIRE) != number; ++polls) {
      srv.keep_alive();
      if (std::chrono::steady_clock::now() > until) return kNotAnswered;
      if (polls < 1000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    std::uint32_t status;
    std::memcpy(&status, at + RingLayout::kStatusAt, sizeof status);
    return status;
  }
  std::int64_t id(int s, int i) const {
    std::int64_t v;
    std::memcpy(&v, slot(s) + spec.layout.ids_at() + sizeof v * std::size_t(i), sizeof v);
    return v;
  }
  double distance(int s, int i) const {
    double v;
    std::memcpy(&v, slot(s) + spec.layout.distances_at() + sizeof v * std::size_t(i), sizeof v);
    return v;
  }
};

// What ask_with_refusals found: requests not answered in kAnswerWithin (it stops
// at the first), refused ones, ones whose status was not the one their
// request calls for, and answers unlike the expected ones.
struct RingTally {
  int unanswered = 0, refused = 0, wrong_status = 0, differ = 0;
};

// Queries[0..nq) (dim floats each) asked one at a time through slot q %
// slots with ef 20 and k 10 and the ring's epoch, except those a server
// must refuse unsearched: another epoch (q % 10 == 3), a list above the
// device's (5), more answers than a slot holds (7: the ring's max_k is
// below 17), none (8), a list shorter than k (9). The others' answers are
// compared with ids/distances (search_cpu's of the same queries at ef 20,
// k 10; ids mapped through row_ids, -1 and no distance after the last).
template <typename Server>
RingTally ask_with_refusals(const Ring& ring, Server& srv, const float* queries, int nq, int dim,
                            const std::int64_t* ids, const double* distances, const std::int64_t* row_ids) {
  RingTally t;
  for (int q = 0; q < nq; ++q) {
    const std::uint32_t epoch = q % 10 == 3 ? ring.spec.epoch - 1 : ring.spec.epoch;
    const std::int32_t ef = q % 10 == 5 ? graph::kMaxDeviceEf + 1 : q % 10 == 9 ? 9 : 20;
    const std::int32_t k = q % 10 == 7 ? 17 : q % 10 == 8 ? 0 : 10;
    const int s = q % ring.spec.slots;
    const std::uint32_t status =
        ring.request(srv, s, queries + std::size_t(q) * std::size_t(dim), dim, ef, k, epoch);
    if (status == kNotAnswered) {
      ++t.unanswered;
      break;
    }
    const bool refuse = epoch != ring.spec.epoch || ef != 20 || k != 10;
    t.wrong_status += status != (refuse ? 1u : 0u);
    if (refuse) {
      ++t.refused;
      continue;
    }
    for (int i = 0; i < 10; ++i) {
      const std::int64_t node = ids[q * 10 + i];
      const std::int64_t want = node < 0 ? -1 : row_ids[node];
      const double dist = ring.distance(s, i);
      t.differ += ring.id(s, i) != want ||
                  (want >= 0 && std::memcmp(&dist, &distances[q * 10 + i], sizeof dist) != 0);
    }
  }
  return t;
}

}  // namespace gknn::test
