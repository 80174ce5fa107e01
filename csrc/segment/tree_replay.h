#pragma once

// The reduction tree's sums of groups replayed without moving the entries (host code): a stable
// grouping (a counting pass or a stable sort) puts group g's entries at grouped positions
// [first[g], first[g + 1]), in input order, and segment_sum / segment_gather_sum then add each
// group's terms over the reduction tree of those positions (segment_index.h; width 1: chunks of 32
// positions). TreeSumReplay adds the same terms in input order, each group keeping the grouped
// position of its next entry, so each term knows its place in the tree and is folded as the tree
// folds it: the same bits as grouping first. Each group's entries must arrive in input order; a
// thread that owns a set of groups may add them while others add theirs.

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "segment/segment_index.h"

namespace torch_ragged::cpu {

// A group's state in the replay: the grouped position of its next entry and its partials of
// levels 0 and 1 (level 0: the fold of its current chunk's terms from the identity, in order),
// where one line holds them; the partials above, touched once per 1024 entries, lie apart.
template <typename acc_t, typename Index>
struct GroupRun {
  Index next;
  acc_t chunk, level_one;
};

// The tree's sum of each group, replayed over n grouped positions (width 1). When a group's entry
// ends a chunk (its next position is a chunk edge), the chunk's partial is merged into the group's
// level-1 partial; a level-1 partial is merged into level 2 where that edge is also a level-1
// node's edge, and so on. Each level's partial starts from the identity and merges its children
// left to right, as value(L) does; the group's sum then merges them top down over the last
// (unfinished) child of each level: the tree's value at the group's top level, bit for bit.
template <typename acc_t, typename Index>
class TreeSumReplay {
 public:
  // n grouped positions in `groups` groups, each to be start()ed before its first add.
  TreeSumReplay(int64_t n, int64_t groups)
      : tree_(ReductionTree::of(nullptr, 0, n, 1)),
        uppers_(tree_.levels() - 1),
        groups_(groups),
        runs_(new GroupRun<acc_t, Index>[groups]),  // not zeroed: start() sets each
        upper_(groups * std::max(uppers_ - 1, 0), acc_t(0)) {}

  // Every group started at first[g] (first: groups + 1 offsets).
  TreeSumReplay(int64_t n, const std::vector<int64_t>& first)
      : TreeSumReplay(n, static_cast<int64_t>(first.size()) - 1) {
    at::parallel_for(0, groups_, 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t g = lo; g < hi; ++g) start(g, first[g]);
    });
  }

  // Group g's first entry lies at grouped position `first`.
  void start(int64_t g, int64_t first) {
    runs_[g] = GroupRun<acc_t, Index>{static_cast<Index>(first), acc_t(0), acc_t(0)};
  }

  // Every partial above level 1 back to the identity: the replay is then ready for other groups
  // (each start()ed again), over the same positions.
  void clear_upper() { std::fill(upper_.begin(), upper_.end(), acc_t(0)); }

  // Group g's next term.
  void add(int64_t g, acc_t term) {
    GroupRun<acc_t, Index>& run = runs_[g];
    const int64_t edge = ++run.next;
    run.chunk += term;
    if ((edge & chunk_mask()) == 0 && edge < tree_.num_rows) close_chunk(run, g, edge);
  }

  // The terms of `count` entries, in input order within each group.
  void add(const Index* groups, const acc_t* terms, int64_t count) {
    for (int64_t j = 0; j < count; ++j) {
      if (j + kPrefetchAhead < count) prefetch(groups[j + kPrefetchAhead]);
      add(groups[j], terms[j]);
    }
  }

  // Group g's state pulled into the cache ahead of its add.
  void prefetch(int64_t g) const { __builtin_prefetch(runs_.get() + g, 1); }

  // Group g's sum, once all its entries were added.
  acc_t sum(int64_t g) const {
    acc_t value = runs_[g].chunk;
    if (uppers_ >= 1) value = runs_[g].level_one + value;
    for (int level = 2; level <= uppers_; ++level) value = upper(level)[g] + value;
    return value;
  }

 private:
  static constexpr int64_t kPrefetchAhead = 16;

  int64_t chunk_mask() const { return tree_.node_rows(0) - 1; }

  // Group g's chunk ending at grouped position `edge` (0 < edge < n) is complete.
  void close_chunk(GroupRun<acc_t, Index>& run, int64_t g, int64_t edge) {
    acc_t value = run.chunk;
    run.chunk = acc_t(0);
    run.level_one += value;
    if (uppers_ == 1 || (edge & (tree_.node_rows(1) - 1)) != 0) return;
    value = run.level_one;
    run.level_one = acc_t(0);
    for (int level = 2;; ++level) {
      acc_t& partial = upper(level)[g];
      partial += value;
      // A node of the top level holds every row: no edge below n ends one.
      if (level == uppers_ || (edge & (tree_.node_rows(level) - 1)) != 0) return;
      value = partial;
      partial = acc_t(0);
    }
  }
  // The partials of `level` (>= 2), one per group.
  acc_t* upper(int level) { return upper_.data() + (level - 2) * groups_; }
  const acc_t* upper(int level) const { return upper_.data() + (level - 2) * groups_; }

  ReductionTree tree_;  // over the grouped positions; only its shape is used
  int uppers_;          // its levels above 0
  int64_t groups_;
  std::unique_ptr<GroupRun<acc_t, Index>[]> runs_;
  std::vector<acc_t> upper_;  // per level 2, 3, ...: its partial of each group
};

}  // namespace torch_ragged::cpu
