#pragma once

// Runs a cooperative CUDA kernel body (csrc/common/block.h) on the host, over its whole grid,
// and reports what compute-sanitizer's racecheck / synccheck / initcheck would (test-only).
//
// Each thread of a block is a thread of control of its own (an OS thread), but only one runs at
// a time: a scheduler hands a token to the threads in a shuffled order, and a thread gives it back
// when it reaches a barrier (sync) or a warp collective (shuffle, ballot), or ends. So a phase
// (the code between two barriers) runs its threads in an arbitrary order, as a GPU may; a body
// whose result depended on that order shows it, and the scheduler checks:
//   - shared-memory races: within one phase, an element written by one thread and read or written
//     by another (what `compute-sanitizer --tool racecheck` reports);
//   - barrier divergence: threads of a block waiting at different barriers, or at a barrier that
//     others have left the kernel without reaching; a warp collective some lanes of the warp do not
//     reach, or reach at another place (`--tool synccheck`);
//   - shared reads out of bounds, or of an element no thread has written (`--tool initcheck`).
// A block whose threads cannot all go on (divergence) is abandoned: its threads are unwound.
//
// Blocks run one after another, in a shuffled order (a GPU gives no order between blocks).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <semaphore>
#include <source_location>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "common/block.h"

namespace torch_ragged::testing {

// What one emulated launch found; every list empty means a clean launch.
struct LaunchReport {
  std::vector<std::string> races;        // racecheck
  std::vector<std::string> divergences;  // synccheck
  std::vector<std::string> errors;       // initcheck, out-of-bounds, exceptions
  bool clean() const { return races.empty() && divergences.empty() && errors.empty(); }
  std::string summary() const {
    std::ostringstream out;
    for (const auto* list : {&races, &divergences, &errors}) {
      for (const std::string& line : *list) out << line << "\n";
    }
    return out.str();
  }
};

class EmulatedBlock;

namespace detail {

enum class ThreadState { kReady, kRunning, kAtBarrier, kAtWarpOp, kDone };
enum class WarpOp { kShflUp, kShflDown, kShflXor, kShfl, kBallot };

struct Unwind {};  // thrown in an emulated thread of an abandoned block

inline std::string where(const std::source_location& at) {
  const std::string file = at.file_name();
  return file.substr(file.find_last_of('/') + 1) + ":" + std::to_string(at.line());
}

inline bool same_place(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         std::strcmp(a.file_name(), b.file_name()) == 0;
}

// Who touched one shared element in the current phase.
struct Touches {
  int writer = -1, reader = -1;
  bool several_readers = false, reported = false;
};

struct SharedSlot {
  std::string name;
  size_t element_bytes = 0;
  int64_t size = 0;
  std::vector<unsigned char> bytes;
  std::vector<char> written;  // initcheck: an element some thread has written
};

class BlockRun {
 public:
  BlockRun(int64_t block, int64_t blocks, int threads, uint64_t seed, LaunchReport& report)
      : block_(block), blocks_(blocks), threads_(threads), report_(report), rng_(seed) {}

  int64_t block() const { return block_; }
  int64_t blocks() const { return blocks_; }
  int threads() const { return threads_; }

  void run(const std::function<void(EmulatedBlock&)>& body);

  // Called by the emulated threads (one runs at a time).
  void barrier(int thread, const std::source_location& at) {
    state_[thread] = ThreadState::kAtBarrier;
    place_[thread] = at;
    yield(thread);
  }

  uint64_t warp_collective(int thread, WarpOp op, uint64_t bits, int argument,
                           const std::source_location& at) {
    state_[thread] = ThreadState::kAtWarpOp;
    place_[thread] = at;
    op_[thread] = op;
    lane_in_[thread] = bits;
    argument_[thread] = argument;
    yield(thread);
    return lane_out_[thread];
  }

  SharedSlot& slot(int id, const char* name, size_t element_bytes, int64_t size) {
    auto [it, added] = slots_.try_emplace(id);
    SharedSlot& s = it->second;
    if (added) {
      s.name = name;
      s.element_bytes = element_bytes;
      s.size = size;
      s.bytes.assign(static_cast<size_t>(size) * element_bytes, 0);
      s.written.assign(static_cast<size_t>(size), 0);
    } else if (s.element_bytes != element_bytes || s.size != size) {
      error("shared array " + s.name + " declared with two shapes");
    }
    return s;
  }

