// CPU kernels of the sparse family: flattened keys, and coalesce on the segment core's sort.

#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/checks.h"
#include "common/cpu_clones.h"
#include "common/parallel.h"
#include "sparse/coalesce.h"
#include "sparse/softmax.h"
#include "sparse/sparse_args.h"

namespace torch_ragged {
namespace {

// indices with their entries contiguous, each sparse dim's row where it lies: the kernels read rows
// by their stride (torch's coalesce leaves indices as rows of a wider buffer: no copy needed).
at::Tensor with_contiguous_rows(const at::Tensor& indices) {
  return indices.stride(1) == 1 || indices.size(1) <= 1 ? indices : indices.contiguous();
}

at::Tensor flat_keys_cpu(std::string_view op, const at::Tensor& indices, const KeyGeometry& g,
                         bool validate) {
  const at::Tensor src = with_contiguous_rows(indices);
  const int64_t nnz = src.size(1), row_stride = src.stride(0);
  at::Tensor keys = at::empty({nnz}, src.options().dtype(at::kLong));
  int64_t* out = keys.mutable_data_ptr<int64_t>();
  std::atomic<bool> out_of_range{false};
  AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "sparse_flat_keys_cpu", [&] {
    const index_t* idx = src.const_data_ptr<index_t>();
    at::parallel_for(0, nnz, kGrainElems / std::max(1, g.sparse_dim), [&](int64_t b, int64_t e) {
      const KeyGeometry local = g;  // a local copy: stores to `out` cannot alias it
      bool all_in_range = true;
      for (int64_t i = b; i < e; ++i) {
        bool in_range;
        out[i] = flat_key(local, idx, row_stride, i, in_range);
        all_in_range = all_in_range && in_range;
      }
      if (!all_in_range) out_of_range = true;
    });
  });
  if (validate && out_of_range) {
    raise_out_of_range(op, indices, at::IntArrayRef(g.size, g.sparse_dim));
  }
  return keys;
}

// Entry i's index tuple in range, and after entry i - 1's (row-major order; i > 0), without
// branches, for any number of sparse dims.
template <typename index_t>
inline bool in_range_and_after_previous(const KeyGeometry& g, const index_t* indices,
                                        int64_t row_stride, int64_t i) {
  bool in_range = true, decided = false, after = false;  // the first dim that differs decides
  for (int d = 0; d < g.sparse_dim; ++d) {
    const int64_t index = static_cast<int64_t>(indices[d * row_stride + i]);
    const int64_t previous = static_cast<int64_t>(indices[d * row_stride + i - 1]);
    in_range = in_range & (index >= 0) & (index < g.size[d]);
    after = after | (!decided & (index > previous));
    decided = decided | (index != previous);
  }
  return in_range & after;
}

// Entries [begin, end) of a matrix's indices (rows and columns) copied to `out` (contiguous, nnz
// entries), and whether each is in range and after the one before it: the copy and the check in
// one read of the indices, written so that the compiler keeps whole vectors of entries in flight
// (no branch, unsigned range compares).
template <typename index_t>
TORCH_RAGGED_CPU_CLONES bool copy_block_if_ordered_2d(const index_t* row, const index_t* col,
                                                      index_t* out, int64_t nnz, int64_t begin,
                                                      int64_t end, int64_t rows, int64_t cols) {
  using unsigned_t = std::make_unsigned_t<index_t>;
  int failed = 0;
  for (int64_t i = begin; i < end; ++i) {
    const index_t r = row[i], c = col[i], previous_r = row[i - 1], previous_c = col[i - 1];
    out[i] = r;
    out[nnz + i] = c;
    failed |= static_cast<int>(static_cast<uint64_t>(static_cast<unsigned_t>(r)) >=
                               static_cast<uint64_t>(rows)) |
              static_cast<int>(static_cast<uint64_t>(static_cast<unsigned_t>(c)) >=
                               static_cast<uint64_t>(cols)) |
              static_cast<int>(r < previous_r) |
              (static_cast<int>(r == previous_r) & static_cast<int>(c <= previous_c));
  }
  return failed == 0;
}

template <typename index_t>
bool copy_block_if_ordered(const index_t* idx, int64_t row_stride, index_t* out, int64_t nnz,
                           int64_t begin, int64_t end, const KeyGeometry& g) {
  if (g.sparse_dim == 2) {
    return copy_block_if_ordered_2d(idx, idx + row_stride, out, nnz, begin, end, g.size[0],
                                    g.size[1]);
  }
  bool all = true;
  for (int64_t i = begin; i < end; ++i) {
    for (int d = 0; d < g.sparse_dim; ++d) out[d * nnz + i] = idx[d * row_stride + i];
    all = all & in_range_and_after_previous(g, idx, row_stride, i);
  }
  return all;
}

// The indices copied, if they are coalesced already (every index in range, the tuples strictly
// increasing), else an undefined tensor: blocks of entries copied and checked together, each chunk
// stopping after the first block that fails or once another chunk failed (random input pays
// microseconds, coalesced input about a copy).
at::Tensor copy_if_coalesced_cpu(const at::Tensor& indices, const KeyGeometry& g) {
  const at::Tensor src = with_contiguous_rows(indices);
  const int64_t nnz = src.size(1), row_stride = src.stride(0);
  at::Tensor out = at::empty(src.sizes(), src.options());
  bool coalesced = true;
  AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "sparse_coalesce_cpu", [&] {
    const index_t* idx = src.const_data_ptr<index_t>();
    index_t* copy = out.mutable_data_ptr<index_t>();
    for (int d = 0; d < g.sparse_dim && nnz > 0; ++d) {  // the first entry has only its range
      const int64_t index = static_cast<int64_t>(idx[d * row_stride]);
      copy[d * nnz] = idx[d * row_stride];
      coalesced = coalesced && index >= 0 && index < g.size[d];
    }
    if (!coalesced) return;
    std::atomic<bool> all{true};
    constexpr int64_t kBlock = 1024;
    at::parallel_for(1, std::max<int64_t>(nnz, 1), kGrainElems, [&](int64_t begin, int64_t end) {
      const KeyGeometry local = g;  // a local copy: stores to `copy` cannot alias it
      for (int64_t block = begin; block < end; block += kBlock) {
        if (!copy_block_if_ordered(idx, row_stride, copy, nnz, block, std::min(end, block + kBlock),
                                   local)) {
          all.store(false);
        }
        if (!all.load(std::memory_order_relaxed)) return;
      }
    });
    coalesced = all.load();
  });
  return coalesced ? out : at::Tensor();
}

