// CPU sort by key and runs of equal keys (segment/sort.h).

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "common/cpu_clones.h"
#include "segment/portable_lanes.h"
#include "segment/segment_index.h"
#include "segment/sort.h"
#include "segment/tree_replay.h"

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
      for (int64_t i = chunks.begin(t), end = chunks.end(t); i < end; ++i) {
        const int64_t slot = next[(static_cast<uint64_t>(keys[i]) >> shift) & (kBuckets - 1)]++;
        keys_out[slot] = keys[i];
        perm_out[slot] = perm == nullptr ? i : perm[i];
      }
    }
  });
  return true;
}

// LSD radix sort of keys (n,) over their low key_bits bits into (sorted keys, permutation), in
// passes over the chunks; digits on which every key agrees are skipped. The caller checked that the
// keys are not already sorted.
KeyOrder lsd_sort(const at::Tensor& keys, int key_bits, const Chunks& chunks) {
  const int64_t* in = keys.const_data_ptr<int64_t>();
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

// Sorts keys[begin, end) (all sharing their high bits) with perm alongside, stably: insertion sort
// for the short buckets most are, std::stable_sort of (key, position) pairs for longer ones.
void sort_bucket(int64_t* keys, int64_t* perm, int64_t begin, int64_t end,
                 std::vector<std::pair<int64_t, int64_t>>& scratch) {
  const int64_t size = end - begin;
  if (size <= 32) {
    for (int64_t i = begin + 1; i < end; ++i) {
      const int64_t key = keys[i], position = perm[i];
      int64_t j = i;
      for (; j > begin && keys[j - 1] > key; --j) {
        keys[j] = keys[j - 1];
        perm[j] = perm[j - 1];
      }
      keys[j] = key;
      perm[j] = position;
    }
    return;
  }
  scratch.resize(size);
  for (int64_t i = 0; i < size; ++i) scratch[i] = {keys[begin + i], perm[begin + i]};
  std::stable_sort(scratch.begin(), scratch.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (int64_t i = 0; i < size; ++i) std::tie(keys[begin + i], perm[begin + i]) = scratch[i];
}

// One stable counting pass of keys into buckets [0, buckets) by bucket_of(key) (unsigned, so a
// negative key lands past the end), over the chunks: per-chunk counts, then, in (bucket, chunk)
// order, where each chunk writes its first key of each bucket. msd_sort's pass on the top bits and
// group_small_keys' on whole keys.
struct CountingPass {
  std::vector<std::vector<int64_t>> next;  // [chunk][bucket]: counts, then first slots
  std::vector<int64_t> bucket_first;       // (buckets + 1,): each bucket's first sorted position

  // Counts and offsets; false (nothing else valid) when a key's bucket is not below `buckets`.
  // Every step runs on all threads: the histograms (8 bytes per bucket per chunk, megabytes for
  // msd_sort's million buckets) are zeroed by the thread that counts into them, and the offsets
  // are a scan over ranges of buckets (a serial pass over them left the other threads waiting).
  template <typename BucketOf>
  bool count(const int64_t* keys, const Chunks& chunks, int64_t buckets,
             const BucketOf& bucket_of) {
    next.resize(chunks.count);
    std::atomic<bool> fits{true};
    at::parallel_for(0, chunks.count, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        next[t].assign(buckets, 0);
        int64_t* counts = next[t].data();
        for (int64_t i = chunks.begin(t), end = chunks.end(t); i < end; ++i) {
          const uint64_t bucket = bucket_of(keys[i]);
          if (bucket >= static_cast<uint64_t>(buckets)) {
            fits.store(false, std::memory_order_relaxed);
            return;
          }
          ++counts[bucket];
        }
      }
    });
    if (!fits.load()) return false;
    bucket_first.resize(buckets + 1);
    // Keys in each range of buckets, then each range's first position, then the slots within it.
    // one chunk (few keys): one range, so that a tiny call does not wake the thread pool
    const Chunks ranges{buckets,
                        std::min<int64_t>(buckets, chunks.count == 1 ? 1 : chunks.count * 4)};
    std::vector<int64_t> range_first(ranges.count + 1, 0);
    at::parallel_for(0, ranges.count, 1, [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        int64_t keys_in_range = 0;
        for (int64_t b = ranges.begin(r), end = ranges.end(r); b < end; ++b) {
          for (int64_t t = 0; t < chunks.count; ++t) keys_in_range += next[t][b];
        }
        range_first[r + 1] = keys_in_range;
      }
    });
    for (int64_t r = 0; r < ranges.count; ++r) range_first[r + 1] += range_first[r];
    at::parallel_for(0, ranges.count, 1, [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) {
        int64_t position = range_first[r];
        for (int64_t b = ranges.begin(r), end = ranges.end(r); b < end; ++b) {
          bucket_first[b] = position;
          for (int64_t t = 0; t < chunks.count; ++t) {
            const int64_t count = next[t][b];
            next[t][b] = position;
            position += count;
          }
        }
      }
    });
    bucket_first[buckets] = range_first[ranges.count];
    return true;
  }
  // place(slot, i) for every key i, slots ascending in input order within each bucket.
  template <typename BucketOf, typename Place>
  void scatter(const int64_t* keys, const Chunks& chunks, const BucketOf& bucket_of,
               const Place& place) {
    at::parallel_for(0, chunks.count, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        int64_t* slots = next[t].data();
        for (int64_t i = chunks.begin(t), end = chunks.end(t); i < end; ++i) {
          place(slots[bucket_of(keys[i])]++, i);
        }
      }
    });
  }
};

