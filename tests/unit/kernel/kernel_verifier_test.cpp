// The Kernel IR verifier (src/kernel/kernel_verifier.h): one test per illegal construct, each
// checking that the Error names the kernel, the statement (where the rule is about a statement)
// and the rule; and one legal program using every statement kind, which must be accepted.
//
// Each test starts from a small legal program and breaks one thing. Statements are numbered as the
// verifier and the executor number them: in order, nested bodies included, from 1 per kernel.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"
#include "kernel/kernel_verifier.h"
#include "../kernel_builders.h"

namespace solder {
namespace {

using namespace kernel_builders;

// The globals every test program has: x[8, 16] in, y[8, 16] out, t[8, 16] an intermediate.
KernelProgram program(std::vector<Kernel> kernels) {
  KernelProgram p;
  p.name = "verifier_test";
  p.globals = {GlobalTensor{"x", {8, 16}, DType::f32, GlobalRole::input},
               GlobalTensor{"y", {8, 16}, DType::f32, GlobalRole::output},
               GlobalTensor{"t", {8, 16}, DType::f32, GlobalRole::intermediate}};
  p.kernels = std::move(kernels);
  return p;
}

// A statement that writes the whole output y (so that "output never written" does not fire first).
Stmt write_y() { return map(at("y", {var("r"), var("c")}), real(0), over({{"r", 8}, {"c", 16}})); }

// ---- Checking ----------------------------------------------------------------------------------

// The verifier's Error message for `p`; a test failure (and "") when the verifier accepts it.
std::string rejection(const KernelProgram& p) {
  try {
    verify_kernel_program(p);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "the verifier accepted the program";
  return "";
}

// Expects `p` rejected with a message containing every one of `parts`.
void expect_rejected(const KernelProgram& p, const std::vector<std::string>& parts) {
  std::string message = rejection(p);
  for (auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing from: " << message;
}

void expect_accepted(const KernelProgram& p) {
  try {
    verify_kernel_program(p);
  } catch (const Error& e) {
    ADD_FAILURE() << "rejected: " << e.what();
  }
}

// =================================================================================================
// Clusters
// =================================================================================================

TEST(KernelVerifier, RejectsEveryCollectiveInAKernelWithoutACluster) {
  // Statement 3 is the collective (after two fills); the kernel has no cluster.
  struct Case {
    Stmt collective;
    std::string label;
  };
  std::vector<Case> cases = {
      {cluster_reduce(ReduceOp::sum, "a"), "statement 3 (cluster_reduce)"},
      {cluster_gather("a", "other"), "statement 3 (cluster_gather)"},
      {reduce_scatter(ReduceOp::sum, "a", "other"), "statement 3 (reduce_scatter)"},
      {dsm_shuffle("a", "other", 0), "statement 3 (dsm_shuffle)"},
      {all_exchange(false, "a", 0), "statement 3 (all_exchange)"},
      {barrier(true), "statement 3 (barrier)"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.label);
    auto p = program({kernel("lonely", {{"b", 4}}, 1, {buffer("a", {4}, Scope::shared), buffer("other", {4}, Scope::shared)},
                             {fill("a", 1), fill("other", 1), c.collective, write_y()})});
    expect_rejected(p, {"kernel 'lonely'", c.label, "collectives need a clustered kernel"});
  }
}

TEST(KernelVerifier, RejectsAClusterBufferWithoutACluster) {
  auto p = program({kernel("no_cluster", {{"b", 4}}, 1, {buffer("dsm", {4}, Scope::cluster)}, {write_y()})});
  expect_rejected(p, {"kernel 'no_cluster'", "cluster buffer 'dsm' in a kernel without a cluster"});
}

TEST(KernelVerifier, RejectsAClusterOf17Blocks) {
  auto p = program({kernel("huge_cluster", {{"b", 34}}, 17, {}, {write_y()})});
  expect_rejected(p, {"kernel 'huge_cluster'", "cluster of 17 blocks", "1 to 16 blocks"});
}

TEST(KernelVerifier, RejectsAClusterOf0Blocks) {
  auto p = program({kernel("empty_cluster", {{"b", 4}}, 0, {}, {write_y()})});
  expect_rejected(p, {"kernel 'empty_cluster'", "cluster of 0 blocks", "1 to 16 blocks"});
}

TEST(KernelVerifier, AcceptsAClusterOf16Blocks) {
  expect_accepted(program({kernel("widest_cluster", {{"a", 2}, {"b", 32}}, 16, {}, {write_y()})}));
}

TEST(KernelVerifier, RejectsAClusterThatDoesNotDivideTheLastGridDim) {
  // 4 × 6 = 24 blocks is a multiple of 4, but a cluster must lie within the last dim (6).
  auto p = program({kernel("ragged_cluster", {{"a", 4}, {"b", 6}}, 4, {}, {write_y()})});
  expect_rejected(p, {"kernel 'ragged_cluster'", "cluster of 4 blocks does not divide the last grid dim 'b' (6)"});
}

// =================================================================================================
// contract
// =================================================================================================

// A contract c[i, j] = Σ_k a[i, k] · b[k, j] over 8×4 tiles with K = 16; statements 1-2 fill a and b,
// statement 3 is the contract. `edit` changes the node before it is wrapped.
template <class Edit>
KernelProgram contract_program(Edit edit) {
  ContractNode n = *contract_tiles("c", 8, 4, 16, "a", "b").as<ContractNode>();
  edit(n);
  return program({kernel("matmul", {{"blk", 1}}, 1,
                         {buffer("c", {8, 4}, Scope::register_file), buffer("a", {8, 16}, Scope::shared),
                          buffer("b", {16, 4}, Scope::shared)},
                         {fill("a", 1), fill("b", 1), make_stmt(std::move(n)), write_y()})});
}

TEST(KernelVerifier, AcceptsAContractWithScaleBiasAndTwoTerms) {
  expect_accepted(contract_program([](ContractNode& n) {
    n.terms.push_back(n.terms[0]);
    n.scale = load("a", {var("i"), num(0)});
    n.bias = var("j") * num(2);
    n.type = MmaType::bf16;
  }));
}

TEST(KernelVerifier, RejectsAContractOperandThatUsesTheOtherSidesAxis) {
  auto p = contract_program([](ContractNode& n) { n.terms[0].a = load("a", {var("j"), var("k")}); });
  expect_rejected(p, {"kernel 'matmul'", "statement 3 (contract)", "operand a 'a[j, k]' uses the column axis 'j'"});
}

TEST(KernelVerifier, RejectsAContractScaleThatUsesTheReducedAxis) {
  auto p = contract_program([](ContractNode& n) { n.scale = var("k"); });
  expect_rejected(p, {"statement 3 (contract)", "variable 'k' is not in scope"});
}

TEST(KernelVerifier, RejectsAContractRowAxisOutsideItsDomain) {
  auto p = contract_program([](ContractNode& n) { n.row_axes = {"r"}; });
  expect_rejected(p, {"statement 3 (contract)", "row axis 'r' is not an axis of the domain"});
}

TEST(KernelVerifier, RejectsAContractWithoutTerms) {
  auto p = contract_program([](ContractNode& n) { n.terms.clear(); });
  expect_rejected(p, {"statement 3 (contract)", "contract has no product terms"});
}

// A paired contract: c = silu(pair) · value over a·b and a·b (the buffers `v` and `pv`, one f32 each).
KernelProgram paired_program(std::function<void(ContractNode&)> edit, DType pair_dtype = DType::f32) {
  ContractNode n = *contract_tiles("c", 8, 4, 16, "a", "b").as<ContractNode>();
  n.pair_terms = n.terms;
  n.value = "v";
  n.pair_value = "pv";
  n.epilogue = load("pv", {num(0)}) * load("v", {num(0)});
  edit(n);
  return program({kernel("paired", {{"blk", 1}}, 1,
                         {buffer("c", {8, 4}, Scope::register_file), buffer("a", {8, 16}, Scope::shared),
                          buffer("b", {16, 4}, Scope::shared), buffer("v", {1}, Scope::register_file),
                          buffer("pv", {1}, Scope::register_file, pair_dtype)},
                         {fill("a", 1), fill("b", 1), make_stmt(std::move(n)), write_y()})});
}

TEST(KernelVerifier, AcceptsAPairedContract) { expect_accepted(paired_program([](ContractNode&) {})); }

TEST(KernelVerifier, RejectsAPairedContractWithoutEpilogue) {
  auto p = paired_program([](ContractNode& n) {
    n.epilogue = Expr();
    n.value.clear();
  });
  expect_rejected(p, {"statement 3 (contract)", "a paired contract has no epilogue to read its pair value"});
}

TEST(KernelVerifier, RejectsAPairValueThatIsNotOneF32Element) {
  expect_rejected(paired_program([](ContractNode&) {}, DType::f16), {"contract pair value 'pv' is not one f32 element"});
}

TEST(KernelVerifier, RejectsAPairedOperandThatUsesTheOtherSidesAxis) {
  auto p = paired_program([](ContractNode& n) { n.pair_terms[0].b = load("b", {var("k"), var("i")}); });
  expect_rejected(p, {"paired operand b 'b[k, i]' uses the row axis 'i'"});
}

TEST(KernelVerifier, RejectsAPairValueWithoutPairedTerms) {
  auto p = paired_program([](ContractNode& n) { n.pair_terms.clear(); });
  expect_rejected(p, {"contract names a pair value 'pv' but has no paired terms"});
}

// =================================================================================================
// Collective payload sizes and groups
// =================================================================================================

TEST(KernelVerifier, RejectsAClusterGatherDestinationOfTheWrongSize) {
  // Cluster of 4, source of 3: the destination must hold 12.
  auto p = program({kernel("gather", {{"b", 4}}, 4, {buffer("src", {3}, Scope::cluster), buffer("dst", {8}, Scope::shared)},
                           {fill("src", 1), cluster_gather("src", "dst"), write_y()})});
  expect_rejected(p, {"kernel 'gather'", "statement 2 (cluster_gather)",
                      "cluster_gather destination holds 8 elements; expected cluster size × source = 12"});
}

TEST(KernelVerifier, RejectsAReduceScatterSourceOfTheWrongSize) {
  // Cluster of 4, destination of 3: the source must hold 12.
  auto p = program({kernel("scatter", {{"b", 4}}, 4, {buffer("src", {10}, Scope::cluster), buffer("dst", {3}, Scope::cluster)},
                           {fill("src", 1), reduce_scatter(ReduceOp::sum, "src", "dst"), write_y()})});
  expect_rejected(p, {"kernel 'scatter'", "statement 2 (reduce_scatter)",
                      "reduce_scatter source holds 10 elements; expected cluster size × destination = 12"});
}

TEST(KernelVerifier, RejectsAShuffleGroupThatDoesNotDivideTheCluster) {
  auto p = program({kernel("shuffle", {{"b", 4}}, 4, {buffer("src", {3}, Scope::cluster), buffer("dst", {3}, Scope::cluster)},
                           {fill("src", 1), dsm_shuffle("src", "dst", 3), write_y()})});
  expect_rejected(p, {"kernel 'shuffle'", "statement 2 (dsm_shuffle)", "group of 3 does not divide the cluster of 4"});
}

TEST(KernelVerifier, RejectsAnAllExchangeGroupThatDoesNotDivideTheCluster) {
  auto p = program({kernel("exchange", {{"b", 8}}, 8, {buffer("buf", {3}, Scope::cluster)},
                           {fill("buf", 1), all_exchange(true, "buf", 3), write_y()})});
  expect_rejected(p, {"kernel 'exchange'", "statement 2 (all_exchange)", "group of 3 does not divide the cluster of 8"});
}

// =================================================================================================
// Written before read
// =================================================================================================

TEST(KernelVerifier, RejectsABufferReadBeforeItIsWritten) {
  auto p = program({kernel("uninitialised", {{"b", 8}}, 1, {buffer("tile", {16}, Scope::shared)},
                           {copy(at("y", {var("b"), var("c")}), at("tile", {var("c")}), over({{"c", 16}}))})});
  expect_rejected(p, {"kernel 'uninitialised'", "statement 1 (copy)", "buffer 'tile' is read before it is written"});
}

TEST(KernelVerifier, RejectsABufferWrittenInOnlyOneBranchThenRead) {
  // 1 if, 2 fill (then branch only), 3 copy reads the tile.
  auto p = program({kernel("one_branch", {{"b", 8}}, 1, {buffer("tile", {16}, Scope::shared)},
                           {branch(equal(var("b"), num(0)), {fill("tile", 1)}),
                            copy(at("y", {var("b"), var("c")}), at("tile", {var("c")}), over({{"c", 16}}))})});
  expect_rejected(p, {"kernel 'one_branch'", "statement 3 (copy)", "buffer 'tile' is read before it is written"});
}

TEST(KernelVerifier, AcceptsABufferWrittenInBothBranches) {
  expect_accepted(program({kernel("both_branches", {{"b", 8}}, 1, {buffer("tile", {16}, Scope::shared)},
                                  {branch(equal(var("b"), num(0)), {fill("tile", 1)}, {fill("tile", 2)}),
                                   copy(at("y", {var("b"), var("c")}), at("tile", {var("c")}), over({{"c", 16}}))})}));
}

TEST(KernelVerifier, RejectsAGlobalIntermediateReadBeforeAnyKernelWritesIt) {
  // Kernel 'consume' reads t, which only the later kernel 'produce' writes.
  Domain all = over({{"r", 8}, {"c", 16}});
  auto p = program({kernel("consume", {{"b", 1}}, 1, {}, {copy(at("y", {var("r"), var("c")}), at("t", {var("r"), var("c")}), all)}),
                    kernel("produce", {{"b", 1}}, 1, {}, {copy(at("t", {var("r"), var("c")}), at("x", {var("r"), var("c")}), all)})});
  expect_rejected(p, {"kernel 'consume'", "statement 1 (copy)", "global 't' is read before any kernel writes it"});
}

TEST(KernelVerifier, RejectsWritingAnInput) {
  auto p = program({kernel("clobber", {{"b", 1}}, 1, {}, {write_y(), map(at("x", {num(0), num(0)}), real(1))})});
  expect_rejected(p, {"kernel 'clobber'", "statement 2 (map)", "writes the input 'x'"});
}

TEST(KernelVerifier, RejectsAnOutputThatIsNeverWritten) {
  auto p = program({kernel("idle", {{"b", 1}}, 1, {buffer("tile", {4}, Scope::shared)}, {fill("tile", 0)})});
  expect_rejected(p, {"output 'y' is never written"});
}

// =================================================================================================
// Variables in scope
// =================================================================================================

TEST(KernelVerifier, RejectsALoopVariableUsedAfterItsLoop) {
  // 1 fill, 2 for i, 3 map inside, 4 map outside the loop still uses i.
  auto p = program({kernel("escaped_loop_var", {{"b", 8}}, 1, {buffer("tile", {16}, Scope::shared)},
                           {fill("tile", 0), loop("i", num(0), num(16), {map(at("tile", {var("i")}), real(1))}),
                            map(at("y", {var("b"), var("i")}), load("tile", {var("i")})), write_y()})});
  expect_rejected(p, {"kernel 'escaped_loop_var'", "statement 4 (map)", "variable 'i' is not in scope"});
}

TEST(KernelVerifier, RejectsAQueueTagUsedBeforeThePop) {
  // Statement 3 pushes with the tag `item`, which only the pop at statement 4 binds.
  auto p = program({kernel("early_tag", {{"w", 2}}, 1,
                           {buffer("tile", {16}, Scope::register_file), buffer("q", {16}, Scope::queue, DType::f32, 2)},
                           {write_y(), fill("tile", 0), queue_push("q", "tile", var("item")), queue_pop("q", "tile", "item")})});
  expect_rejected(p, {"kernel 'early_tag'", "statement 3 (queue_push)", "variable 'item' is not in scope"});
}

TEST(KernelVerifier, RejectsAQueueTagUsedAfterTheBodyThatPoppedIt) {
  // The pop in the then branch (statement 3) binds `item` to the end of that branch only.
  auto p = program({kernel("stale_tag", {{"w", 2}}, 1,
                           {buffer("tile", {16}, Scope::register_file), buffer("q", {16}, Scope::queue, DType::f32, 2)},
                           {write_y(), branch(equal(var("w"), num(0)), {queue_pop("q", "tile", "item")}, {fill("tile", 0)}),
                            map(at("y", {var("item"), num(0)}), real(1))})});
  expect_rejected(p, {"kernel 'stale_tag'", "statement 5 (map)", "variable 'item' is not in scope"});
}

TEST(KernelVerifier, AcceptsAQueueTagUsedAfterThePop) {
  expect_accepted(program({kernel("tagged", {{"w", 2}}, 1,
                                  {buffer("tile", {16}, Scope::register_file), buffer("q", {16}, Scope::queue, DType::f32, 2)},
                                  {branch(equal(var("w"), num(0)), {fill("tile", 1), queue_push("q", "tile", num(3))},
                                          {queue_pop("q", "tile", "item"),
                                           copy(at("y", {var("item"), var("c")}), at("tile", {var("c")}), over({{"c", 16}}))}),
                                   write_y()})}));
}

// =================================================================================================
// Accesses, limits, queues, names
// =================================================================================================

TEST(KernelVerifier, RejectsAnAccessWithTheWrongRank) {
  auto p = program({kernel("rank", {{"b", 8}}, 1, {}, {copy(at("y", {var("b"), var("c")}), at("x", {var("c")}), over({{"c", 16}}))})});
  expect_rejected(p, {"kernel 'rank'", "statement 1 (copy)", "'x' has rank 2, accessed with 1 indices"});
}

TEST(KernelVerifier, RejectsALoadWithTheWrongRankInsideAnExpression) {
  auto p = program({kernel("load_rank", {{"b", 8}}, 1, {}, {map(at("y", {var("b"), var("c")}), load("x", {var("c")}), over({{"c", 16}}))})});
  expect_rejected(p, {"kernel 'load_rank'", "statement 1 (map)", "'x' has rank 2"});
}

TEST(KernelVerifier, RejectsMoreThan227KBOfSharedMemory) {
  // 128 KB shared + 100 KB cluster (DSM lives in shared memory too) = 228 KB.
  auto p = program({kernel("greedy", {{"b", 2}}, 2,
                           {buffer("big", {32 * 1024}, Scope::shared), buffer("dsm", {25 * 1024}, Scope::cluster),
                            buffer("regs", {64 * 1024}, Scope::register_file)},
                           {write_y()})});
  expect_rejected(p, {"kernel 'greedy'", "(228 KB) of shared memory per block", "at most 232448 bytes (227 KB)"});
}

TEST(KernelVerifier, AcceptsExactly227KBOfSharedMemory) {
  expect_accepted(program({kernel("full", {{"b", 2}}, 1, {buffer("big", {227 * 256}, Scope::shared)}, {write_y()})}));
}

TEST(KernelVerifier, SharedMemoryJustOverTheLimitSaysByHowMuch) {
  auto p = program({kernel("barely", {{"b", 2}}, 1, {buffer("big", {227 * 256 + 1}, Scope::shared)}, {write_y()})});
  std::string message = rejection(p);
  EXPECT_EQ(message.find("needs 227 KB"), std::string::npos) << message;
}

TEST(KernelVerifier, RejectsAQueueReadDirectlyInAMap) {
  auto p = program({kernel("peek", {{"b", 8}}, 1, {buffer("q", {16}, Scope::queue, DType::f32, 2)},
                           {map(at("y", {var("b"), var("c")}), load("q", {var("c")}), over({{"c", 16}}))})});
  expect_rejected(p, {"kernel 'peek'", "statement 1 (map)", "queue 'q' is read directly; use queue_pop"});
}

TEST(KernelVerifier, RejectsAQueueWrittenDirectlyByACopy) {
  auto p = program({kernel("poke", {{"b", 8}}, 1, {buffer("q", {16}, Scope::queue, DType::f32, 2)},
                           {write_y(), copy(at("q", {var("c")}), at("x", {var("b"), var("c")}), over({{"c", 16}}))})});
  expect_rejected(p, {"kernel 'poke'", "statement 2 (copy)", "queue 'q' is written directly; use queue_push"});
}

TEST(KernelVerifier, RejectsDuplicateBufferNames) {
  auto p = program({kernel("twins", {{"b", 8}}, 1, {buffer("tile", {16}, Scope::shared), buffer("tile", {8}, Scope::register_file)},
                           {write_y()})});
  expect_rejected(p, {"kernel 'twins'", "buffer 'tile' reuses a name"});
}

TEST(KernelVerifier, RejectsABufferNamedLikeAGridVariable) {
  auto p = program({kernel("clash", {{"b", 8}}, 1, {buffer("b", {16}, Scope::shared)}, {write_y()})});
  expect_rejected(p, {"kernel 'clash'", "buffer 'b' reuses a name"});
}

TEST(KernelVerifier, RejectsABufferNamedLikeAGlobal) {
  auto p = program({kernel("shadow", {{"b", 8}}, 1, {buffer("x", {16}, Scope::shared)}, {write_y()})});
  expect_rejected(p, {"kernel 'shadow'", "buffer 'x' has the name of a global tensor"});
}

TEST(KernelVerifier, RejectsALoopVariableThatShadowsAGridVariable) {
  auto p = program({kernel("shadowed", {{"b", 8}}, 1, {},
                           {write_y(), loop("b", num(0), num(2), {}), map(at("y", {var("b"), var("c")}), real(1), over({{"c", 16}}))})});
  expect_rejected(p, {"kernel 'shadowed'", "statement 2 (for)", "'b'"});
}

// =================================================================================================
// A legal program with every statement kind
// =================================================================================================

// Counts the statement kinds of a body, nested bodies included.
class KindCounter : public StmtVisitor {
 public:
  std::set<StmtKind> kinds;
  using StmtVisitor::visit;
#define SOLDER_COUNT_KIND(name)                 \
  void visit(const name##Node& node) override { \
    kinds.insert(StmtKind::name);               \
    StmtVisitor::visit(node);                   \
  }
  SOLDER_STMT_NODES(SOLDER_COUNT_KIND)
#undef SOLDER_COUNT_KIND
};

TEST(KernelVerifier, AcceptsALegalProgramWithEveryStatementKind) {
  // Kernel 'zero' initialises t for the atomic combine; kernel 'clustered' (grid 2 × 4, clusters of
  // 4) uses every tile op and collective; kernel 'pipeline' hands a tile through a queue.
  Domain row = over({{"j", 4}});
  Domain tile = over({{"i", 4}, {"j", 4}});
  Kernel zero = kernel("zero", {{"b", 1}}, 1, {}, {map(at("t", {var("r"), var("c")}), real(0), over({{"r", 8}, {"c", 16}}))});
  Kernel clustered = kernel(
      "clustered", {{"row", 2}, {"blk", 4}}, 4,
      {buffer("a", {4}, Scope::cluster), buffer("gathered", {16}, Scope::cluster), buffer("scattered", {4}, Scope::shared),
       buffer("ring", {4}, Scope::cluster), buffer("s", {4, 4}, Scope::shared), buffer("c", {4, 4}, Scope::register_file),
       buffer("acc", {4}, Scope::register_file, DType::bf16)},
      {fill("a", 0),
       loop("k", num(0), var("row") + num(1), {map(at("a", {var("j")}), load("a", {var("j")}) + load("x", {var("row"), var("k") * num(4) + var("j")}), row)}),
       branch(equal(mod(var("blk"), num(4)), num(0)), {fill("acc", 1)}, {fill("acc", 2)}),
       copy(at("s", {var("i"), var("j")}), at("x", {var("row") * num(4) + var("i"), var("blk") * num(4) + var("j")}), tile),
       contract_tiles("c", 4, 4, 4, "s", "s", false, true, false),
       contract_tiles("c", 4, 4, 4, "s", "s", true, false, true, MmaType::bf16),
       reduce_sum(at("acc", {var("i")}), load("c", {var("i"), var("j")}), over({{"i", 4}}), {{"j", 4}}, true),
       cluster_reduce(ReduceOp::max, "a"),
       cluster_gather("a", "gathered"),
       reduce_scatter(ReduceOp::sum, "gathered", "scattered"),
       dsm_shuffle("a", "ring", 2),
       all_exchange(true, "ring", 4),
       barrier(true),
       barrier(false),
       inter_cluster_reduce(ReduceOp::sum, at("t", {var("row"), var("blk") * num(4) + var("j")}), at("ring", {var("j")}), row),
       copy(at("y", {var("row"), var("blk") * num(4) + var("j")}), at("acc", {var("j")}), row)});
  Kernel pipeline = kernel("pipeline", {{"w", 2}}, 1,
                           {buffer("tile", {16}, Scope::register_file), buffer("q", {16}, Scope::queue, DType::f32, 2)},
                           {branch(equal(var("w"), num(0)),
                                   {copy(at("tile", {var("c")}), at("t", {num(0), var("c")}), over({{"c", 16}})),
                                    queue_push("q", "tile", num(5))},
                                   {queue_pop("q", "tile", "item"),
                                    copy(at("y", {var("item"), var("c")}), at("tile", {var("c")}), over({{"c", 16}}))})});
  KernelProgram p = program({zero, clustered, pipeline});
  expect_accepted(p);

  KindCounter counter;
  for (auto& k : p.kernels) counter.visit(k.body);
#define SOLDER_EXPECT_KIND(name) EXPECT_TRUE(counter.kinds.count(StmtKind::name)) << #name " is not exercised";
  SOLDER_STMT_NODES(SOLDER_EXPECT_KIND)
#undef SOLDER_EXPECT_KIND
}

}  // namespace
}  // namespace solder