at::Tensor run_indices_cpu(const at::Tensor& sorted_keys, const at::Tensor& first_idx,
                           const KeyGeometry& g, at::ScalarType dtype) {
  const int64_t runs = first_idx.numel() - 1;
  at::Tensor out = at::empty({g.sparse_dim, runs}, sorted_keys.options().dtype(dtype));
  const int64_t* keys = sorted_keys.const_data_ptr<int64_t>();
  const int64_t* heads = first_idx.const_data_ptr<int64_t>();
  AT_DISPATCH_INDEX_TYPES(dtype, "sparse_coalesce_cpu", [&] {
    index_t* indices = out.mutable_data_ptr<index_t>();
    at::parallel_for(0, runs, kGrainElems, [&](int64_t begin, int64_t end) {
      const KeyGeometry local = g;  // a local copy: stores to `indices` cannot alias it
      for (int64_t r = begin; r < end; ++r) run_head_indices(local, keys, heads, runs, r, indices);
    });
  });
  return out;
}

// ---- sparse @ sparse by rows (Gustavson) ----

// Sorts a row's distinct columns (all < 2^bits) in place: least-significant-digit radix sort in
// 8-bit digits for rows long enough to amortise its 256-entry counts, std::sort below that (the
// sort was half of a row's time under comparison sorting).
template <typename col_t>
void sort_columns(col_t* cols, int64_t n, std::vector<col_t>& scratch, int bits) {
  if (n < 64) {
    std::sort(cols, cols + n);
    return;
  }
  scratch.resize(n);
  col_t* from = cols;
  col_t* to = scratch.data();
  for (int shift = 0; shift < bits; shift += 8) {
    uint32_t offsets[257] = {};
    for (int64_t p = 0; p < n; ++p)
      ++offsets[((static_cast<uint64_t>(from[p]) >> shift) & 255) + 1];
    for (int d = 0; d < 256; ++d) offsets[d + 1] += offsets[d];
    for (int64_t p = 0; p < n; ++p)
      to[offsets[(static_cast<uint64_t>(from[p]) >> shift) & 255]++] = from[p];
    std::swap(from, to);
  }
  if (from != cols) std::copy(from, from + n, cols);
}

// The symbolic pass, one row of C at a time: how many distinct columns the row reaches. Dense: a
// stamp per column of C (the row that last touched it), allocated once per thread; a row's
// columns arrive in no order, so the count is kept without a branch. Sparse, where C's m columns
// are too many for that: the row's columns collected, sorted and made unique.
template <typename col_t>
class RowColumnCounter {
 public:
  RowColumnCounter(int64_t m, bool dense) : dense_(dense) {
    if (dense_) stamp_.assign(m, col_t(-1));
  }

  void start(int64_t row) {
    row_ = static_cast<col_t>(row);
    distinct_ = 0;
    touched_.clear();
  }

  // The columns of one row of B (every pointer a local: the loop keeps them in registers).
  void touch(const col_t* cols, int64_t count) {
    if (!dense_) {
      touched_.insert(touched_.end(), cols, cols + count);
      return;
    }
    col_t* stamp = stamp_.data();
    const col_t row = row_;
    int64_t distinct = distinct_;
    for (int64_t q = 0; q < count; ++q) {
      distinct += stamp[cols[q]] != row;
      stamp[cols[q]] = row;
    }
    distinct_ = distinct;
  }

  int64_t count() {
    if (dense_) return distinct_;
    std::sort(touched_.begin(), touched_.end());
    return std::unique(touched_.begin(), touched_.end()) - touched_.begin();
  }

 private:
  bool dense_;
  col_t row_ = -1;
  int64_t distinct_ = 0;
  std::vector<col_t> stamp_, touched_;
};