// Insertion sort of words[0, n): most of msd_sort's buckets hold a few keys.
inline void insertion_sort(uint64_t* words, int64_t n) {
  for (int64_t i = 1; i < n; ++i) {
    const uint64_t word = words[i];
    int64_t j = i;
    for (; j > 0 && words[j - 1] > word; --j) words[j] = words[j - 1];
    words[j] = word;
  }
}

// Sorts the words of one first-level bucket, `count` of them from `words`, into `sorted` (scratch
// of its own): a counting pass on the digit just below the bucket's bits (sized for 2-4 words per
// digit, in cache), then each digit's words by insertion (or std::sort past 32: the words are
// distinct, so no stability is needed). `low_bits`: the key bits a word carries above its position.
void sort_bucket_words(const uint64_t* words, int64_t count, int low_bits, uint64_t* sorted,
                       std::vector<int64_t>& digit_first) {
  int digit_bits = 0;
  while (digit_bits < low_bits && (int64_t{4} << digit_bits) <= count) ++digit_bits;
  const int shift = 32 + low_bits - digit_bits;
  const int64_t digits = int64_t{1} << digit_bits;
  const uint64_t digit_mask = static_cast<uint64_t>(digits - 1);
  digit_first.assign(digits + 1, 0);
  for (int64_t i = 0; i < count; ++i) ++digit_first[((words[i] >> shift) & digit_mask) + 1];
  for (int64_t d = 0; d < digits; ++d) digit_first[d + 1] += digit_first[d];
  for (int64_t i = 0; i < count; ++i)
    sorted[digit_first[(words[i] >> shift) & digit_mask]++] = words[i];
  int64_t begin = 0;  // digit_first[d] is now digit d's end
  for (int64_t d = 0; d < digits; ++d) {
    const int64_t end = digit_first[d];
    if (end - begin <= 32) {
      insertion_sort(sorted + begin, end - begin);
    } else {
      std::sort(sorted + begin, sorted + end);
    }
    begin = end;
  }
}

