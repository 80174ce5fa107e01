// The C++ RaggedTensor, through the public headers only. References are plain loops over the
// members and torch ops on each member.

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

std::vector<at::Tensor> point_clouds() {
  return {torch::randn({3, 2}), torch::randn({0, 2}), torch::randn({4, 2})};
}

TEST(RaggedTensor, FromListKeepsMembersAndPadsThem) {
  const auto clouds = point_clouds();
  const auto r = torch_ragged::RaggedTensor::from_list(clouds);
  ASSERT_EQ(r.size(), 3);
  EXPECT_TRUE(torch::equal(r.first_idx(), torch::tensor({0, 3, 3, 7}, torch::kLong)));
  const auto padded = r.padded(-1.0);
  ASSERT_EQ(padded.sizes(), (std::vector<int64_t>{3, 4, 2}));
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t n = clouds[b].size(0);
    EXPECT_TRUE(torch::equal(r[b], clouds[b]));
    EXPECT_TRUE(torch::equal(padded[b].slice(0, 0, n), clouds[b]));
    EXPECT_TRUE((padded[b].slice(0, n) == -1).all().item<bool>());
  }
}

TEST(RaggedTensor, IndexSelectAndReductionsMatchPerMemberOps) {
  const auto clouds = point_clouds();
  const auto r = torch_ragged::RaggedTensor::from_list(clouds);
  const auto picked = r.index_select(torch::tensor({2, -3, 2}, torch::kLong));
  ASSERT_EQ(picked.size(), 3);
  EXPECT_TRUE(torch::equal(picked[0], clouds[2]));
  EXPECT_TRUE(torch::equal(picked[1], clouds[0]));
  EXPECT_TRUE(torch::equal(picked[2], clouds[2]));
  const auto sums = r.sum();
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_TRUE(torch::allclose(sums[b], clouds[b].sum(0)));
  }
  EXPECT_TRUE(torch::allclose(r.softmax()[2], torch::softmax(clouds[2], 0)));
}

TEST(RaggedTensor, RowOfEveryMemberIsEachMembersRowAndRefusesShortMembers) {
  const std::vector<at::Tensor> clouds{torch::randn({3, 2}), torch::randn({1, 2}),
                                       torch::randn({5, 2})};
  const auto r = torch_ragged::RaggedTensor::from_list(clouds);
  for (const int64_t k : {0, -1}) {
    const at::Tensor rows = r.row(k);
    ASSERT_EQ(rows.sizes(), (std::vector<int64_t>{3, 2}));
    for (int64_t b = 0; b < 3; ++b) {
      EXPECT_TRUE(torch::equal(rows[b], clouds[b][k < 0 ? clouds[b].size(0) + k : k]));
    }
    EXPECT_TRUE(torch::equal(torch_ragged::segment_row(r.values(), r.first_idx(), k), rows));
  }
  try {
    r.row(1);  // member 1 holds one row
    FAIL() << "expected an IndexError";
  } catch (const c10::IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("row 1 is out of range for segment 1 of 1 rows"),
              std::string::npos)
        << e.what();
  }
}

// The rows of member b that Python's list slicing keeps (negative bounds from its end, clipped).
at::Tensor python_slice(const at::Tensor& member, std::optional<int64_t> start,
                        std::optional<int64_t> stop, int64_t step) {
  const int64_t n = member.size(0);
  const auto bound = [n](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    return *v < 0 ? std::max<int64_t>(n + *v, 0) : std::min(*v, n);
  };
  std::vector<int64_t> rows;
  for (int64_t i = bound(start, 0); i < bound(stop, n); i += step) rows.push_back(i);
  return member.index_select(0, torch::tensor(rows, torch::kLong));
}

TEST(RaggedTensor, RowsOfEveryMemberAreEachMembersSliceAsPythonSlicesAList) {
  const std::vector<at::Tensor> clouds{torch::randn({3, 2}), torch::randn({0, 2}),
                                       torch::randn({7, 2}), torch::randn({1, 2})};
  const auto r = torch_ragged::RaggedTensor::from_list(clouds);
  const std::vector<std::tuple<std::optional<int64_t>, std::optional<int64_t>, int64_t>> keys{
      {1, std::nullopt, 1},
      {-2, std::nullopt, 1},
      {std::nullopt, std::nullopt, 2},
      {1, -1, 3},
      {5, 2, 1},
      {-10, 20, 1}};
  for (const auto& [start, stop, step] : keys) {
    const torch_ragged::RaggedTensor rows = r.rows(start, stop, step);
    ASSERT_EQ(rows.size(), 4);
    const std::vector<at::Tensor> members = rows.list();
    for (size_t b = 0; b < clouds.size(); ++b) {
      EXPECT_TRUE(torch::equal(members[b], python_slice(clouds[b], start, stop, step)));
    }
    auto [values, first_idx] =
        torch_ragged::segment_slice(r.values(), r.first_idx(), start, stop, step);
    EXPECT_TRUE(torch::equal(values, rows.values()));
    EXPECT_TRUE(torch::equal(first_idx, rows.first_idx()));
  }
}

