// k-selection: the k best of n keys, each carried with a payload (a row id).
//
// One order everywhere: keys compare as PostgreSQL compares float8/int8 (NaN
// above every number, -0 equal to +0); Smallest takes keys ascending, Largest
// descending; equal keys are broken by ascending payload. So every algorithm,
// on the CPU or the GPU, returns exactly the same rows in the same order.
//
// Keys: float, double, int32_t, int64_t. Payloads: uint32_t, uint64_t.
// Results hold min(k, n) entries, best first. Keys come back canonical (NaN
// as the positive quiet NaN, -0 as +0).
#pragma once

#include <cstdint>

namespace gknn {

enum class SelectOrder { Smallest, Largest };

// ---- CPU references (the oracle for every GPU kernel; the CPU fallback) ----

// One array. `payloads` may be null: the payload is then the index in `keys`.
// Returns the number of results written, min(k, n).
template <typename Key, typename Payload>
std::int64_t select_topk_cpu(const Key* keys, const Payload* payloads, std::int64_t n, std::int64_t k,
                             SelectOrder order, Key* out_keys, Payload* out_payloads);

// nq rows of `len` keys (row r starts at keys + r * ld); payload = column index.
// Outputs are nq x k; a row shorter than k is padded with payload ~0 (all
// ones) and the worst possible key.
template <typename Key, typename Payload>
void select_rows_cpu(const Key* keys, std::int64_t nq, std::int64_t len, std::int64_t ld, int k,
                     SelectOrder order, Key* out_keys, Payload* out_payloads);

// ---- GPU (device pointers; `stream` is a cudaStream_t, null for the default
// stream; the call returns once the results are in the output buffers) ----

// One array, k <= n allowed up to kMaxBitonicK; larger k goes to the sample
// selection. `d_payloads` may be null (payload = index).
constexpr std::int64_t kMaxBitonicK = 1024;
template <typename Key, typename Payload>
std::int64_t select_topk_gpu(const Key* d_keys, const Payload* d_payloads, std::int64_t n, std::int64_t k,
                             SelectOrder order, Key* d_out_keys, Payload* d_out_payloads,
                             void* stream = nullptr);

// Batched rows (WarpSelect / BlockSelect and the "bits" kernel), k <= 2048.
constexpr int kMaxRowK = 2048;
template <typename Key, typename Payload>
void select_rows_gpu(const Key* d_keys, std::int64_t nq, std::int64_t len, std::int64_t ld, int k,
                     SelectOrder order, Key* d_out_keys, Payload* d_out_payloads, void* stream = nullptr);

}  // namespace gknn