// The numeric pass, one row of C at a time: each column's sum, from 0, the products added in the
// order they arrive (ascending l, as spgemm_row_numeric adds them). Dense: a sum per column of C
// and a bit per column (allocated once per thread), every product added without a branch: its
// column is appended to the row's list and the list grows only where the bit was clear. The
// row's columns come out in order by scanning the set bits (a top level of a bit per 64-column
// word, built from the list, says which words to read) where that top level is short next to the
// row, else by sorting the list; either way the sums and bits are cleared as they are read. Sparse,
// where m is too large for that: the row's products collected and sorted stably by column. Both
// emit the row's columns sorted, with the same sums. col_t: int32_t where columns and rows fit
// (half the cache footprint and a faster sort), else int64_t.
template <typename scalar_t, typename acc_t, typename col_t>
class RowAccumulator {
 public:
  RowAccumulator(int64_t m, bool dense) : dense_(dense), column_bits_(bits_for(m)) {
    if (dense_) {
      sum_.assign(m, acc_t(0));
      column_bits_of_word_.assign((m + 63) / 64, 0);
      word_bits_.assign((m + 4095) / 4096, 0);
    }
  }

  // `distinct`: the row's column count, from the symbolic pass (the list's capacity).
  void start(int64_t row, int64_t distinct) {
    row_ = row;
    listed_ = 0;
    distinct_ = distinct;
    products_.clear();
    if (dense_ && static_cast<int64_t>(touched_.size()) <= distinct) touched_.resize(distinct + 1);
  }

  // The products a * b_values[q] of one row of B, at columns cols[q] (every pointer a local: the
  // loop keeps them in registers).
  void add(scalar_t a, const col_t* cols, const scalar_t* b_values, int64_t count) {
    if (!dense_) {
      for (int64_t q = 0; q < count; ++q) {
        products_.emplace_back(cols[q], spgemm_product<scalar_t, acc_t>(a, b_values[q]));
      }
      return;
    }
    col_t* list = touched_.data();
    acc_t* sum = sum_.data();
    uint64_t* words = column_bits_of_word_.data();
    int64_t listed = listed_;
    for (int64_t q = 0; q < count; ++q) {
      const auto c = static_cast<uint64_t>(cols[q]);
      const uint64_t word = words[c >> 6], bit = uint64_t{1} << (c & 63);
      list[listed] = cols[q];  // kept only if the column is new to the row
      listed += (word & bit) == 0;
      words[c >> 6] = word | bit;
      sum[c] += spgemm_product<scalar_t, acc_t>(a, b_values[q]);
    }
    listed_ = listed;
  }

  // Writes the row's entries (its row index where `rows` is not null, its columns in ascending
  // order as out_t) and their sums.
  template <typename out_t>
  void finish(int64_t* rows, out_t* cols, scalar_t* values) {
    if (rows != nullptr) std::fill_n(rows, distinct_, row_);
    if (dense_) {
      TORCH_INTERNAL_ASSERT_DEBUG_ONLY(listed_ == distinct_, "spgemm: the passes disagree");
      // the bitmap's top level costs a word read per 4096 columns of C; a sort, a few steps per
      // column of the row
      if (word_bits_.size() <= 2 * static_cast<size_t>(listed_)) {
        emit_columns_in_bit_order(cols, values);
      } else {
        emit_sorted_list(cols, values);
      }
      return;
    }
    std::stable_sort(products_.begin(), products_.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    int64_t out = -1;
    acc_t sum(0);
    for (size_t p = 0; p < products_.size(); ++p) {
      if (p == 0 || products_[p].first != products_[p - 1].first) {
        if (out >= 0) values[out] = static_cast<scalar_t>(sum);
        cols[++out] = static_cast<out_t>(products_[p].first);
        sum = acc_t(0);
      }
      sum += products_[p].second;
    }
    if (out >= 0) values[out] = static_cast<scalar_t>(sum);
  }

 private:
  template <typename out_t>
  void emit(out_t* cols, scalar_t* values, int64_t p, col_t col) {
    cols[p] = static_cast<out_t>(col);
    values[p] = static_cast<scalar_t>(sum_[col]);
    sum_[col] = acc_t(0);
  }

  // The row's entries in column order, read off the bitmap: its top level built from the list,
  // then the set bits of the words it marks (the scan clears both levels).
  template <typename out_t>
  void emit_columns_in_bit_order(out_t* cols, scalar_t* values) {
    for (int64_t p = 0; p < listed_; ++p) {
      const auto c = static_cast<uint64_t>(touched_[p]);
      word_bits_[c >> 12] |= uint64_t{1} << ((c >> 6) & 63);
    }
    int64_t p = 0;
    for (size_t top = 0; top < word_bits_.size(); ++top) {
      for (uint64_t words = std::exchange(word_bits_[top], 0); words != 0; words &= words - 1) {
        const uint64_t word = top * 64 + static_cast<uint64_t>(__builtin_ctzll(words));
        for (uint64_t bits = std::exchange(column_bits_of_word_[word], 0); bits != 0;
             bits &= bits - 1) {
          emit(cols, values, p++,
               static_cast<col_t>(word * 64 + static_cast<uint64_t>(__builtin_ctzll(bits))));
        }
      }
    }
  }

  template <typename out_t>
  void emit_sorted_list(out_t* cols, scalar_t* values) {
    sort_columns(touched_.data(), listed_, scratch_, column_bits_);
    for (int64_t p = 0; p < listed_; ++p) {
      emit(cols, values, p, touched_[p]);
      column_bits_of_word_[static_cast<uint64_t>(touched_[p]) >> 6] = 0;
    }
  }

  static int bits_for(int64_t m) {
    int bits = 0;
    while (bits < 63 && (int64_t{1} << bits) < m) ++bits;
    return bits;
  }

  bool dense_;
  int column_bits_;  // columns are < 2^column_bits_
  int64_t row_ = -1;
  int64_t listed_ = 0;    // the row's distinct columns so far: touched_[0, listed_)
  int64_t distinct_ = 0;  // the row's distinct columns, as the symbolic pass counted them
  std::vector<acc_t> sum_;
  // bit c % 64 of column_bits_of_word_[c / 64]: column c holds a product of the row; bit w % 64
  // of word_bits_[w / 64] (set only while the row is emitted): column_bits_of_word_[w] is not zero
  std::vector<uint64_t> column_bits_of_word_, word_bits_;
  std::vector<col_t> touched_, scratch_;
  std::vector<std::pair<col_t, acc_t>> products_;
};

// Running total of the products per row of C (sum over row i of A of the lengths of B's rows).
std::vector<int64_t> products_per_row(const SpgemmOperands& s) {
  const int64_t* a_first = s.a_first.const_data_ptr<int64_t>();
  const int64_t* a_cols = s.a_cols.const_data_ptr<int64_t>();
  const int64_t* b_first = s.b_first.const_data_ptr<int64_t>();
  std::vector<int64_t> total(s.n + 1, 0);
  at::parallel_for(0, s.n, 1 << 12, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t products = 0;
      for (int64_t e = a_first[i]; e < a_first[i + 1]; ++e) {
        products += b_first[a_cols[e] + 1] - b_first[a_cols[e]];
      }
      total[i + 1] = products;
    }
  });
  std::partial_sum(total.begin(), total.end(), total.begin());
  return total;
}

