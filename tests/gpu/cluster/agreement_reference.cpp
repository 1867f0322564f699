// Host half of the agreement test between the Kernel IR / CPU executor and the device collectives (issue #6,
// "host-side semantics"). For every case of agreement_cases.h it builds a small Kernel IR program
//
//   kernel collective, grid blk < clusters * C, cluster C:
//     copy tile[i] = x[blk, i]                  (tile: a cluster buffer of the block's input)
//     <the collective>                          (in place, or tile -> result)
//     copy y[blk, i] = tile or result [i]
//
// (inter_cluster_reduce: a first kernel copies y = init, the second combines every block's tile into
// y[blk % C, i]), draws x (and init) with the project's own generator (make_inputs, a fixed seed per case),
// runs it on the CPU executor and writes, into OUT_DIR:
//   manifest.txt      one line per case (agreement_cases.h)
//   caseNNN.x         the input, float32 little-endian, [blocks][in_count] (values already rounded to T)
//   caseNNN.init      inter_cluster_reduce only: y's initial value, [C][count]
//   caseNNN.y         the executor's output, float32, [blocks][out_count] (inter: [C][count])
// agreement.cu runs the device library on the same files and compares.
//
// Usage: agreement_reference OUT_DIR
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../../unit/kernel_builders.h"
#include "agreement_cases.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "ir/diagnostics.h"

