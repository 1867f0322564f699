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
//        agreement_reference --generated [--compile-only]   (the generated code against the executor, on a GPU;
//                                                             --compile-only: NVRTC and the executor, no GPU)
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../../unit/kernel_builders.h"
#include "agreement_cases.h"
#include "backend/cpu/executor.h"
#include "backend/cpu/inputs.h"
#include "backend/cuda/cuda_backend.h"
#include "runtime/runtime.h"
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

// Every collective and operator the tests cover, with the shuffle/exchange group (0: the whole cluster).
struct CollectiveRow {
  Collective collective;
  Op op;
  int group;
};
const CollectiveRow kCollectiveRows[] = {
    {Collective::cluster_reduce, Op::sum, 0},       {Collective::cluster_reduce, Op::max, 0},
    {Collective::cluster_reduce, Op::min, 0},       {Collective::cluster_gather, Op::none, 0},
    {Collective::reduce_scatter, Op::sum, 0},       {Collective::reduce_scatter, Op::max, 0},
    {Collective::reduce_scatter, Op::min, 0},       {Collective::dsm_shuffle, Op::none, 0},
    {Collective::dsm_shuffle, Op::none, 2},         {Collective::all_exchange, Op::add, 0},
    {Collective::all_exchange, Op::mul, 0},         {Collective::all_exchange, Op::add, 2},
    {Collective::inter_cluster_reduce, Op::sum, 0}, {Collective::inter_cluster_reduce, Op::max, 0},
    {Collective::inter_cluster_reduce, Op::min, 0},
};

Case make_case(int id, const CollectiveRow& row, ElementType type, unsigned cluster, unsigned group, unsigned payload_bytes, bool special) {
  Case c;
  c.id = id;
  c.collective = row.collective;
  c.op = row.op;
  c.type = type;
  c.cluster = cluster;
  c.group = group;
  c.payload_bytes = payload_bytes;
  c.special = special;
  return c;
}

// The case list: every collective x C in {2, 4, 8} x op x {f32, bf16, f16} x {1, 16} KB per block, then the
// special-value cases (the same rows, types and cluster sizes at 1 KB; special_values). 16 KB: a
// cluster_gather at C = 8 needs 16 + 128 KB of cluster buffers, under the Kernel IR's 227 KB per block; with
// the device half's 2 KB slots it takes several rounds at every C.
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  auto add = [&](const CollectiveRow& row, ElementType type, unsigned cluster, unsigned payload, bool special) {
    unsigned group = row.group == 0 ? cluster : static_cast<unsigned>(row.group);
    if (row.group != 0 && group >= cluster) return;  // G = 2 at C = 2 is the G = C row
    cases.push_back(make_case(static_cast<int>(cases.size()), row, type, cluster, group, payload, special));
  };
  for (const CollectiveRow& row : kCollectiveRows)
    for (ElementType type : {ElementType::f32, ElementType::bf16, ElementType::f16})
      for (unsigned cluster : {2u, 4u, 8u})
        for (unsigned kb : {1u, 16u}) add(row, type, cluster, kb * 1024, false);
  for (const CollectiveRow& row : kCollectiveRows)
    for (ElementType type : {ElementType::f32, ElementType::bf16, ElementType::f16})
      for (unsigned cluster : {2u, 4u, 8u}) add(row, type, cluster, 1024, true);
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
// elements gets value i / 5 in the even sources and i % 5 in the odd ones, so that every ordered pair meets in
// a combine (and, at C >= 4, again in the other order within the same combine). Sources: the ranks of a
// cluster; for inter_cluster_reduce (which combines across clusters), the clusters. For inter_cluster_reduce
// the initial global `init` holds the identity at i < 25 (so the pairs decide), and the five special values
// at i = 25..29, combined with normal values from the blocks (a NaN already in the global must stay NaN).
void special_values(const Case& c, HostTensor& x, HostTensor& init) {
  const double values[5] = {0.0, -0.0, INFINITY, -INFINITY, std::numeric_limits<double>::quiet_NaN()};
  const bool across = c.collective == Collective::inter_cluster_reduce;
  for (unsigned b = 0; b < c.blocks(); ++b) {
    unsigned source = across ? b / c.cluster : b % c.cluster;
    for (unsigned j = 0; j < c.in_count(); ++j) {
      unsigned i = j % c.count();
      if (i < 25) x.values[size_t{b} * c.in_count() + j] = values[source % 2 == 0 ? i / 5 : i % 5];
    }
  }
  if (!across) return;
  const double identity = c.op == Op::sum ? -0.0 : c.op == Op::max ? -INFINITY : INFINITY;
  for (unsigned r = 0; r < c.cluster; ++r)
    for (unsigned i = 0; i < 30 && i < c.count(); ++i) init.values[size_t{r} * c.count() + i] = i < 25 ? identity : values[i - 25];
}