  // Records an access to element `index` of slot `id`; false when it must not happen (out of
  // bounds: a read returns zero, a write is dropped).
  bool access(int thread, int id, int64_t index, bool write) {
    SharedSlot& s = slots_.at(id);
    const std::string element = s.name + "[" + std::to_string(index) + "]";
    if (index < 0 || index >= s.size) {
      error("out-of-bounds shared access " + element + " (size " + std::to_string(s.size) +
            ") by thread " + std::to_string(thread) + in_block());
      return false;
    }
    if (!write && !s.written[index]) {
      error("read of " + element + " before any thread wrote it, by thread " +
            std::to_string(thread) + in_block());
    }
    Touches& t = touches_[(int64_t{id} << 40) | index];
    const bool read_by_another = t.reader != -1 && (t.reader != thread || t.several_readers);
    std::string race;
    if (t.writer != -1 && t.writer != thread) {
      race = element + " written by thread " + std::to_string(t.writer) + " and " +
             (write ? "written" : "read") + " by thread " + std::to_string(thread);
    } else if (write && read_by_another) {
      race = element + " read by " +
             (t.reader != thread ? "thread " + std::to_string(t.reader) : "other threads") +
             " and written by thread " + std::to_string(thread);
    }
    if (!race.empty() && !t.reported) {
      t.reported = true;
      report_.races.push_back("shared-memory race: " + race + " in one phase" + in_block());
    }
    if (write) {
      t.writer = thread;
      s.written[index] = 1;
    } else if (t.reader == -1) {
      t.reader = thread;
    } else if (t.reader != thread) {
      t.several_readers = true;
    }
    return true;
  }

 private:
  std::string in_block() const {
    return " (block " + std::to_string(block_) + ", phase " + std::to_string(phase_) + ")";
  }
  void error(const std::string& message) { report_.errors.push_back(message); }
  void divergence(const std::string& message) {
    report_.divergences.push_back(message + in_block());
  }

  void yield(int thread) {
    to_scheduler_.release();
    resume_[thread]->acquire();
    if (unwinding_) throw Unwind{};
  }

  void run_thread(int thread, const std::function<void(EmulatedBlock&)>& body);
  void resume(int thread) {
    state_[thread] = ThreadState::kRunning;
    resume_[thread]->release();
    to_scheduler_.acquire();
  }
  bool resolve_warps();
  bool resolve_barrier();
  void shuffle_lanes(int first_lane);

  int64_t block_, blocks_;
  int threads_;
  LaunchReport& report_;
  std::mt19937_64 rng_;
  int phase_ = 0;
  bool unwinding_ = false;
  std::binary_semaphore to_scheduler_{0};
  std::vector<std::unique_ptr<std::binary_semaphore>> resume_;
  std::vector<ThreadState> state_;
  std::vector<std::source_location> place_;
  std::vector<WarpOp> op_;
  std::vector<uint64_t> lane_in_, lane_out_;
  std::vector<int> argument_;
  std::unordered_map<int, SharedSlot> slots_;
  std::unordered_map<int64_t, Touches> touches_;
};

}  // namespace detail

// A shared array as a body sees it: operator[] reads and writes like T*, and every access is
// recorded by the block's run.
template <typename T>
class SharedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  class Element {
   public:
    operator T() const {  // NOLINT(google-explicit-constructor): reads like a T&
      T value{};
      if (array_.run_->access(array_.thread_, array_.id_, index_, false)) {
        std::memcpy(&value, array_.data() + index_, sizeof(T));
      }
      return value;
    }
    Element& operator=(const T& value) {
      if (array_.run_->access(array_.thread_, array_.id_, index_, true)) {
        std::memcpy(array_.data() + index_, &value, sizeof(T));
      }
      return *this;
    }
    Element& operator=(const Element& other) { return *this = static_cast<T>(other); }

   private:
    friend class SharedArray;
    Element(const SharedArray& array, int64_t index) : array_(array), index_(index) {}
    const SharedArray& array_;
    int64_t index_;
  };

  SharedArray(detail::BlockRun* run, int thread, int id, const char* name, int64_t size)
      : run_(run), thread_(thread), id_(id) {
    slot_ = &run->slot(id, name, sizeof(T), size);
  }
  Element operator[](int64_t index) const { return Element(*this, index); }

 private:
  T* data() const { return reinterpret_cast<T*>(slot_->bytes.data()); }
  detail::BlockRun* run_;
  int thread_, id_;
  detail::SharedSlot* slot_;
};

