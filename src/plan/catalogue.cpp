#include "plan/catalogue.h"

#include <algorithm>

#include "support/json.h"

namespace solder {

namespace {

// The skeleton's shapes. BM: 64 (one m64 per consumer, small M) to 256; BN: every wgmma N worth a tile from
// 16 to 256; BK: the three widths whose rows are 128 bytes for some MMA type (the 128-byte swizzle);
// stages 2-16 (shared memory bounds the deep ones: feasibility's smem_capacity); one or two consumer
// warpgroups; clusters up to 2×2, 4×1 / 1×4 and 2×4 (multicast of A along N and of B along M); split-K 1-16.
const GemmCatalogueAxes kGemmCatalogueAxes = {
    /*bm=*/{64, 128, 192, 256},
    /*bn=*/{16, 32, 64, 96, 128, 160, 192, 224, 256},
    /*bk=*/{32, 64, 128},
    /*stages=*/{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
    /*consumers=*/{1, 2},
    /*clusters=*/{{1, 1}, {2, 1}, {1, 2}, {2, 2}, {4, 1}, {1, 4}, {2, 4}},
    /*split_k=*/{1, 2, 3, 4, 5, 6, 8, 12, 16},
};

std::string join(const std::vector<int>& values) {
  std::string text;
  for (int v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

}  // namespace

int GemmConfig::stage_bytes() const { return (bm + bn) * bk * mma_type_bytes(type); }

int GemmConfig::smem_bytes(DType) const { return stages * stage_bytes() + stages * 2 * 8 + 1024; }

bool in_device_skeleton(const GemmConfig& c) {
  const bool schedule = c.pingpong ? c.bm == 64 && c.consumers == 2 && c.split_k == 1 : c.consumers == c.bm / 64;
  return (c.bm == 64 || c.bm == 128) && schedule && c.bn % 16 == 0 &&
         c.bn >= 16 && c.bn <= 256 && c.bk * mma_type_bytes(c.type) == 128 && c.stages >= 2 && c.stages <= 16 &&
         c.split_k >= 1 && c.split_k <= 16 &&
         (c.cluster_m == 1 || c.cluster_m == 2) && (c.cluster_n == 1 || c.cluster_n == 2 || c.cluster_n == 4);
}

bool skeleton_cluster_fits(const GemmProblem& p, const GemmConfig& c) {
  // An N-major B: its 64-wide boxes dealt out, or (BN/64 odd) each box's K rows split (Config::BSplitK).
  if (c.cluster_m > 1 && p.b_k_major && ((c.bn / c.cluster_m) % 8 != 0 || c.bn % c.cluster_m != 0)) return false;
  if (c.cluster_n > 1 && (p.a_k_major ? (c.bm / c.cluster_n) % 8 != 0 || c.bm % c.cluster_n != 0 : (c.bm / 64) % c.cluster_n != 0))
    return false;
  return true;
}

int GemmConfig::accumulator_registers() const { return rows_per_consumer() * bn / 128; }

int GemmConfig::launch_registers() const {
  const int consumer = std::min(255, (accumulator_registers() + kConsumerOverheadRegisters + 7) / 8 * 8);
  const int total = 128 * kProducerRegisters + 128 * consumers * consumer;
  return std::min(255, (total / threads() + 7) / 8 * 8);
}

std::string config_name(const GemmConfig& c) {
  return std::string(mma_type_name(c.type)) + " " + std::to_string(c.bm) + "x" + std::to_string(c.bn) + "x" +
         std::to_string(c.bk) + " s" + std::to_string(c.stages) + " w" + std::to_string(c.consumers) + " c" +
         std::to_string(c.cluster_m) + "x" + std::to_string(c.cluster_n) + " k" + std::to_string(c.split_k) +
         (c.pingpong ? " pingpong" : "");
}

const GemmCatalogueAxes& gemm_catalogue_axes() { return kGemmCatalogueAxes; }

std::vector<GemmConfig> gemm_catalogue(MmaType type) {
  const GemmCatalogueAxes& axes = kGemmCatalogueAxes;
  std::vector<GemmConfig> configs;
  for (int bm : axes.bm)
    for (int bn : axes.bn)
      for (int bk : axes.bk)
        for (int stages : axes.stages)
          for (int consumers : axes.consumers)
            for (auto [cm, cn] : axes.clusters)
              for (int split : axes.split_k) {
                GemmConfig c;
                c.type = type;
                c.bm = bm;
                c.bn = bn;
                c.bk = bk;
                c.stages = stages;
                c.consumers = consumers;
                c.cluster_m = cm;
                c.cluster_n = cn;
                c.split_k = split;
                c.pingpong = bm == 64 && consumers == 2;  // the only schedule that point can run
                configs.push_back(c);
              }
  return configs;
}

std::string catalogue_json() {
  const GemmCatalogueAxes& axes = kGemmCatalogueAxes;
  JsonWriter json;
  json.begin_object();
  auto list = [&json](const char* name, const std::vector<int>& values) {
    json.key(name).begin_array();
    for (int v : values) json.value(v);
    json.end_array();
  };
  list("bm", axes.bm);
  list("bn", axes.bn);
  list("bk", axes.bk);
  list("stages", axes.stages);
  list("consumers", axes.consumers);
  json.key("clusters").begin_array();
  for (auto [m, n] : axes.clusters) json.begin_array().value(m).value(n).end_array();
  json.end_array();
  list("split_k", axes.split_k);
  json.key("types").begin_array();
  for (MmaType t : {MmaType::bf16, MmaType::f16, MmaType::f8e4m3, MmaType::f8e5m2, MmaType::tf32}) json.value(mma_type_name(t));
  json.end_array();
  json.key("configurations_per_type").value(static_cast<int64_t>(gemm_catalogue(MmaType::bf16).size()));
  json.key("name_format").value("TYPE BMxBNxBK sSTAGES wCONSUMERS cCLUSTER_MxCLUSTER_N kSPLIT_K[ pingpong]");
  json.key("pingpong").value("BM 64 with 2 consumers: the ping-pong schedule (each warpgroup a whole tile, in turn)");
  json.end_object();
  return json.str();
}

std::string catalogue_text() {
  const GemmCatalogueAxes& axes = kGemmCatalogueAxes;
  std::string clusters;
  for (auto [m, n] : axes.clusters) clusters += (clusters.empty() ? "" : ", ") + std::to_string(m) + "x" + std::to_string(n);
  return "GEMM skeleton catalogue (the product of these axes, per MMA type bf16 f16 e4m3 e5m2 tf32):\n"
         "  BM         " + join(axes.bm) + "\n"
         "  BN         " + join(axes.bn) + "\n"
         "  BK         " + join(axes.bk) + "\n"
         "  stages     " + join(axes.stages) + "\n"
         "  consumers  " + join(axes.consumers) + " warpgroups (plus one producer); BM 64 with 2: the ping-pong schedule\n"
         "  cluster    " + clusters + " (M x N)\n"
         "  split-K    " + join(axes.split_k) + "\n"
         "  " + std::to_string(gemm_catalogue(MmaType::bf16).size()) + " configurations per type before the feasibility rules\n"
         "  names: TYPE BMxBNxBK sSTAGES wCONSUMERS cMxN kSPLIT, e.g. \"bf16 128x256x64 s4 w2 c2x1 k1\"\n";
}

}  // namespace solder