// Row ranges of about equal products (rows vary by orders of magnitude under power-law patterns).
std::vector<int64_t> balanced_row_tasks(const std::vector<int64_t>& products, int64_t tasks) {
  const int64_t n = static_cast<int64_t>(products.size()) - 1;
  std::vector<int64_t> bounds(tasks + 1, n);
  bounds[0] = 0;
  for (int64_t t = 1; t < tasks; ++t) {
    const int64_t target = static_cast<int64_t>(
        static_cast<double>(products.back()) * static_cast<double>(t) / static_cast<double>(tasks));
    bounds[t] =
        std::max(bounds[t - 1],
                 static_cast<int64_t>(std::lower_bound(products.begin(), products.end(), target) -
                                      products.begin()));
    bounds[t] = std::min(bounds[t], n);
  }
  return bounds;
}

// Runs task(t, worker) for t in [0, tasks), handed out one at a time to the threads (equal products
// are not equal time: a product that finds its column costs less than one that adds it), each
// thread with one worker built by make_worker.
template <typename MakeWorker, typename Task>
void for_each_task(int64_t tasks, MakeWorker&& make_worker, Task&& task) {
  std::atomic<int64_t> next{0};
  at::parallel_for(0, std::min<int64_t>(tasks, at::get_num_threads()), 1, [&](int64_t, int64_t) {
    auto worker = make_worker();
    for (int64_t t = next.fetch_add(1); t < tasks; t = next.fetch_add(1)) task(t, worker);
  });
}

