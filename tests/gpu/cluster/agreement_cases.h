// The case list of the executor/device agreement test (agreement_reference.cpp writes it, agreement.cu reads
// it back from the manifest). Plain C++, shared by the host program and the device program so that both agree
// on what a case is.
//
// A case is one collective on one cluster shape. Every block holds `in_count` elements of its input tile;
// `count` is the collective's count argument (docs/cluster-collectives.md):
//   cluster_reduce, all_exchange, dsm_shuffle, inter_cluster_reduce  count = in_count
//   cluster_gather                                                   count = in_count, output C * count
//   reduce_scatter                                                   count = in_count / C
// `special` cases overwrite a few input elements with +0, -0, +inf, -inf and NaN (agreement_reference.cpp,
// special_values): the edges of the max/min rule (NaN propagates, -0 < +0). They are reported apart and gate
// like the random cases (NaN agrees with NaN, whatever the payload).
#pragma once

#include <cstdio>
#include <string>

namespace agreement {

enum class Collective { cluster_reduce, cluster_gather, reduce_scatter, dsm_shuffle, all_exchange, inter_cluster_reduce };
enum class Op { none, sum, max, min, add, mul };
enum class ElementType { f32, bf16, f16 };

inline const char* collective_name(Collective c) {
  switch (c) {
    case Collective::cluster_reduce: return "cluster_reduce";
    case Collective::cluster_gather: return "cluster_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::dsm_shuffle: return "dsm_shuffle";
    case Collective::all_exchange: return "all_exchange";
    case Collective::inter_cluster_reduce: return "inter_cluster_reduce";
  }
  return "?";
}
inline const char* op_name(Op op) {
  const char* names[] = {"-", "sum", "max", "min", "add", "mul"};
  return names[static_cast<int>(op)];
}
inline const char* type_name(ElementType t) { return t == ElementType::f32 ? "f32" : t == ElementType::bf16 ? "bf16" : "f16"; }
inline unsigned type_bytes(ElementType t) { return t == ElementType::f32 ? 4 : 2; }

struct Case {
  int id = 0;
  Collective collective = Collective::cluster_reduce;
  Op op = Op::none;
  ElementType type = ElementType::f32;
  unsigned cluster = 2, group = 2, payload_bytes = 1024;
  bool special = false;

  unsigned in_count() const { return payload_bytes / type_bytes(type); }
  unsigned count() const { return collective == Collective::reduce_scatter ? in_count() / cluster : in_count(); }
  unsigned out_count() const { return collective == Collective::cluster_gather ? cluster * count() : count(); }
  unsigned clusters() const { return collective == Collective::inter_cluster_reduce ? 3 : 2; }
  unsigned blocks() const { return clusters() * cluster; }
  // Elements of the output global: per block, or one [C, count] region for inter_cluster_reduce.
  size_t output_elements() const {
    return collective == Collective::inter_cluster_reduce ? size_t{cluster} * count() : size_t{blocks()} * out_count();
  }
  size_t input_elements() const { return size_t{blocks()} * in_count(); }
  // Bit-exact, except inter_cluster_reduce(sum): the order of its combines is unspecified on the device.
  bool exact() const { return !(collective == Collective::inter_cluster_reduce && op == Op::sum); }
  // The row of the result table, e.g. "all_exchange add G=2".
  std::string row() const {
    std::string r = collective_name(collective);
    if (op != Op::none) r += std::string(" ") + op_name(op);
    if (collective == Collective::dsm_shuffle || collective == Collective::all_exchange)
      r += group == cluster ? " G=C" : " G=" + std::to_string(group);
    return r;
  }
  std::string file(const char* suffix) const {
    char name[32];
    std::snprintf(name, sizeof name, "case%03d.%s", id, suffix);
    return name;
  }
};

// Manifest line: id collective op type cluster group payload_bytes special
inline std::string manifest_line(const Case& c) {
  char line[160];
  std::snprintf(line, sizeof line, "%d %s %s %s %u %u %u %d", c.id, collective_name(c.collective), op_name(c.op),
                type_name(c.type), c.cluster, c.group, c.payload_bytes, c.special ? 1 : 0);
  return line;
}

inline bool parse_manifest_line(const char* line, Case* c) {
  char collective[32], op[8], type[8];
  int special = 0;
  if (std::sscanf(line, "%d %31s %7s %7s %u %u %u %d", &c->id, collective, op, type, &c->cluster, &c->group,
                  &c->payload_bytes, &special) != 8)
    return false;
  c->special = special != 0;
  int found = 0;
  for (int k = 0; k <= static_cast<int>(Collective::inter_cluster_reduce); ++k)
    if (std::string(collective) == collective_name(static_cast<Collective>(k))) c->collective = static_cast<Collective>(k), found |= 1;
  for (int k = 0; k <= static_cast<int>(Op::mul); ++k)
    if (std::string(op) == op_name(static_cast<Op>(k))) c->op = static_cast<Op>(k), found |= 2;
  for (int k = 0; k <= 2; ++k)
    if (std::string(type) == type_name(static_cast<ElementType>(k))) c->type = static_cast<ElementType>(k), found |= 4;
  return found == 7;
}

}  // namespace agreement
