// CPU references for k-selection: sort the packed (key, payload) words,
// which is the whole contract, so the GPU kernels are checked against the
// simplest possible statement of it.
#include <algorithm>
#include <vector>

#include "gknn/error.h"
#include "select/key_order.cuh"

namespace gknn {

namespace {

template <typename Word>
bool word_less(const Word& a, const Word& b) {
  return a < b;
}

}  // namespace

template <typename Key, typename Payload>
std::int64_t select_topk_cpu(const Key* keys, const Payload* payloads, std::int64_t n, std::int64_t k,
                             SelectOrder order, Key* out_keys, Payload* out_payloads) {
  using P = select::Packing<Key, Payload>;
  if (n < 0 || k < 0) throw Error(ErrorCode::InvalidArgument, "select_topk: negative size");
  const bool largest = order == SelectOrder::Largest;
  std::vector<typename P::Word> words(n);
  for (std::int64_t i = 0; i < n; ++i)
    words[i] = P::pack(keys[i], payloads ? payloads[i] : static_cast<Payload>(i), largest);
  const std::int64_t take = std::min(k, n);
  std::partial_sort(words.begin(), words.begin() + take, words.end(), word_less<typename P::Word>);
  for (std::int64_t i = 0; i < take; ++i) {
    out_keys[i] = P::key(words[i], largest);
    out_payloads[i] = P::payload(words[i]);
  }
  return take;
}

template <typename Key, typename Payload>
void select_rows_cpu(const Key* keys, std::int64_t nq, std::int64_t len, std::int64_t ld, int k,
                     SelectOrder order, Key* out_keys, Payload* out_payloads) {
  using P = select::Packing<Key, Payload>;
  const bool largest = order == SelectOrder::Largest;
  for (std::int64_t r = 0; r < nq; ++r) {
    std::int64_t got = select_topk_cpu<Key, Payload>(keys + r * ld, nullptr, len, k, order, out_keys + r * k,
                                                     out_payloads + r * k);
    for (std::int64_t j = got; j < k; ++j) {
      out_keys[r * k + j] = P::key(P::sentinel(), largest);
      out_payloads[r * k + j] = P::payload(P::sentinel());
    }
  }
}

#define GKNN_INSTANTIATE(K, P)                                                                              \
  template std::int64_t select_topk_cpu<K, P>(const K*, const P*, std::int64_t, std::int64_t, SelectOrder,  \
                                              K*, P*);                                                      \
  template void select_rows_cpu<K, P>(const K*, std::int64_t, std::int64_t, std::int64_t, int, SelectOrder, \
                                      K*, P*);
GKNN_FOR_EACH_KEY_PAYLOAD(GKNN_INSTANTIATE)
#undef GKNN_INSTANTIATE

}  // namespace gknn