// C = A @ B: a symbolic pass counts each row's columns, one scan gives C's row offsets, a numeric
// pass fills the rows, both over tasks of equal products. Memory: C, plus one accumulator per
// thread; the products are never listed. Deterministic: each entry sums its products from 0 in
// ascending l whatever the thread count.
SpgemmResult spgemm_rows_cpu(const SpgemmOperands& s) {
  const std::vector<int64_t> products = products_per_row(s);
  const int64_t threads = at::get_num_threads();
  const int64_t tasks = std::max<int64_t>(
      1, std::min<int64_t>(s.n, std::min<int64_t>(threads * 16, products.back() / 4096 + 1)));
  const std::vector<int64_t> bounds = balanced_row_tasks(products, tasks);
  // Dense accumulators when their m columns cost no more than a thread's products (and fit).
  const bool dense = s.m <= std::max<int64_t>(int64_t{1} << 16, 4 * products.back() / threads) &&
                     s.m <= (int64_t{1} << 30) / (16 * threads);
  const int64_t* a_first = s.a_first.const_data_ptr<int64_t>();
  const int64_t* a_cols = s.a_cols.const_data_ptr<int64_t>();
  const int64_t* b_first = s.b_first.const_data_ptr<int64_t>();
  const int64_t a_nnz = s.a_cols.numel();
  std::vector<int64_t> first(s.n + 1, 0);  // C's row offsets
  SpgemmResult c;
  AT_DISPATCH_V2(
      s.a_values.scalar_type(), "sparse_spgemm_cpu", AT_WRAP([&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* a_values = s.a_values.const_data_ptr<scalar_t>();
        const scalar_t* b_values = s.b_values.const_data_ptr<scalar_t>();
        auto run = [&](auto col_zero) {
          using col_t = decltype(col_zero);
          // B's columns in col_t: the loops below read them at random rows, and half the
          // bytes are half the cache misses.
          const at::Tensor b_cols_narrow = s.b_cols.to(c10::CppTypeToScalarType<col_t>::value);
          const col_t* b_cols = b_cols_narrow.const_data_ptr<col_t>();
          // The rows of task t, each walked row of B by row of B: start(i), visit(e, q_begin,
          // q_end) for A entry e in ascending l (the summation order) with B's entries
          // [q_begin, q_end) of row l, then done(i). The B row of A's next entry is prefetched
          // while the current one is walked, and the offsets of B's row a few entries on.
          auto walk_rows = [&](int64_t t, auto&& start, auto&& visit, auto&& done) {
            constexpr int64_t kAhead = 8;
            for (int64_t i = bounds[t]; i < bounds[t + 1]; ++i) {
              start(i);
              const int64_t e_end = a_first[i + 1];
              for (int64_t e = a_first[i]; e < e_end; ++e) {
                if (e + kAhead < a_nnz) __builtin_prefetch(b_first + a_cols[e + kAhead]);
                if (e + 1 < e_end) {
                  const int64_t next = b_first[a_cols[e + 1]];
                  __builtin_prefetch(b_cols + next);
                  __builtin_prefetch(b_values + next);
                }
                const int64_t l = a_cols[e];
                visit(e, b_first[l], b_first[l + 1]);
              }
              done(i);
            }
          };
          using Counter = RowColumnCounter<col_t>;
          for_each_task(
              tasks, [&] { return Counter(s.m, dense); },
              [&](int64_t t, Counter& row) {
                walk_rows(
                    t, [&](int64_t i) { row.start(i); },
                    [&](int64_t, int64_t q, int64_t q_end) { row.touch(b_cols + q, q_end - q); },
                    [&](int64_t i) { first[i + 1] = row.count(); });
              });
          std::partial_sum(first.begin(), first.end(), first.begin());
          const int64_t nnz = first[s.n];
          c.values = at::empty({nnz}, s.a_values.options());
          scalar_t* values = c.values.mutable_data_ptr<scalar_t>();
          // The rows filled, each writing its columns as out_t and, for COO, its row index.
          auto fill = [&](int64_t* rows, auto* cols) {
            using Row = RowAccumulator<scalar_t, acc_t, col_t>;
            for_each_task(
                tasks, [&] { return Row(s.m, dense); },
                [&](int64_t t, Row& row) {
                  walk_rows(
                      t, [&](int64_t i) { row.start(i, first[i + 1] - first[i]); },
                      [&](int64_t e, int64_t q, int64_t q_end) {
                        row.add(a_values[e], b_cols + q, b_values + q, q_end - q);
                      },
                      [&](int64_t i) {
                        row.finish(rows == nullptr ? nullptr : rows + first[i], cols + first[i],
                                   values + first[i]);
                      });
                });
          };
          if (!s.csr_output) {
            c.indices = at::empty({2, nnz}, s.a_cols.options());
            int64_t* rows = c.indices.mutable_data_ptr<int64_t>();
            fill(rows, rows + nnz);
            return;
          }
          c.first = csr_offsets_of_product(
              s, at::from_blob(first.data(), {s.n + 1}, at::TensorOptions(at::kLong)));
          c.cols = at::empty({nnz}, s.a_cols.options().dtype(s.csr_index_dtype));
          AT_DISPATCH_INDEX_TYPES(s.csr_index_dtype, "sparse_spgemm_csr_cpu",
                                  [&] { fill(nullptr, c.cols.mutable_data_ptr<index_t>()); });
        };
        constexpr int64_t kInt32 = std::numeric_limits<int32_t>::max();
        if (s.m <= kInt32 && s.n <= kInt32) {
          run(int32_t{0});
        } else {
          run(int64_t{0});
        }
      }),
      AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16);
  return c;
}

// ---- compressed layouts: the first break of torch's invariants ----

// The first entry of [begin, end) that compressed_entry_violation flags (end when none), the
// offsets valid: the slice of begin found by binary search, then walked.
template <typename offset_t, typename index_t>
int64_t first_flagged_entry(const offset_t* compressed, int64_t slices, const index_t* plain,
                            int64_t plain_size, int64_t begin, int64_t end) {
  int64_t slice = slice_of_entry(compressed, slices, begin);
  for (int64_t p = begin; p < end; ++p) {
    while (compressed[slice + 1] <= p) ++slice;  // past empty slices
    if (compressed_entry_violation(compressed, slice, plain, plain_size, p) != kCompressedValid) {
      return p;
    }
  }
  return end;
}