// msd_sort for keys whose bits below the first level fit in 32 bits (low_bits = key_bits -
// first_bits), as are the positions (n <= 2^32): each key moves as one 64-bit word, (those bits)
// << 32 | position, and sorting a bucket's words sorts its keys stably (equal keys by position).
// Two levels: a counting pass into 2^first_bits buckets (few enough that their write streams stay
// in cache; the words live in the permutation's memory), then each bucket sorted on its own in
// cache (sort_bucket_words) and unpacked into the sorted keys and the permutation. The buckets are
// shared between threads by their keys. nullopt (nothing written) when one bucket holds so many
// keys that the threads could not share the second level.
std::optional<KeyOrder> sort_packed(const at::Tensor& keys, const Chunks& chunks, int key_bits,
                                    int first_bits) {
  const int64_t n = keys.numel();
  const int64_t* in = keys.const_data_ptr<int64_t>();
  const int low_bits = key_bits - first_bits;
  const uint64_t low_mask = (uint64_t{1} << low_bits) - 1;
  const auto top = [low_bits](int64_t key) { return static_cast<uint64_t>(key) >> low_bits; };
  const int64_t buckets = int64_t{1} << first_bits;
  CountingPass pass;
  if (!pass.count(in, chunks, buckets, top)) return std::nullopt;  // keys wider than key_bits
  const std::vector<int64_t>& bucket_first = pass.bucket_first;
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  int64_t largest = 0;
  for (int64_t b = 0; b < buckets; ++b) {
    largest = std::max(largest, bucket_first[b + 1] - bucket_first[b]);
  }
  if (threads > 1 && largest > 2 * n / threads) return std::nullopt;
  at::Tensor sorted = at::empty_like(keys), permutation = at::empty_like(keys);
  int64_t* keys_out = sorted.mutable_data_ptr<int64_t>();
  int64_t* perm_out = permutation.mutable_data_ptr<int64_t>();
  static_assert(sizeof(uint64_t) == sizeof(int64_t));
  uint64_t* packed = reinterpret_cast<uint64_t*>(perm_out);  // read back before it is overwritten
  pass.scatter(in, chunks, top, [&](int64_t slot, int64_t i) {
    packed[slot] = (static_cast<uint64_t>(in[i]) & low_mask) << 32 | static_cast<uint64_t>(i);
  });
  // Part t of the second level: the buckets starting in keys [n t / parts, n (t + 1) / parts).
  const Chunks parts{n, threads};
  const auto first_bucket_of = [&](int64_t t) {
    return std::lower_bound(bucket_first.begin(), bucket_first.end() - 1, parts.begin(t)) -
           bucket_first.begin();
  };
  at::parallel_for(0, parts.count, 1, [&](int64_t first, int64_t last) {
    std::vector<uint64_t> scratch;
    std::vector<int64_t> digit_first;
    for (int64_t t = first; t < last; ++t) {
      const int64_t end = t + 1 == parts.count ? buckets : first_bucket_of(t + 1);
      for (int64_t b = first_bucket_of(t); b < end; ++b) {
        const int64_t begin = bucket_first[b], count = bucket_first[b + 1] - begin;
        scratch.resize(count);
        sort_bucket_words(packed + begin, count, low_bits, scratch.data(), digit_first);
        const uint64_t high = static_cast<uint64_t>(b) << low_bits;
        for (int64_t i = 0; i < count; ++i) {
          keys_out[begin + i] = static_cast<int64_t>(high | scratch[i] >> 32);
          perm_out[begin + i] = static_cast<int64_t>(scratch[i] & 0xffffffffu);
        }
      }
    }
  });
  return KeyOrder{sorted, permutation};
}

