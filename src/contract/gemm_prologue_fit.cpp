#include "contract/gemm_prologue_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "hw/hardware.h"
#include "support/refusal.h"

#include "ir/expr_visitor.h"
#include "lower/lower_prologue.h"

namespace solder {

GemmPrologueFit fit_gemm_prologue(const Kernel& kernel, const std::vector<GlobalTensor>& globals) {
  GemmPrologueFit fit;
  auto refuse = [&](std::string why) {
    fit.refusal = std::move(why);
    return fit;
  };
  GemmPrologueProblem pp;
  if (!is_prologue_contraction(kernel, &pp.sides)) return refuse("its body is not side reductions and one contract");
  const ContractNode& c = *kernel.body.back().as<ContractNode>();
  pp.contract = &c;
  if (c.terms.size() != 1 || c.where || c.domain.guard || c.accumulate || c.bias || c.epilogue)
    return refuse("not one unconditional product term with a scale only");
  if (c.type == MmaType::f32 || c.type == MmaType::tf32 || c.type == MmaType::tf32x3)
    return refuse("T = " + std::string(mma_type_name(c.type)));
  if (c.reduce_axes.size() != 1 || c.row_axes.size() != 1 || c.column_axes.empty()) return refuse("not one row axis and one K");
  if (c.domain.axes.size() != 1 + c.column_axes.size()) return refuse("a batch axis (the prologue path has none)");
  std::set<std::string> side_buffers;
  for (auto* s : pp.sides) {
    if (s->op != ReduceOp::sum && s->op != ReduceOp::max && s->op != ReduceOp::min) return refuse("a side reduction that is not a sum, max or min");
    side_buffers.insert(s->dst.name);
  }
  const std::string row = c.row_axes[0], k = c.reduce_axes[0].var;
  std::string source;
  for_each_load(c.terms[0].a, [&](const LoadNode& load) {
    if (load.index.size() == 2 && load.index[0].as<VarNode>() && load.index[1].as<VarNode>() &&
        load.index[0].as<VarNode>()->name == row && load.index[1].as<VarNode>()->name == k)
      source = load.tensor;
    if (side_buffers.count(load.tensor)) pp.pre_sweep = true;
  });
  if (source.empty()) return refuse("operand A reads no tensor at [" + row + ", " + k + "]");
  GemmSkeletonProblem& p = pp.problem;
  p.reduce_axis = k;
  p.k = c.reduce_axes[0].extent;
  std::map<std::string, int64_t> extent;
  for (auto& a : c.domain.axes) extent[a.var] = a.extent;
  std::string why;
  auto a = operand_of(make_load(source, {make_var(row), make_var(k)}), c.row_axes, k, {}, globals, "A", p.row_axes, why);
  if (!a) return refuse(why);
  auto b = operand_of(c.terms[0].b, c.column_axes, k, {}, globals, "B", p.column_axes, why);
  if (!b) return refuse(why);
  for (auto& v : p.row_axes) {
    p.row_extents.push_back(extent.at(v));
    p.m *= extent.at(v);
  }
  for (auto& v : p.column_axes) {
    p.column_extents.push_back(extent.at(v));
    p.n *= extent.at(v);
  }
  if (a->dtype != DType::bf16 && a->dtype != DType::f16)
    return refuse("the staged " + source + " is " + std::string(dtype_name(a->dtype)) + " (the prologue stages bf16 or f16)");
  const bool fp8_t = c.type == MmaType::f8e4m3 || c.type == MmaType::f8e5m2;
  const bool b_fp8 = b->dtype == DType::f8e4m3 || b->dtype == DType::f8e5m2;
  if (fp8_t ? !b_fp8 : !((c.type == MmaType::bf16 && b->dtype == DType::bf16) || (c.type == MmaType::f16 && b->dtype == DType::f16)))
    return refuse("B is " + std::string(dtype_name(b->dtype)) + ", not exact in T = " + std::string(mma_type_name(c.type)));
  if (fp8_t && !b->k_major) return refuse("the fp8 B operand is not K-major (fp8 wgmma reads K-major operands)");
  if (a->rows != p.m || b->rows != p.n || a->k != p.k || b->k != p.k) return refuse("the operands' shapes are not the contract's M, N, K");
  if (p.m > (1LL << 31) - 1 || p.n > (1LL << 31) - 1) return refuse("M or N over 2^31");
  p.a = *a;
  p.b = *b;
  fit.problem = pp;
  return fit;
}

std::optional<bool> forced_prologue_split() {
  const char* value = std::getenv("SOLDER_PROLOGUE_PLAN");
  if (!value || !*value || std::string(value) == "cost") return std::nullopt;
  if (std::string(value) == "one") return false;
  if (std::string(value) == "split") return true;
  throw Refusal(std::string("SOLDER_PROLOGUE_PLAN: expected one, split or cost, found '") + value + "' (unset it for the cost model's choice)");
}

ProloguePlanChoice choose_prologue_plan(const GemmPrologueProblem& pp, int bm, int bn, int bk, double split_gemm_us, int64_t a_t_bytes) {
  ProloguePlanChoice choice;
  const HardwareDescription& hw = default_hardware();
  const Rates& rates = hw.rates;
  const int sms = hw.sm_count > 0 ? hw.sm_count : 132;
  const double l2_tbps = rates.l2_tbps > 0 ? rates.l2_tbps : 9.0;
  const double hbm_tbps = rates.hbm_tbps > 0 ? rates.hbm_tbps : 3.0;
  const double launch_us = rates.launch_us > 0 ? rates.launch_us : 1.0;
  const ContractNode& c = *pp.contract;
  const bool fp8 = c.type == MmaType::f8e4m3 || c.type == MmaType::f8e5m2;
  double tensor_tflops = rates.tensor(mma_type_name(c.type));
  if (!(tensor_tflops > 0)) tensor_tflops = fp8 ? 1425 : 785;
  const GemmSkeletonProblem& p = pp.problem;
  const double src_bytes = dtype_bytes(p.a.dtype), b_bytes = dtype_bytes(p.b.dtype);
  const int64_t tiles = ((p.m + bm - 1) / bm) * ((p.n + bn - 1) / bn);
  const int64_t per_block = (tiles + sms - 1) / sms;
  const int64_t k_tiles = (p.k + bk - 1) / bk;
  const double sm_l2 = l2_tbps * 1e12 / sms;  // bytes per second into one SM, all loading
  const double mma_us = 2.0 * bm * bn * bk / (tensor_tflops * 1e12 / sms) * 1e6;
  const double load_us = (bm * src_bytes + bn * b_bytes) * bk / sm_l2 * 1e6;
  const double convert_us = (pp.pre_sweep ? kConvertNsPerElement : kConvertNsPerElementNoSides) * bm * bk * 1e-3;
  const double k_tile_us = std::max(mma_us, load_us) + convert_us;
  const double sweep_us = pp.pre_sweep ? bm * src_bytes * static_cast<double>(p.k) / sm_l2 * 1e6 : 0.0;
  choice.one_us = static_cast<double>(per_block) * k_tiles * k_tile_us + sweep_us + launch_us;
  const double row_bytes = static_cast<double>(p.m) * p.k * src_bytes + static_cast<double>(a_t_bytes);
  const bool in_registers = row_kernel_in_registers(p.k, static_cast<int64_t>(src_bytes));
  const double row_fraction = in_registers ? kRowKernelCopyFraction : kRowKernelSharedCopyFraction;
  const double row_us = row_bytes / (hbm_tbps * 1e12 * row_fraction) * 1e6 + launch_us;
  choice.split_us = row_us + split_gemm_us;
  auto fig = [](double x) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", x);
    return std::string(text);
  };
  const std::optional<bool> forced = forced_prologue_split();
  choice.split = forced ? *forced : choice.split_us < choice.one_us;
  choice.why = "one kernel " + fig(choice.one_us) + " us predicted (" + std::to_string(per_block) + " tiles per block × " +
               std::to_string(k_tiles) + " K tiles × " + fig(k_tile_us) + " us: MMA " + fig(mma_us) + ", L2 reads " + fig(load_us) +
               ", conversion " + fig(convert_us) + (pp.pre_sweep ? "; pre-sweep " + fig(sweep_us) + " us" : std::string()) +
               ") against two kernels " + fig(choice.split_us) + " us (the row kernel " + fig(row_us) + " us for " + fig(row_bytes / 1e6) +
               " MB at " + fig(row_fraction * 100) + " % of the copy rate" +
               (in_registers ? ", rows in registers" : ", rows in shared memory") + ", the plain skeleton " + fig(split_gemm_us) + " us): " +
               (forced ? std::string("forced by SOLDER_PROLOGUE_PLAN=") + (*forced ? "split" : "one")
                       : std::string(choice.split ? "two kernels are cheaper" : "one kernel is cheaper"));
  return choice;
}

}  // namespace solder