at::Tensor sparse_compressed_violation_cpu(const at::Tensor& compressed_indices,
                                           const at::Tensor& plain_indices,
                                           c10::SymInt plain_size) {
  const int64_t size = check_compressed_args(compressed_indices, plain_indices, plain_size);
  const at::Tensor compressed = compressed_indices.contiguous(), plain = plain_indices.contiguous();
  const int64_t nnz = plain.numel(), slices = compressed.numel() - 1;
  if (const CompressedFinding offsets = offsets_violation(compressed, nnz); offsets.kind != 0) {
    return offsets.as_tensor();
  }
  int64_t first = nnz;
  AT_DISPATCH_INDEX_TYPES(compressed.scalar_type(), "sparse_compressed_violation_cpu", [&] {
    using offset_t = index_t;
    const offset_t* c = compressed.const_data_ptr<offset_t>();
    AT_DISPATCH_INDEX_TYPES(plain.scalar_type(), "sparse_compressed_violation_cpu", [&] {
      const index_t* q = plain.const_data_ptr<index_t>();
      first = at::parallel_reduce(
          int64_t{0}, nnz, kGrainElems, nnz,
          [&](int64_t begin, int64_t end, int64_t found) {
            const int64_t flagged = first_flagged_entry(c, slices, q, size, begin, end);
            return flagged < end ? std::min(found, flagged) : found;
          },
          [](int64_t a, int64_t b) { return std::min(a, b); });
    });
  });
  if (first == nnz) return CompressedFinding{}.as_tensor();
  return entry_finding(plain, size, first).as_tensor();
}

}  // namespace

// Linkage outside the anonymous namespace: register_sparse_kernels takes it as a template argument.
extern const CoalesceBackend kCpuBackend;
const CoalesceBackend kCpuBackend{
    &flat_keys_cpu,   &copy_if_coalesced_cpu,   &cpu::sort_keys, &cpu::run_offsets,
    &run_indices_cpu, &cpu::segment_gather_sum, &spgemm_rows_cpu};

std::pair<at::Tensor, at::Tensor> index_select_entries_cpu(std::string_view op,
                                                           const at::Tensor& indices, int64_t dim,
                                                           const at::Tensor& positions,
                                                           int64_t size) {
  const at::Tensor src = with_contiguous_rows(indices);
  const at::Tensor wanted = positions.contiguous();
  const int64_t sparse_dim = src.size(0), nnz = src.size(1), row_stride = src.stride(0);
  const int64_t count = wanted.numel();
  const int64_t* idx = src.const_data_ptr<int64_t>();
  const int64_t* along = idx + dim * row_stride;
  const int64_t* want = wanted.const_data_ptr<int64_t>();
  // positions wrapped (negative ones count from the end, as torch's sparse index_select), each
  // checked in [-size, size)
  std::vector<int64_t> wrapped(count);
  bool in_range = true;
  for (int64_t p = 0; p < count; ++p) {
    in_range &= want[p] >= -size && want[p] < size;
    wrapped[p] = want[p] < 0 ? want[p] + size : want[p];
  }
  if (!in_range) check_index_values(op, wanted, dim, size, /*negative_allowed=*/true);  // raises
  // slot[v] .. slot[v + 1]: where the positions holding value v lie in `by_value` (a counting sort;
  // placed from the last position down, so each value's positions keep their order). One offset
  // per value along dim: a size too large to allocate raises under the op's name.
  at::Tensor slots = as_op(op, [&] { return at::zeros({size + 1}, src.options()); });
  int64_t* slot = slots.mutable_data_ptr<int64_t>();
  for (int64_t p = 0; p < count; ++p) ++slot[wrapped[p]];
  std::partial_sum(slot, slot + size, slot);  // slot[v]: where value v's positions end
  slot[size] = count;
  std::vector<int64_t> by_value(count);
  for (int64_t p = count - 1; p >= 0; --p) by_value[--slot[wrapped[p]]] = p;  // now their start
  const auto outputs_of = [&](int64_t entry) {
    return slot[along[entry] + 1] - slot[along[entry]];
  };
  // Two passes over chunks of entries, in parallel: each chunk's output count, then (each chunk
  // starting where the chunks before it end) the outputs written.
  const int64_t chunks = std::clamp<int64_t>(nnz / kGrainElems, 1, 4 * at::get_num_threads());
  const int64_t per_chunk = (nnz + chunks - 1) / chunks;
  std::vector<int64_t> chunk_first(chunks + 1, 0);
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      int64_t n = 0;
      for (int64_t e = c * per_chunk, stop = std::min(nnz, e + per_chunk); e < stop; ++e) {
        n += outputs_of(e);
      }
      chunk_first[c + 1] = n;
    }
  });
  std::partial_sum(chunk_first.begin(), chunk_first.end(), chunk_first.begin());
  const int64_t total = chunk_first[chunks];
  at::Tensor out_indices = at::empty({sparse_dim, total}, src.options());
  at::Tensor source = at::empty({total}, src.options());
  int64_t* out = out_indices.mutable_data_ptr<int64_t>();
  int64_t* source_entry = source.mutable_data_ptr<int64_t>();
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      int64_t first = chunk_first[c];
      for (int64_t entry = c * per_chunk, stop = std::min(nnz, entry + per_chunk); entry < stop;
           ++entry) {
        const int64_t n = outputs_of(entry);
        if (n == 0) continue;  // most entries of a selection of a few rows
        const int64_t* chosen = by_value.data() + slot[along[entry]];
        for (int64_t k = 0; k < sparse_dim; ++k) {
          int64_t* row = out + k * total + first;
          const int64_t index = idx[k * row_stride + entry];
          // plain loops: n is mostly 1 or 2, where copy_n / fill_n cost a call each
          for (int64_t r = 0; r < n; ++r) row[r] = k == dim ? chosen[r] : index;
        }
        for (int64_t r = 0; r < n; ++r) source_entry[first + r] = entry;
        first += n;
      }
    }
  });
  return {out_indices, source};
}