TEST(RaggedTensor, MatmulAndPowActOnEveryMembersRowsAsTorchDoesOnEachMember) {
  const std::vector<at::Tensor> clouds{torch::randn({3, 4}, torch::kDouble),
                                       torch::randn({0, 4}, torch::kDouble),
                                       torch::randn({5, 4}, torch::kDouble)};
  const auto r = torch_ragged::RaggedTensor::from_list(clouds);
  const at::Tensor weight = torch::randn({4, 2}, torch::kDouble);
  const at::Tensor vector = torch::randn({4}, torch::kDouble);
  const std::vector<at::Tensor> by_matrix = r.matmul(weight).list(),
                                by_vector = r.matmul(vector).list(), squared = r.pow(2).list();
  for (size_t b = 0; b < clouds.size(); ++b) {
    EXPECT_TRUE(torch::allclose(by_matrix[b], torch::mm(clouds[b], weight)));
    EXPECT_TRUE(torch::allclose(by_vector[b], torch::mv(clouds[b], vector)));
    EXPECT_TRUE(torch::equal(squared[b], clouds[b] * clouds[b]));
  }
  EXPECT_THROW(r.matmul(torch::randn({2, 4, 2}, torch::kDouble)), c10::ValueError);
  const auto scalars =
      torch_ragged::RaggedTensor::from_list({torch::randn({3}), torch::randn({2})});
  EXPECT_THROW(scalars.matmul(torch::randn({1})), c10::ValueError);
}

TEST(RaggedTensor, ImagesWithTwoRaggedDimsRoundTripThroughPadded) {
  const std::vector<at::Tensor> images{torch::randn({2, 3, 4}), torch::randn({5, 1, 4})};
  const auto r = torch_ragged::RaggedTensor::from_list(images, 2);
  ASSERT_EQ(r.ragged_dims(), 2);
  const auto padded = r.padded(0, std::nullopt, "left");
  ASSERT_EQ(padded.sizes(), (std::vector<int64_t>{2, 5, 3, 4}));
  EXPECT_TRUE(torch::equal(padded[0].slice(0, 3).slice(1, 0), images[0]));
  const auto back = torch_ragged::RaggedTensor::from_padded(padded, r.shape_per_tensor(), "left");
  EXPECT_TRUE(torch::equal(back.values(), r.values()));
  EXPECT_TRUE(torch::equal(back[1], images[1]));
}

TEST(RaggedTensor, GradientsReachTheValues) {
  const auto values = torch::randn({7, 2}, torch::requires_grad());
  const torch_ragged::RaggedTensor r(values, torch::tensor({0, 3, 3, 7}, torch::kLong));
  r.index_select(torch::tensor({0, 0}, torch::kLong)).values().sum().backward();
  const auto expected = torch::cat({torch::full({3, 2}, 2.0), torch::zeros({4, 2})});
  EXPECT_TRUE(torch::equal(values.grad(), expected));
}

// What the message of `call`'s exception of type E holds.
template <typename E, typename F>
std::string message_of(F&& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  return "(nothing was thrown)";
}

