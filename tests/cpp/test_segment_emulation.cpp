// The segment core's CUDA kernel bodies (segment_index.h), run on the host over their launch grids
// (grid_emulator.h), against the CPU kernels: the same bits for sum / mean / max / min / softmax /
// log_softmax / their gradient's sums / gathered sums and dots, in float and double, on layouts
// from empty segments to one segment spanning every level of the reduction tree.

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

#include <limits>
#include <tuple>
#include <vector>

#include "common/op_handle.h"
#include "grid_emulator.h"
#include "segment/segment_index.h"

namespace torch_ragged::testing {
namespace {

// segment_cuda.cu's with_tree_tables: `tree` with tree_tables_kernel's tables (held by `tables`).
struct TreeTables {
  std::vector<int64_t> chunk_first_segments;
  std::vector<CrossingSegments> node_crossings;
};

inline ReductionTree emulated_with_tree_tables(ReductionTree tree, TreeTables& tables) {
  tables.chunk_first_segments.assign(tree.nodes(0), -1);
  tables.node_crossings.assign(tree.table_entries(), CrossingSegments{-2, -2});
  emulate_launch(tree.table_entries(), [&](int64_t i) {
    tree_table_entry(tree, i, tables.chunk_first_segments.data(), tables.node_crossings.data());
  });
  tree.chunk_first_segments = tables.chunk_first_segments.data();
  tree.node_crossings = tables.node_crossings.data();
  return tree;
}

// The CUDA host code of segment_cuda.cu's reduce_tree, with the launches emulated (kPiecesOnly:
// level 0 folds only the chunks' head and tail pieces and empty segments are not written, as in
// softmax's trees). The tree's tables are built here unless `given` has them.
template <typename Reducer, bool kPiecesOnly = false, typename Load, typename Write>
void emulated_reduce_tree(const ReductionTree& given, int64_t width, const Load& load,
                          const Write& write) {
  using Acc = typename Reducer::Acc;
  TreeTables tables;
  const ReductionTree tree =
      given.node_crossings != nullptr ? given : emulated_with_tree_tables(given, tables);
  std::vector<Acc> heads, tails, below_heads, below_tails;
  for (const TreeLaunch& launch : tree_launches(tree, width)) {
    if (kPiecesOnly && launch.kind == TreeLaunch::kEmptySegments) continue;
    if (launch.kind == TreeLaunch::kEmptySegments) {
      emulate_launch(launch.threads, [&](int64_t t) {
        write_if_empty<Reducer>(tree, t / width, t % width, write);
      });
      continue;
    }
    below_heads = std::move(heads);
    below_tails = std::move(tails);
    heads.assign(launch.threads, Reducer::identity());
    tails.assign(launch.threads, Reducer::identity());
    if (launch.kind == TreeLaunch::kChunks) {
      emulate_launch(launch.threads, [&](int64_t t) {
        if constexpr (kPiecesOnly) {
          reduce_chunk_pieces<Reducer>(tree, t / width, t % width, width, load, heads.data(),
                                       tails.data());
        } else {
          reduce_chunk<Reducer>(tree, t / width, t % width, width, load, write, heads.data(),
                                tails.data());
        }
      });
    } else {
      emulate_launch(launch.threads, [&](int64_t t) {
        merge_node<Reducer>(tree, launch.level, t / width, t % width, width,
                            tree.crossings_of(launch.level - 1), below_heads.data(),
                            below_tails.data(), write, heads.data(), tails.data());
      });
    }
  }
}

struct Case {
  std::vector<int64_t> first_idx;
  int64_t width;
};

// Lengths drawn so that segments sit inside chunks, cross chunk and node edges, and span levels.
Case random_case(int64_t segments, int64_t max_len, int64_t width, uint64_t seed) {
  torch::manual_seed(seed);
  const at::Tensor lengths = torch::randint(0, max_len + 1, {segments}, torch::kLong);
  std::vector<int64_t> first_idx{0};
  for (int64_t b = 0; b < segments; ++b)
    first_idx.push_back(first_idx.back() + lengths[b].item<int64_t>());
  return {first_idx, width};
}

std::vector<Case> cases() {
  return {
      {{0}, 3},                                     // no segment
      {{0, 0, 0}, 2},                               // only empty segments
      {{0, 5, 5, 40, 41}, 1},                       // empty, crossing one chunk edge
      {{0, 1000, 1001, 3000}, 4},                   // two levels
      {{0, 100'000}, 1},                            // one segment over three levels
      {{0, 7, 40'000, 70'001, 70'001, 70'050}, 3},  // long and short, crossing level-2 nodes
      random_case(300, 70, 5, 1),
      random_case(2000, 5, 1, 2),  // many short segments, scalar rows
      // short scalar segments over several CPU tasks (the CPU's fixed-count path, task edges)
      random_case(40'000, 9, 1, 4),
      random_case(40, 3000, 2, 3),
  };
}

at::Tensor offsets(const Case& c) { return torch::tensor(c.first_idx, torch::kLong); }

ReductionTree tree_of(const Case& c) {
  return ReductionTree::of(c.first_idx.data(), static_cast<int64_t>(c.first_idx.size()) - 1,
                           c.first_idx.back(), c.width);
}

at::Tensor random_data(const Case& c, at::ScalarType dtype, uint64_t seed) {
  // (rows, width) with rows = first_idx[-1]
  torch::manual_seed(seed);
  // Spread magnitudes, so that the order of additions shows in the last bits.
  return (torch::randn({c.first_idx.back(), c.width}, torch::kDouble) *
          torch::exp(torch::randn({c.first_idx.back(), c.width}, torch::kDouble) * 3))
      .to(dtype);
}

const std::vector<at::ScalarType> kFloating{torch::kFloat, torch::kDouble};

template <typename scalar_t, bool kMean>
at::Tensor emulated_sum(const Case& c, const at::Tensor& data) {
  using acc_t = sum_acc_t<scalar_t>;
  at::Tensor out =
      torch::empty({static_cast<int64_t>(c.first_idx.size()) - 1, c.width}, data.options());
  emulated_reduce_tree<SumReducer<acc_t>>(
      tree_of(c), c.width, LoadRows<scalar_t, acc_t>{data.const_data_ptr<scalar_t>(), c.width},
      WriteSum<scalar_t, kMean>{out.mutable_data_ptr<scalar_t>(), c.width});
  return out;
}

TEST(SegmentEmulation, SumAndMeanMatchTheCpuBitForBit) {
  for (const Case& c : cases()) {
    for (const auto dtype : kFloating) {
      const at::Tensor data = random_data(c, dtype, 7);
      AT_DISPATCH_FLOATING_TYPES(dtype, "sum", [&] {
        EXPECT_TRUE(same_bits(emulated_sum<scalar_t, false>(c, data),
                              torch_ragged::segment_sum(data, offsets(c))))
            << "sum, width " << c.width << ", rows " << c.first_idx.back();
        EXPECT_TRUE(same_bits(emulated_sum<scalar_t, true>(c, data),
                              torch_ragged::segment_mean(data, offsets(c))))
            << "mean, width " << c.width << ", rows " << c.first_idx.back();
      });
    }
  }
}

// Rows of -0.0 (a few of them 1.0): where a segment's piece starts from the identity (0 + -0.0 is
// +0.0) shows in the sign of its sum, so a body that started a piece from its first row, or at
// another row than the CPU, would differ from the CPU's bits here.
TEST(SegmentEmulation, SumsOfNegativeZerosMatchTheCpuBitForBit) {
  for (const Case& c : cases()) {
    for (const auto dtype : kFloating) {
      at::Tensor data = torch::full({c.first_idx.back(), c.width}, -0.0, dtype);
      if (data.size(0) > 3) data.index_put_({torch::arange(0, data.size(0), 97)}, 1.0);
      AT_DISPATCH_FLOATING_TYPES(dtype, "sum", [&] {
        EXPECT_TRUE(same_bits(emulated_sum<scalar_t, false>(c, data),
                              torch_ragged::segment_sum(data, offsets(c))))
            << "sum of -0.0, width " << c.width << ", rows " << c.first_idx.back();
      });
    }
  }
}

// Integer sums and means on the GPU's body: the 64-bit accumulator, the mean divided in 64 bits
// (a count cast to int8 wrapped to 0 at 256 rows and trapped), against the CPU kernel and against
// a plain loop of Python-style integers.
TEST(SegmentEmulation, IntegerSumsAndMeansMatchTheCpuAndALoop) {
  for (const Case& c : cases()) {
    torch::manual_seed(11);
    const at::Tensor wide = torch::randint(-100, 101, {c.first_idx.back(), c.width}, torch::kLong);
    const auto rows_of = wide.accessor<int64_t, 2>();
    for (const auto dtype : {torch::kInt8, torch::kInt16, torch::kInt32}) {
      const at::Tensor data = wide.to(dtype);
      AT_DISPATCH_INTEGRAL_TYPES(dtype, "integers", [&] {
        const at::Tensor mean = emulated_sum<scalar_t, true>(c, data);
        const auto means = mean.accessor<scalar_t, 2>();
        EXPECT_TRUE(torch::equal(mean, torch_ragged::segment_mean(data, offsets(c))));
        EXPECT_TRUE(torch::equal(emulated_sum<scalar_t, false>(c, data),
                                 torch_ragged::segment_sum(data, offsets(c))));
        for (size_t b = 0; b + 1 < c.first_idx.size(); ++b) {
          const int64_t rows = c.first_idx[b + 1] - c.first_idx[b];
          for (int64_t col = 0; col < c.width; ++col) {
            int64_t total = 0;
            for (int64_t r = c.first_idx[b]; r < c.first_idx[b + 1]; ++r) {
              total += rows_of[r][col];
            }
            const int64_t expected = rows > 0 ? total / rows : 0;  // C++ division: toward zero
            ASSERT_EQ(static_cast<int64_t>(means[b][col]), expected)
                << "segment " << b << ", " << dtype;
          }
        }
      });
    }
  }
}

// The data make the order of additions visible: a plain left-to-right sum of the long segment
// differs from the tree's in the last bits (else the bitwise comparisons above could not fail).
TEST(SegmentEmulation, TheDataTellSummationOrdersApart) {
  const Case c{{0, 100'000}, 1};
  const at::Tensor data = random_data(c, torch::kFloat, 7);
  float sequential = 0;
  for (int64_t r = 0; r < 100'000; ++r) sequential += data[r][0].item<float>();
  const float tree = torch_ragged::segment_sum(data, offsets(c)).item<float>();
  EXPECT_NE(sequential, tree);
  EXPECT_NEAR(sequential, tree, 1e-3 * std::abs(tree) + 1e-3);
}

TEST(SegmentEmulation, IntegerAndHalfSumsMatchTheCpu) {
  for (const Case& c : cases()) {
    const at::Tensor ints = (random_data(c, torch::kDouble, 3) * 100).to(torch::kInt);
    EXPECT_TRUE(
        same_bits(emulated_sum<int, true>(c, ints), torch_ragged::segment_mean(ints, offsets(c))));
    const at::Tensor halves = random_data(c, torch::kDouble, 4).clamp(-100, 100).to(torch::kHalf);
    EXPECT_TRUE(same_bits(emulated_sum<at::Half, false>(c, halves),
                          torch_ragged::segment_sum(halves, offsets(c))));
  }
}

TEST(SegmentEmulation, MaxAndMinMatchTheCpu) {
  for (const Case& c : cases()) {
    at::Tensor data = random_data(c, torch::kFloat, 5);
    if (data.numel() > 10) data.view({-1})[7] = std::numeric_limits<float>::quiet_NaN();
    const int64_t segments = static_cast<int64_t>(c.first_idx.size()) - 1;
    for (const bool largest : {true, false}) {
      at::Tensor values = torch::empty({segments, c.width}, data.options());
      at::Tensor arg = torch::empty({segments, c.width}, torch::kLong);
      const WriteExtremum<float> write{values.mutable_data_ptr<float>(),
                                       arg.mutable_data_ptr<int64_t>(), c.width};
      const LoadRows<float> load{data.const_data_ptr<float>(), c.width};
      if (largest) {
        emulated_reduce_tree<ExtremumReducer<float, true>>(tree_of(c), c.width, load, write);
      } else {
        emulated_reduce_tree<ExtremumReducer<float, false>>(tree_of(c), c.width, load, write);
      }
      const auto [expected_values, expected_arg] =
          largest ? torch_ragged::segment_max(data, offsets(c))
                  : torch_ragged::segment_min(data, offsets(c));
      EXPECT_TRUE(same_bits(values, expected_values));
      EXPECT_TRUE(torch::equal(arg, expected_arg));
    }
  }
}

// segment_cuda.cu's softmax_cuda: the two trees over the chunks' head and tail pieces, then
// softmax_chunk per (chunk, column). Statistics the trees do not write stay NaN: a row that read
// one would show.
template <typename scalar_t, bool kLog>
at::Tensor emulated_softmax(const Case& c, const at::Tensor& data) {
  using acc_t = at::opmath_type<scalar_t>;
  TreeTables tables;
  const ReductionTree tree = emulated_with_tree_tables(tree_of(c), tables);
  const acc_t nan = std::numeric_limits<acc_t>::quiet_NaN();
  std::vector<acc_t> shifts(tree.num_segments * c.width, nan),
      divisors(tree.num_segments * c.width, nan);
  const scalar_t* in = data.const_data_ptr<scalar_t>();
  emulated_reduce_tree<ExtremumReducer<acc_t, true>, true>(
      tree, c.width, LoadRows<scalar_t>{in, c.width}, WriteShift<acc_t>{shifts.data(), c.width});
  emulated_reduce_tree<SumReducer<acc_t>, true>(
      tree, c.width, LoadShiftedExp<scalar_t>{in, shifts.data(), c.width},
      WriteSoftmaxDivisor<acc_t, kLog>{divisors.data(), c.width});
  at::Tensor out = torch::empty_like(data);
  const SoftmaxOutput<scalar_t, kLog> map{in, shifts.data(), divisors.data(),
                                          out.mutable_data_ptr<scalar_t>(), c.width};
  emulate_launch(tree.nodes(0) * c.width,
                 [&](int64_t t) { softmax_chunk(tree, t / c.width, t % c.width, map); });
  return out;
}

TEST(SegmentEmulation, SoftmaxAndLogSoftmaxMatchTheCpuBitForBit) {
  for (const Case& c : cases()) {
    for (const auto dtype : kFloating) {
      at::Tensor data = random_data(c, dtype, 11) * 30;
      if (data.size(0) > 50) data[3].fill_(-std::numeric_limits<double>::infinity());
      AT_DISPATCH_FLOATING_TYPES(dtype, "softmax", [&] {
        EXPECT_TRUE(same_bits(emulated_softmax<scalar_t, false>(c, data),
                              torch_ragged::segment_softmax(data, offsets(c))))
            << "softmax, width " << c.width << ", rows " << c.first_idx.back();
        EXPECT_TRUE(same_bits(emulated_softmax<scalar_t, true>(c, data),
                              torch_ragged::segment_log_softmax(data, offsets(c))))
            << "log_softmax, width " << c.width << ", rows " << c.first_idx.back();
      });
    }
  }
}

// Scalar segments over many CPU tasks, up to the data's last row: short ones (0 to 70 rows; up to
// 64, the CPU finds their maxima in vectors, in any order, and runs their sums a segment per lane
// unless they cross a level-1 node) and long ones inside a task crossing level-1 nodes (summed
// row by row). Values of comparable size,
// so that every term counts in the sums and their order shows in the last bits, with the values
// where the max's order could show: NaN rows (two payloads), ties of +0 and -0, a lone -0 maximum
// beside -inf (log_softmax then shows the shift's zero sign), all -inf, +inf. NaN payloads are
// the compiler's choice (see same_bits_any_nan); a NaN lost or misplaced is not.
TEST(SegmentEmulation, ScalarSegmentsWithSpecialValuesMatchTheCpuBitForBit) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const Case& c : {random_case(30'000, 70, 1, 8), random_case(60, 3000, 1, 9)}) {
    for (const auto dtype : kFloating) {
      torch::manual_seed(13);
      at::Tensor data = torch::randn({c.first_idx.back(), 1}, torch::kDouble).to(dtype);
      AT_DISPATCH_FLOATING_TYPES(dtype, "special", [&] {
        scalar_t* x = data.mutable_data_ptr<scalar_t>();
        const scalar_t nan_a = std::nan("1"), nan_b = std::nan("2");
        for (size_t b = 0; b + 1 < c.first_idx.size(); ++b) {
          const int64_t lo = c.first_idx[b], n = c.first_idx[b + 1] - lo;
          if (n < 2) continue;
          switch (b % 13) {
            case 1:  // two NaN rows: the whole segment is NaN
              x[lo + n / 2] = nan_a;
              x[lo + n - 1] = nan_b;
              break;
            case 2:  // -0, +0, -0, ...: a tie of zeros
              for (int64_t r = 0; r < n; ++r) x[lo + r] = r % 2 ? scalar_t(0) : -scalar_t(0);
              break;
            case 3:  // a lone -0 maximum, the other rows -inf
              for (int64_t r = 0; r < n; ++r) x[lo + r] = -inf;
              x[lo + n - 1] = -scalar_t(0);
              break;
            case 4:
              for (int64_t r = 0; r < n; ++r) x[lo + r] = -inf;
              break;
            case 5:
              x[lo + n / 2] = inf;
              break;
          }
        }
        EXPECT_TRUE(same_bits_any_nan(emulated_softmax<scalar_t, false>(c, data),
                                      torch_ragged::segment_softmax(data, offsets(c))))
            << "softmax, rows " << c.first_idx.back();
        EXPECT_TRUE(same_bits_any_nan(emulated_softmax<scalar_t, true>(c, data),
                                      torch_ragged::segment_log_softmax(data, offsets(c))))
            << "log_softmax, rows " << c.first_idx.back();
      });
    }
  }
}

template <typename scalar_t, bool kLog>
at::Tensor emulated_softmax_backward(const Case& c, const at::Tensor& grad, const at::Tensor& y) {
  using acc_t = at::opmath_type<scalar_t>;
  TreeTables tables;
  const ReductionTree tree = emulated_with_tree_tables(tree_of(c), tables);
  std::vector<acc_t> sums(tree.num_segments * c.width, std::numeric_limits<acc_t>::quiet_NaN());
  const scalar_t* g = grad.const_data_ptr<scalar_t>();
  const scalar_t* out = y.const_data_ptr<scalar_t>();
  emulated_reduce_tree<SumReducer<acc_t>, true>(
      tree, c.width, LoadGradTerm<scalar_t>{g, kLog ? nullptr : out, c.width},
      WriteAcc<acc_t>{sums.data(), c.width});
  at::Tensor grad_input = torch::empty_like(grad);
  const SoftmaxGradInput<scalar_t, kLog> map{g, out, sums.data(),
                                             grad_input.mutable_data_ptr<scalar_t>(), c.width};
  emulate_launch(tree.nodes(0) * c.width,
                 [&](int64_t t) { softmax_chunk(tree, t / c.width, t % c.width, map); });
  return grad_input;
}

at::Tensor cpu_softmax_backward(const at::Tensor& grad, const at::Tensor& y, const Case& c,
                                bool log) {
  static auto op =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool)>(
          "torch_ragged::segment_softmax_backward");
  return op.call(grad, y, offsets(c), log);
}

TEST(SegmentEmulation, SoftmaxGradientsMatchTheCpuBitForBit) {
  for (const Case& c : cases()) {
    for (const auto dtype : kFloating) {
      const at::Tensor grad = random_data(c, dtype, 13);
      const at::Tensor y = torch_ragged::segment_softmax(random_data(c, dtype, 17), offsets(c));
      const at::Tensor log_y =
          torch_ragged::segment_log_softmax(random_data(c, dtype, 17), offsets(c));
      AT_DISPATCH_FLOATING_TYPES(dtype, "softmax_backward", [&] {
        EXPECT_TRUE(same_bits(emulated_softmax_backward<scalar_t, false>(c, grad, y),
                              cpu_softmax_backward(grad, y, c, false)));
        EXPECT_TRUE(same_bits(emulated_softmax_backward<scalar_t, true>(c, grad, log_y),
                              cpu_softmax_backward(grad, log_y, c, true)));
      });
    }
  }
}

// A sparse matrix's rows times a dense matrix: rows of `data` gathered by `index`, times `weight`.
TEST(SegmentEmulation, WeightedGatheredSumsMatchTheCpuBitForBit) {
  static auto gather_sum =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                           const at::Tensor&)>("torch_ragged::segment_gather_sum");
  for (const Case& c : cases()) {
    for (const auto dtype : kFloating) {
      const int64_t entries = c.first_idx.back();
      const at::Tensor dense = random_data({{0, 50}, c.width}, dtype, 19);
      const at::Tensor index = torch::randint(0, 50, {entries}, torch::kLong);
      const at::Tensor weight = torch::randn({entries}, torch::kDouble).to(dtype);
      const at::Tensor expected = gather_sum.call(dense, index, weight, offsets(c));
      AT_DISPATCH_FLOATING_TYPES(dtype, "gather_sum", [&] {
        at::Tensor out =
            torch::empty({static_cast<int64_t>(c.first_idx.size()) - 1, c.width}, dense.options());
        emulated_reduce_tree<SumReducer<scalar_t>>(
            tree_of(c), c.width,
            LoadRows<scalar_t>{dense.const_data_ptr<scalar_t>(), c.width,
                               index.const_data_ptr<int64_t>(), weight.const_data_ptr<scalar_t>()},
            WriteSum<scalar_t, false>{out.mutable_data_ptr<scalar_t>(), c.width});
        EXPECT_TRUE(same_bits(out, expected)) << "width " << c.width << ", entries " << entries;
      });
    }
  }
}

TEST(SegmentEmulation, GatheredDotsMatchTheCpuBitForBit) {
  static auto gather_dot =
      op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           const at::Tensor&)>("torch_ragged::segment_gather_dot");
  for (const Case& c : cases()) {
    const int64_t segments = static_cast<int64_t>(c.first_idx.size()) - 1;
    const int64_t entries = c.first_idx.back();
    const at::Tensor a = random_data({{0, segments}, 9}, torch::kFloat, 23);
    const at::Tensor b = random_data({{0, 40}, 9}, torch::kFloat, 29);
    const at::Tensor index = torch::randint(0, 40, {entries}, torch::kLong);
    at::Tensor out = torch::empty({entries}, a.options());
    emulate_launch(entries, [&](int64_t entry) {
      gather_dot_entry(a.const_data_ptr<float>(), b.const_data_ptr<float>(),
                       index.const_data_ptr<int64_t>(), c.first_idx.data(), segments, 9, entry,
                       out.mutable_data_ptr<float>());
    });
    EXPECT_TRUE(same_bits(out, gather_dot.call(a, b, index, offsets(c))));
  }
}

TEST(SegmentEmulation, ResultsDoNotDependOnTheCpuThreadCount) {
  const Case c = random_case(3000, 200, 3, 31);
  const at::Tensor data = random_data(c, torch::kFloat, 37);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor one = torch_ragged::segment_softmax(data, offsets(c));
  const at::Tensor sum_one = torch_ragged::segment_sum(data, offsets(c));
  at::set_num_threads(std::max(2, threads));
  EXPECT_TRUE(same_bits(one, torch_ragged::segment_softmax(data, offsets(c))));
  EXPECT_TRUE(same_bits(sum_one, torch_ragged::segment_sum(data, offsets(c))));
  at::set_num_threads(threads);
}

// The launch plan: enough threads to fill a GPU (an H200 runs ~270k threads at once) on a long
// scalar reduction and on many small segments of 64 columns, no launch with fewer than the
// chunks' count at level 0, and every partial written by one thread (node x column: distinct).
// The one launch of the tree tables fills every chunk's first segment and every node's crossing
// segments of levels 0 .. levels() - 2 with what a search per node gives (a loop over the levels).
TEST(SegmentEmulation, TreeTablesHoldWhatASearchPerNodeGives) {
  for (const Case& c : cases()) {
    const ReductionTree plain = tree_of(c);
    TreeTables tables;
    const ReductionTree tree = emulated_with_tree_tables(plain, tables);
    for (int64_t chunk = 0; chunk < plain.nodes(0); ++chunk) {
      ASSERT_EQ(tree.first_segment_of_chunk(chunk),
                segment_of_row(c.first_idx.data(), plain.num_segments, chunk << plain.chunk_bits));
    }
    int64_t checked = 0;
    for (int level = 0; level < std::max(plain.levels() - 1, 1); ++level) {
      for (int64_t node = 0; node < plain.nodes(level); ++node, ++checked) {
        const CrossingSegments want = plain.crossing(level, node),
                               got = tree.crossings_of(level)[node];
        ASSERT_EQ(got.head, want.head) << "level " << level << ", node " << node;
        ASSERT_EQ(got.tail, want.tail) << "level " << level << ", node " << node;
      }
    }
    EXPECT_EQ(checked, static_cast<int64_t>(tables.node_crossings.size()));
  }
}

TEST(SegmentEmulation, TheLaunchPlanFillsAGpu) {
  const std::vector<int64_t> one_segment{0, 10'000'000};
  const auto long_scalar =
      tree_launches(ReductionTree::of(one_segment.data(), 1, 10'000'000, 1), 1);
  ASSERT_EQ(long_scalar.front().kind, TreeLaunch::kChunks);
  EXPECT_GE(long_scalar.front().threads, 256'000);
  EXPECT_EQ(long_scalar.front().threads, 312'500);
  EXPECT_EQ(long_scalar.size(), 6u);                   // chunks, 4 merge levels, empty segments
  const Case many = random_case(100'000, 32, 64, 41);  // the segment benchmark's "many small"
  const auto small = tree_launches(tree_of(many), 64);
  EXPECT_GE(small.front().threads, 256'000);
}

}  // namespace
}  // namespace torch_ragged::testing
