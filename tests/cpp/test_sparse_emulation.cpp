// The sparse family's CUDA key kernel (flat_keys_kernel: sparse_index.h's flat_key per entry and a
// shared out-of-range flag), run on the host over its launch grid (grid_emulator.h) against the
// CPU's sparse_flat_keys: the same keys, and a flag exactly when the CPU raises (validate=True).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <vector>

#include "grid_emulator.h"
#include "sparse/sparse_index.h"

namespace torch_ragged::testing {
namespace {

TEST(SparseEmulation, FlatKeysMatchTheCpu) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("torch_ragged::sparse_flat_keys", "")
                       .typed<at::Tensor(const at::Tensor&, c10::SymIntArrayRef, bool)>();
  std::mt19937_64 rng(31);
  int flagged = 0;
  for (int trial = 0; trial < 100; ++trial) {
    const int dims = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> sizes;
    KeyGeometry g;
    g.sparse_dim = dims;
    for (int d = 0; d < dims; ++d) sizes.push_back(1 + static_cast<int64_t>(rng() % 7));
    int64_t stride = 1;
    for (int d = dims - 1; d >= 0; --d) {
      g.size[d] = sizes[d];
      g.stride[d] = stride;
      stride *= sizes[d];
    }
    const int64_t nnz = static_cast<int64_t>(rng() % 12);
    at::Tensor indices = torch::empty({dims, nnz}, torch::kLong);
    for (int d = 0; d < dims; ++d) {
      for (int64_t i = 0; i < nnz; ++i) {
        // Mostly in range; now and then -1 or the size itself.
        const int64_t r = static_cast<int64_t>(rng() % (sizes[d] * 8));
        indices[d][i] = r < sizes[d] * 7 ? r % sizes[d] : (r % 2 == 0 ? -1 : sizes[d]);
      }
    }
    std::vector<int64_t> keys(nnz);
    int32_t out_of_range = 0;
    emulate_launch(nnz, [&](int64_t i) {
      bool in_range = true;
      keys[i] = flat_key(g, indices.const_data_ptr<int64_t>(), nnz, i, in_range);
      if (!in_range) out_of_range = 1;
    });
    const at::Tensor unchecked = op.call(indices, c10::fromIntArrayRefSlow(sizes), false);
    EXPECT_TRUE(torch::equal(unchecked, torch::tensor(keys, torch::kLong))) << trial;
    bool refused = false;
    try {
      op.call(indices, c10::fromIntArrayRefSlow(sizes), true);
    } catch (const c10::IndexError&) {
      refused = true;
    }
    EXPECT_EQ(out_of_range != 0, refused) << trial;
    flagged += out_of_range;
  }
  EXPECT_GT(flagged, 10);
  EXPECT_LT(flagged, 90);
}

}  // namespace
}  // namespace torch_ragged::testing