namespace {

using namespace solder;
using namespace solder::kernel_builders;
using agreement::Case;
using agreement::Collective;
using agreement::ElementType;
using agreement::Op;

DType dtype_of(ElementType t) { return t == ElementType::f32 ? DType::f32 : t == ElementType::bf16 ? DType::bf16 : DType::f16; }

ReduceOp reduce_op_of(Op op) { return op == Op::sum ? ReduceOp::sum : op == Op::max ? ReduceOp::max : ReduceOp::min; }

// The case list: every collective x C in {2, 4, 8} x op x {f32, bf16, f16} x {1, 16} KB per block, then the
// special-value cases (f32 and bf16, C = 2, 1 KB: the two sources are the whole cluster, so each special pair
// is the whole combine). 16 KB: a cluster_gather at C = 8 needs 16 + 128 KB of cluster buffers, under the
// Kernel IR's 227 KB per block; with the device half's 2 KB slots it takes several rounds at every C.
std::vector<Case> all_cases() {
  struct Row {
    Collective collective;
    Op op;
    int group;  // 0: the whole cluster
  };
  const Row rows[] = {
      {Collective::cluster_reduce, Op::sum, 0},       {Collective::cluster_reduce, Op::max, 0},
      {Collective::cluster_reduce, Op::min, 0},       {Collective::cluster_gather, Op::none, 0},
      {Collective::reduce_scatter, Op::sum, 0},       {Collective::reduce_scatter, Op::max, 0},
      {Collective::reduce_scatter, Op::min, 0},       {Collective::dsm_shuffle, Op::none, 0},
      {Collective::dsm_shuffle, Op::none, 2},         {Collective::all_exchange, Op::add, 0},
      {Collective::all_exchange, Op::mul, 0},         {Collective::all_exchange, Op::add, 2},
      {Collective::inter_cluster_reduce, Op::sum, 0}, {Collective::inter_cluster_reduce, Op::max, 0},
      {Collective::inter_cluster_reduce, Op::min, 0},
  };
  std::vector<Case> cases;
  auto add = [&](const Row& row, ElementType type, unsigned cluster, unsigned payload, bool special) {
    unsigned group = row.group == 0 ? cluster : static_cast<unsigned>(row.group);
    if (row.group != 0 && group >= cluster) return;  // G = 2 at C = 2 is the G = C row
    Case c;
    c.id = static_cast<int>(cases.size());
    c.collective = row.collective;
    c.op = row.op;
    c.type = type;
    c.cluster = cluster;
    c.group = group;
    c.payload_bytes = payload;
    c.special = special;
    cases.push_back(c);
  };
  for (const Row& row : rows)
    for (ElementType type : {ElementType::f32, ElementType::bf16, ElementType::f16})
      for (unsigned cluster : {2u, 4u, 8u})
        for (unsigned kb : {1u, 16u}) add(row, type, cluster, kb * 1024, false);
  for (const Row& row : rows)
    if (row.op != Op::mul)
      for (ElementType type : {ElementType::f32, ElementType::bf16}) add(row, type, 2, 1024, true);
  return cases;
}

// Inputs from the project's generator (backend/cpu/inputs.h): a one-line program declares x (and init) with
// the distribution, make_inputs draws them from (seed, name) and rounds them to the dtype.
TensorSet draw_inputs(const Case& c, uint64_t seed) {
  const char* type = agreement::type_name(c.type);
  // all_exchange(mul): uniform(0.5, 1.5), so that a product over 8 blocks stays near 1 (as the device tests).
  std::string dist = c.op == Op::mul ? " ~ uniform(0.5, 1.5)" : "";
  std::string text = "program agreement\n";
  text += "dim B = " + std::to_string(c.blocks()) + ", N = " + std::to_string(c.in_count()) + ", R = " +
          std::to_string(c.cluster) + ", M = " + std::to_string(c.count()) + "\n";
  text += "in x[B, N] : " + std::string(type) + dist + "\n";
  text += "in init[R, M] : " + std::string(type) + "\n";
  text += "out y[b, n] : " + std::string(type) + " = x[b, n]\n";
  text += "out z[r, m] : " + std::string(type) + " = init[r, m]\n";
  auto program = std::make_shared<const Program>(parse_program(text, "agreement.sol"));
  return make_inputs(bind_program(program, SizeChoice{}), seed);
}

// Overwrites some input elements with +0, -0, +inf, -inf and NaN: element i < 25 of each segment of `count`
// elements gets value i / 5 in the first source and i % 5 in the second, so that every ordered pair meets in
// one combine. Sources: ranks 0 and 1 of every cluster; for inter_cluster_reduce (which combines across
// clusters), the blocks of clusters 0 and 1.
void special_values(const Case& c, HostTensor& x) {
  const double values[5] = {0.0, -0.0, INFINITY, -INFINITY, std::numeric_limits<double>::quiet_NaN()};
  const bool across = c.collective == Collective::inter_cluster_reduce;
  for (unsigned b = 0; b < c.blocks(); ++b) {
    unsigned source = across ? b / c.cluster : b % c.cluster;
    if (source > 1) continue;
    for (unsigned j = 0; j < c.in_count(); ++j) {
      unsigned i = j % c.count();
      if (i < 25) x.values[size_t{b} * c.in_count() + j] = values[source == 0 ? i / 5 : i % 5];
    }
  }
}

KernelProgram build_program(const Case& c) {
  const DType t = dtype_of(c.type);
  const int64_t blocks = c.blocks(), in_count = c.in_count(), count = c.count(), out_count = c.out_count();
  const int cluster = static_cast<int>(c.cluster), group = static_cast<int>(c.group);
  KernelProgram p;
  p.name = "agreement";
  p.globals.push_back(input("x", {blocks, in_count}, t));
  auto load_tile = copy(at("tile", {var("i")}), at("x", {var("blk"), var("i")}), over({{"i", in_count}}));
  auto store = [&](const std::string& from) {
    return copy(at("y", {var("blk"), var("i")}), at(from, {var("i")}), over({{"i", out_count}}));
  };
  std::vector<Buffer> buffers = {buffer("tile", {in_count}, Scope::cluster, t)};
  Block body = {load_tile};
  switch (c.collective) {
    case Collective::cluster_reduce:
      body.push_back(cluster_reduce(reduce_op_of(c.op), "tile"));
      body.push_back(store("tile"));
      break;
    case Collective::all_exchange:
      body.push_back(all_exchange(c.op == Op::mul, "tile", group == cluster ? 0 : group));
      body.push_back(store("tile"));
      break;
    case Collective::cluster_gather:
      buffers.push_back(buffer("result", {out_count}, Scope::cluster, t));
      body.push_back(cluster_gather("tile", "result"));
      body.push_back(store("result"));
      break;
    case Collective::reduce_scatter:
      buffers.push_back(buffer("result", {out_count}, Scope::cluster, t));
      body.push_back(reduce_scatter(reduce_op_of(c.op), "tile", "result"));
      body.push_back(store("result"));
      break;
    case Collective::dsm_shuffle:
      buffers.push_back(buffer("result", {out_count}, Scope::cluster, t));
      body.push_back(dsm_shuffle("tile", "result", group == cluster ? 0 : group));
      body.push_back(store("result"));
      break;
    case Collective::inter_cluster_reduce: {
      p.globals.push_back(input("init", {int64_t{cluster}, count}, t));
      p.globals.push_back(output("y", {int64_t{cluster}, count}, t));
      p.kernels.push_back(kernel("init", {{"r", cluster}}, 1, {},
                                 {copy(at("y", {var("r"), var("i")}), at("init", {var("r"), var("i")}), over({{"i", count}}))}));
      buffers[0].scope = Scope::shared;  // like the device test: a shared-memory tile (bulk reduce or atomics)
      body.push_back(inter_cluster_reduce(reduce_op_of(c.op), at("y", {mod(var("blk"), num(cluster)), var("i")}),
                                          at("tile", {var("i")}), over({{"i", count}})));
      p.kernels.push_back(kernel("collective", {{"blk", blocks}}, cluster, buffers, body));
      return p;
    }
  }
  p.globals.push_back(output("y", {blocks, out_count}, t));
  p.kernels.push_back(kernel("collective", {{"blk", blocks}}, cluster, buffers, body));
  return p;
}

void write_floats(const std::string& path, const std::vector<double>& values) {
  std::vector<float> data(values.begin(), values.end());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(float)));
  if (!out) throw Error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: agreement_reference OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::ofstream manifest(dir + "/manifest.txt");
  if (!manifest) {
    std::fprintf(stderr, "agreement_reference: cannot write %s/manifest.txt (does the directory exist?)\n", dir.c_str());
    return 2;
  }
  int written = 0;
  try {
    for (const Case& c : all_cases()) {
      TensorSet inputs = draw_inputs(c, 20261122u + static_cast<uint64_t>(c.id));
      if (c.special) special_values(c, inputs.at("x"));
      TensorSet program_inputs = {{"x", inputs.at("x")}};
      if (c.collective == Collective::inter_cluster_reduce) program_inputs["init"] = inputs.at("init");
      ExecutionResult result = execute_kernel_program(build_program(c), program_inputs);
      if (result.unwritten.at("y") != 0) {
        std::fprintf(stderr, "agreement_reference: case %d (%s): the executor left %lld output elements unwritten\n", c.id,
                     c.row().c_str(), static_cast<long long>(result.unwritten.at("y")));
        return 1;
      }
      write_floats(dir + "/" + c.file("x"), program_inputs.at("x").values);
      if (c.collective == Collective::inter_cluster_reduce) write_floats(dir + "/" + c.file("init"), program_inputs.at("init").values);
      write_floats(dir + "/" + c.file("y"), result.outputs.at("y").values);
      manifest << agreement::manifest_line(c) << "\n";
      ++written;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "agreement_reference: %s\n", e.what());
    return 1;
  }
  std::printf("agreement_reference: %d cases written to %s\n", written, dir.c_str());
  return 0;
}
