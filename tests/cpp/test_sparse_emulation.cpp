// The sparse family's CUDA key kernel (flat_keys_kernel: sparse_index.h's flat_key per entry and a
// shared out-of-range flag), run on the host over its launch grid (grid_emulator.h) against the
// CPU's sparse_flat_keys: the same keys, and a flag exactly when the CPU raises (validate=True).
// Coalesce's decode of each run's indices from its key against torch's coalesce.
// The compressed layouts' invariant check (first_flagged_entry_kernel) against the CPU op.
// Sparse @ sparse: the CUDA kernel's pattern step (the products' keys, sorted and made unique) and
// its numeric kernel (spgemm_row_numeric, one thread per row) against the CPU's Gustavson kernel:
// the same entries, the same bits.

#include <ATen/OpMathType.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <vector>

#include "grid_emulator.h"
#include "sparse/sparse_index.h"

namespace torch_ragged::testing {
namespace {

// Row-major strides over sizes (what flat_key expects), written here as the tests' own reference.
KeyGeometry row_major_geometry(const std::vector<int64_t>& sizes) {
  KeyGeometry g;
  g.sparse_dim = static_cast<int>(sizes.size());
  int64_t stride = 1;
  for (int d = g.sparse_dim - 1; d >= 0; --d) {
    g.size[d] = sizes[d];
    g.stride[d] = stride;
    stride *= sizes[d];
  }
  return g;
}

TEST(SparseEmulation, FlatKeysMatchTheCpu) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("torch_ragged::sparse_flat_keys", "")
                       .typed<at::Tensor(const at::Tensor&, c10::SymIntArrayRef, bool)>();
  std::mt19937_64 rng(31);
  int flagged = 0;
  for (int trial = 0; trial < 100; ++trial) {
    const int dims = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> sizes;
    for (int d = 0; d < dims; ++d) sizes.push_back(1 + static_cast<int64_t>(rng() % 7));
    const KeyGeometry g = row_major_geometry(sizes);
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

// coalesce's CUDA decode (run_indices_kernel: run_head_indices per run) over its grid: each run's
// indices from its sorted key, against torch's own coalesce (1-3 sparse dims, int32 and int64).
TEST(SparseEmulation, RunIndicesMatchTorchsCoalesce) {
  std::mt19937_64 rng(37);
  for (int trial = 0; trial < 60; ++trial) {
    const int dims = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> sizes;
    for (int d = 0; d < dims; ++d) sizes.push_back(1 + static_cast<int64_t>(rng() % 9000));
    const KeyGeometry g = row_major_geometry(sizes);
    const int64_t nnz = 1 + static_cast<int64_t>(rng() % 400);
    const at::ScalarType dtype = trial % 2 == 0 ? torch::kLong : torch::kInt;
    std::vector<at::Tensor> rows;
    for (int d = 0; d < dims; ++d) {
      rows.push_back(torch::randint(std::min<int64_t>(sizes[d], 1 + trial % 5 * 3), {nnz},
                                    torch::kLong));  // small ranges now and then: duplicates
    }
    const at::Tensor indices = torch::stack(rows);
    const at::Tensor expected =
        torch::sparse_coo_tensor(indices, torch::ones({nnz}), sizes).coalesce().indices();
    const at::Tensor keys =
        (indices * torch::tensor(std::vector<int64_t>(g.stride, g.stride + dims)).unsqueeze(1))
            .sum(0);
    const at::Tensor sorted_keys = std::get<0>(torch::sort(keys));
    const at::Tensor unique = std::get<0>(torch::unique_consecutive(sorted_keys));
    // first_idx of the runs: where each distinct key first appears in the sorted keys
    const at::Tensor first_idx =
        torch::cat({torch::searchsorted(sorted_keys, unique), torch::tensor({nnz})});
    const int64_t runs = unique.size(0);
    at::Tensor out = torch::empty({dims, runs}, dtype);
    AT_DISPATCH_INDEX_TYPES(dtype, "run_indices_emulation", [&] {
      emulate_launch(runs, [&](int64_t r) {
        run_head_indices(g, sorted_keys.const_data_ptr<int64_t>(),
                         first_idx.const_data_ptr<int64_t>(), runs, r,
                         out.mutable_data_ptr<index_t>());
      });
    });
    EXPECT_TRUE(torch::equal(out.to(torch::kLong), expected)) << trial;
  }
}

at::Tensor random_coalesced(int64_t rows, int64_t cols, int64_t nnz, at::ScalarType dtype,
                            uint64_t seed) {
  torch::manual_seed(seed);
  const at::Tensor indices = torch::stack(
      {torch::randint(rows, {nnz}, torch::kLong), torch::randint(cols, {nnz}, torch::kLong)});
  // Magnitudes from 1e-3 to 1e3: sums whose bits depend on their order.
  const at::Tensor values = (torch::randn({nnz}, torch::kDouble) *
                             torch::pow(10.0, torch::randint(-3, 4, {nnz}, torch::kDouble)))
                                .to(dtype);
  return torch::sparse_coo_tensor(indices, values, {rows, cols}).coalesce();
}

at::Tensor row_offsets(const at::Tensor& rows, int64_t n) {
  return torch::cat(
      {torch::zeros({1}, torch::kLong),
       torch::zeros({n}, torch::kLong).index_add(0, rows, torch::ones_like(rows)).cumsum(0)});
}

template <typename scalar_t>
void check_spgemm_matches_the_cpu(at::ScalarType dtype, uint64_t seed) {
  using acc_t = at::opmath_type<scalar_t>;
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("torch_ragged::sparse_spgemm", "")
                       .typed<std::tuple<at::Tensor, at::Tensor>(
                           const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           const at::Tensor&, c10::SymIntArrayRef, c10::SymIntArrayRef)>();
  const int64_t n = 300, k = 200, m = 250;
  const at::Tensor a = random_coalesced(n, k, 3000, dtype, seed);
  const at::Tensor b = random_coalesced(k, m, 2500, dtype, seed + 1);
  const std::vector<int64_t> a_size = {n, k}, b_size = {k, m};
  const auto [cpu_indices, cpu_values] =
      op.call(a._indices(), a._values(), b._indices(), b._values(),
              c10::fromIntArrayRefSlow(a_size), c10::fromIntArrayRefSlow(b_size));
  // CSR operands, as spgemm_with hands them to the backends.
  const at::Tensor a_first = row_offsets(a._indices()[0], n),
                   b_first = row_offsets(b._indices()[0], k);
  const at::Tensor a_cols = a._indices()[1].contiguous(), b_cols = b._indices()[1].contiguous();
  const at::Tensor a_values = a._values().contiguous(), b_values = b._values().contiguous();
  // The pattern step of spgemm_pattern_cuda, in the same ATen ops on the host.
  const at::Tensor b_lengths = b_first.slice(0, 1) - b_first.slice(0, 0, -1);
  const at::Tensor per_entry = b_lengths.index_select(0, a_cols);
  const at::Tensor products_first =
      torch::cat({torch::zeros({1}, torch::kLong), per_entry.cumsum(0)});
  const at::Tensor a_entry = torch::repeat_interleave(per_entry);
  const at::Tensor rank = torch::arange(a_entry.size(0)) - products_first.index_select(0, a_entry);
  const at::Tensor b_entry = b_first.index_select(0, a_cols.index_select(0, a_entry)) + rank;
  const at::Tensor a_rows = a._indices()[0];
  const at::Tensor keys = a_rows.index_select(0, a_entry) * m + b_cols.index_select(0, b_entry);
  const at::Tensor unique = std::get<0>(torch::unique_consecutive(std::get<0>(torch::sort(keys))));
  const at::Tensor rows = torch::div(unique, m, "floor");
  const at::Tensor pattern = torch::stack({rows, unique - rows * m});
  ASSERT_TRUE(torch::equal(pattern, cpu_indices));
  // The numeric kernel over its grid, one thread per row, in a shuffled order.
  const at::Tensor c_first = row_offsets(rows, n);
  const at::Tensor c_cols = pattern[1].contiguous();
  std::vector<acc_t> acc(c_cols.size(0));
  const SpgemmRowTables<scalar_t> operands{
      a_first.const_data_ptr<int64_t>(),   a_cols.const_data_ptr<int64_t>(),
      a_values.const_data_ptr<scalar_t>(), b_first.const_data_ptr<int64_t>(),
      b_cols.const_data_ptr<int64_t>(),    b_values.const_data_ptr<scalar_t>(),
      c_first.const_data_ptr<int64_t>(),   c_cols.const_data_ptr<int64_t>()};
  emulate_launch(n, [&](int64_t i) {
    EXPECT_TRUE((spgemm_row_numeric<scalar_t, acc_t>(i, operands, acc.data())));
  });
  std::vector<scalar_t> device_values(acc.begin(), acc.end());
  const at::Tensor emulated =
      torch::from_blob(device_values.data(), {static_cast<int64_t>(device_values.size())}, dtype)
          .clone();
  EXPECT_TRUE(same_bits(emulated, cpu_values)) << dtype;
}

// A pattern of C that lacks a column some product lands in (symbolic and numeric steps out of
// step): the body reports it and writes nothing outside the row (the GPU shell asserts on it).
TEST(SparseEmulation, SpgemmNumericReportsAColumnMissingFromThePattern) {
  // A = [[1, 1]], B = [[0, 2, 0], [3, 0, 4]]: row 0 of C reaches columns 0, 1, 2; the pattern
  // below holds columns 0 and 1 only, and a sentinel entry after the row.
  const std::vector<int64_t> a_first{0, 2}, a_cols{0, 1}, b_first{0, 1, 3}, b_cols{1, 0, 2};
  const std::vector<double> a_values{1, 1}, b_values{2, 3, 4};
  const std::vector<int64_t> c_first{0, 2}, c_cols{0, 1, 99};
  std::vector<double> acc{-1, -1, -7};
  const SpgemmRowTables<double> operands{a_first.data(), a_cols.data(), a_values.data(),
                                         b_first.data(), b_cols.data(), b_values.data(),
                                         c_first.data(), c_cols.data()};
  EXPECT_FALSE((spgemm_row_numeric<double, double>(0, operands, acc.data())));
  EXPECT_EQ(acc, (std::vector<double>{3, 2, -7}));  // the found columns summed, the sentinel kept
}

TEST(SparseEmulation, SpgemmMatchesTheCpuBitForBit) {
  check_spgemm_matches_the_cpu<float>(at::kFloat, 41);
  check_spgemm_matches_the_cpu<double>(at::kDouble, 43);
  check_spgemm_matches_the_cpu<at::Half>(at::kHalf, 47);
  check_spgemm_matches_the_cpu<at::BFloat16>(at::kBFloat16, 53);
}

// sparse_compressed_violation's CUDA kernel (first_flagged_entry_kernel: each entry's slice by
// binary search, compressed_entry_violation, an atomic minimum) over its grid, against the CPU op
// (its slices walked per chunk): the same first flagged entry and kind, for valid layouts and ones
// with plain indices out of range or repeated, int32 and int64 offsets and indices.
template <typename offset_t, typename index_t>
void check_compressed_violation_matches_the_cpu(uint64_t seed) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("torch_ragged::sparse_compressed_violation", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymInt)>();
  std::mt19937_64 rng(seed);
  int flagged = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t slices = static_cast<int64_t>(rng() % 40), plain_size = 1 + rng() % 50;
    std::vector<offset_t> compressed{0};
    std::vector<index_t> plain;
    for (int64_t s = 0; s < slices; ++s) {  // each slice: a rising run of distinct indices
      for (int64_t j = 0; j < plain_size; ++j) {
        if (rng() % 3 == 0) plain.push_back(static_cast<index_t>(j));
      }
      compressed.push_back(static_cast<offset_t>(plain.size()));
    }
    const int64_t nnz = static_cast<int64_t>(plain.size());
    for (int breaks = static_cast<int>(rng() % 3); breaks > 0 && nnz > 0; --breaks) {
      const int64_t p = static_cast<int64_t>(rng() % nnz);
      const uint64_t how = rng() % 3;
      plain[p] = static_cast<index_t>(how == 0   ? -1
                                      : how == 1 ? plain_size
                                                 : (p > 0 ? plain[p - 1] : 0));
    }
    unsigned long long first = nnz;
    emulate_launch(nnz, [&](int64_t p) {
      const int64_t slice = slice_of_entry(compressed.data(), slices, p);
      if (compressed_entry_violation(compressed.data(), slice, plain.data(), plain_size, p) != 0) {
        first = std::min<unsigned long long>(first, p);
      }
    });
    const auto offsets_dtype = c10::CppTypeToScalarType<offset_t>::value;
    const auto plain_dtype = c10::CppTypeToScalarType<index_t>::value;
    const at::Tensor found =
        op.call(torch::tensor(at::ArrayRef<offset_t>(compressed), offsets_dtype),
                torch::tensor(at::ArrayRef<index_t>(plain), plain_dtype), plain_size);
    const int64_t kind = found[0].item<int64_t>(), position = found[1].item<int64_t>();
    if (static_cast<int64_t>(first) == nnz) {
      EXPECT_EQ(kind, 0) << trial;
      continue;
    }
    ++flagged;
    const int64_t p = static_cast<int64_t>(first);
    EXPECT_EQ(position, p) << trial;
    EXPECT_EQ(kind, compressed_entry_violation(compressed.data(),
                                               slice_of_entry(compressed.data(), slices, p),
                                               plain.data(), plain_size, p))
        << trial;
  }
  EXPECT_GT(flagged, 10);
  EXPECT_LT(flagged, 55);
}

TEST(SparseEmulation, CompressedViolationMatchesTheCpu) {
  check_compressed_violation_matches_the_cpu<int64_t, int64_t>(61);
  check_compressed_violation_matches_the_cpu<int32_t, int32_t>(67);
  check_compressed_violation_matches_the_cpu<int32_t, int64_t>(71);
}

}  // namespace
}  // namespace torch_ragged::testing
