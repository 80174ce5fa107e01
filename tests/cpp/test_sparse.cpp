// The C++ API of the sparse family, through the public headers only.

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace {

at::Tensor longs(std::vector<int64_t> values) { return torch::tensor(values, torch::kLong); }

TEST(Sparse, CoalesceSumsDuplicatesInInputOrderAndKeepsInt32Indices) {
  const auto indices = longs({1, 0, 1, 2, 0, 2}).view({2, 3}).to(torch::kInt);
  const auto values = torch::tensor({3.0, 4.0, 5.0});
  auto [unique, sums, permutation, first_idx] =
      torch_ragged::sparse_coalesce(indices, values, {2, 3});
  EXPECT_EQ(unique.scalar_type(), torch::kInt);
  EXPECT_TRUE(torch::equal(unique, longs({0, 1, 0, 2}).view({2, 2}).to(torch::kInt)));
  EXPECT_TRUE(torch::equal(sums, torch::tensor({4.0, 8.0})));
  EXPECT_TRUE(torch::equal(permutation, longs({1, 0, 2})));
  EXPECT_TRUE(torch::equal(first_idx, longs({0, 1, 3})));
  // without the order: the same entries, the order's tensors empty
  auto [same_unique, same_sums, no_permutation, no_first_idx] =
      torch_ragged::sparse_coalesce(indices, values, {2, 3}, /*validate=*/true,
                                    /*return_order=*/false);
  EXPECT_TRUE(torch::equal(same_unique, unique));
  EXPECT_TRUE(torch::equal(same_sums, sums));
  EXPECT_EQ(no_permutation.numel(), 0);
  EXPECT_EQ(no_first_idx.numel(), 0);
}

TEST(Sparse, CoalesceOfATorchSparseTensorMatchesTorch) {
  const auto s = torch::sparse_coo_tensor(longs({2, 0, 2, 1}).view({1, 4}),
                                          torch::tensor({1.0, 2.0, 3.0, 4.0}), {3});
  const auto ours = torch_ragged::coalesce(s);
  const auto expected = s.coalesce();
  EXPECT_TRUE(ours.is_coalesced());
  EXPECT_TRUE(torch::equal(ours._indices(), expected.indices()));
  EXPECT_TRUE(torch::equal(ours._values(), expected.values()));
}

TEST(Sparse, SumToDenseAndGradients) {
  const auto indices = longs({0, 1, 1, 0, 2, 0}).view({2, 3});
  const auto values = torch::tensor({1.0, 2.0, 3.0}, torch::requires_grad());
  auto [rows, row_sums] =
      torch_ragged::sparse_sum(indices, values, {2, 3}, std::vector<int64_t>{1});
  EXPECT_TRUE(torch::equal(row_sums, torch::tensor({1.0, 5.0})));
  const auto dense = torch_ragged::sparse_to_dense(indices, values, {2, 3});
  EXPECT_TRUE(torch::equal(dense, torch::tensor({1.0, 0.0, 0.0, 3.0, 0.0, 2.0}).view({2, 3})));
  (row_sums * torch::tensor({10.0, 100.0})).sum().backward();
  EXPECT_TRUE(torch::equal(values.grad(), torch::tensor({10.0, 100.0, 100.0})));
}

// torch_ragged::sparse::<name>: the Python module's functions on torch sparse tensors, each its op.
// Expected values worked out by hand.
TEST(Sparse, SparseTensorFunctionsByTheirPythonNames) {
  // (3,) with index 2 twice: coalesced, 2 -> -1 + -3 = -4, 0 -> 2
  const auto values = torch::tensor({-1.0, 2.0, -3.0}, torch::requires_grad());
  // at:: (through autograd): torch::'s factory would not connect s to values
  const auto s = at::sparse_coo_tensor(longs({2, 0, 2}).view({1, 3}), values, {3});
  const auto absolute = torch_ragged::sparse::abs(s);
  EXPECT_TRUE(absolute.is_coalesced());
  EXPECT_TRUE(torch::equal(absolute._indices(), longs({0, 2}).view({1, 2})));
  EXPECT_TRUE(torch::equal(absolute._values(), torch::tensor({2.0, 4.0})));
  // neg is linear: the entries as they are, still uncoalesced
  const auto negated = torch_ragged::sparse::neg(s);
  EXPECT_FALSE(negated.is_coalesced());
  EXPECT_TRUE(torch::equal(negated._values(), torch::tensor({1.0, -2.0, 3.0})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::pow(s, 2)._values(), torch::tensor({4.0, 16.0})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::to_dense(s), torch::tensor({2.0, 0.0, -4.0})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::sum(s), torch::tensor(-2.0)));
  // the gradient of an uncoalesced tensor's values: d|v0 + v2| / dv = sign(-4) for both duplicates
  torch_ragged::sparse::abs(s).values().sum().backward();
  EXPECT_TRUE(torch::equal(values.grad(), torch::tensor({-1.0, 1.0, -1.0})));

  // a 2 x 2 CSR matrix [[1, 3], [0, 5]]: softmax along rows, sums along columns
  const auto csr =
      torch::sparse_csr_tensor(longs({0, 2, 3}), longs({0, 1, 1}), torch::tensor({1.0, 3.0, 5.0}),
                               {2, 2}, torch::dtype(torch::kFloat).layout(torch::kSparseCsr));
  const auto e = std::exp(2.0);
  const auto softmax = torch_ragged::sparse::softmax(csr, 1);
  EXPECT_EQ(softmax.layout(), torch::kSparseCsr);
  EXPECT_TRUE(torch::allclose(softmax.values(), torch::tensor({1 / (1 + e), e / (1 + e), 1.0})));
  const auto log_softmax = torch_ragged::sparse::log_softmax(csr, 1);
  EXPECT_TRUE(torch::allclose(log_softmax.values(), softmax.values().log()));
  const auto column_sums = torch_ragged::sparse::sum(csr, std::vector<int64_t>{0});
  EXPECT_TRUE(torch::equal(column_sums._values(), torch::tensor({1.0, 8.0})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::to_dense(csr),
                           torch::tensor({1.0, 3.0, 0.0, 5.0}).view({2, 2})));
  EXPECT_TRUE(
      torch::equal(torch_ragged::sparse::coalesce(s)._values(), torch::tensor({2.0, -4.0})));

  // structure: s is the vector [2, 0, -4] stored as three entries
  EXPECT_EQ(torch_ragged::sparse::select(s, 0, 2).item<double>(), -4.0);  // the dense sum there
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::unsqueeze(s, 0)._indices(),
                           longs({0, 0, 0, 2, 0, 2}).view({2, 3})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::index_select(s, 0, longs({2, 2})).to_dense(),
                           torch::tensor({-4.0, -4.0})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::narrow_copy(s, 0, 1, 2).to_dense(),
                           torch::tensor({0.0, -4.0})));
  const auto matrix = torch_ragged::sparse::unsqueeze(s, 1);  // (3, 1)
  const auto transposed = torch_ragged::sparse::t(matrix);
  EXPECT_FALSE(transposed.is_coalesced());  // relabelled, as torch's
  EXPECT_TRUE(torch::equal(transposed._indices(), longs({0, 0, 0, 2, 0, 2}).view({2, 3})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::permute(matrix, {1, 0})._indices(),
                           transposed._indices()));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::transpose(matrix, 0, 1).to_dense(),
                           torch::tensor({2.0, 0.0, -4.0}).view({1, 3})));

  // arithmetic: s is [2, 0, -4]; the other vector [1, 5, 0]
  const auto other =
      torch::sparse_coo_tensor(longs({1, 0}).view({1, 2}), torch::tensor({5.0, 1.0}), {3});
  const auto sum = torch_ragged::sparse::add(s, other, 2);
  EXPECT_TRUE(sum.is_coalesced());
  EXPECT_TRUE(torch::equal(sum.to_dense(), torch::tensor({4.0, 10.0, -4.0})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::sub(s, other).to_dense(),
                           torch::tensor({1.0, -5.0, -4.0})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::mul(s, other)._values(), torch::tensor({2.0})));
  EXPECT_TRUE(
      torch::equal(torch_ragged::sparse::mul(s, 0.5).to_dense(), torch::tensor({1.0, 0.0, -2.0})));
  EXPECT_TRUE(
      torch::equal(torch_ragged::sparse::div(s, 3, "floor")._values(), torch::tensor({0.0, -2.0})));

  // cat / stack: [2, 0, -4] and [1, 5, 0] joined
  const auto joined = torch_ragged::sparse::cat({s, other});
  EXPECT_EQ(joined.sizes(), torch::IntArrayRef({6}));
  EXPECT_TRUE(torch::equal(joined.to_dense(), torch::tensor({2.0, 0.0, -4.0, 1.0, 5.0, 0.0})));
  const auto stacked = torch_ragged::sparse::stack({s, other}, 0);
  EXPECT_TRUE(torch::equal(stacked.to_dense(),
                           torch::tensor({2.0, 0.0, -4.0, 1.0, 5.0, 0.0}).view({2, 3})));

  // conversions: the dense matrix [[0, 2], [3, 0]] through each layout and back
  const auto dense = torch::tensor({0.0, 2.0, 3.0, 0.0}).view({2, 2});
  const auto coo = torch_ragged::sparse::to_sparse(dense);
  EXPECT_TRUE(coo.is_coalesced());
  EXPECT_TRUE(torch::equal(coo._indices(), longs({0, 1, 1, 0}).view({2, 2})));
  const auto as_csr = torch_ragged::sparse::to_sparse_csr(coo);
  EXPECT_EQ(as_csr.layout(), torch::kSparseCsr);
  EXPECT_TRUE(torch::equal(as_csr.crow_indices(), longs({0, 1, 2})));
  const auto as_csc = torch_ragged::sparse::to_sparse_csc(as_csr);
  EXPECT_TRUE(torch::equal(as_csc.row_indices(), longs({1, 0})));
  EXPECT_TRUE(torch::equal(as_csc.values(), torch::tensor({3.0, 2.0})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::to_sparse_coo(as_csc).to_dense(), dense));
  EXPECT_TRUE(torch_ragged::sparse::to_sparse_csr(as_csr).is_same(as_csr));  // as it is
  const auto masked =
      torch_ragged::sparse::sparse_mask(torch::tensor({5.0, 6.0, 7.0, 8.0}).view({2, 2}), as_csr);
  EXPECT_EQ(masked.layout(), torch::kSparseCsr);
  EXPECT_TRUE(torch::equal(masked.values(), torch::tensor({6.0, 7.0})));

  // products: the matrix [[0, 2], [3, 0]] (coo) times [[1, 2], [3, 4]]
  const auto right = torch::tensor({1.0, 2.0, 3.0, 4.0}).view({2, 2});
  const auto product = torch::tensor({6.0, 8.0, 3.0, 6.0}).view({2, 2});
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::mm(coo, right), product));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::mm(as_csc, right), product));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::mm(right, as_csr), right.mm(dense)));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::mm(coo, coo).to_dense(), dense.mm(dense)));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::addmm(right, coo, right, 2, 0.5),
                           right * 2 + product * 0.5));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::mv(coo, torch::tensor({1.0, 10.0})),
                           torch::tensor({20.0, 3.0})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::matmul(torch::tensor({1.0, 10.0}), coo),
                           torch::tensor({30.0, 2.0})));
  EXPECT_TRUE(torch::equal(
      torch_ragged::sparse::bmm(torch_ragged::sparse::unsqueeze(coo, 0), right.unsqueeze(0)),
      product.unsqueeze(0)));
  EXPECT_TRUE(
      torch::equal(torch_ragged::sparse::hspmm(coo, right)._indices(), longs({0, 1}).view({1, 2})));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::smm(coo, right).to_dense(), product));
  EXPECT_TRUE(torch::equal(torch_ragged::sparse::sspaddmm(coo, coo, right, 1, 1).to_dense(),
                           dense + product));

  try {
    torch_ragged::sparse::abs(torch::ones({3}));
    ADD_FAILURE() << "a dense tensor was taken";
  } catch (const c10::TypeError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("torch_ragged.sparse.abs: expected a sparse COO tensor, got torch.strided"),
              std::string::npos);
  }
}