// `suffix` names the globals and kernels (x<suffix>, y<suffix>, ...) so that several cases can share one
// program (the generated-code mode).
KernelProgram build_program(const Case& c, const std::string& suffix = "") {
  const DType t = dtype_of(c.type);
  const int64_t blocks = c.blocks(), in_count = c.in_count(), count = c.count(), out_count = c.out_count();
  const int cluster = static_cast<int>(c.cluster), group = static_cast<int>(c.group);
  KernelProgram p;
  p.name = "agreement";
  p.globals.push_back(input("x" + suffix, {blocks, in_count}, t));
  auto load_tile = copy(at("tile", {var("i")}), at("x" + suffix, {var("blk"), var("i")}), over({{"i", in_count}}));
  auto store = [&](const std::string& from) {
    return copy(at("y" + suffix, {var("blk"), var("i")}), at(from, {var("i")}), over({{"i", out_count}}));
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
      p.globals.push_back(input("init" + suffix, {int64_t{cluster}, count}, t));
      p.globals.push_back(output("y" + suffix, {int64_t{cluster}, count}, t));
      p.kernels.push_back(kernel("init" + suffix, {{"r", cluster}}, 1, {},
                                 {copy(at("y" + suffix, {var("r"), var("i")}), at("init" + suffix, {var("r"), var("i")}), over({{"i", count}}))}));
      buffers[0].scope = Scope::shared;  // like the device test: a shared-memory tile (bulk reduce or atomics)
      body.push_back(inter_cluster_reduce(reduce_op_of(c.op), at("y" + suffix, {mod(var("blk"), num(cluster)), var("i")}),
                                          at("tile", {var("i")}), over({{"i", count}})));
      p.kernels.push_back(kernel("collective" + suffix, {{"blk", blocks}}, cluster, buffers, body));
      return p;
    }
  }
  p.globals.push_back(output("y" + suffix, {blocks, out_count}, t));
  p.kernels.push_back(kernel("collective" + suffix, {{"blk", blocks}}, cluster, buffers, body));
  return p;
}

void write_floats(const std::string& path, const std::vector<double>& values) {
  std::vector<float> data(values.begin(), values.end());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(float)));
  if (!out) throw Error("cannot write " + path);
}

}  // namespace

// ---- --generated: the CUDA code generator's collectives against the executor --------------------------------
//
// The same kind of Kernel IR programs (build_program), compiled by the CUDA code generator (whose collectives
// call the device library: src/backend/cuda/kernel_writer_cluster.cpp) and run through the CUDA backend, as
// `solder run --backend cuda` does, against the CPU executor on the same inputs. Unlike the cases above, the
// element counts need not be whole 16-byte packets (3 per block: the generated code pads them), C = 3 is
// included, and payloads of 1030 elements take several mailbox rounds. Rule: bit for bit (NaN agrees with NaN,
// +0 and -0 differ), except inter_cluster_reduce(sum), whose order is unspecified: within 2 (k + 1) eps_f32
// sum|terms|. Cases share programs (a dozen per program) to keep NVRTC time down.
std::vector<Case> generated_cases() {
  std::vector<Case> cases;
  for (const CollectiveRow& row : kCollectiveRows)
    for (ElementType type : {ElementType::f32, ElementType::bf16})
      for (unsigned cluster : {2u, 3u, 4u}) {
        if (type == ElementType::bf16 && (cluster != 4 || row.collective == Collective::inter_cluster_reduce)) continue;
        unsigned group = row.group == 0 ? cluster : static_cast<unsigned>(row.group);
        if (row.group != 0 && (group >= cluster || cluster % group != 0)) continue;
        for (unsigned segment : {3u, 1030u, 64u}) {
          unsigned in_count = row.collective == Collective::reduce_scatter ? segment * cluster : segment;
          cases.push_back(make_case(static_cast<int>(cases.size()), row, type, cluster, group, in_count * agreement::type_bytes(type),
                                    segment == 64));
        }
      }
  return cases;
}

bool same_value(double got, double want) {
  float g = static_cast<float>(got), w = static_cast<float>(want);
  if (std::isnan(g) || std::isnan(w)) return std::isnan(g) && std::isnan(w);
  uint32_t gb, wb;
  std::memcpy(&gb, &g, 4);
  std::memcpy(&wb, &w, 4);
  return gb == wb;
}

