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
  if (waiting_ < alive_) return;
  std::string who;
  for (auto& [block, what] : where_) who += (who.empty() ? "" : "; ") + std::string("block ") + std::to_string(block) + " waits at " + what;
  fail_locked("every running block is waiting and none can proceed (" + who + ")");
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
  where_[block] = statement;
  ++waiting_;
  check_all_waiting();
  changed_.wait(lock, [&] { return !failure_.empty() || barriers_[cluster].generation != generation; });
  --waiting_;
  where_.erase(block);
  throw_if_failed();
}

void SyncDomain::queue_push(int block, const std::string& queue, int depth, std::vector<float> tile, int64_t tag,
                            const std::string& statement) {
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_failed();
  Queue& q = queues_[queue];
  if (static_cast<int>(q.items.size()) >= depth) {
    where_[block] = statement + " (queue '" + queue + "' full)";
    ++waiting_;
    check_all_waiting();
    changed_.wait(lock, [&] { return !failure_.empty() || static_cast<int>(queues_[queue].items.size()) < depth; });
    --waiting_;
    where_.erase(block);
    throw_if_failed();
  }
  queues_[queue].items.emplace_back(std::move(tile), tag);
  changed_.notify_all();
}

std::vector<float> SyncDomain::queue_pop(int block, const std::string& queue, int64_t* tag, const std::string& statement) {
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_failed();
  if (queues_[queue].items.empty()) {
    where_[block] = statement + " (queue '" + queue + "' empty)";
    ++waiting_;
    check_all_waiting();
    changed_.wait(lock, [&] { return !failure_.empty() || !queues_[queue].items.empty(); });
    --waiting_;
    where_.erase(block);
    throw_if_failed();
  }
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
  if (failure_.empty() && waiting_ > 0 && waiting_ >= alive_) {
    std::string who;
    for (auto& [other, what] : where_) who += (who.empty() ? "" : "; ") + std::string("block ") + std::to_string(other) + " waits at " + what;
    failure_ = "deadlock in kernel '" + kernel_ + "': every running block is waiting and none can proceed (" + who + ")";
  }
  changed_.notify_all();
}

}  // namespace solder