// The Block of csrc/common/block.h, for one emulated thread.
class EmulatedBlock {
 public:
  EmulatedBlock(detail::BlockRun* run, int thread) : run_(run), thread_(thread) {}

  int thread() const { return thread_; }
  int threads() const { return run_->threads(); }
  int64_t block() const { return run_->block(); }
  int64_t blocks() const { return run_->blocks(); }
  void sync(std::source_location at = std::source_location::current()) const {
    run_->barrier(thread_, at);
  }

  template <typename T>
  T shfl_up(T value, int delta, std::source_location at = std::source_location::current()) const {
    return collective(detail::WarpOp::kShflUp, value, delta, at);
  }
  template <typename T>
  T shfl_down(T value, int delta, std::source_location at = std::source_location::current()) const {
    return collective(detail::WarpOp::kShflDown, value, delta, at);
  }
  template <typename T>
  T shfl_xor(T value, int lane_mask,
             std::source_location at = std::source_location::current()) const {
    return collective(detail::WarpOp::kShflXor, value, lane_mask, at);
  }
  template <typename T>
  T shfl(T value, int source_lane,
         std::source_location at = std::source_location::current()) const {
    return collective(detail::WarpOp::kShfl, value, source_lane, at);
  }
  uint32_t ballot(bool predicate, std::source_location at = std::source_location::current()) const {
    return collective(detail::WarpOp::kBallot, uint32_t{predicate}, 0, at);
  }

  // Shared array `id` of this block (the same storage for every thread that names it).
  template <typename T>
  SharedArray<T> shared(int id, const char* name, int64_t size) const {
    return SharedArray<T>(run_, thread_, id, name, size);
  }

 private:
  template <typename T>
  T collective(detail::WarpOp op, T value, int argument, const std::source_location& at) const {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8);
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    bits = run_->warp_collective(thread_, op, bits, argument, at);
    std::memcpy(&value, &bits, sizeof(T));
    return value;
  }

  detail::BlockRun* run_;
  int thread_;
};

namespace detail {

inline void BlockRun::run_thread(int thread, const std::function<void(EmulatedBlock&)>& body) {
  resume_[thread]->acquire();
  if (!unwinding_) {
    try {
      EmulatedBlock block(this, thread);
      body(block);
    } catch (const Unwind&) {
    } catch (const std::exception& e) {
      error("thread " + std::to_string(thread) + in_block() + " threw: " + e.what());
    }
  }
  state_[thread] = ThreadState::kDone;
  to_scheduler_.release();
}

inline void BlockRun::run(const std::function<void(EmulatedBlock&)>& body) {
  state_.assign(threads_, ThreadState::kReady);
  place_.assign(threads_, std::source_location());
  op_.assign(threads_, WarpOp::kShfl);
  lane_in_.assign(threads_, 0);
  lane_out_.assign(threads_, 0);
  argument_.assign(threads_, 0);
  for (int t = 0; t < threads_; ++t) resume_.push_back(std::make_unique<std::binary_semaphore>(0));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads_; ++t)
    workers.emplace_back([this, t, &body] { run_thread(t, body); });
  std::vector<int> ready;
  while (true) {
    ready.clear();
    for (int t = 0; t < threads_; ++t) {
      if (state_[t] == ThreadState::kReady) ready.push_back(t);
    }
    if (!ready.empty()) {
      std::shuffle(ready.begin(), ready.end(), rng_);
      for (const int t : ready) resume(t);
      continue;
    }
    if (std::all_of(state_.begin(), state_.end(),
                    [](ThreadState s) { return s == ThreadState::kDone; })) {
      break;
    }
    if (!resolve_warps() && !resolve_barrier()) {  // divergence: abandon the block
      unwinding_ = true;
      for (int t = 0; t < threads_; ++t) {
        if (state_[t] != ThreadState::kDone) resume(t);
      }
      break;
    }
  }
  for (std::thread& worker : workers) worker.join();
}