// Keys wide enough for three or more LSD passes (a large COO tensor's flattened indices): one
// stable counting pass on the top bits, about one bucket per few keys (for a 2-D tensor, about a
// row each), then each bucket sorted on its own. Two passes over the data instead of four. Returns
// nullopt when the keys crowd into a few buckets (one dense row, say): LSD then sorts them.
std::optional<KeyOrder> msd_sort(const at::Tensor& keys, int key_bits, const Chunks& chunks) {
  const int64_t n = keys.numel();
  const int64_t* in = keys.const_data_ptr<int64_t>();
  int top_bits = 0;
  while ((int64_t{2} << top_bits) <= n / 2) ++top_bits;  // ~2-4 keys per bucket
  // Histograms: 2^top_bits counts per chunk, at most 256 MB in all.
  while (top_bits > kDigitBits && (int64_t{8} << top_bits) * chunks.count > (int64_t{1} << 28)) {
    --top_bits;
  }
  top_bits = std::min(top_bits, key_bits);
  // The packed two-level sort where a word holds the bits below its first level: 2^10 first-level
  // buckets or more, as few as leave 32 bits below them.
  const int first_bits = std::min(top_bits, std::max(10, key_bits - 32));
  if (key_bits - first_bits <= 32 && n <= (int64_t{1} << 32)) {
    if (std::optional<KeyOrder> order = sort_packed(keys, chunks, key_bits, first_bits)) {
      return order;
    }
  }
  const int shift = key_bits - top_bits;
  const int64_t buckets = int64_t{1} << top_bits;
  const auto top = [shift](int64_t key) { return static_cast<uint64_t>(key) >> shift; };
  CountingPass pass;
  if (!pass.count(in, chunks, buckets, top)) return std::nullopt;  // keys wider than key_bits
  const std::vector<int64_t>& bucket_first = pass.bucket_first;
  int64_t largest = 0;
  for (int64_t b = 0; b < buckets; ++b) {
    largest = std::max(largest, bucket_first[b + 1] - bucket_first[b]);
  }
  if (largest > n / 8) return std::nullopt;
  at::Tensor sorted = at::empty_like(keys), permutation = at::empty_like(keys);
  int64_t* keys_out = sorted.mutable_data_ptr<int64_t>();
  int64_t* perm_out = permutation.mutable_data_ptr<int64_t>();
  pass.scatter(in, chunks, top, [&](int64_t slot, int64_t i) {
    keys_out[slot] = in[i];
    perm_out[slot] = i;
  });
  at::parallel_for(0, buckets, 1 << 12, [&](int64_t first, int64_t last) {
    std::vector<std::pair<int64_t, int64_t>> scratch;
    for (int64_t b = first; b < last; ++b) {
      sort_bucket(keys_out, perm_out, bucket_first[b], bucket_first[b + 1], scratch);
    }
  });
  return KeyOrder{sorted, permutation};
}

// Up to this many keys, a stable insertion sort of (key, position) beats the radix passes, whose
// 2048-bucket histograms cost microseconds whatever n (tiny inputs: per-call cost is the speed).
constexpr int64_t kInsertionSortKeys = 64;

KeyOrder insertion_sort(const at::Tensor& keys) {
  const int64_t n = keys.numel();
  const int64_t* in = keys.const_data_ptr<int64_t>();
  at::Tensor sorted = at::empty_like(keys), permutation = at::empty_like(keys);
  int64_t* key_out = sorted.mutable_data_ptr<int64_t>();
  int64_t* position_out = permutation.mutable_data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t j = i;
    // strictly greater moves: equal keys keep their input order (stable)
    for (; j > 0 && key_out[j - 1] > in[i]; --j) {
      key_out[j] = key_out[j - 1];
      position_out[j] = position_out[j - 1];
    }
    key_out[j] = in[i];
    position_out[j] = i;
  }
  return {sorted, permutation};
}

}  // namespace

KeyOrder sort_keys(const at::Tensor& keys, int key_bits) {
  const int64_t n = keys.numel();
  const int64_t* in = keys.const_data_ptr<int64_t>();
  if (n <= 1 || non_decreasing(in, n)) return {keys, at::Tensor()};
  if (n <= kInsertionSortKeys) return insertion_sort(keys);
  const Chunks chunks{n, n < kParallelKeys ? 1 : std::max<int64_t>(1, at::get_num_threads())};
  if (key_bits > 2 * kDigitBits && n >= kParallelKeys) {
    if (std::optional<KeyOrder> order = msd_sort(keys, key_bits, chunks)) return *order;
  }
  return lsd_sort(keys, key_bits, chunks);
}