TEST(Sparse, OutOfRangeIndexRaisesIndexError) {
  EXPECT_THROW(torch_ragged::sparse_coalesce(longs({0, 5}).view({1, 2}), torch::ones({2}), {3}),
               c10::IndexError);
}

}  // namespace

namespace {

TEST(Sparse, MatmulWithAPlanAndItsGradients) {
  const auto indices = torch::tensor({0, 0, 1, 0, 2, 0}, torch::kLong).view({2, 3});
  const auto values = torch::tensor({1.0, 2.0, 3.0}, torch::requires_grad());
  const auto dense = torch::tensor({1.0, 10.0, 100.0}).view({3, 1}).requires_grad_(true);
  const auto plan = torch_ragged::sparse_mm_plan(indices, {2, 3});
  const auto out = torch_ragged::sparse_mm(values, dense, indices, plan);
  // S = [[1, 0, 2], [3, 0, 0]] (entries (0,0), (0,2), (1,0))
  EXPECT_TRUE(torch::equal(out, torch::tensor({201.0, 3.0}).view({2, 1})));
  out.sum().backward();
  EXPECT_TRUE(torch::equal(values.grad(), torch::tensor({1.0, 100.0, 1.0})));
  EXPECT_TRUE(torch::equal(dense.grad(), torch::tensor({4.0, 0.0, 2.0}).view({3, 1})));
  const auto s = torch::sparse_coo_tensor(indices, values.detach(), {2, 3});
  EXPECT_TRUE(torch::allclose(torch_ragged::mm(s, dense.detach()), out.detach()));
}

TEST(Sparse, AccelerateRunsTorchsOwnOpsOnTheseKernelsAndSwitchesBack) {
  ASSERT_FALSE(torch_ragged::torch_sparse_accelerated());
  const auto s = torch::sparse_coo_tensor(longs({2, 0, 2, 1}).view({1, 4}),
                                          torch::tensor({1.0, 2.0, 3.0, 4.0}), {3});
  const at::Tensor expected = s.coalesce();
  EXPECT_FALSE(torch_ragged::accelerate_torch_sparse(true));
  EXPECT_TRUE(torch_ragged::torch_sparse_accelerated());
  const at::Tensor got = s.coalesce();  // aten::_coalesce, now this library's kernel
  EXPECT_TRUE(got.is_coalesced());
  EXPECT_TRUE(torch::equal(got._indices(), expected._indices()));
  EXPECT_TRUE(torch::equal(got._values(), expected._values()));
  // torch does not check the indices here; this library's kernel does, by name
  const auto out_of_range =
      at::_sparse_coo_tensor_unsafe(longs({0, 7}).view({1, 2}), torch::tensor({1.0, 2.0}), {3});
  try {
    (void)out_of_range.coalesce();
    ADD_FAILURE() << "expected torch_ragged's IndexError";
  } catch (const c10::IndexError& error) {
    EXPECT_NE(std::string(error.what()).find("torch_ragged.sparse_coalesce"), std::string::npos);
  }
  EXPECT_TRUE(torch_ragged::accelerate_torch_sparse(false));
  EXPECT_FALSE(torch_ragged::torch_sparse_accelerated());
  EXPECT_TRUE(torch::equal(s.coalesce()._values(), expected._values()));
}

}  // namespace

