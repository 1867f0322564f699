// Synchronisation among concurrently running blocks in the CPU executor: cluster barriers (which
// collectives are built on), bounded queues, and deadlock detection.
//
// A SyncDomain spans the blocks that run concurrently: one cluster, or every block of a kernel that
// uses queues. It counts live and waiting blocks; when every live block waits, or a block waits at
// a barrier of a cluster one of whose blocks has exited, or the blocks of a cluster reach different
// barriers, the domain fails: every waiter wakes and throws an Error describing the deadlock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace solder {

class SyncDomain {
 public:
  SyncDomain(std::string kernel, int blocks, int cluster_size);

  // Waits until every block of `cluster` arrives at a barrier. `statement` identifies the
  // statement (number and kind, e.g. "statement 5 (cluster_reduce)").
  void cluster_barrier(int block, int cluster, const std::string& statement);

  // Bounded queue of tagged tiles.
  void queue_push(int block, const std::string& queue, int depth, std::vector<float> tile, int64_t tag,
                  const std::string& statement);
  std::vector<float> queue_pop(int block, const std::string& queue, int64_t* tag, const std::string& statement);

  // A block finished its body (normally or with an error).
  void exit_block(int block, int cluster);
  // Marks the domain failed (an error in one block stops the others).
  void abort(const std::string& why);

 private:
  struct BarrierState {
    int arrived = 0;
    int64_t generation = 0;
    std::map<int, std::string> waiting;  // block → statement
    int exited = 0;
  };
  struct Queue {
    std::deque<std::pair<std::vector<float>, int64_t>> items;
  };

  std::string kernel_;
  int cluster_size_;
  int alive_;
  std::string failure_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, BarrierState> barriers_;  // per cluster
  std::map<std::string, Queue> queues_;
  struct Waiter {
    std::string what;                  // the statement it waits at
    std::function<bool()> can_proceed; // its wake-up condition
  };
  std::map<int, Waiter> waiters_;      // blocks waiting now

  // Waits (lock held) until `can_proceed`, registered as `block` waiting at `what`; fails the domain
  // if every live block waits and none of their conditions holds.
  void wait_until(std::unique_lock<std::mutex>& lock, int block, const std::string& what, std::function<bool()> can_proceed);
  void check_all_waiting();
  [[noreturn]] void fail_locked(const std::string& why);
  void throw_if_failed() const;
};

}  // namespace solder