std::optional<KeyGroups> group_small_keys(const at::Tensor& keys, int64_t num_keys) {
  const int64_t n = keys.numel();
  const int64_t* in = keys.const_data_ptr<int64_t>();
  const Chunks chunks{n, n < kParallelKeys ? 1 : std::max<int64_t>(1, at::get_num_threads())};
  const auto whole = [](int64_t key) { return static_cast<uint64_t>(key); };
  CountingPass pass;
  if (!pass.count(in, chunks, num_keys, whole)) return std::nullopt;
  at::Tensor permutation = at::empty_like(keys);
  int64_t* out = permutation.mutable_data_ptr<int64_t>();
  pass.scatter(in, chunks, whole, [&](int64_t slot, int64_t i) { out[slot] = i; });
  return KeyGroups{permutation, at::tensor(pass.bucket_first, keys.options())};
}

namespace {

// ---- softmax over the groups of small keys, entries left in place ----
//
// group_small_keys puts key k's entries at grouped positions [first[k], first[k + 1]), in input
// order; segment_(log_)softmax then sums each group's terms over the reduction tree of those
// positions (segment_index.h). The same sums are replayed here without moving the entries into
// that order: each group keeps the grouped position of its next entry, so each entry knows its
// place in the tree, and its term is folded as the tree folds it. The replay must see each group's
// entries in input order, so it runs one key range per thread, over the terms of its range (a
// stable partition of the entries by range, written by the pass that computes the terms).

// Per chunk of entries and key: the entries and their maximum (the first of equals kept, as every
// max of the core keeps it; merged in chunk order, the maxima are the tree's).
template <typename acc_t, typename Index>
struct KeyTally {
  Index count;
  acc_t max;
};

// Key ranges [range_first[r], range_first[r + 1]) holding about as many entries each (first: the
// groups' first grouped positions), and the range of a key without a branch.
struct KeyRanges {
  std::vector<int64_t> range_first;

