#pragma once

// Offsets over `first_idx`, for every family: the library's one scan (host and device) and the
// checks of a first_idx argument. Segment b holds rows [first_idx[b], first_idx[b + 1]).

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace torch_ragged {

// Exclusive scan of counts with the total appended (n + 1 entries). Every count must be >= 0 and
// the total must fit in int64, else ValueError naming op and arg.
std::vector<int64_t> offsets_from_counts(std::string_view op, std::string_view arg,
                                         const int64_t* counts, int64_t n);

// The same for a 1-D integer tensor of counts (read on the host: a device-to-host copy on a GPU).
std::vector<int64_t> offsets_from_counts(std::string_view op, std::string_view arg,
                                         const at::Tensor& counts);

// The same as a (n + 1,) int64 CPU tensor, written in place (no vector copied into a tensor).
at::Tensor offsets_tensor_from_counts(std::string_view op, std::string_view arg,
                                      const at::Tensor& counts);

// first_idx read on the host and checked: 1-D integer with >= 1 entries, starting at 0,
// non-decreasing, and ending at num_rows when given (the data's rows, or a
// caller's num_rows argument). ValueError / TypeError naming op.
std::vector<int64_t> checked_first_idx(std::string_view op, const at::Tensor& first_idx,
                                       std::optional<int64_t> num_rows);

// The same as the (num_segments + 1,) contiguous int64 CPU tensor read (first_idx itself when it is
// one): no copy into a vector, for callers that hand the offsets on as a tensor.
at::Tensor checked_first_idx_on_host(std::string_view op, const at::Tensor& first_idx,
                                     std::optional<int64_t> num_rows);

// first_idx's dtype and rank (no values read), and its device: the CPU or `data`'s device.
void check_first_idx_tensor(std::string_view op, const at::Tensor& first_idx,
                            const at::Tensor& data);

// first_idx (num_rows + 1,) int64 of sorted segment ids (a coalesced COO matrix's row indices):
// segment r holds positions [first_idx[r], first_idx[r + 1]). nullopt when the ids are not
// non-decreasing or fall outside [0, num_rows): torch's conversion would then give wrong offsets or
// write out of bounds. One pass and one host read (a synchronisation on a GPU).
std::optional<at::Tensor> offsets_of_sorted_ids(const at::Tensor& ids, int64_t num_rows);

namespace cuda {
// Device version of the scan (defined in cuda/segment_cuda.cu): [0, cumsum(counts)...] as int64 on
// the counts' device, with no host synchronisation and no validation (callers that need it check
// the result: a negative count or an overflow shows as a decrease).
at::Tensor offsets_from_counts(const at::Tensor& counts);
}  // namespace cuda

}  // namespace torch_ragged
