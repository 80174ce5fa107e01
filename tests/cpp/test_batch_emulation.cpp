// The batch family's CUDA kernel bodies (batch_index.h: scatter_to_padded_element,
// gather_to_packed_element), run on the host over their whole launch grids (grid_emulator.h) with
// tables built here from the members (host addresses stand in for device ones), against the CPU
// kernels: list_to_padded, packed_to_padded, list_to_packed and padded_to_packed, byte for byte,
// right and left padding, ranks 0 to 2, empty members and padding beyond every member.

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

#include <random>
#include <string>
#include <vector>

#include "batch/batch_index.h"
#include "grid_emulator.h"

namespace torch_ragged::testing {
namespace {

// Host tables of a batch, with the BatchTables view the kernels read.
struct Tables {
  std::vector<int64_t> shapes, offsets, max_shape, first_row, sources;
  BatchTables view;
};

Tables tables_of(const std::vector<at::Tensor>& members, int64_t rank,
                 const std::vector<int64_t>& max_shape, bool left,
                 const std::vector<int64_t>& sources) {
  Tables t;
  t.max_shape = max_shape;
  t.first_row = {0};
  const int64_t elem = members.empty() ? 1 : members[0].size(-1);
  for (const at::Tensor& m : members) {
    int64_t rows = 1;
    for (int64_t j = 0; j < rank; ++j) {
      t.shapes.push_back(m.size(j));
      t.offsets.push_back(left ? max_shape[j] - m.size(j) : 0);
      rows *= m.size(j);
    }
    t.first_row.push_back(t.first_row.back() + rows);
  }
  t.sources = sources;
  t.view = BatchTables{static_cast<int64_t>(members.size()),
                       rank,
                       elem,
                       t.shapes.data(),
                       t.offsets.data(),
                       t.max_shape.data(),
                       t.first_row.data(),
                       t.sources.data()};
  return t;
}

std::vector<int64_t> addresses(const std::vector<at::Tensor>& tensors) {
  std::vector<int64_t> out;
  for (const at::Tensor& t : tensors) out.push_back(reinterpret_cast<int64_t>(t.const_data_ptr()));
  return out;
}

// Random members of rank `rank` (+ the element dim of 3), sizes 0..4, and a max_shape one above.
std::vector<at::Tensor> random_members(std::mt19937_64& rng, int64_t rank, int64_t count) {
  std::vector<at::Tensor> members;
  for (int64_t b = 0; b < count; ++b) {
    std::vector<int64_t> shape;
    for (int64_t j = 0; j < rank; ++j) shape.push_back(static_cast<int64_t>(rng() % 5));
    shape.push_back(3);
    members.push_back(torch::randn(shape, torch::kDouble));
  }
  return members;
}

std::vector<int64_t> padded_max_shape(const std::vector<at::Tensor>& members, int64_t rank) {
  std::vector<int64_t> max_shape(rank, 0);
  for (const at::Tensor& m : members) {
    for (int64_t j = 0; j < rank; ++j) max_shape[j] = std::max(max_shape[j], m.size(j) + 1);
  }
  return max_shape;
}

at::Tensor emulated_padded(const Tables& t, const std::vector<int64_t>& padded_sizes, double pad) {
  at::Tensor out = torch::empty(padded_sizes, torch::kDouble);
  const int64_t padded_line = line_elems(t.max_shape.data(), t.view.rank, t.view.elem);
  const int64_t lines = padded_lines_per_item(t.max_shape.data(), t.view.rank);
  double* o = out.mutable_data_ptr<double>();
  emulate_launch(out.numel(), [&](int64_t e) {
    scatter_to_padded_element(t.view, o, pad, e, padded_line, lines);
  });
  return out;
}

at::Tensor emulated_packed(const Tables& t, const at::Tensor& padded) {
  at::Tensor out = torch::empty({t.first_row.back(), t.view.elem}, torch::kDouble);
  const int64_t padded_line = line_elems(t.max_shape.data(), t.view.rank, t.view.elem);
  const int64_t item_elems = padded_lines_per_item(t.max_shape.data(), t.view.rank) * padded_line;
  const double* base = padded.defined() ? padded.const_data_ptr<double>() : nullptr;
  double* o = out.mutable_data_ptr<double>();
  emulate_launch(out.numel(), [&](int64_t e) {
    gather_to_packed_element(t.view, o, base, e, padded_line, item_elems);
  });
  return out;
}

TEST(BatchEmulation, BodiesMatchTheCpuKernels) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t rank = trial % 3, count = 1 + static_cast<int64_t>(rng() % 6);
    const bool left = trial % 2 == 1;
    const std::string side = left ? "left" : "right";
    const std::vector<at::Tensor> members = random_members(rng, rank, count);
    const std::vector<int64_t> max_shape = padded_max_shape(members, rank);
    std::vector<int64_t> padded_sizes{count};
    padded_sizes.insert(padded_sizes.end(), max_shape.begin(), max_shape.end());
    padded_sizes.push_back(3);

    // list_to_padded and list_to_packed: members read through their addresses.
    const Tables from_list = tables_of(members, rank, max_shape, left, addresses(members));
    const auto [padded, shape_per_tensor] =
        torch_ragged::list_to_padded(members, -7.0, max_shape, side);
    EXPECT_TRUE(same_bits(emulated_padded(from_list, padded_sizes, -7.0), padded)) << trial;
    const auto [packed, shapes] = torch_ragged::list_to_packed(members);
    EXPECT_TRUE(same_bits(emulated_packed(from_list, at::Tensor()), packed)) << trial;

    // packed_to_padded: the members' places in the packed tensor are their sources.
    std::vector<int64_t> item_addresses;
    for (int64_t b = 0; b < count; ++b) {
      item_addresses.push_back(
          reinterpret_cast<int64_t>(packed.const_data_ptr<double>() + from_list.first_row[b] * 3));
    }
    const Tables from_packed = tables_of(members, rank, max_shape, left, item_addresses);
    const at::Tensor first_idx = torch::tensor(from_list.first_row, torch::kLong);
    EXPECT_TRUE(same_bits(
        emulated_padded(from_packed, padded_sizes, 2.5),
        torch_ragged::packed_to_padded(packed, shape_per_tensor, first_idx, 2.5, max_shape, side)))
        << trial;

    // padded_to_packed: read from the padded tensor.
    EXPECT_TRUE(same_bits(emulated_packed(from_list, padded),
                          torch_ragged::padded_to_packed(padded, shape_per_tensor, side)))
        << trial;
  }
}

}  // namespace
}  // namespace torch_ragged::testing
