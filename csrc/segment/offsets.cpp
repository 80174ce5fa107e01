#include "segment/offsets.h"

#include <ATen/Parallel.h>
#include <c10/util/safe_numerics.h>

#include <algorithm>
#include <atomic>
#include <functional>

#include "common/checks.h"
#include "common/cpu_clones.h"

namespace torch_ragged {

namespace {

// offsets[0] = 0, offsets[i + 1] = counts[0] + ... + counts[i]. The loop only scans (no branch: it
// runs at cumsum's speed) and records whether a count was negative or a sum overflowed; only then
// does a second pass find the first bad index for the error.
void scan_counts(std::string_view op, std::string_view arg, const int64_t* counts, int64_t n,
                 int64_t* offsets) {
  offsets[0] = 0;
  int64_t total = 0;
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) {
    bad |= counts[i] < 0;
    bad |= __builtin_add_overflow(total, counts[i], &total);
    offsets[i + 1] = total;
  }
  if (!bad) return;
  total = 0;
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK_VALUE(counts[i] >= 0, "torch_ragged.", op, ": ", arg, " must be non-negative, got ",
                      counts[i], " at index ", i);
    TORCH_CHECK_VALUE(!c10::add_overflows(total, counts[i], &total), "torch_ragged.", op, ": ", arg,
                      " adds up to more than 2^63 - 1 rows (overflow at index ", i, ")");
  }
}

}  // namespace

std::vector<int64_t> offsets_from_counts(std::string_view op, std::string_view arg,
                                         const int64_t* counts, int64_t n) {
  std::vector<int64_t> offsets(n + 1);
  scan_counts(op, arg, counts, n, offsets.data());
  return offsets;
}

at::Tensor offsets_tensor_from_counts(std::string_view op, std::string_view arg,
                                      const at::Tensor& counts) {
  const at::Tensor host = index_tensor_on_host(op, arg, counts, 1);
  at::Tensor offsets = at::empty({host.numel() + 1}, host.options());
  scan_counts(op, arg, host.const_data_ptr<int64_t>(), host.numel(),
              offsets.mutable_data_ptr<int64_t>());
  return offsets;
}

std::vector<int64_t> offsets_from_counts(std::string_view op, std::string_view arg,
                                         const at::Tensor& counts) {
  const at::Tensor host = index_tensor_on_host(op, arg, counts, 1);
  return offsets_from_counts(op, arg, host.const_data_ptr<int64_t>(), host.numel());
}

namespace {

// Whether ids [begin, end) (the ids before them ending in ids[begin - 1] when begin > 0) are
// sorted and in [0, num_rows); out[r] for the rows that start among them (rows (previous id, id]
// start at the id's position). Stops at the first bad id, out of bounds of nothing.
TORCH_RAGGED_CPU_CLONES bool offsets_of_chunk(const int64_t* ids, int64_t begin, int64_t end,
                                              int64_t num_rows, int64_t* out) {
  constexpr int64_t kBlock = 8, kWideBlock = 32;
  // -1 before the first id (rows [0, ids[0]] start at 0); clamped, so that a negative id of the
  // previous chunk (refused there) cannot send this chunk's writes below 0.
  int64_t previous = begin == 0 ? -1 : std::max<int64_t>(ids[begin - 1], -1);
  for (int64_t i = begin; i < end; ++i) {
    // Ids equal to a valid previous one (rows run tens of entries) start no row and are sorted and
    // in range already: skipped 32 at a time while none differs (one vectorised xor-or), then a
    // block of 8 at a time, one vector compare finding the first that differs.
    if (previous >= 0 && i + kWideBlock <= end) {
      int64_t differs = 0;
      for (int64_t j = 0; j < kWideBlock; ++j) differs |= ids[i + j] ^ previous;
      if (differs == 0) {
        i += kWideBlock - 1;
        continue;
      }
    }
    if (previous >= 0 && i + kBlock <= end) {
      uint32_t differs = 0;
      for (int64_t j = 0; j < kBlock; ++j) {
        differs |= static_cast<uint32_t>(ids[i + j] != previous) << j;
      }
      if (differs == 0) {
        i += kBlock - 1;
        continue;
      }
      i += __builtin_ctz(differs);
    }
    const int64_t id = ids[i];
    if (id < previous || id < 0 || id >= num_rows) return false;
    for (int64_t r = previous + 1; r <= id; ++r) out[r] = i;
    previous = id;
  }
  return true;
}

// The CPU form: one pass over the ids in parallel chunks, each checking its ids (range, order, its
// first against the previous chunk's last) and writing the offsets of the rows that start inside
// it: every offset is written by one chunk, none out of bounds even when the ids are not sorted (a
// chunk stops at its first bad id).
std::optional<at::Tensor> offsets_of_sorted_ids_on_host(const int64_t* ids, int64_t n,
                                                        int64_t num_rows) {
  at::Tensor offsets = at::empty({num_rows + 1}, at::kLong);
  int64_t* out = offsets.mutable_data_ptr<int64_t>();
  std::atomic<bool> fits{true};
  at::parallel_for(0, n, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
    if (!offsets_of_chunk(ids, begin, end, num_rows, out)) {
      fits.store(false, std::memory_order_relaxed);
    }
  });
  if (!fits.load()) return std::nullopt;
  for (int64_t r = n == 0 ? 0 : ids[n - 1] + 1; r <= num_rows; ++r) out[r] = n;
  return offsets;
}

}  // namespace

