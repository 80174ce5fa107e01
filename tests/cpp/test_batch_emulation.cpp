// The batch family's CUDA kernel bodies (batch_index.h: scatter_to_padded_element,
// gather_to_packed_element; for rank-1 batches pad_rank1_rows and the segment core's row mover on
// the block emulator), run on the host over their whole launch grids (grid_emulator.h) with
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
#include "block_emulator.h"
#include "common/element_type.h"
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

// ---- Rank-1 batches on the row kernels (block_emulator.h), as the CUDA shells launch them ----

// launch_scatter_to_padded's row path: pad_rank1_rows over tiles of `threads` padded rows.
at::Tensor emulated_rank1_padded(const Tables& t, int64_t max_len, const at::Tensor& pad_element,
                                 uint64_t source_bits, int threads, LaunchReport& report) {
  at::Tensor out = torch::empty({t.view.batch, max_len, t.view.elem}, pad_element.options());
  const int64_t element_bytes = out.element_size(), row_bytes = t.view.elem * element_bytes;
  const int chunk_bytes = widest_chunk_bytes(static_cast<uint64_t>(row_bytes) | source_bits |
                                             address_bits(out.data_ptr()));
  EXPECT_GE(chunk_bytes, element_bytes);  // else the shell takes the element kernel
  with_element_type("test", chunk_bytes, [&](auto chunk) {
    using Chunk = decltype(chunk);
    const Chunk pad = repeated_element<Chunk>(
        static_cast<const char*>(pad_element.const_data_ptr()), element_bytes);
    const int64_t rows = t.view.batch * max_len;
    report = emulate_cooperative_launch(
        std::min<int64_t>((rows + threads - 1) / threads, 3), threads,
        [&](const EmulatedBlock& block) {
          pad_rank1_rows(block, t.view, max_len, static_cast<Chunk*>(out.mutable_data_ptr()),
                         row_bytes / chunk_bytes, pad);
        });
  });
  return out;
}

// launch_gather_to_packed's row path: the segment core's mover over first_row, reading the padded
// tensor (defined) or the members at t.sources.
at::Tensor emulated_rank1_packed(const Tables& t, const at::Tensor& padded, int64_t max_len,
                                 const at::TensorOptions& options, uint64_t source_bits,
                                 int threads, LaunchReport& report) {
  at::Tensor out = torch::empty({t.first_row.back(), t.view.elem}, options);
  const int64_t row_bytes = t.view.elem * out.element_size();
  const void* padded_base = padded.defined() ? padded.const_data_ptr() : nullptr;
  const int chunk_bytes =
      widest_chunk_bytes(static_cast<uint64_t>(row_bytes) | source_bits |
                         address_bits(out.data_ptr()) | address_bits(padded_base));
  with_element_type("test", chunk_bytes, [&](auto chunk) {
    using Chunk = decltype(chunk);
    const int64_t chunks = row_bytes / chunk_bytes, rows = out.size(0);
    const PackedRowSource<Chunk> source{t.view, static_cast<const Chunk*>(padded_base), chunks,
                                        max_len};
    report = emulate_cooperative_launch(
        std::min<int64_t>((rows + threads - 1) / threads, 3), threads,
        [&](const EmulatedBlock& block) {
          move_segment_rows(block, block.shared<int64_t>(0, "row_segment", threads),
                            block.shared<int64_t>(1, "warp_max", threads / kWarpSize),
                            t.first_row.data(), t.view.batch, rows,
                            static_cast<Chunk*>(out.mutable_data_ptr()), chunks, source);
        });
  });
  return out;
}

