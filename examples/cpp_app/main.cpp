// Uses torch_ragged from C++ three ways:
//   - runs a TorchScript model that calls torch.ops.torch_ragged ops (saved by
//     examples/torchscript/ragged_module.py; TorchScript is kept for existing users),
//   - runs an AOTInductor package (.pt2) of an exported model that calls torch_ragged ops (built by
//     examples/export_aoti.py), after checking it was built against this torch_ragged version,
//   - calls the C++ API directly, backward included.
// Linking TorchRagged::TorchRagged registers the ops; no Python is involved.
//
//   cpp_app MODEL.pt [PACKAGE.pt2]   -> exits 0 when every check passes, 1 when one fails, 2 on
//                                       bad arguments or a package it must not load

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/script.h>
#include <torch/torch.h>
#include <torch_ragged/torch_ragged.h>

#include <iostream>
#include <optional>
#include <string>
#include <unordered_map>

namespace {

bool check(bool ok, const char* what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << "\n";
  return ok;
}

// The package's `torch_ragged_version` metadata (set by examples/export_aoti.py) must name this
// program's torch_ragged: the package calls the ops by name and schema, and another version may
// register them differently. Returns the reason not to load it, if any.
std::optional<std::string> package_mismatch(const std::string& path) {
  std::unordered_map<std::string, std::string> metadata;
  try {
    metadata = torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(path, "model");
  } catch (const c10::Error& error) {
    return std::string("it is not a readable AOTInductor package (") +
           error.what_without_backtrace() + ")";
  }
  const auto found = metadata.find("torch_ragged_version");
  if (found == metadata.end()) {
    return std::string(
        "its metadata names no torch_ragged_version (build it with "
        "examples/export_aoti.py)");
  }
  if (found->second != torch_ragged::version()) {
    return "it was built against torch_ragged " + found->second + ", this program links " +
           torch_ragged::version() + "; rebuild it with examples/export_aoti.py";
  }
  return std::nullopt;
}

// examples/export_aoti.py's RaggedFeatures, run from the package on sizes other than the ones it
// was exported with, against the C++ API.
bool check_aoti_package(const std::string& path) {
  torch::inductor::AOTIModelPackageLoader package(path);
  const auto points = torch::arange(21, torch::kFloat).view({7, 3});
  const auto first_idx = torch::tensor({0, 4, 4, 5, 7}, torch::kLong);
  const auto image = torch::arange(3 * 6 * 4, torch::kFloat).view({3, 6, 4});
  const std::vector<at::Tensor> outputs = package.run({points, first_idx, image});
  const auto shape_per_tensor = torch::tensor({4, 0, 1, 2}, torch::kLong).view({4, 1});
  bool ok = check(outputs.size() == 3, "AOTInductor package: three outputs");
  if (!ok) return false;
  ok &= check(torch::allclose(outputs[0], torch_ragged::segment_sum(points, first_idx)),
              "AOTInductor package: per-cloud sums equal segment_sum");
  ok &= check(torch::equal(outputs[1], torch_ragged::packed_to_padded(points, shape_per_tensor,
                                                                      first_idx, 0.0)),
              "AOTInductor package: padded batch equals packed_to_padded (4 clouds, 7 points)");
  ok &= check(torch::equal(outputs[2], torch_ragged::pad(image, {0, 0, 2, 2, 2, 2}, "reflect")),
              "AOTInductor package: reflect-padded 6x4 image equals pad");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: cpp_app MODEL.pt [PACKAGE.pt2]\n";
    return 2;
  }
  if (argc == 3) {
    if (const auto reason = package_mismatch(argv[2])) {
      std::cerr << "cpp_app: refusing to load " << argv[2] << ": " << *reason << "\n";
      return 2;
    }
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

  if (argc == 3) ok &= check_aoti_package(argv[2]);

  std::cout << (ok ? "all checks passed" : "some checks FAILED") << "\n";
  return ok ? 0 : 1;
}
