// Integer interval analysis of index expressions and conditions.
//
// Used by the verifier (is every load in range, taking select guards into account) and by fusion
// (is a mask condition all-true, all-false or mixed over a tile's index ranges, Flashlight-style
// tile skipping). All bounds are inclusive.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace solder {

struct Interval {
  int64_t lo = 0, hi = 0;
  bool contains(const Interval& other) const { return lo <= other.lo && other.hi <= hi; }
};

// What the analysis knows: ranges of index variables and dim values, and ranges of whole
// sub-expressions learned from guards (e.g. `r + kr - 1 >= 0` bounds the expression `r + kr - 1`).
class RangeFacts {
 public:
  std::map<std::string, Interval> vars;
  std::map<std::string, int64_t> dims;
  // Tensors holding integers (i32), whose loads the analysis may bound: by the i32 range, narrowed
  // by what guards prove about that very load (`t[n] >= 0 && t[n] < V`); never by the extent of a
  // dim the value indexes. Unset: every load is unknown.
  const std::set<std::string, std::less<>>* integer_tensors = nullptr;

  // The range of an integer expression, or nullopt when it is not an integer expression the
  // analysis understands (real arithmetic, loads of tensors not in integer_tensors, ...).
  std::optional<Interval> bound(const Expr& e) const;
  // Whether `cond` holds everywhere (true), nowhere (false) or it depends (nullopt).
  std::optional<bool> decide(const Expr& cond) const;
  // Facts that hold where `cond` is true (or false, when `holds` is false): refines variable
  // ranges and records bounds on sub-expressions compared with a bounded value.
  RangeFacts assuming(const Expr& cond, bool holds) const;

 private:
  std::vector<std::pair<Expr, Interval>> expr_facts_;
  void learn_atom(const Expr& atom, bool holds);
  void narrow(const Expr& e, Interval range);
};

}  // namespace solder