TEST(RaggedTensor, ReductionsOverFeatureDimsReduceEveryMembersRows) {
  const std::vector<at::Tensor> clouds{torch::randn({3, 2, 4}), torch::randn({0, 2, 4}),
                                       torch::randn({2, 2, 4})};
  const auto r = torch_ragged::RaggedTensor::from_list(clouds);
  ASSERT_EQ(r.dim(), 4);
  for (const bool keepdim : {false, true}) {
    const auto sums = r.sum({-1}, keepdim), means = r.mean({2, 3}, keepdim);
    const auto highs = r.amax({3}, keepdim), lows = r.amin({-2}, keepdim);
    for (int64_t b = 0; b < 3; ++b) {
      EXPECT_TRUE(torch::allclose(sums[b], clouds[b].sum(-1, keepdim)));
      EXPECT_TRUE(torch::allclose(means[b], clouds[b].mean({1, 2}, keepdim)));
      EXPECT_TRUE(torch::equal(highs[b], std::get<0>(clouds[b].max(2, keepdim))));
      EXPECT_TRUE(torch::equal(lows[b], std::get<0>(clouds[b].min(1, keepdim))));
    }
  }
  const auto along_features = r.softmax(-1), within_members = r.log_softmax(1);
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_TRUE(torch::allclose(along_features[b], torch::softmax(clouds[b], -1)));
    EXPECT_TRUE(torch::allclose(within_members[b], torch::log_softmax(clouds[b], 0)));
  }
  EXPECT_NE(message_of<c10::ValueError>([&] { r.sum({1}); })
                .find("RaggedTensor.sum: dim 1 is a ragged dim; dim must name feature dims (2 and "
                      "up), and each member reduced whole is sum()"),
            std::string::npos);
  EXPECT_NE(message_of<c10::ValueError>([&] {
              r.amax({0, 2});
            }).find("would mix members"),
            std::string::npos);
  EXPECT_NE(message_of<c10::IndexError>([&] {
              r.mean({4});
            }).find("dim 4 is out of range for a RaggedTensor of 4 dims (B, 1 ragged, 2 feature)"),
            std::string::npos);
  EXPECT_THROW(r.sum(std::vector<int64_t>{}), c10::ValueError);
}

TEST(RaggedTensor, ElementwiseMathActsOnEveryMemberAndKeepsTheStructure) {
  const std::vector<at::Tensor> clouds{torch::randn({3, 2}), torch::randn({1, 2})};
  const std::vector<at::Tensor> others{torch::randn({3, 2}), torch::randn({1, 2})};
  const auto r = torch_ragged::RaggedTensor::from_list(clouds);
  const auto q = torch_ragged::RaggedTensor::from_list(others);
  const at::Tensor column = torch::randn({2});
  const std::vector<std::pair<torch_ragged::RaggedTensor, std::function<at::Tensor(int64_t)>>>
      cases{
          {r + q, [&](int64_t b) { return clouds[b] + others[b]; }},
          {r - column, [&](int64_t b) { return clouds[b] - column; }},
          {column * r, [&](int64_t b) { return column * clouds[b]; }},
          {r / 4.0, [&](int64_t b) { return clouds[b] / 4.0; }},
          {2 - r, [&](int64_t b) { return 2 - clouds[b]; }},
          {1.5 / q, [&](int64_t b) { return 1.5 / others[b]; }},
          {-r, [&](int64_t b) { return -clouds[b]; }},
      };
  for (const auto& [result, expected] : cases) {
    EXPECT_TRUE(torch::equal(result.first_idx(), r.first_idx()));
    for (int64_t b = 0; b < 2; ++b) EXPECT_TRUE(torch::equal(result[b], expected(b)));
  }
  // Comparisons: a bool RaggedTensor of the same members.
  const auto positive = r > 0.0, equal = r == q, below = column <= r;
  for (int64_t b = 0; b < 2; ++b) {
    EXPECT_TRUE(torch::equal(positive[b], clouds[b] > 0.0));
    EXPECT_TRUE(torch::equal(equal[b], clouds[b] == others[b]));
    EXPECT_TRUE(torch::equal(below[b], column <= clouds[b]));
  }
  EXPECT_EQ(positive.values().scalar_type(), torch::kBool);
  EXPECT_TRUE((r != r).values().logical_not().all().item<bool>());
  // A number keeps the values' dtype, as torch's own operators: int64 values times 2 stay int64.
  const auto counts = torch_ragged::RaggedTensor::from_list({torch::arange(3), torch::arange(2)});
  EXPECT_EQ((counts * 2).values().scalar_type(), torch::kLong);
  EXPECT_EQ((2.5 - counts).values().scalar_type(), torch::kFloat);
  // Another structure, or a dense operand reaching the packed rows, is refused by name.
  const auto other_shape = torch_ragged::RaggedTensor::from_list({others[1], others[0]});
  EXPECT_NE(message_of<c10::ValueError>([&] {
              r + other_shape;
            }).find("elementwise math needs RaggedTensors of one structure"),
            std::string::npos);
  EXPECT_NE(message_of<c10::ValueError>([&] {
              r* torch::randn({4, 2});
            }).find("a dense operand of shape [4, 2] reaches the packed rows [4, 2]"),
            std::string::npos);
  EXPECT_TRUE(torch::equal((r + torch::ones({1, 2})).values(), r.values() + 1));
}

