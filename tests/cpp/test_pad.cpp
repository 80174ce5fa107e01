// The C++ API of pad, through the public headers only (the numpy oracle runs in the Python tests).

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

namespace {

at::Tensor longs(std::vector<int64_t> values) { return torch::tensor(values, torch::kLong); }

TEST(Pad, ReflectSeveralPeriods) {
  const auto out = torch_ragged::pad(torch::arange(3), {1, 8}, "reflect");
  EXPECT_TRUE(torch::equal(out, longs({1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2})));
}

TEST(Pad, OddSymmetric) {
  const auto out = torch_ragged::pad(longs({1, 2, 4}), {5, 5}, "symmetric", std::nullopt,
                                     std::nullopt, std::nullopt, "odd");
  EXPECT_TRUE(torch::equal(out, longs({-4, -2, -2, 0, 1, 1, 2, 4, 4, 6, 7, 7, 8})));
}

TEST(Pad, ConstantCornersTakeTheLastAxisValue) {
  const auto values = torch::tensor({1.0, 2.0, 3.0, 4.0}).view({2, 2});
  const auto out = torch_ragged::pad(torch::zeros({1, 1}), {1, 1, 1, 1}, "constant", values);
  const auto expected = torch::tensor({3.f, 1.f, 4.f, 3.f, 0.f, 4.f, 3.f, 2.f, 4.f}).view({3, 3});
  EXPECT_TRUE(torch::equal(out, expected));
}

TEST(Pad, MedianOfAnEvenCountRoundsHalfToEven) {
  const auto out = torch_ragged::pad(longs({1, 2, 3, 4}), {1, 1}, "median");
  EXPECT_TRUE(torch::equal(out, longs({2, 1, 2, 3, 4, 2})));
}

TEST(Pad, BackwardSumsEveryPreimage) {
  const auto x = torch::zeros({3}, torch::requires_grad());
  torch_ragged::pad(x, {4, 4}, "wrap").sum().backward();  // t = -4..6, taken mod 3
  EXPECT_TRUE(torch::equal(x.grad(), torch::tensor({4.f, 3.f, 4.f})));
}

TEST(Pad, BadModeIsAValueError) {
  EXPECT_THROW(torch_ragged::pad(torch::zeros({2}), {1, 1}, "nearest"), c10::ValueError);
  EXPECT_THROW(torch_ragged::pad(torch::zeros({2}), {1}, "edge"), c10::ValueError);
}

}  // namespace
