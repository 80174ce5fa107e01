#pragma once

// Sorting by key and runs of equal keys: the segment core's answer to "group these entries" (the
// duplicates coalesce sums, the pools sparse softmax normalises). Kernels the families call
// directly, after checking their arguments; not ops.
//
//   keys (n,) int64 in [0, 2^key_bits)  --sort_keys-->  permutation: sorted position -> input
//   sorted keys  --run_offsets-->  first_idx over sorted positions (one segment per distinct key)
//   segment_gather_sum(data, permutation, {}, first_idx): each run's rows summed, in input order
//
// The sort is stable, so equal keys keep their input order and every result is deterministic.

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

namespace torch_ragged {

// The key_bits that sort_keys needs for keys in [0, num_keys): the bit width of num_keys - 1.
inline int key_bits_for(uint64_t num_keys) {
  return num_keys <= 1 ? 0 : 64 - __builtin_clzll(num_keys - 1);
}

struct KeyOrder {
  at::Tensor sorted_keys;  // (n,) int64
  at::Tensor permutation;  // (n,) int64; undefined when the keys were already sorted (identity)
};

// Keys grouped without sorting them (group_small_keys): `permutation` as KeyOrder's, `first_idx`
// the groups' offsets over sorted positions.
struct KeyGroups {
  at::Tensor permutation, first_idx;
};

namespace cpu {
// Stable sort over the low key_bits bits; keys already non-decreasing are detected in one pass and
// not moved; up to 64 keys: insertion sort. Wide keys: counting passes from their top bits down,
// each bucket then sorted (keys packed with their positions into one word each, in two cache-sized
// levels, where both fit in 32 bits); narrow or crowded keys: LSD radix sort (11-bit digits, digits
// all keys share skipped).
KeyOrder sort_keys(const at::Tensor& keys, int key_bits);
// first_idx (runs + 1,) int64 of the runs of equal keys in sorted_keys.
at::Tensor run_offsets(const at::Tensor& sorted_keys);
// Keys from a small range [0, num_keys) (a matrix's columns, say) grouped by one stable counting
// pass: `permutation` as sort_keys' (equal keys in input order), `first_idx` (num_keys + 1,) with
// key k at sorted positions [first_idx[k], first_idx[k + 1]) (empty for absent keys): the sorted
// keys and their runs without sorting them. nullopt when a key lies outside [0, num_keys).
std::optional<KeyGroups> group_small_keys(const at::Tensor& keys, int64_t num_keys);
// Softmax (log) of scalar values (n,) over the groups of group_small_keys' keys, in input order:
// bit for bit segment_(log_)softmax of the grouped values, put back where they came from, without
// moving any (each group's sums replay the reduction tree over its grouped positions). nullopt
// when a key lies outside [0, num_keys).
std::optional<at::Tensor> softmax_of_small_key_groups(const at::Tensor& values,
                                                      const at::Tensor& keys, int64_t num_keys,
                                                      bool log);
// out[r] = sum over i in [first_idx[r], first_idx[r + 1]) of weight[i] * data[index[i]] (data[i]
// when index is undefined, weight 1 when weight is), rows of data (n, ...) in op-math, in order:
// (runs, ...). Unchecked: the segment_gather_sum op checks its arguments first.
at::Tensor segment_gather_sum(const at::Tensor& data, const at::Tensor& index,
                              const at::Tensor& weight, const at::Tensor& first_idx);
}  // namespace cpu

namespace cuda {
// The same on the GPU (cub::DeviceRadixSort, 64-bit item counts; never skips the sort).
KeyOrder sort_keys(const at::Tensor& keys, int key_bits);
// run_offsets also returns its count without a second pass; `runs` is read on the host (the one
// synchronisation a data-dependent size needs).
at::Tensor run_offsets(const at::Tensor& sorted_keys);
at::Tensor segment_gather_sum(const at::Tensor& data, const at::Tensor& index,
                              const at::Tensor& weight, const at::Tensor& first_idx);
}  // namespace cuda

}  // namespace torch_ragged
