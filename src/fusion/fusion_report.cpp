// The fusion report: what `solder fuse` prints.
#include <sstream>

#include "algebra/normal_form.h"
#include "fusion/fuse.h"
#include "ir/printer.h"
#include "support/json.h"

namespace solder {
namespace {

std::string dims_text(const GroupPlan& plan, DimRole role) {
  std::string s;
  for (auto& d : plan.dims) {
    if (d.role != role) continue;
    s += (s.empty() ? "" : ", ") + d.name + "=" + std::to_string(d.extent);
    if (role != DimRole::resident) s += " (tile " + std::to_string(d.tile) + ")";
  }
  return s.empty() ? "-" : s;
}

std::string update_text(const GroupMember& m) {
  const Decomposition& d = m.decomposition;
  std::map<std::string, std::string> old;
  if (d.h_online) for (auto& t : tensors_used(d.h_online)) old[t] = t + "_old";
  std::string acc = "acc";
  switch (d.kind) {
    case Decomposition::Kind::independent:
      return acc + " ← " + acc + " " + std::string(monoid_of(m.def.reduce).oplus_name) + " " + print_expr(d.online_term);
    case Decomposition::Kind::multiplicative: {
      std::string s = d.h_online ? acc + " ← " + acc + " × " + print_expr(rescale_factor(d, old)) + " + Σ " + print_expr(d.online_term)
                                 : acc + " ← " + acc + " + Σ " + print_expr(d.online_term);
      if (d.h_deferred) s += "; at the end × " + print_expr(d.h_deferred);
      return s;
    }
    case Decomposition::Kind::monotone:
      return "select on the key " + print_expr(d.g) + " (F increases with it); at the end value = " + print_expr(d.value_from_key) +
             " with @key the selected key";
    case Decomposition::Kind::additive:
      return acc + " ← " + std::string(monoid_of(m.def.reduce).oplus_name) + "(" + acc + ", " + print_expr(d.g) + ")" +
             (d.h_deferred ? "; at the end + " + print_expr(d.h_deferred) : "");
    case Decomposition::Kind::polynomial: {
      std::string s = "B_k ← shift(B, δ = centre_new − centre) + Σ F_k, k = 0.." + std::to_string(d.taylor.size() - 1) + " with";
      for (size_t k = 0; k < d.taylor.size(); ++k) s += (k ? ";" : "") + std::string(" F_") + std::to_string(k) + " = " + print_expr(d.taylor[k]);
      return s + "; result B_0 at centre = final " + print_expr(d.d_load);
    }
    case Decomposition::Kind::refused: return d.reason;
  }
  return "";
}

}  // namespace

std::string fusion_report_text(const BoundProgram& program, const FusionResult& result, const ContractPassResult* contracts) {
  std::ostringstream out;
  out << "program " << program.program->name << ": " << program.defs.size() << " definitions → " << result.kernels.kernels.size()
      << " kernel" << (result.kernels.kernels.size() == 1 ? "" : "s") << "\n";
  if (!result.inlined.empty()) {
    out << "inlined (pointwise, recomputed in their consumers):";
    for (auto& n : result.inlined) out << " " << n;
    out << "\n";
  }
  for (auto& g : result.groups) {
    const GroupPlan& p = g.plan;
    out << "\nkernel " << g.name;
    if (g.kernels.size() > 1) out << " (+ " << g.kernels[1] << ")";
    out << ": ";
    for (size_t i = 0; i < p.members.size(); ++i) out << (i ? ", " : "") << p.members[i].def.target.name;
    out << "\n  grid: " << dims_text(p, DimRole::grid) << "\n  stream: " << dims_text(p, DimRole::stream);
    if (p.segments > 1) out << " split into " << p.segments << " segments";
    out << "\n  held whole: " << dims_text(p, DimRole::resident) << "\n  inner loops: " << dims_text(p, DimRole::inner) << "\n";
    for (auto& m : p.members) {
      out << "  " << m.def.target.name << " [" << phase_name(m.phase) << (m.exported ? ", stored" : ", on chip")
          << (m.recomputed ? ", recomputed per block" : "") << "] " << reduce_op_name(m.def.reduce);
      if (m.phase == Phase::cascade) {
        const Decomposition& d = m.decomposition;
        out << " — " << decomposition_kind_name(d.kind);
        if (!d.d_tensors.empty()) {
          out << " in";
          for (auto& t : d.d_tensors) out << " " << t;
        }
        out << "\n";
        if (d.kind == Decomposition::Kind::multiplicative || d.kind == Decomposition::Kind::additive || d.kind == Decomposition::Kind::monotone)
          out << "      G = " << print_expr(d.g) << ",  H = " << print_expr(d.h) << "  (" << d.confirmation << ")\n";
        if (d.kind == Decomposition::Kind::polynomial) out << "      polynomial of degree " << d.taylor.size() - 1 << " in " << print_expr(d.d_load) << "  (" << d.confirmation << ")\n";
        out << "      online: " << update_text(m) << "\n";
      } else {
        out << "\n";
      }
    }
    for (auto& n : p.notes) out << "  note: " << n << "\n";
  }
  for (auto& k : result.whole) out << "\nkernel " << k << ": a whole contraction, one launch of the sm_90a GEMM skeleton\n";
  if (!result.whole_notes.empty()) {
    out << "\nwhole contractions (whole_contractions.h: FLOPs per byte materialised against the machine balance):\n";
    for (auto& n : result.whole_notes) out << "  " << n << "\n";
  }
  if (!result.refusals.empty()) {
    out << "\nrefused fusions:\n";
    for (auto& r : result.refusals) out << "  " << r << "\n";
  }
  if (contracts && !contracts->entries.empty()) out << "\n" << contract_report_text(*contracts);
  return out.str();
}

std::string fusion_report_json(const BoundProgram& program, const FusionResult& result, const ContractPassResult* contracts) {
  JsonWriter json;
  json.begin_object().key("program").value(program.program->name);
  json.key("kernel_count").value(static_cast<int64_t>(result.kernels.kernels.size()));
  json.key("inlined").begin_array();
  for (auto& n : result.inlined) json.value(n);
  json.end_array().key("kernels").begin_array();
  for (auto& g : result.groups) {
    const GroupPlan& p = g.plan;
    json.begin_object().key("name").value(g.name).key("kernels").begin_array();
    for (auto& k : g.kernels) json.value(k);
    json.end_array().key("segments").value(p.segments).key("dims").begin_array();
    for (auto& d : p.dims)
      json.begin_object().key("name").value(d.name).key("extent").value(d.extent).key("role").value(dim_role_name(d.role))
          .key("tile").value(d.tile).end_object();
    json.end_array().key("definitions").begin_array();
    for (auto& m : p.members) {
      json.begin_object().key("name").value(m.def.target.name).key("phase").value(phase_name(m.phase));
      json.key("reduction").value(reduce_op_name(m.def.reduce)).key("stored").value(m.exported).key("recomputed").value(m.recomputed);
      if (m.phase == Phase::cascade) {
        const Decomposition& d = m.decomposition;
        json.key("online").value(true).key("decomposition").value(decomposition_kind_name(d.kind));
        if (d.g) json.key("G").value(print_expr(d.g));
        if (d.h) json.key("H").value(print_expr(d.h));
        json.key("update").value(update_text(m));
        if (!d.confirmation.empty()) json.key("confirmation").value(d.confirmation);
      }
      json.end_object();
    }
    json.end_array().key("notes").begin_array();
    for (auto& n : p.notes) json.value(n);
    json.end_array().end_object();
  }
  json.end_array().key("whole_contractions").begin_array();
  for (auto& k : result.whole) json.value(k);
  json.end_array().key("whole_notes").begin_array();
  for (auto& n : result.whole_notes) json.value(n);
  json.end_array().key("refused").begin_array();
  for (auto& r : result.refusals) json.value(r);
  json.end_array();
  if (contracts) {
    json.key("contraction_policy").value(contracts->policy.why).key("contractions").begin_array();
    for (auto& e : contracts->entries) {
      json.begin_object().key("kernel").value(e.kernel).key("destination").value(e.destination).key("canonical").value(e.canonical);
      if (e.canonical) json.key("contract").value(e.text);
      else json.key("refusal").value(e.refusal);
      json.key("notes").begin_array();
      for (auto& n : e.notes) json.value(n);
      json.end_array().end_object();
    }
    json.end_array();
  }
  json.end_object();
  return json.str();
}

}  // namespace solder
