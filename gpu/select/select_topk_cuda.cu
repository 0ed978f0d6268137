// select_topk_gpu: the k best of one array (the pipeline is in
// topk_pipeline.cuh).
#include "gknn/select.h"
#include "select/topk_pipeline.cuh"

namespace gknn {
template <typename Key, typename Payload>
std::int64_t select_topk_gpu(const Key* d_keys, const Payload* d_payloads, std::int64_t n, std::int64_t k,
                             SelectOrder order, Key* d_out_keys, Payload* d_out_payloads, void* stream_ptr) {
  using namespace select;
  using P = Packing<Key, Payload>;
  using Word = typename P::Word;
  if (n < 0 || k < 0) throw Error(ErrorCode::InvalidArgument, "select_topk_gpu: negative size");
  const int64_t take = k < n ? k : n;
  if (take == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const bool largest = order == SelectOrder::Largest;
  AsyncBuffer<Word> top(take, stream);
  smallest_words<Word>(ArrayLoader<Key, Payload>{d_keys, d_payloads, n, largest}, n, k, top.get(), stream);
  unpack_words<Key, Payload>
      <<<grid_for(take, 256), 256, 0, stream>>>(top.get(), take, largest, d_out_keys, d_out_payloads);
  GKNN_CUDA(cudaGetLastError());
  GKNN_CUDA(cudaStreamSynchronize(stream));
  return take;
}

#define GKNN_INSTANTIATE(K, P)                                                                             \
  template std::int64_t select_topk_gpu<K, P>(const K*, const P*, std::int64_t, std::int64_t, SelectOrder, \
                                              K*, P*, void*);
GKNN_FOR_EACH_KEY_PAYLOAD(GKNN_INSTANTIATE)
#undef GKNN_INSTANTIATE

}  // namespace gknn
