#pragma once

// Runs a CUDA kernel's body on the host over the kernel's whole launch grid (test-only).
//
// The CUDA kernels are thin shells: a grid-stride loop over t in [0, threads) that calls a
// C10_HOST_DEVICE body from the family's _index.h. These helpers call the same body for every t,
// in a shuffled order (a GPU gives no order between threads; a body that depended on one would
// show it here), so the arithmetic the GPU would run is executed and compared with the CPU
// kernels on machines without a GPU. White-box: the tests include the library's internal headers.

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace torch_ragged::testing {

// body(t) for every t in [0, threads), in an order shuffled by `seed`.
template <typename Body>
void emulate_launch(int64_t threads, const Body& body, uint64_t seed = 0) {
  std::vector<int64_t> order(threads);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 generator(seed + static_cast<uint64_t>(threads));
  std::shuffle(order.begin(), order.end(), generator);
  for (const int64_t t : order) body(t);
}

// Bitwise equality of two tensors (NaN payloads included), whatever the dtype.
inline bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor x = a.contiguous().view({-1}).view(at::kByte);
  const at::Tensor y = b.contiguous().view({-1}).view(at::kByte);
  return torch::equal(x, y);
}

// same_bits where NaN matches NaN whatever its payload: an IEEE operation on two NaNs returns one
// of them, and which one the compiler decides (it may swap a commutative operation's operands).
inline bool same_bits_any_nan(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (!torch::equal(a.isnan(), b.isnan())) return false;
  return same_bits(a.masked_fill(a.isnan(), 0), b.masked_fill(b.isnan(), 0));
}

}  // namespace torch_ragged::testing
