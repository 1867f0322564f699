#include "backend/cpu/executor_sync.h"

#include "ir/diagnostics.h"

namespace solder {

SyncDomain::SyncDomain(std::string kernel, int blocks, int cluster_size)
    : kernel_(std::move(kernel)), cluster_size_(cluster_size), alive_(blocks) {}

void SyncDomain::throw_if_failed() const {
  if (!failure_.empty()) throw Error(failure_);
}

void SyncDomain::fail_locked(const std::string& why) {
  if (failure_.empty()) failure_ = "deadlock in kernel '" + kernel_ + "': " + why;
  changed_.notify_all();
  throw Error(failure_);
}

void SyncDomain::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.empty()) failure_ = why;
  changed_.notify_all();
}

void SyncDomain::check_all_waiting() {
  if (static_cast<int>(waiters_.size()) < alive_) return;
  for (auto& [block, w] : waiters_)
    if (w.can_proceed()) return;  // woken, not yet running
  std::string who;
  for (auto& [block, w] : waiters_) who += (who.empty() ? "" : "; ") + std::string("block ") + std::to_string(block) + " waits at " + w.what;
  fail_locked("every running block is waiting and none can proceed (" + who + ")");
}

void SyncDomain::wait_until(std::unique_lock<std::mutex>& lock, int block, const std::string& what, std::function<bool()> can_proceed) {
  waiters_[block] = Waiter{what, can_proceed};
  check_all_waiting();
  changed_.wait(lock, [&] { return !failure_.empty() || can_proceed(); });
  waiters_.erase(block);
  throw_if_failed();
}

void SyncDomain::cluster_barrier(int block, int cluster, const std::string& statement) {
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_failed();
  BarrierState& b = barriers_[cluster];
  for (auto& [other, other_statement] : b.waiting) {
    if (other_statement != statement)
      fail_locked("the blocks of cluster " + std::to_string(cluster) + " reached different collectives: block " +
                  std::to_string(other) + " at " + other_statement + ", block " + std::to_string(block) + " at " + statement);
  }
  if (b.exited > 0)
    fail_locked("block " + std::to_string(block) + " waits at " + statement + " for its cluster, but " + std::to_string(b.exited) +
                " block(s) of cluster " + std::to_string(cluster) + " have already exited");
  if (++b.arrived == cluster_size_) {
    b.arrived = 0;
    b.waiting.clear();
    ++b.generation;
    changed_.notify_all();
    return;
  }
  int64_t generation = b.generation;
  b.waiting[block] = statement;
  wait_until(lock, block, statement, [this, cluster, generation] { return barriers_[cluster].generation != generation; });
}

void SyncDomain::queue_push(int block, const std::string& queue, int depth, std::vector<float> tile, int64_t tag,
                            const std::string& statement) {
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_failed();
  if (static_cast<int>(queues_[queue].items.size()) >= depth)
    wait_until(lock, block, statement + " (queue '" + queue + "' full)",
               [this, queue, depth] { return static_cast<int>(queues_[queue].items.size()) < depth; });
  queues_[queue].items.emplace_back(std::move(tile), tag);
  changed_.notify_all();
}

std::vector<float> SyncDomain::queue_pop(int block, const std::string& queue, int64_t* tag, const std::string& statement) {
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_failed();
  if (queues_[queue].items.empty())
    wait_until(lock, block, statement + " (queue '" + queue + "' empty)", [this, queue] { return !queues_[queue].items.empty(); });
  auto item = std::move(queues_[queue].items.front());
  queues_[queue].items.pop_front();
  changed_.notify_all();
  *tag = item.second;
  return std::move(item.first);
}

void SyncDomain::exit_block(int block, int cluster) {
  std::lock_guard<std::mutex> lock(mutex_);
  --alive_;
  BarrierState& b = barriers_[cluster];
  ++b.exited;
  if (failure_.empty() && !b.waiting.empty()) {
    std::string who;
    for (auto& [other, statement] : b.waiting) who += (who.empty() ? "" : ", ") + std::to_string(other) + " at " + statement;
    failure_ = "deadlock in kernel '" + kernel_ + "': block " + std::to_string(block) + " of cluster " + std::to_string(cluster) +
               " exited while its peers wait (block " + who + ")";
  }
  if (failure_.empty() && !waiters_.empty() && static_cast<int>(waiters_.size()) >= alive_) {
    bool any = false;
    for (auto& [other, w] : waiters_) any |= w.can_proceed();
    if (!any) {
      std::string who;
      for (auto& [other, w] : waiters_) who += (who.empty() ? "" : "; ") + std::string("block ") + std::to_string(other) + " waits at " + w.what;
      failure_ = "deadlock in kernel '" + kernel_ + "': every running block is waiting and none can proceed (" + who + ")";
    }
  }
  changed_.notify_all();
}

}  // namespace solder