std::optional<at::Tensor> offsets_of_sorted_ids(const at::Tensor& ids, int64_t num_rows) {
  const int64_t n = ids.numel();
  if (ids.is_cpu() && ids.scalar_type() == at::kLong) {
    const at::Tensor flat = ids.reshape(-1).contiguous();
    return offsets_of_sorted_ids_on_host(flat.const_data_ptr<int64_t>(), n, num_rows);
  }
  if (n > 0) {
    const at::Tensor flat = ids.reshape(-1);
    at::Tensor fits = flat.narrow(0, 0, 1).ge(0).logical_and(flat.narrow(0, n - 1, 1).lt(num_rows));
    if (n > 1) fits = fits.logical_and(flat.narrow(0, 1, n - 1).ge(flat.narrow(0, 0, n - 1)).all());
    if (!fits.item<bool>()) return std::nullopt;
  }
  return at::_convert_indices_from_coo_to_csr(ids.reshape(-1), num_rows, /*out_int32=*/false);
}

at::Tensor checked_first_idx_on_host(std::string_view op, const at::Tensor& first_idx,
                                     std::optional<int64_t> num_rows) {
  at::Tensor host = index_tensor_on_host(op, "first_idx", first_idx, 1);
  TORCH_CHECK_VALUE(host.numel() >= 1, "torch_ragged.", op,
                    ": first_idx needs at least 1 entry (num_segments + 1), got 0");
  const int64_t* idx = host.const_data_ptr<int64_t>();
  const int64_t segments = host.numel() - 1;
  TORCH_CHECK_VALUE(idx[0] == 0, "torch_ragged.", op, ": first_idx[0] must be 0, got ", idx[0]);
  // one branch-free pass (it vectorises); the offending pair is looked for only to name it
  bool rising = true;
  for (int64_t b = 0; b < segments; ++b) rising &= idx[b] <= idx[b + 1];
  if (!rising) {
    const int64_t b = std::adjacent_find(idx, idx + segments + 1, std::greater<>()) - idx;
    TORCH_CHECK_VALUE(false, "torch_ragged.", op,
                      ": first_idx must be non-decreasing, got first_idx[", b, "] = ", idx[b],
                      " > first_idx[", b + 1, "] = ", idx[b + 1]);
  }
  if (num_rows.has_value()) {
    TORCH_CHECK_VALUE(idx[segments] == *num_rows, "torch_ragged.", op, ": num_rows = ", *num_rows,
                      " but the segments hold first_idx[-1] = ", idx[segments], " rows");
  }
  return host;
}

std::vector<int64_t> checked_first_idx(std::string_view op, const at::Tensor& first_idx,
                                       std::optional<int64_t> num_rows) {
  const at::Tensor host = checked_first_idx_on_host(op, first_idx, num_rows);
  const int64_t* idx = host.const_data_ptr<int64_t>();
  return std::vector<int64_t>(idx, idx + host.numel());
}

void check_first_idx_tensor(std::string_view op, const at::Tensor& first_idx,
                            const at::Tensor& data) {
  check_index_tensor(op, "first_idx", first_idx, 1);
  TORCH_CHECK_VALUE(first_idx.size(0) >= 1, "torch_ragged.", op,
                    ": first_idx needs at least 1 entry (num_segments + 1), got 0");
  TORCH_CHECK_VALUE(first_idx.is_cpu() || first_idx.device() == data.device(), "torch_ragged.", op,
                    ": first_idx must be on the CPU or on the data's device ", data.device(),
                    ", got ", first_idx.device());
}

}  // namespace torch_ragged
