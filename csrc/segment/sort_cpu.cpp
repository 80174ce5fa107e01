// CPU sort by key and runs of equal keys (segment/sort.h).

#include <ATen/Parallel.h>

#include <array>

#include "common/cpu_clones.h"
#include "segment/sort.h"

namespace torch_ragged::cpu {
namespace {

constexpr int kDigitBits = 11;
constexpr int kBuckets = 1 << kDigitBits;
// Below this many keys one thread sorts (the per-pass histograms would cost more than they save).
constexpr int64_t kParallelKeys = int64_t{1} << 16;

bool non_decreasing(const int64_t* keys, int64_t n) {
  return at::parallel_reduce(
      int64_t{0}, n - 1, int64_t{1} << 16, true,
      [&](int64_t begin, int64_t end, bool sorted) {
        for (int64_t i = begin; i < end && sorted; ++i) sorted = keys[i] <= keys[i + 1];
        return sorted;
      },
      [](bool a, bool b) { return a && b; });
}

// Contiguous chunks of [0, n), one per task: the scatter of a stable LSD pass keeps chunk order.
struct Chunks {
  int64_t n, count;
  int64_t begin(int64_t t) const { return n * t / count; }
  int64_t end(int64_t t) const { return n * (t + 1) / count; }
};

using Histogram = std::array<int64_t, kBuckets>;

TORCH_RAGGED_CPU_CLONES void count_digits(const int64_t* keys, int64_t begin, int64_t end,
                                          int shift, Histogram& hist) {
  hist.fill(0);
  for (int64_t i = begin; i < end; ++i)
    ++hist[(static_cast<uint64_t>(keys[i]) >> shift) & (kBuckets - 1)];
}

// One stable counting pass on the digit at `shift`; returns false (and moves nothing) when every
// key has the same digit there.
bool radix_pass(const Chunks& chunks, int shift, const int64_t* keys, const int64_t* perm,
                int64_t* keys_out, int64_t* perm_out) {
  std::vector<Histogram> hist(chunks.count);
  at::parallel_for(0, chunks.count, 1, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      count_digits(keys, chunks.begin(t), chunks.end(t), shift, hist[t]);
    }
  });
  int64_t position = 0;
  for (int d = 0; d < kBuckets; ++d) {
    int64_t bucket = 0;
    for (int64_t t = 0; t < chunks.count; ++t) bucket += hist[t][d];
    if (bucket == chunks.n) return false;
    for (int64_t t = 0; t < chunks.count; ++t) {
      const int64_t count = hist[t][d];
      hist[t][d] = position;  // now: where chunk t writes its first key with digit d
      position += count;
    }
  }
  at::parallel_for(0, chunks.count, 1, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      Histogram& next = hist[t];
      for (int64_t i = chunks.begin(t); i < chunks.end(t); ++i) {
        const int64_t slot = next[(static_cast<uint64_t>(keys[i]) >> shift) & (kBuckets - 1)]++;
        keys_out[slot] = keys[i];
        perm_out[slot] = perm == nullptr ? i : perm[i];
      }
    }
  });
  return true;
}

}  // namespace

KeyOrder sort_keys(const at::Tensor& keys, int key_bits) {
  const int64_t n = keys.numel();
  const int64_t* in = keys.const_data_ptr<int64_t>();
  if (n <= 1 || non_decreasing(in, n)) return {keys, at::Tensor()};
  const Chunks chunks{n, n < kParallelKeys ? 1 : std::max<int64_t>(1, at::get_num_threads())};
  at::Tensor buffers[2][2] = {{at::empty_like(keys), at::empty_like(keys)},
                              {at::empty_like(keys), at::empty_like(keys)}};
  const int64_t* src_keys = in;
  const int64_t* src_perm = nullptr;  // identity before the first pass that moves anything
  int next = 0;
  for (int shift = 0; shift < key_bits; shift += kDigitBits) {
    int64_t* dst_keys = buffers[next][0].mutable_data_ptr<int64_t>();
    int64_t* dst_perm = buffers[next][1].mutable_data_ptr<int64_t>();
    if (!radix_pass(chunks, shift, src_keys, src_perm, dst_keys, dst_perm)) continue;
    src_keys = dst_keys;
    src_perm = dst_perm;
    next ^= 1;
  }
  // Unsorted keys differ somewhere in their low key_bits bits, so some pass moved them.
  TORCH_INTERNAL_ASSERT(src_perm != nullptr, "torch_ragged: keys wider than key_bits");
  return {buffers[next ^ 1][0], buffers[next ^ 1][1]};
}

at::Tensor run_offsets(const at::Tensor& sorted_keys) {
  const int64_t n = sorted_keys.numel();
  const int64_t* keys = sorted_keys.const_data_ptr<int64_t>();
  const Chunks chunks{n, n < kParallelKeys ? 1 : std::max<int64_t>(1, at::get_num_threads())};
  auto is_head = [&](int64_t i) { return i == 0 || keys[i] != keys[i - 1]; };
  std::vector<int64_t> heads(chunks.count + 1, 0);
  at::parallel_for(0, chunks.count, 1, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      int64_t count = 0;
      for (int64_t i = chunks.begin(t); i < chunks.end(t); ++i) count += is_head(i);
      heads[t + 1] = count;
    }
  });
  for (int64_t t = 0; t < chunks.count; ++t) heads[t + 1] += heads[t];
  at::Tensor first_idx = at::empty({heads.back() + 1}, sorted_keys.options());
  int64_t* out = first_idx.mutable_data_ptr<int64_t>();
  at::parallel_for(0, chunks.count, 1, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      int64_t slot = heads[t];
      for (int64_t i = chunks.begin(t); i < chunks.end(t); ++i) {
        if (is_head(i)) out[slot++] = i;
      }
    }
  });
  out[heads.back()] = n;
  return first_idx;
}

}  // namespace torch_ragged::cpu