  KeyRanges(const std::vector<int64_t>& first, int64_t ranges) : range_first(ranges + 1) {
    const int64_t n = first.back();
    for (int64_t r = 0; r <= ranges; ++r) {
      range_first[r] =
          r == ranges
              ? static_cast<int64_t>(first.size()) - 1
              : std::lower_bound(first.begin(), first.end() - 1, n * r / ranges) - first.begin();
    }
  }
  int64_t count() const { return static_cast<int64_t>(range_first.size()) - 1; }
  int64_t range_of(int64_t key) const {  // ranges hold keys [0, range_first.back())
    int64_t r = 0;
    for (int64_t step = int64_t{1} << (63 - __builtin_clzll(count())); step > 0; step >>= 1) {
      r += (r + step < count() && range_first[r + step] <= key) ? step : 0;
    }
    return r;
  }
};

// terms[0, count) = exp(x - shift of the key) for entries [lo, lo + count).
template <typename scalar_t, typename acc_t = at::opmath_type<scalar_t>>
void shifted_exp_terms(const scalar_t* x, const int64_t* keys, const acc_t* shift, int64_t lo,
                       int64_t count, acc_t* terms) {
  for (int64_t j = 0; j < count; ++j)
    terms[j] = static_cast<acc_t>(x[lo + j]) - shift[keys[lo + j]];
  exp_values(terms, count);
}

// The stable partition of one block of `count` entries by key range, for at most kRanges ranges:
// entry j of range r goes to next[r], its key and term written there, and next[r] moves on. The
// kRanges positions are locals (registers, the loops over them unrolled): each entry picks its
// range's by compares and bumps it. With the positions read and written in memory through r (the
// loop partition_block_by_range keeps for more ranges), each entry waited on the previous one's
// store and reload of the same counter whenever two in a row fell in one range (2M entries, 100k
// columns, 2 ranges: 13.4-14.3 -> 11.9-13.0 ms for the whole softmax; the counts as lanes of one
// vector, read through r, took 19 ms).
template <int kRanges, typename acc_t, typename Index>
void partition_block(const int64_t* keys, const acc_t* terms, int64_t count,
                     const KeyRanges& ranges, int64_t* next, Index* partitioned_keys,
                     acc_t* partitioned_terms) {
  int64_t position_of[kRanges], first_key[kRanges];  // first_key[r]: range r's first key
  for (int r = 0; r < kRanges; ++r) {
    position_of[r] = r < ranges.count() ? next[r] : 0;
    first_key[r] = r < ranges.count() ? ranges.range_first[r] : std::numeric_limits<int64_t>::max();
  }
  for (int64_t j = 0; j < count; ++j) {
    const int64_t key = keys[j];
    if constexpr (kRanges == 2) {  // the loops below, in the fewest instructions (a cmov)
      const bool second = key >= first_key[1];
      const int64_t position = second ? position_of[1] : position_of[0];
      position_of[1] += second;
      position_of[0] += !second;
      partitioned_keys[position] = static_cast<Index>(key);
      partitioned_terms[position] = terms[j];
      continue;
    }
    int64_t range = 0;
#pragma GCC unroll 8
    for (int r = 1; r < kRanges; ++r) range += key >= first_key[r];
    int64_t position = 0;
#pragma GCC unroll 8
    for (int r = 0; r < kRanges; ++r) {
      const int64_t here = range == r;
      position |= position_of[r] & -here;  // a mask, not a select: GCC made that a branch
      position_of[r] += here;
    }
    partitioned_keys[position] = static_cast<Index>(key);
    partitioned_terms[position] = terms[j];
  }
  for (int64_t r = 0; r < ranges.count(); ++r) next[r] = position_of[r];
}

template <typename acc_t, typename Index>
void partition_block_by_range(const int64_t* keys, const acc_t* terms, int64_t count,
                              const KeyRanges& ranges, int64_t* next, Index* partitioned_keys,
                              acc_t* partitioned_terms) {
  if (ranges.count() <= 2) {
    return partition_block<2>(keys, terms, count, ranges, next, partitioned_keys,
                              partitioned_terms);
  }
  if (ranges.count() <= 4) {
    return partition_block<4>(keys, terms, count, ranges, next, partitioned_keys,
                              partitioned_terms);
  }
  if (ranges.count() <= 8) {
    return partition_block<8>(keys, terms, count, ranges, next, partitioned_keys,
                              partitioned_terms);
  }
  for (int64_t j = 0; j < count; ++j) {
    const int64_t key = keys[j], position = next[ranges.range_of(key)]++;
    partitioned_keys[position] = static_cast<Index>(key);
    partitioned_terms[position] = terms[j];
  }
}

template <typename scalar_t, bool kLog, typename Index>
bool softmax_of_groups(const scalar_t* x, const int64_t* keys, int64_t n, int64_t groups,
                       scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  using Max = ExtremumReducer<acc_t, true>;
  using Tally = KeyTally<acc_t, Index>;
  constexpr int64_t kBlock = 1 << 12;  // entries whose terms are computed at once
  const Chunks chunks{n, n < kParallelKeys ? 1 : std::max<int64_t>(1, at::get_num_threads())};
  // 1. Per chunk: each key's entries and maximum (a table of 8 bytes a key for float).
  std::vector<std::vector<Tally>> tallies(chunks.count);
  std::atomic<bool> fits{true};
  at::parallel_for(0, chunks.count, 1, [&](int64_t first_chunk, int64_t last_chunk) {
    for (int64_t t = first_chunk; t < last_chunk; ++t) {
      tallies[t].assign(groups, Tally{0, -std::numeric_limits<acc_t>::infinity()});
      Tally* tally = tallies[t].data();
      for (int64_t i = chunks.begin(t), end = chunks.end(t); i < end; ++i) {
        const int64_t key = keys[i];
        if (static_cast<uint64_t>(key) >= static_cast<uint64_t>(groups)) {
          fits.store(false, std::memory_order_relaxed);
          return;
        }
        const acc_t v = static_cast<acc_t>(x[i]);
        Tally& k = tally[key];
        ++k.count;
        k.max = Max::beats(v, k.max) ? v : k.max;
      }
    }
  });
  if (!fits.load()) return false;
  // 2. Each group's shift and first grouped position.
  std::vector<acc_t> shift(groups);
  std::vector<int64_t> first(groups + 1);
  at::parallel_for(0, groups, 1 << 14, [&](int64_t lo, int64_t hi) {
    for (int64_t g = lo; g < hi; ++g) {
      acc_t max = tallies[0][g].max;
      int64_t count = tallies[0][g].count;
      for (int64_t t = 1; t < chunks.count; ++t) {
        max = Max::beats(tallies[t][g].max, max) ? tallies[t][g].max : max;
        count += tallies[t][g].count;
      }
      shift[g] = softmax_shift(max);
      first[g + 1] = count;
    }
  });
  first[0] = 0;
  for (int64_t g = 0; g < groups; ++g) first[g + 1] += first[g];
  // 3. The terms, partitioned stably by key range: range r's, chunk by chunk, at
  // slot[t][r] onwards (slot: where chunk t writes its first entry of range r).
  const KeyRanges ranges(first, chunks.count);
  std::vector<std::vector<int64_t>> slot(chunks.count, std::vector<int64_t>(ranges.count()));
  for (int64_t r = 0, position = 0; r < ranges.count(); ++r) {
    for (int64_t t = 0; t < chunks.count; ++t) {
      slot[t][r] = position;
      for (int64_t g = ranges.range_first[r]; g < ranges.range_first[r + 1]; ++g)
        position += tallies[t][g].count;
    }
  }
  tallies.clear();
  // Uninitialised (every slot is written): torch's allocator, which backs large ones by huge pages.
  const at::Tensor partition = at::empty({n * static_cast<int64_t>(sizeof(Index) + sizeof(acc_t))},
                                         at::TensorOptions().dtype(at::kByte));
  auto* partitioned_terms = reinterpret_cast<acc_t*>(partition.mutable_data_ptr<uint8_t>());
  auto* partitioned_keys = reinterpret_cast<Index*>(partitioned_terms + n);
  at::parallel_for(0, chunks.count, 1, [&](int64_t first_chunk, int64_t last_chunk) {
    std::vector<acc_t> terms(kBlock);
    for (int64_t t = first_chunk; t < last_chunk; ++t) {
      int64_t* next = slot[t].data();
      for (int64_t lo = chunks.begin(t), end = chunks.end(t); lo < end; lo += kBlock) {
        const int64_t count = std::min(kBlock, end - lo);
        shifted_exp_terms(x, keys, shift.data(), lo, count, terms.data());
        partition_block_by_range(keys + lo, terms.data(), count, ranges, next, partitioned_keys,
                                 partitioned_terms);
      }
    }
  });
  // 4. The sums, one key range per thread.
  TreeSumReplay<acc_t, Index> replay(n, first);
  at::parallel_for(0, ranges.count(), 1, [&](int64_t first_range, int64_t last_range) {
    for (int64_t r = first_range; r < last_range; ++r) {
      const int64_t lo = first[ranges.range_first[r]], hi = first[ranges.range_first[r + 1]];
      replay.add(partitioned_keys + lo, partitioned_terms + lo, hi - lo);
    }
  });
  // 5. 1 / sum, or log(sum) (log_values: portable_log lane by lane), per group.
  std::vector<acc_t> divisor(groups);
  at::parallel_for(0, groups, 1 << 12, [&](int64_t lo, int64_t hi) {
    for (int64_t g = lo; g < hi; ++g) {
      divisor[g] = kLog ? replay.sum(g) : WriteSoftmaxDivisor<acc_t, false>::of(replay.sum(g));
    }
    if (kLog) log_values(divisor.data() + lo, hi - lo);
  });
  // 6. The output, in input order (softmax's terms computed again: cheaper than keeping them).
  at::parallel_for(0, n, kBlock, [&](int64_t begin, int64_t end) {
    if (kLog) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t g = keys[i];
        out[i] = static_cast<scalar_t>((static_cast<acc_t>(x[i]) - shift[g]) - divisor[g]);
      }
      return;
    }
    std::vector<acc_t> terms(kBlock);
    for (int64_t lo = begin; lo < end; lo += kBlock) {
      const int64_t count = std::min(kBlock, end - lo);
      shifted_exp_terms(x, keys, shift.data(), lo, count, terms.data());
      for (int64_t j = 0; j < count; ++j) {
        out[lo + j] = static_cast<scalar_t>(terms[j] * divisor[keys[lo + j]]);
      }
    }
  });
  return true;
}

}  // namespace

