// Single-array top-k: the GPU (bitonic top-k behind a sampled prefilter)
// against the CPU reference, which states the contract as a sort.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gknn/select.h"
#include "gpu_env.h"
#include "select_data.h"

namespace {

using gknn::SelectOrder;
using gknn::test::Dist;

template <typename Key>
bool same_key(Key a, Key b) {
  return std::memcmp(&a, &b, sizeof(Key)) == 0;
}

// The reference's order, checked by brute force on small inputs: ascending
// (or descending) SQL order with NaN greatest, then payload.
TEST(SelectTopkCpu, OrderContract) {
  const float nan = std::nanf("");
  std::vector<float> keys = {3.0f, -0.0f, nan, 0.0f, -INFINITY, INFINITY, 3.0f, -nan, 1.0f};
  std::vector<float> out_k(9);
  std::vector<std::uint32_t> out_p(9);
  auto select = gknn::select_topk_cpu<float, std::uint32_t>;
  ASSERT_EQ(select(keys.data(), nullptr, 9, 9, SelectOrder::Smallest, out_k.data(), out_p.data()), 9);
  EXPECT_EQ(out_p, (std::vector<std::uint32_t>{4, 1, 3, 8, 0, 6, 5, 2, 7}));
  EXPECT_FALSE(std::signbit(out_k[1]));  // -0 comes back as +0
  ASSERT_EQ(select(keys.data(), nullptr, 9, 4, SelectOrder::Largest, out_k.data(), out_p.data()), 4);
  EXPECT_EQ(std::vector<std::uint32_t>(out_p.begin(), out_p.begin() + 4),
            (std::vector<std::uint32_t>{2, 7, 5, 0}));  // NaN first when descending, ties by payload
  EXPECT_TRUE(std::isnan(out_k[0]) && !std::signbit(out_k[0]));
}

TEST(SelectTopkCpu, ExplicitPayloadsBreakTies) {
  std::vector<std::int64_t> keys = {5, 5, 5, 1};
  std::vector<std::uint64_t> pay = {30, 10, 20, 99};
  std::vector<std::int64_t> k(3);
  std::vector<std::uint64_t> p(3);
  gknn::select_topk_cpu<std::int64_t, std::uint64_t>(keys.data(), pay.data(), 4, 3, SelectOrder::Smallest,
                                                     k.data(), p.data());
  EXPECT_EQ(p, (std::vector<std::uint64_t>{99, 10, 20}));
}

template <typename Key, typename Payload>
void check_gpu(Dist dist, std::int64_t n, std::int64_t k, SelectOrder order, unsigned seed) {
  SCOPED_TRACE(gknn::test::dist_name(dist) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
               (order == SelectOrder::Largest ? " largest" : " smallest"));
  std::vector<Key> keys = gknn::test::make_keys<Key>(dist, n, seed);
  const std::int64_t take = std::min(k, n);
  std::vector<Key> want_k(take), got_k(take);
  std::vector<Payload> want_p(take), got_p(take);
  gknn::select_topk_cpu<Key, Payload>(keys.data(), nullptr, n, k, order, want_k.data(), want_p.data());

  Key *d_keys = nullptr, *d_out_k = nullptr;
  Payload* d_out_p = nullptr;
  ASSERT_EQ(cudaMalloc(&d_keys, sizeof(Key) * std::max<std::int64_t>(n, 1)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out_k, sizeof(Key) * std::max<std::int64_t>(take, 1)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out_p, sizeof(Payload) * std::max<std::int64_t>(take, 1)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_keys, keys.data(), sizeof(Key) * n, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_out_p, 0xAB, sizeof(Payload) * std::max<std::int64_t>(take, 1)),
            cudaSuccess);  // poison
  std::int64_t got = gknn::select_topk_gpu<Key, Payload>(d_keys, nullptr, n, k, order, d_out_k, d_out_p);
  EXPECT_EQ(got, take);
  ASSERT_EQ(cudaMemcpy(got_k.data(), d_out_k, sizeof(Key) * take, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got_p.data(), d_out_p, sizeof(Payload) * take, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_keys);
  cudaFree(d_out_k);
  cudaFree(d_out_p);
  EXPECT_EQ(got_p, want_p);
  for (std::int64_t i = 0; i < take; ++i) ASSERT_TRUE(same_key(got_k[i], want_k[i])) << "rank " << i;
}

class SelectTopkGpu : public ::testing::TestWithParam<std::int64_t> {};

// Every k from the issue at sizes that are multiples of nothing, the small
// path (n below the sampling size) and the sampled path, on every input.
TEST_P(SelectTopkGpu, FloatUint32AllDistributions) {
  GKNN_NEED_GPU();
  const std::int64_t k = GetParam();
  unsigned seed = 1;
  for (std::int64_t n : {std::int64_t(1), std::int64_t(31), std::int64_t(1000), std::int64_t(1000003)})
    for (Dist d : gknn::test::all_dists())
      for (SelectOrder o : {SelectOrder::Smallest, SelectOrder::Largest})
        check_gpu<float, std::uint32_t>(d, n, k, o, seed++);
}

INSTANTIATE_TEST_SUITE_P(Ks, SelectTopkGpu,
                         ::testing::Values(1, 2, 31, 32, 33, 100, 255, 256, 1000, 1024, 2048, 5000));

TEST(SelectTopkGpuTypes, EveryKeyAndPayload) {
  GKNN_NEED_GPU();
  unsigned seed = 100;
  for (std::int64_t n : {std::int64_t(77), std::int64_t(300007)})
    for (std::int64_t k : {std::int64_t(1), std::int64_t(100), std::int64_t(1024)})
      for (Dist d : {Dist::Uniform, Dist::FewDistinct, Dist::NonFinite, Dist::SignedZeros})
        for (SelectOrder o : {SelectOrder::Smallest, SelectOrder::Largest}) {
          check_gpu<float, std::uint64_t>(d, n, k, o, seed++);
          check_gpu<double, std::uint32_t>(d, n, k, o, seed++);
          check_gpu<double, std::uint64_t>(d, n, k, o, seed++);
          check_gpu<std::int32_t, std::uint32_t>(d, n, k, o, seed++);
          check_gpu<std::int32_t, std::uint64_t>(d, n, k, o, seed++);
          check_gpu<std::int64_t, std::uint32_t>(d, n, k, o, seed++);
          check_gpu<std::int64_t, std::uint64_t>(d, n, k, o, seed++);
        }
}

TEST(SelectTopkGpuTypes, KLargerThanN) {
  GKNN_NEED_GPU();
  check_gpu<float, std::uint32_t>(Dist::Uniform, 10, 1024, SelectOrder::Smallest, 3);
  check_gpu<double, std::uint64_t>(Dist::Uniform, 70000, 100000, SelectOrder::Largest, 4);
  check_gpu<float, std::uint32_t>(Dist::Uniform, 0, 5, SelectOrder::Smallest, 5);
}

}  // namespace