// Members (s_b, C) of 0-6 rows; `misaligned` ones start one element into their storage (the chunk
// narrows to what their addresses allow).
std::vector<at::Tensor> rank1_members(std::mt19937_64& rng, int64_t count, int64_t width,
                                      torch::Dtype dtype, bool misaligned) {
  std::vector<at::Tensor> members;
  for (int64_t b = 0; b < count; ++b) {
    const int64_t rows = static_cast<int64_t>(rng() % 7), numel = rows * width;
    const at::Tensor flat = (torch::randn({numel + 1}) * 10).abs().to(dtype);
    const int64_t shift = misaligned && b % 2 == 1 ? 1 : 0;
    members.push_back(flat.narrow(0, shift, numel).view({rows, width}));
  }
  return members;
}

TEST(BatchEmulation, RankOneRowKernelsMatchTheCpuKernels) {
  std::mt19937_64 rng(31);
  const std::vector<std::pair<int64_t, torch::Dtype>> widths = {
      {3, torch::kDouble}, {4, torch::kFloat},  {3, torch::kFloat}, {5, torch::kHalf},
      {7, torch::kBool},   {40, torch::kFloat}, {1, torch::kLong},  {33, torch::kByte}};
  for (int trial = 0; trial < 32; ++trial) {
    const auto [width, dtype] = widths[trial % widths.size()];
    const int64_t count = 1 + static_cast<int64_t>(rng() % 40);
    const bool left = trial % 2 == 1, misaligned = trial % 3 == 2;
    const std::string side = left ? "left" : "right";
    const int threads = trial == 7 ? 256 : trial % 4 == 0 ? 128 : 64;  // 256: kCudaThreads
    const std::vector<at::Tensor> members = rank1_members(rng, count, width, dtype, misaligned);
    int64_t max_len = 0;
    for (const at::Tensor& m : members) max_len = std::max(max_len, m.size(0));
    max_len += trial % 5;  // padding beyond every member too
    if (max_len == 0) continue;
    const int pad_value = dtype == torch::kBool ? 1 : 3;  // what the dtype holds
    const at::Tensor pad = torch::full({1}, pad_value, dtype);
    LaunchReport report;

    const Tables from_list = tables_of(members, 1, {max_len}, left, addresses(members));
    const auto [padded, shape_per_tensor] =
        torch_ragged::list_to_padded(members, pad_value, std::vector<int64_t>{max_len}, side);
    EXPECT_TRUE(same_bits(emulated_rank1_padded(from_list, max_len, pad,
                                                address_bits(from_list.sources), threads, report),
                          padded))
        << trial;
    EXPECT_TRUE(report.clean()) << report.summary();

    const auto [packed, shapes] = torch_ragged::list_to_packed(members);
    if (packed.size(0) == 0) continue;
    EXPECT_TRUE(same_bits(emulated_rank1_packed(from_list, at::Tensor(), 0, packed.options(),
                                                address_bits(from_list.sources), threads, report),
                          packed))
        << trial;
    EXPECT_TRUE(report.clean()) << report.summary();

    // packed_to_padded: the members' places in the packed tensor are their sources.
    std::vector<int64_t> item_addresses;
    const auto* base = static_cast<const char*>(packed.const_data_ptr());
    for (int64_t b = 0; b < count; ++b) {
      item_addresses.push_back(
          reinterpret_cast<int64_t>(base + from_list.first_row[b] * width * packed.element_size()));
    }
    const Tables from_packed = tables_of(members, 1, {max_len}, left, item_addresses);
    EXPECT_TRUE(same_bits(
        emulated_rank1_padded(from_packed, max_len, pad, address_bits(base), threads, report),
        torch_ragged::packed_to_padded(packed, shape_per_tensor,
                                       torch::tensor(from_list.first_row, torch::kLong), pad_value,
                                       std::vector<int64_t>{max_len}, side)))
        << trial;
    EXPECT_TRUE(report.clean()) << report.summary();

    EXPECT_TRUE(same_bits(
        emulated_rank1_packed(from_list, padded, max_len, packed.options(), 0, threads, report),
        torch_ragged::padded_to_packed(padded, shape_per_tensor, side)))
        << trial;
    EXPECT_TRUE(report.clean()) << report.summary();
  }
}

}  // namespace
}  // namespace torch_ragged::testing
