// The C++ API of the segment core, through the public headers only.

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

namespace {

at::Tensor longs(std::vector<int64_t> values) { return torch::tensor(values, torch::kLong); }

// Three segments of a (5, 2) batch, the middle one empty.
const std::vector<int64_t> kFirstIdx{0, 2, 2, 5};
at::Tensor data() { return torch::arange(10, torch::kDouble).view({5, 2}); }

TEST(Segment, SumAndMean) {
  const auto sums = torch_ragged::segment_sum(data(), longs(kFirstIdx));
  EXPECT_TRUE(torch::equal(sums, torch::tensor({2., 4., 0., 0., 18., 21.}).view({3, 2})));
  const auto means = torch_ragged::segment_mean(data(), longs(kFirstIdx).to(torch::kInt));
  EXPECT_TRUE(torch::equal(means, torch::tensor({1., 2., 0., 0., 6., 7.}).view({3, 2})));
}

TEST(Segment, MaxAndMinWithArgAndEmptySegments) {
  auto [values, arg] = torch_ragged::segment_max(data(), longs(kFirstIdx));
  EXPECT_TRUE(torch::equal(values, torch::tensor({2., 3., 0., 0., 8., 9.}).view({3, 2})));
  EXPECT_TRUE(torch::equal(arg, longs({1, 1, -1, -1, 4, 4}).view({3, 2})));
  auto [min_values, min_arg] = torch_ragged::segment_min(data(), longs(kFirstIdx));
  EXPECT_TRUE(torch::equal(min_arg, longs({0, 0, -1, -1, 2, 2}).view({3, 2})));
}

TEST(Segment, SoftmaxMatchesTorchPerSegment) {
  const auto x = torch::randn({5, 3}, torch::kDouble);
  const auto out = torch_ragged::segment_softmax(x, longs(kFirstIdx));
  EXPECT_TRUE(torch::allclose(out.slice(0, 0, 2), torch::softmax(x.slice(0, 0, 2), 0)));
  EXPECT_TRUE(torch::allclose(out.slice(0, 2, 5), torch::softmax(x.slice(0, 2, 5), 0)));
  const auto log_out = torch_ragged::segment_log_softmax(x, longs(kFirstIdx));
  EXPECT_TRUE(torch::allclose(log_out.exp(), out));
}

TEST(Segment, ExpandAndIdsAreTheRowsSegments) {
  EXPECT_TRUE(torch::equal(torch_ragged::segment_ids(longs(kFirstIdx)), longs({0, 0, 2, 2, 2})));
  const auto expanded = torch_ragged::segment_expand(longs({7, 8, 9}), longs(kFirstIdx), 5);
  EXPECT_TRUE(torch::equal(expanded, longs({7, 7, 9, 9, 9})));
}

TEST(Segment, GradientsFlowThroughTheCppApi) {
  const auto x = data().requires_grad_(true);
  const auto values = std::get<0>(torch_ragged::segment_max(x, longs(kFirstIdx)));
  (torch_ragged::segment_sum(x, longs(kFirstIdx)).sum() + values.sum()).backward();
  // every row gets 1 from the sum; rows 1 and 4 (the maxima) get 1 more
  const auto expected = torch::tensor({1., 1., 2., 2., 1., 1., 1., 1., 2., 2.}).view({5, 2});
  EXPECT_TRUE(torch::equal(x.grad(), expected));
}

TEST(Segment, BadFirstIdxRaisesValueErrorNamingTheOp) {
  try {
    torch_ragged::segment_sum(data(), longs({0, 3, 2, 5}));
    FAIL() << "expected an error";
  } catch (const c10::ValueError& e) {
    EXPECT_NE(
        std::string(e.what()).find("torch_ragged.segment_sum: first_idx must be non-decreasing"),
        std::string::npos);
  }
  EXPECT_THROW(torch_ragged::get_first_idx(longs({1, -1})), c10::ValueError);
}

// scatter by an unsorted index, against sums / maxima written out by hand for data() (rows
// [0 1] [2 3] [4 5] [6 7] [8 9]) and index {2, 0, 2, 3, 0}: position 1 gets no row.
TEST(Segment, ScatterReducesEachPositionsRowsInOrder) {
  const auto index = longs({2, 0, 2, 3, 0});
  const auto sums = torch_ragged::scatter(data(), index, 0);
  EXPECT_TRUE(torch::equal(sums, torch::tensor({10., 12., 0., 0., 4., 6., 6., 7.}).view({4, 2})));
  const auto means = torch_ragged::scatter(data(), index.to(torch::kInt), 0, 5, "mean");
  EXPECT_TRUE(
      torch::equal(means, torch::tensor({5., 6., 0., 0., 2., 3., 6., 7., 0., 0.}).view({5, 2})));
  auto [values, arg] = torch_ragged::scatter_max(data(), index, 0);
  EXPECT_TRUE(torch::equal(values, torch::tensor({8., 9., 0., 0., 4., 5., 6., 7.}).view({4, 2})));
  EXPECT_TRUE(torch::equal(arg, longs({4, 4, 5, 5, 2, 2, 3, 3}).view({4, 2})));
  auto [min_values, min_arg] = torch_ragged::scatter_min(data().t(), index, 1);
  EXPECT_TRUE(torch::equal(min_arg, longs({1, 5, 0, 3, 1, 5, 0, 3}).view({2, 4})));
  // the gradient of a sum reaches every row once; of a max, the rows holding the maxima
  const auto x = data().requires_grad_(true);
  (torch_ragged::scatter(x, index, 0).sum() +
   std::get<0>(torch_ragged::scatter_max(x, index, 0)).sum())
      .backward();
  EXPECT_TRUE(
      torch::equal(x.grad(), torch::tensor({1., 1., 1., 1., 2., 2., 2., 2., 2., 2.}).view({5, 2})));
  try {
    torch_ragged::scatter(data(), longs({2, 0, -1, 3, 0}), 0);
    FAIL() << "expected an error";
  } catch (const c10::ValueError& e) {
    EXPECT_NE(
        std::string(e.what()).find("torch_ragged.scatter: index must be non-negative, got -1"),
        std::string::npos);
  }
}

// torch_ragged::scatter_compat, torch_scatter's API from C++: its test_scatter.py table (an index
// per element along dim 1) and test_segment.py's, written out by hand there.
TEST(Segment, ScansRestartAtEachSegmentFromCpp) {
  const auto data = torch::tensor({2., 3., 4., 5.});
  const auto first_idx = longs({0, 2, 2, 4});  // an empty segment in the middle
  EXPECT_TRUE(
      torch::equal(torch_ragged::segment_cumsum(data, first_idx), torch::tensor({2., 5., 4., 9.})));
  EXPECT_TRUE(torch::equal(torch_ragged::segment_cumsum(data, first_idx, false, true),
                           torch::tensor({0., 2., 0., 4.})));
  EXPECT_TRUE(torch::equal(torch_ragged::segment_cumsum(data, first_idx, true),
                           torch::tensor({5., 3., 9., 5.})));
  EXPECT_TRUE(torch::equal(torch_ragged::segment_cumprod(data, first_idx, true, true),
                           torch::tensor({3., 1., 5., 1.})));
  // torch.cummax's rule: the later of equal values
  auto [highest, at] =
      torch_ragged::segment_cummax(torch::tensor({1., 3., 3., 2.}), longs({0, 3, 4}));
  EXPECT_TRUE(torch::equal(highest, torch::tensor({1., 3., 3., 2.})));
  EXPECT_TRUE(torch::equal(at, longs({0, 1, 2, 3})));
  auto [lowest, at_lowest] =
      torch_ragged::segment_cummin(torch::tensor({3., 1., 2., 5.}), longs({0, 4}));
  EXPECT_TRUE(torch::equal(lowest, torch::tensor({3., 1., 1., 1.})));
  EXPECT_TRUE(torch::equal(at_lowest, longs({0, 1, 1, 1})));
  const auto large = torch::tensor({0., 0., 1e4, 1e4}, torch::kDouble);
  EXPECT_TRUE(
      torch::allclose(torch_ragged::segment_logcumsumexp(large, longs({0, 2, 4})),
                      torch::tensor({0., std::log(2.), 1e4, 1e4 + std::log(2.)}, torch::kDouble)));
  EXPECT_TRUE(
      torch::equal(torch_ragged::segment_arange(longs({0, 2, 2, 5})), longs({0, 1, 0, 1, 2})));
  const auto x = torch::ones({4}, torch::requires_grad());
  torch_ragged::segment_cumsum(x, longs({0, 2, 4})).sum().backward();
  EXPECT_TRUE(torch::equal(x.grad(), torch::tensor({2.f, 1.f, 2.f, 1.f})));  // rows at or after it
}

TEST(ScatterCompat, TorchScattersTablesFromCpp) {
  namespace ts = torch_ragged::scatter_compat;
  const auto src = torch::tensor({1., 5., 3., 7., 9., 11., 2., 4., 8., 6., 10., 12.}).view({2, 6});
  const auto index = longs({0, 1, 0, 1, 1, 3, 0, 0, 1, 0, 1, 2}).view({2, 6});
  EXPECT_TRUE(torch::equal(ts::scatter(src, index, 1, std::nullopt, std::nullopt, "mul"),
                           torch::tensor({3., 315., 1., 11., 48., 80., 12., 1.}).view({2, 4})));
  auto [values, arg] = ts::scatter_max(src, index, 1);
  EXPECT_TRUE(
      torch::equal(values, torch::tensor({3., 9., 0., 11., 6., 10., 12., 0.}).view({2, 4})));
  EXPECT_TRUE(torch::equal(arg, longs({2, 4, 6, 5, 3, 4, 5, 6}).view({2, 4})));
  // out: sums are added to its values, and out is what comes back
  const auto out = torch::full({2, 4}, -2.);
  const auto returned = ts::scatter(src, index, 1, out);
  EXPECT_TRUE(returned.is_same(out));
  EXPECT_TRUE(
      torch::equal(out, torch::tensor({2., 19., -2., 9., 10., 16., 10., -2.}).view({2, 4})));
  const auto rows = torch::tensor({1., 2., 3., 4., 5., 6.});
  const auto indptr = longs({0, 2, 5, 5, 6});
  EXPECT_TRUE(torch::equal(ts::segment_csr(rows, indptr), torch::tensor({3., 12., 0., 6.})));
  EXPECT_TRUE(torch::equal(std::get<1>(ts::segment_max_csr(rows, indptr)), longs({1, 4, 6, 5})));
  EXPECT_TRUE(torch::equal(ts::gather_csr(torch::tensor({10., 20., 30., 40.}), indptr),
                           torch::tensor({10., 10., 20., 20., 20., 40.})));
  EXPECT_TRUE(torch::equal(
      ts::segment_coo(rows, longs({0, 0, 1, 1, 1, 3}), std::nullopt, std::nullopt, "mean"),
      torch::tensor({1.5, 4., 0., 6.})));
  try {
    ts::segment_csr(rows, torch::tensor({0., 6.}));
    FAIL() << "expected an error";
  } catch (const c10::TypeError& e) {
    EXPECT_NE(
        std::string(e.what()).find("torch_ragged.compat_segment_csr: indptr must hold integers"),
        std::string::npos);
  }
}

TEST(ScatterCompat, OneReductionNamesAndPygSoftmax) {
  namespace ts = torch_ragged::scatter_compat;
  const auto src = torch::tensor({1., 5., 3., 7., 9., 11., 2., 4., 8., 6., 10., 12.}).view({2, 6});
  const auto index = longs({0, 1, 0, 1, 1, 3, 0, 0, 1, 0, 1, 2}).view({2, 6});
  EXPECT_TRUE(torch::equal(ts::scatter_mul(src, index, 1),
                           torch::tensor({3., 315., 1., 11., 48., 80., 12., 1.}).view({2, 4})));
  EXPECT_TRUE(torch::equal(ts::scatter_sum(src, index, 1),
                           torch::tensor({4., 21., 0., 11., 12., 18., 12., 0.}).view({2, 4})));
  EXPECT_TRUE(torch::equal(ts::scatter_add(src, index, 1), ts::scatter_sum(src, index, 1)));
  EXPECT_TRUE(torch::equal(ts::scatter_mean(src, index, 1),
                           torch::tensor({2., 7., 0., 11., 4., 9., 12., 0.}).view({2, 4})));
  const auto rows = torch::tensor({1., 2., 3., 4., 5., 6.});
  const auto indptr = longs({0, 2, 5, 5, 6});
  EXPECT_TRUE(torch::equal(ts::segment_sum_csr(rows, indptr), torch::tensor({3., 12., 0., 6.})));
  EXPECT_TRUE(torch::equal(ts::segment_add_csr(rows, indptr), torch::tensor({3., 12., 0., 6.})));
  EXPECT_TRUE(torch::equal(ts::segment_mean_csr(rows, indptr), torch::tensor({1.5, 4., 0., 6.})));
  const auto sorted = longs({0, 0, 1, 1, 1, 3});
  EXPECT_TRUE(torch::equal(ts::segment_sum_coo(rows, sorted), torch::tensor({3., 12., 0., 6.})));
  EXPECT_TRUE(torch::equal(ts::segment_add_coo(rows, sorted), torch::tensor({3., 12., 0., 6.})));
  EXPECT_TRUE(torch::equal(ts::segment_mean_coo(rows, sorted), torch::tensor({1.5, 4., 0., 6.})));
  auto [highest, at] = ts::segment_max_coo(rows, sorted);
  EXPECT_TRUE(torch::equal(highest, torch::tensor({2., 5., 0., 6.})));
  EXPECT_TRUE(
      torch::equal(at, longs({1, 4, 6, 5})));  // 6 = src.size(dim): nothing reaches position 2
  auto [lowest, at_lowest] = ts::segment_min_coo(rows, sorted);
  EXPECT_TRUE(torch::equal(lowest, torch::tensor({1., 3., 0., 6.})));
  EXPECT_TRUE(torch::equal(at_lowest, longs({0, 2, 6, 5})));
  // PyG's softmax: groups by sorted offsets (ptr) or by an index in any order; along dim 1 too
  const auto scores = torch::tensor({0., 0., std::log(3.)});
  const auto expected = torch::tensor({0.5, 0.5, 1.});
  EXPECT_TRUE(torch::allclose(ts::softmax(scores, std::nullopt, longs({0, 2, 3})), expected));
  EXPECT_TRUE(torch::allclose(ts::softmax(scores, longs({1, 1, 0})), expected));
  EXPECT_TRUE(torch::allclose(
      ts::softmax(scores.view({1, 3}), std::nullopt, longs({0, 2, 3}), std::nullopt, 1),
      expected.view({1, 3})));
  try {
    ts::softmax(scores);
    FAIL() << "expected an error";
  } catch (const c10::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("give index or ptr"), std::string::npos);
  }
}

}  // namespace
