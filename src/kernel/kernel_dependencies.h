// Which kernels of a KernelProgram depend on which, and on how many streams their launches can run.
//
// The Kernel IR orders a program's kernels one after another (kernel_ir.h): each sees every global
// write of the kernels before it. Two kernels that touch no global in conflict (one writes what the
// other reads or writes) compute the same values in either order or at once, so a runtime may launch
// them concurrently. kernel_dependencies() finds, for each kernel, the earlier kernels it must wait for;
// schedule_launches() places the launches on streams so that each waits only for those.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace solder {

// The globals a kernel (or one launch of several kernels) reads and writes, by name. `exclusive`: it
// must run alone (its blocks wait for each other through a queue, or it shares a device-side resource
// that is not a global, such as the attention skeleton's work counter): every other launch conflicts
// with it.
struct GlobalUse {
  std::set<std::string> reads, writes;
  bool exclusive = false;
};

// The globals `kernel` loads (in any expression, index or guard, and copy sources) and stores (the
// destinations of fill, copy, map, reduce, contract and inter_cluster_reduce). A kernel with a queue buffer
// is exclusive.
GlobalUse global_use(const KernelProgram& program, const Kernel& kernel);

// For each launch k, the earlier launches j < k it conflicts with (j writes a global k reads or writes,
// or reads one k writes, or either is exclusive), ascending. Every dependency is listed, not only the
// nearest ones.
std::vector<std::vector<size_t>> kernel_dependencies(const std::vector<GlobalUse>& launches);

// The launches placed on streams, in program order: launch k goes to `stream` (0 is the caller's) after
// the launches queued there before it, and first waits for the completion of each launch in `waits`
// (on other streams). A stream's first launch waits for what the caller queued before (the fork), and
// the caller's stream waits for every other stream at the end (the join).
struct LaunchStep {
  int stream = 0;
  std::vector<size_t> waits;
};
struct LaunchSchedule {
  int streams = 1;
  std::vector<LaunchStep> steps;
};

// Places each launch on the stream whose last launch it depends on (the latest such), else on a stream
// whose last launch is one of its ancestors, else on a new stream while fewer than `max_streams` are
// used, else on the stream whose last launch is the earliest (an order the program allows, not one it
// needs). max_streams 1 gives every launch to stream 0, in order, with no waits: the serial schedule.
LaunchSchedule schedule_launches(const std::vector<std::vector<size_t>>& dependencies, int max_streams);

}  // namespace solder