TEST(RaggedTensor, IntegerAndBitwiseOperatorsActOnEveryMember) {
  const std::vector<at::Tensor> ints{torch::tensor({7, -7, 5}), torch::tensor({-3})};
  const std::vector<at::Tensor> other{torch::tensor({2, 3, -4}), torch::tensor({6})};
  const auto r = torch_ragged::RaggedTensor::from_list(ints);
  const auto q = torch_ragged::RaggedTensor::from_list(other);
  const std::vector<std::pair<torch_ragged::RaggedTensor, std::function<at::Tensor(int64_t)>>>
      cases{
          // Python's % and //: the sign of the divisor, rounding down (not C++'s truncation)
          {r % 3, [&](int64_t b) { return torch::remainder(ints[b], 3); }},
          {r % q, [&](int64_t b) { return torch::remainder(ints[b], other[b]); }},
          {r.floor_divide(2), [&](int64_t b) { return torch::floor_divide(ints[b], 2); }},
          {r.floor_divide(q), [&](int64_t b) { return torch::floor_divide(ints[b], other[b]); }},
          {r & q, [&](int64_t b) { return ints[b] & other[b]; }},
          {r | 8, [&](int64_t b) { return ints[b] | 8; }},
          {r ^ q, [&](int64_t b) { return ints[b] ^ other[b]; }},
          {~r, [&](int64_t b) { return ~ints[b]; }},
      };
  for (const auto& [result, expected] : cases) {
    for (int64_t b = 0; b < 2; ++b) EXPECT_TRUE(torch::equal(result[b], expected(b)));
  }
  EXPECT_TRUE(torch::equal((r % 3)[0], torch::tensor({1, 2, 2})));  // -7 % 3 == 2, as Python
  EXPECT_TRUE(torch::equal(r.floor_divide(2)[0], torch::tensor({3, -4, 2})));
}

