// Uses torch_ragged from C++: runs a TorchScript model that calls torch.ops.torch_ragged ops (saved
// by examples/torchscript/ragged_module.py), then calls the C++ API directly, backward included.
//
//   cpp_app MODEL.pt    -> exits 0 when every check passes

#include <torch/script.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

#include <iostream>

namespace {

bool check(bool ok, const char* what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << "\n";
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: cpp_app MODEL.pt\n";
    return 2;
  }
  std::cout << "torch_ragged " << torch_ragged::version() << "\n";
  bool ok = true;

  // Three point clouds of 2, 0 and 3 points, packed.
  const auto packed = torch::arange(15, torch::kFloat).view({5, 3});
  const auto first_idx = torch::tensor({0, 2, 2, 5}, torch::kLong);

  torch::jit::script::Module model = torch::jit::load(argv[1]);
  const auto outputs = model.forward({packed, first_idx}).toTuple();
  const auto sums = outputs->elements()[0].toTensor();
  const auto scaled = outputs->elements()[1].toTensor();
  ok &= check(torch::allclose(sums, torch_ragged::segment_sum(packed, first_idx)),
              "scripted model: per-cloud sums equal segment_sum");
  ok &= check(torch::allclose(scaled, packed * 2), "scripted model: padded round trip");

  // The C++ API directly, with a gradient flowing back through the padding.
  const auto points = packed.clone().requires_grad_();
  const auto shape_per_tensor = torch::tensor({2, 0, 3}, torch::kLong).view({3, 1});
  const auto padded = torch_ragged::packed_to_padded(points, shape_per_tensor, first_idx, -1.0);
  std::cout << "padded " << padded.sizes() << "\n";
  ok &= check(padded.sizes() == torch::IntArrayRef({3, 3, 3}), "C++ API: padded shape (3, 3, 3)");
  ok &= check(padded[1].eq(-1).all().item<bool>(), "C++ API: the empty cloud is all padding");
  padded.pow(2).sum().backward();
  ok &= check(torch::allclose(points.grad(), 2 * packed),
              "C++ API: d/dx sum(x^2) = 2x, none from padding");

  std::cout << (ok ? "all checks passed" : "some checks FAILED") << "\n";
  return ok ? 0 : 1;
}