namespace {

// A forward and backward through torch's own sparse ops: the product, the gradient of the values
// and of the dense operand (mm), or the softmax values and their gradient.
std::vector<at::Tensor> training_step(const at::Tensor& indices, const at::Tensor& values,
                                      const at::Tensor& dense, bool softmax) {
  const at::Tensor v = values.clone().requires_grad_();
  const at::Tensor d = dense.clone().requires_grad_();
  const at::Tensor s = at::sparse_coo_tensor(indices, v, {40, 30});  // differentiable in v
  if (softmax) {
    const at::Tensor out = torch::_sparse_softmax(s, 1, false).coalesce();
    (out.values() * torch::sin(torch::arange(out.values().numel(), torch::kDouble)))
        .sum()
        .backward();
    return {out.values().detach(), v.grad()};
  }
  const at::Tensor out = torch::mm(s, d);
  (out * torch::cos(out)).sum().backward();
  return {out.detach(), v.grad(), d.grad()};
}

}  // namespace

// Eight std::threads train through torch's ops while one toggles the switch as fast as it can:
// every result is the serial one, and nothing crashes (the kernels are never removed from the
// dispatcher: the switch is a flag they read).
TEST(Sparse, ThreadsUsingTorchsOpsWhileAnotherTogglesGetTheSerialResults) {
  torch::manual_seed(3);
  const at::Tensor flat = torch::randperm(40 * 30).slice(0, 0, 300);
  const at::Tensor indices = torch::stack({flat.div(30, "floor"), flat.remainder(30)});
  const at::Tensor values = torch::randn({300}, torch::kDouble);
  const at::Tensor dense = torch::randn({30, 5}, torch::kDouble);
  const std::vector<at::Tensor> serial_mm = training_step(indices, values, dense, false);
  const std::vector<at::Tensor> serial_softmax = training_step(indices, values, dense, true);
  std::atomic<bool> stop{false};
  std::atomic<int> steps{0}, mismatches{0};
  std::vector<std::string> errors(8);
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    while (!stop.load()) {
      torch_ragged::accelerate_torch_sparse(true);
      torch_ragged::accelerate_torch_sparse(false);
    }
  });
  for (int w = 0; w < 8; ++w) {
    threads.emplace_back([&, w] {
      for (int k = w; !stop.load(); ++k) {
        try {
          const bool softmax = k % 2 == 1;
          const std::vector<at::Tensor> got = training_step(indices, values, dense, softmax);
          const std::vector<at::Tensor>& want = softmax ? serial_softmax : serial_mm;
          for (size_t i = 0; i < want.size(); ++i) {
            if (!torch::allclose(got[i], want[i], 1e-10, 1e-12)) ++mismatches;
          }
        } catch (const std::exception& e) {
          errors[w] = e.what();
          stop = true;
        }
        ++steps;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  stop = true;
  for (std::thread& t : threads) t.join();
  torch_ragged::accelerate_torch_sparse(false);
  for (const std::string& error : errors) EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(steps.load(), 16);
}