TEST(RaggedTensor, MemberSlicesExtremaNormsAndScansMatchEachMember) {
  const std::vector<at::Tensor> clouds{torch::randn({3, 2}), torch::randn({0, 2}),
                                       torch::randn({4, 2}), torch::randn({1, 2})};
  const auto r = torch_ragged::RaggedTensor::from_list(clouds);
  // members a:b as Python slices a list: clipped, negative from the end, empty when b <= a
  const std::vector<std::pair<std::optional<int64_t>, std::optional<int64_t>>> bounds{
      {1, 3}, {-2, std::nullopt}, {std::nullopt, -1}, {3, 1}, {-9, 9}};
  for (const auto& [start, stop] : bounds) {
    const auto part = r.slice(start, stop);
    const int64_t n = 4,
                  lo = std::clamp<int64_t>(start ? (*start < 0 ? *start + n : *start) : 0, 0, n);
    const int64_t hi =
        std::max(lo, std::clamp<int64_t>(stop ? (*stop < 0 ? *stop + n : *stop) : n, 0, n));
    ASSERT_EQ(part.size(), hi - lo);
    for (int64_t b = lo; b < hi; ++b) EXPECT_TRUE(torch::equal(part[b - lo], clouds[b]));
    EXPECT_TRUE(part.values().is_alias_of(r.values()));  // a view
  }
  EXPECT_TRUE(torch::equal(r.lengths(), torch::tensor({3, 0, 4, 1})));
  EXPECT_EQ(r.numel(), 16);
  EXPECT_EQ(r.feature_shape(), (std::vector<int64_t>{2}));
  // mask: true where padded() holds an element, right- or left-aligned, to a given length
  const at::Tensor right =
      torch::tensor({{1, 1, 1, 0}, {0, 0, 0, 0}, {1, 1, 1, 1}, {1, 0, 0, 0}}).to(torch::kBool);
  EXPECT_TRUE(torch::equal(r.mask(), right));
  EXPECT_TRUE(torch::equal(r.padding_mask(), right.logical_not()));
  EXPECT_TRUE(torch::equal(r.mask(std::vector<int64_t>{5}, "left").slice(1, 1), right.flip(1)));
  EXPECT_THROW(r.mask(std::vector<int64_t>{3}), c10::ValueError);  // shorter than a member
  const auto joined = torch_ragged::RaggedTensor::cat({r.slice(2, std::nullopt), r.slice(0, 1)});
  ASSERT_EQ(joined.size(), 3);
  EXPECT_TRUE(torch::equal(joined[0], clouds[2]) && torch::equal(joined[2], clouds[0]));

  // max / min per member: the values and the row within the member (-1 for an empty member)
  const auto [top, top_row] = r.max();
  const auto [low, low_row] = r.min();
  for (const int64_t b : {0, 2, 3}) {
    const auto [v, i] = clouds[b].max(0);
    EXPECT_TRUE(torch::equal(top[b], v) && torch::equal(top_row[b], i));
    const auto [w, j] = clouds[b].min(0);
    EXPECT_TRUE(torch::equal(low[b], w) && torch::equal(low_row[b], j));
  }
  EXPECT_TRUE((top_row[1] == -1).all().item<bool>());
  const auto [row_max, row_arg] = r.max(-1);
  for (const int64_t b : {0, 2, 3}) {
    const auto [v, i] = clouds[b].max(-1);
    EXPECT_TRUE(torch::equal(row_max[b], v) && torch::equal(row_arg[b], i));
  }

  // norms per member against torch.linalg.vector_norm of each member's rows (0 for the empty one)
  for (const double p : {1.0, 2.0, 3.0, static_cast<double>(INFINITY)}) {
    const at::Tensor norms = r.norm(p);
    for (const int64_t b : {0, 2, 3}) {
      EXPECT_TRUE(torch::allclose(norms[b], torch::linalg_vector_norm(clouds[b], p, {0})));
    }
    EXPECT_TRUE(torch::equal(norms[1], torch::zeros({2})));  // torch refuses inf of nothing
  }
  EXPECT_TRUE(torch::allclose(r.norm(2, {-1})[2], torch::linalg_vector_norm(clouds[2], 2, {-1})));

  // scans: along the ragged dim within each member; along a feature dim every row
  const auto [running, running_row] = r.cummax(1);
  for (const int64_t b : {0, 2, 3}) {
    EXPECT_TRUE(torch::allclose(r.cumsum(1)[b], clouds[b].cumsum(0)));
    EXPECT_TRUE(torch::allclose(r.cumprod(-2)[b], clouds[b].cumprod(0)));
    EXPECT_TRUE(torch::allclose(r.logcumsumexp(1)[b], clouds[b].logcumsumexp(0)));
    EXPECT_TRUE(torch::equal(r.cumsum(2)[b], clouds[b].cumsum(1)));
    const auto [v, i] = clouds[b].cummax(0);
    EXPECT_TRUE(torch::equal(running[b], v) && torch::equal(running_row[b], i));
    const auto [w, j] = clouds[b].cummin(0);
    EXPECT_TRUE(torch::equal(std::get<0>(r.cummin(1))[b], w) &&
                torch::equal(std::get<1>(r.cummin(1))[b], j));
  }

  // a new feature dim; every member's rows set to its own row of per_member
  EXPECT_EQ(r.unsqueeze(-1).values().sizes(), (std::vector<int64_t>{8, 2, 1}));
  EXPECT_EQ(r.unsqueeze(2).values().sizes(), (std::vector<int64_t>{8, 1, 2}));
  EXPECT_THROW(r.unsqueeze(1), c10::IndexError);  // the ragged dim
  const auto centred = r - r.broadcast_members(r.mean());
  EXPECT_TRUE(torch::allclose(centred[2], clouds[2] - clouds[2].mean(0)));
  EXPECT_FALSE(r.detach().values().requires_grad());
  EXPECT_FALSE(r.clone().values().is_alias_of(r.values()));
  EXPECT_THROW(r.norm(-1), c10::ValueError);
  EXPECT_THROW(r.cumsum(0), c10::ValueError);  // the members' dim
}

TEST(RaggedTensor, BadInputRaisesNamingTheMethod) {
  EXPECT_THROW(
      torch_ragged::RaggedTensor(torch::randn({4, 2}), torch::tensor({0, 3}, torch::kLong)),
      c10::ValueError);
  EXPECT_THROW(torch_ragged::RaggedTensor::from_list({torch::randn({3, 2}), torch::randn({3, 5})}),
               c10::ValueError);
  const auto r = torch_ragged::RaggedTensor::from_list(point_clouds());
  EXPECT_THROW(r[3], c10::IndexError);
  EXPECT_THROW(r.index_select(torch::tensor({5}, torch::kLong)), c10::IndexError);
  try {
    r.with_values(torch::randn({2}));
    FAIL() << "expected a ValueError";
  } catch (const c10::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("RaggedTensor.with_values"), std::string::npos);
  }
}

}  // namespace