// Warps whose 32 lanes all wait at one collective get their results; false if none could.
inline bool BlockRun::resolve_warps() {
  bool progress = false;
  for (int first = 0; first < threads_; first += kWarpSize) {
    const auto at_op = [&](int t) { return state_[t] == ThreadState::kAtWarpOp; };
    int waiting = 0;
    for (int t = first; t < first + kWarpSize; ++t) waiting += at_op(t);
    if (waiting == 0) continue;
    bool one_place = waiting == kWarpSize;
    for (int t = first; one_place && t < first + kWarpSize; ++t) {
      one_place = same_place(place_[t], place_[first]) && op_[t] == op_[first];
    }
    if (!one_place) continue;
    shuffle_lanes(first);
    for (int t = first; t < first + kWarpSize; ++t) state_[t] = ThreadState::kReady;
    progress = true;
  }
  if (progress) return true;
  for (int first = 0; first < threads_; first += kWarpSize) {
    for (int t = first; t < first + kWarpSize; ++t) {
      if (state_[t] != ThreadState::kAtWarpOp) continue;
      std::ostringstream message;
      message << "warp divergence: lane " << t - first << " of warp " << first / kWarpSize
              << " waits at the warp collective at " << where(place_[t])
              << ", which not every lane of its warp reaches there:";
      for (int u = first; u < first + kWarpSize; ++u) {
        if (state_[u] == ThreadState::kAtWarpOp && same_place(place_[u], place_[t])) continue;
        message << " lane " << u - first
                << (state_[u] == ThreadState::kDone ? " has exited;"
                                                    : " waits at " + where(place_[u]) + ";");
      }
      divergence(message.str());
      return false;
    }
  }
  return false;
}

// Every live thread waits at one barrier: the phase ends (its race records are dropped); false
// on divergence.
inline bool BlockRun::resolve_barrier() {
  int first_waiting = -1, exited = 0;
  for (int t = 0; t < threads_; ++t) {
    if (state_[t] == ThreadState::kDone) {
      ++exited;
    } else if (first_waiting < 0) {
      first_waiting = t;
    }
  }
  for (int t = 0; t < threads_; ++t) {
    if (state_[t] != ThreadState::kAtBarrier || same_place(place_[t], place_[first_waiting])) {
      continue;
    }
    divergence("barrier divergence: thread " + std::to_string(first_waiting) + " waits at " +
               where(place_[first_waiting]) + ", thread " + std::to_string(t) + " at " +
               where(place_[t]));
    return false;
  }
  if (exited > 0) {
    divergence("barrier divergence: " + std::to_string(threads_ - exited) + " threads wait at " +
               where(place_[first_waiting]) + " that " + std::to_string(exited) +
               " threads of the block left the kernel without reaching");
    return false;
  }
  touches_.clear();
  ++phase_;
  std::fill(state_.begin(), state_.end(), ThreadState::kReady);
  return true;
}

inline void BlockRun::shuffle_lanes(int first) {
  const WarpOp op = op_[first];
  if (op == WarpOp::kBallot) {
    uint64_t votes = 0;
    for (int lane = 0; lane < kWarpSize; ++lane) votes |= (lane_in_[first + lane] & 1) << lane;
    for (int lane = 0; lane < kWarpSize; ++lane) lane_out_[first + lane] = votes;
    return;
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const int argument = argument_[first + lane];
    int source = lane;
    switch (op) {
      case WarpOp::kShflUp:
        source = lane - argument >= 0 ? lane - argument : lane;
        break;
      case WarpOp::kShflDown:
        source = lane + argument < kWarpSize ? lane + argument : lane;
        break;
      case WarpOp::kShflXor:
        source = (lane ^ argument) & (kWarpSize - 1);
        break;
      default:
        source = argument & (kWarpSize - 1);
    }
    lane_out_[first + lane] = lane_in_[first + source];
  }
}

}  // namespace detail

// body(block) for every thread of every block of a grid of `blocks` x `threads` (a multiple of
// the warp size); returns what the run found.
template <typename Body>
LaunchReport emulate_cooperative_launch(int64_t blocks, int threads, const Body& body,
                                        uint64_t seed = 0) {
  LaunchReport report;
  if (threads <= 0 || threads % kWarpSize != 0) {
    report.errors.push_back("block size " + std::to_string(threads) +
                            " is not a positive multiple of the warp size");
    return report;
  }
  std::vector<int64_t> order(blocks);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 generator(seed + static_cast<uint64_t>(blocks));
  std::shuffle(order.begin(), order.end(), generator);
  const std::function<void(EmulatedBlock&)> each_thread = [&body](EmulatedBlock& b) { body(b); };
  for (const int64_t block : order) {
    detail::BlockRun run(block, blocks, threads, generator(), report);
    run.run(each_thread);
  }
  return report;
}

}  // namespace torch_ragged::testing