int run_generated(bool compile_only) {
  std::string why;
  if (!compile_only && !gpu_available(&why)) {
    std::fprintf(stderr, "agreement_reference --generated: no GPU (%s)\n", why.c_str());
    return 2;
  }
  const std::vector<Case> cases = generated_cases();
  constexpr size_t kPerProgram = 12;
  struct Batch {
    KernelProgram program;
    TensorSet inputs;
    std::vector<Case> cases;
  };
  std::vector<Batch> batches;
  for (size_t first = 0; first < cases.size(); first += kPerProgram) {
    Batch b;
    b.program.name = "agreement_generated_" + std::to_string(batches.size());
    for (size_t k = first; k < std::min(cases.size(), first + kPerProgram); ++k) {
      const Case& c = cases[k];
      const std::string suffix = "_" + std::to_string(c.id);
      KernelProgram one = build_program(c, suffix);
      for (auto& g : one.globals) b.program.globals.push_back(g);
      for (auto& kernel : one.kernels) b.program.kernels.push_back(kernel);
      TensorSet drawn = draw_inputs(c, 20261123u + static_cast<uint64_t>(c.id));
      if (c.special) special_values(c, drawn.at("x"), drawn.at("init"));
      for (const char* name : {"x", "init"}) {
        if (std::string(name) == "init" && c.collective != Collective::inter_cluster_reduce) continue;
        HostTensor t = drawn.at(name);
        t.name = name + suffix;
        b.inputs[t.name] = t;
      }
      b.cases.push_back(c);
    }
    batches.push_back(std::move(b));
  }
  // NVRTC for every program at once (the cache then serves run_on_gpu).
  {
    auto start = std::chrono::steady_clock::now();
    std::vector<std::future<void>> compiles;
    for (auto& b : batches)
      compiles.push_back(std::async(std::launch::async, [&b] {
        runtime::compile_cuda(generate_cuda(b.program).source, b.program.name + ".cu");
      }));
    for (auto& f : compiles) f.get();
    std::printf("generated code: %zu cases in %zu programs, compiled in %.1f s\n", cases.size(), batches.size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (compile_only) {
    for (auto& b : batches) execute_kernel_program(b.program, b.inputs);
    std::printf("generated code: compiled, and the executor ran every program (--compile-only: nothing ran on a GPU)\n");
    return 0;
  }
  int agree = 0, differ = 0;
  std::map<std::string, std::map<unsigned, std::array<int, 2>>> table;
  std::vector<std::string> rows;
  for (auto& b : batches) {
    ExecutionResult expected = execute_kernel_program(b.program, b.inputs);
    GpuRunResult got = run_on_gpu(b.program, b.inputs);
    for (const Case& c : b.cases) {
      const std::string y = "y_" + std::to_string(c.id);
      const HostTensor& want = expected.outputs.at(y);
      const HostTensor& have = got.outputs.at(y);
      size_t bad = 0, first_bad = 0;
      for (size_t i = 0; i < want.values.size(); ++i) {
        if (same_value(have.values[i], want.values[i])) continue;
        if (!c.exact()) {
          // inter_cluster_reduce(sum): element (r, e) combines init[r, e] and rank r of every cluster.
          const size_t r = i / c.count(), e = i % c.count();
          double magnitude = std::fabs(b.inputs.at("init_" + std::to_string(c.id)).values[i]);
          for (unsigned k = 0; k < c.clusters(); ++k)
            magnitude += std::fabs(b.inputs.at("x_" + std::to_string(c.id)).values[(k * c.cluster + r) * c.in_count() + e]);
          if (std::fabs(have.values[i] - want.values[i]) <= 2.0 * (c.clusters() + 1) * 0x1p-23 * magnitude) continue;
        }
        if (bad++ == 0) first_bad = i;
      }
      const bool ok = bad == 0 && got.unwritten.at(y) == 0;
      ok ? ++agree : ++differ;
      const std::string row = c.row() + " " + agreement::type_name(c.type) + (c.special ? " special" : "");
      if (!table.count(row)) rows.push_back(row);
      table[row][c.cluster][ok ? 0 : 1]++;
      if (!ok)
        std::printf("DIFF case %d %s %s C=%u, %u elements per block%s: %zu of %zu elements differ, %lld unwritten; element %zu: "
                    "generated %.9g, executor %.9g\n",
                    c.id, c.row().c_str(), agreement::type_name(c.type), c.cluster, c.in_count(), c.special ? " (special values)" : "",
                    bad, want.values.size(), static_cast<long long>(got.unwritten.at(y)), first_bad, have.values[first_bad],
                    want.values[first_bad]);
    }
    std::fflush(stdout);
  }
  std::printf("\nGenerated code (CUDA backend) vs CPU executor, 3 / 1030 elements per block and special values (64): agreeing / cases\n");
  std::printf("| collective, dtype | C=2 | C=3 | C=4 |\n|---|---|---|---|\n");
  for (const std::string& row : rows) {
    std::printf("| %s |", row.c_str());
    for (unsigned C : {2u, 3u, 4u}) {
      auto it = table[row].find(C);
      if (it == table[row].end()) std::printf(" - |");
      else std::printf(" %s%d/%d%s |", it->second[1] ? "**" : "", it->second[0], it->second[0] + it->second[1], it->second[1] ? "**" : "");
    }
    std::printf("\n");
  }
  std::printf("\ngenerated code: %d of %d cases agree with the executor, %d differ\n", agree, agree + differ, differ);
  return differ ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--generated") {
    try {
      return run_generated(argc == 3 && std::string(argv[2]) == "--compile-only");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "agreement_reference --generated: %s\n", e.what());
      return 1;
    }
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: agreement_reference OUT_DIR | --generated\n");
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
      if (c.special) special_values(c, inputs.at("x"), inputs.at("init"));
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