namespace {

// An unsigned integer that is 0 exactly where v == 0 (as Tensor.ne(0): -0.0 is zero, NaN is not):
// floating bits shifted past the sign. Integer arithmetic, so the loops below vectorise.
template <typename scalar_t>
auto nonzero_bits(scalar_t v) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    return std::bit_cast<uint32_t>(v) << 1;
  } else if constexpr (std::is_same_v<scalar_t, double>) {
    return std::bit_cast<uint64_t>(v) << 1;
  } else if constexpr (std::is_same_v<scalar_t, c10::Half> ||
                       std::is_same_v<scalar_t, c10::BFloat16>) {
    return static_cast<uint16_t>(v.x << 1);
  } else if constexpr (std::is_same_v<scalar_t, c10::complex<float>> ||
                       std::is_same_v<scalar_t, c10::complex<double>>) {
    return nonzero_bits(v.real()) | nonzero_bits(v.imag());
  } else if constexpr (std::is_same_v<scalar_t, bool>) {
    return static_cast<uint8_t>(v);
  } else {
    return static_cast<std::make_unsigned_t<scalar_t>>(v);
  }
}

// Whether position p (`inner` values) holds a value that is not zero.
template <typename scalar_t>
bool position_is_set(const scalar_t* x, int64_t p, int64_t inner) {
  decltype(nonzero_bits(scalar_t{})) any = 0;
  for (int64_t k = 0; k < inner; ++k) any |= nonzero_bits(x[p * inner + k]);
  return any != 0;
}

template <typename scalar_t>
int64_t count_set_positions(const scalar_t* x, int64_t begin, int64_t end, int64_t inner) {
  int64_t n = 0;
  if (inner == 1) {
    for (int64_t p = begin; p < end; ++p) n += nonzero_bits(x[p]) != 0;
  } else {
    for (int64_t p = begin; p < end; ++p) n += position_is_set(x, p, inner);
  }
  return n;
}

// Calls found(p) for each set position p in [begin, end), in order. One value per position: blocks
// of 32 values, each tested at once (most of a sparse tensor's dense form is zero) and, where
// some is set, walked through a bit mask (no branch per value).
template <typename scalar_t, typename Found>
void for_each_set_position(const scalar_t* x, int64_t begin, int64_t end, int64_t inner,
                           const Found& found) {
  if (inner != 1) {
    for (int64_t p = begin; p < end; ++p) {
      if (position_is_set(x, p, inner)) found(p);
    }
    return;
  }
  constexpr int64_t kBlock = 32;
  int64_t p = begin;
  for (; p + kBlock <= end; p += kBlock) {
    decltype(nonzero_bits(scalar_t{})) any = 0;
    for (int64_t k = 0; k < kBlock; ++k) any |= nonzero_bits(x[p + k]);
    if (any == 0) continue;
    uint32_t mask = 0;
    for (int64_t k = 0; k < kBlock; ++k) mask |= uint32_t{nonzero_bits(x[p + k]) != 0} << k;
    for (; mask != 0; mask &= mask - 1) found(p + std::countr_zero(mask));
  }
  for (; p < end; ++p) {
    if (nonzero_bits(x[p]) != 0) found(p);
  }
}

// Copies `bytes` bytes (an element size, or a block of them) without a call for the common sizes.
inline void copy_element(char* to, const char* from, int64_t bytes) {
  switch (bytes) {
    case 4:
      std::memcpy(to, from, 4);
      return;
    case 8:
      std::memcpy(to, from, 8);
      return;
    case 2:
      std::memcpy(to, from, 2);
      return;
    case 1:
      *to = *from;
      return;
    default:
      std::memcpy(to, from, bytes);
  }
}

}  // namespace