std::optional<at::Tensor> softmax_of_small_key_groups(const at::Tensor& values,
                                                      const at::Tensor& keys, int64_t num_keys,
                                                      bool log) {
  const at::Tensor x = values.contiguous();
  at::Tensor out = at::empty_like(x);
  bool fits = true;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, x.scalar_type(), "softmax_of_small_key_groups", [&] {
        const auto* in = x.const_data_ptr<scalar_t>();
        auto* o = out.mutable_data_ptr<scalar_t>();
        const int64_t* k = keys.const_data_ptr<int64_t>();
        const int64_t n = x.numel();
        // int32 positions and keys where every one fits: a float group's state in 12 bytes.
        if (std::max(n, num_keys) <= std::numeric_limits<int32_t>::max()) {
          fits = log ? softmax_of_groups<scalar_t, true, int32_t>(in, k, n, num_keys, o)
                     : softmax_of_groups<scalar_t, false, int32_t>(in, k, n, num_keys, o);
        } else {
          fits = log ? softmax_of_groups<scalar_t, true, int64_t>(in, k, n, num_keys, o)
                     : softmax_of_groups<scalar_t, false, int64_t>(in, k, n, num_keys, o);
        }
      });
  if (!fits) return std::nullopt;
  return out;
}

at::Tensor run_offsets(const at::Tensor& sorted_keys) {
  const int64_t n = sorted_keys.numel();
  const int64_t* keys = sorted_keys.const_data_ptr<int64_t>();
  const Chunks chunks{n, n < kParallelKeys ? 1 : std::max<int64_t>(1, at::get_num_threads())};
  auto is_head = [&](int64_t i) { return i == 0 || keys[i] != keys[i - 1]; };
  std::vector<int64_t> heads(chunks.count + 1, 0);
  std::vector<int64_t> last_head(chunks.count, -1);  // per chunk; -1: it has none
  at::parallel_for(0, chunks.count, 1, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      int64_t count = 0;
      for (int64_t i = chunks.begin(t), end = chunks.end(t); i < end; ++i) count += is_head(i);
      heads[t + 1] = count;
      for (int64_t i = chunks.end(t) - 1; count > 0 && i >= chunks.begin(t); --i) {
        if (is_head(i)) {
          last_head[t] = i;
          break;
        }
      }
    }
  });
  for (int64_t t = 0; t < chunks.count; ++t) heads[t + 1] += heads[t];
  at::Tensor first_idx = at::empty({heads.back() + 1}, sorted_keys.options());
  int64_t* out = first_idx.mutable_data_ptr<int64_t>();
  // Without a branch per key (heads fall at random): every position is stored at the next free
  // slot, which only a head advances. Up to the chunk's last head the stores stay inside the
  // chunk's own slots (a later head overwrites each stray one), so chunks never write each other's.
  at::parallel_for(0, chunks.count, 1, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      int64_t slot = heads[t];
      for (int64_t i = chunks.begin(t); i <= last_head[t]; ++i) {
        out[slot] = i;
        slot += is_head(i);
      }
    }
  });
  out[heads.back()] = n;
  return first_idx;
}

}  // namespace torch_ragged::cpu