std::optional<at::Tensor> values_at_indices_cpu(const at::Tensor& dense,
                                                const at::Tensor& indices) {
  const int64_t sparse_dim = indices.size(0), nnz = indices.size(1);
  if (sparse_dim < 1 || sparse_dim > dense.dim() || indices.scalar_type() != at::kLong) {
    return std::nullopt;
  }
  // the dense dims of each entry must be one block in memory (contiguous), read with one copy
  int64_t expected_stride = 1;
  for (int64_t d = dense.dim() - 1; d >= sparse_dim; --d) {
    if (dense.size(d) != 1 && dense.stride(d) != expected_stride) return std::nullopt;
    expected_stride *= dense.size(d);
  }
  const int64_t block = expected_stride * static_cast<int64_t>(dense.element_size());  // bytes
  std::vector<int64_t> shape{nnz};
  shape.insert(shape.end(), dense.sizes().begin() + sparse_dim, dense.sizes().end());
  at::Tensor out = at::empty(shape, dense.options());
  if (nnz == 0) return out;
  const at::Tensor src = with_contiguous_rows(indices);
  const int64_t* idx = src.const_data_ptr<int64_t>();
  const int64_t row_stride = src.stride(0);
  std::vector<int64_t> size(sparse_dim), byte_stride(sparse_dim);
  for (int64_t d = 0; d < sparse_dim; ++d) {
    size[d] = dense.size(d);
    byte_stride[d] = dense.stride(d) * static_cast<int64_t>(dense.element_size());
  }
  const char* base = static_cast<const char*>(dense.const_data_ptr());
  char* to = static_cast<char*>(out.mutable_data_ptr());
  std::atomic<bool> out_of_range{false};
  at::parallel_for(0, nnz, kGrainElems / 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      uint64_t offset = 0;  // unsigned: an index out of range wraps, it does not overflow
      bool in_range = true;
      for (int64_t d = 0; d < sparse_dim; ++d) {
        const auto index = static_cast<uint64_t>(idx[d * row_stride + i]);
        in_range &= index < static_cast<uint64_t>(size[d]);
        offset += index * static_cast<uint64_t>(byte_stride[d]);
      }
      if (!in_range) {  // no read outside dense; the caller's checked route names the entry
        out_of_range.store(true, std::memory_order_relaxed);
        return;
      }
      if (block != 0) copy_element(to + i * block, base + offset, block);
    }
  });
  if (out_of_range.load()) return std::nullopt;
  return out;
}

bool nonzero_positions_cpu_supports(at::ScalarType dtype) {
  // the types of the dispatch below
  switch (dtype) {
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kFloat:
    case at::kDouble:
    case at::kComplexFloat:
    case at::kComplexDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kBool:
      return true;
    default:
      return false;
  }
}

std::pair<at::Tensor, at::Tensor> nonzero_positions_cpu(const at::Tensor& dense, int64_t dims) {
  const at::Tensor src = dense.contiguous();
  const at::IntArrayRef sizes = src.sizes().slice(0, dims);
  const int64_t positions = c10::multiply_integers(sizes);
  const int64_t inner = positions == 0 ? 0 : src.numel() / positions;
  const at::TensorOptions long_options = src.options().dtype(at::kLong);
  if (positions == 0) return {at::empty({dims, 0}, long_options), at::empty({0}, long_options)};
  // Two passes over chunks of positions, in parallel: each chunk's count, then (each chunk
  // starting where the chunks before it end) its indices and positions written.
  const int64_t chunks =
      std::clamp<int64_t>(src.numel() / kGrainElems, 1, 4 * at::get_num_threads());
  const int64_t per_chunk = (positions + chunks - 1) / chunks;
  std::vector<int64_t> chunk_first(chunks + 1, 0);
  at::Tensor indices, found;
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(
      at::kHalf, at::kBFloat16, at::kBool, src.scalar_type(), "sparse_from_dense_cpu", [&] {
        const scalar_t* x = src.const_data_ptr<scalar_t>();
        at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
          for (int64_t c = begin; c < end; ++c) {
            const int64_t first = std::min(positions, c * per_chunk);
            chunk_first[c + 1] =
                count_set_positions(x, first, std::min(positions, first + per_chunk), inner);
          }
        });
        std::partial_sum(chunk_first.begin(), chunk_first.end(), chunk_first.begin());
        const int64_t total = chunk_first[chunks];
        indices = at::empty({dims, total}, long_options);
        found = at::empty({total}, long_options);
        int64_t* out = indices.mutable_data_ptr<int64_t>();
        int64_t* out_position = found.mutable_data_ptr<int64_t>();
        at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
          std::vector<int64_t> index(dims);  // the index of the chunk's next position
          for (int64_t c = begin; c < end; ++c) {
            const int64_t first = std::min(positions, c * per_chunk);
            const int64_t stop = std::min(positions, first + per_chunk);
            for (int64_t d = dims - 1, rest = first; d >= 0; --d) {  // one division per chunk
              index[d] = rest % sizes[d];
              rest /= sizes[d];
            }
            // line by line along the last sparse dim: the other dims' indices stay put
            const int64_t last = dims - 1, line = sizes[last];
            int64_t o = chunk_first[c];
            for (int64_t p = first; p < stop;) {
              const int64_t line_start = p - index[last];
              const int64_t line_stop = std::min(stop, line_start + line);
              for_each_set_position(x, p, line_stop, inner, [&](int64_t q) {
                for (int64_t d = 0; d < last; ++d) out[d * total + o] = index[d];
                out[last * total + o] = q - line_start;
                out_position[o++] = q;
              });
              p = line_stop;
              index[last] = 0;  // the next line (unless p == stop)
              for (int64_t d = last - 1; d >= 0 && ++index[d] == sizes[d]; --d) index[d] = 0;
            }
          }
        });
      });
  return {indices, found};
}

TORCH_LIBRARY_IMPL(torch_ragged, CPU, m) {
  register_sparse_kernels<kCpuBackend>(m);
  m.impl("sparse_compressed_violation", &sparse_compressed_violation_cpu);
}

}  // namespace torch_ragged
