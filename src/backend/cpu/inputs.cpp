#include "backend/cpu/inputs.h"

#include <algorithm>
#include <cmath>

#include "solder/random_inputs.cuh"
#include "support/parallel.h"

namespace solder {
namespace {

// splitmix64 is a counter: the n-th draw depends only on the seed and n, so a chunk of a tensor can
// start its own generator at its first element (skip) and the values do not depend on the chunking.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  void skip(uint64_t draws) { state_ += draws * 0x9E3779B97F4A7C15ull; }
  uint64_t next() {  // splitmix64
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  int64_t integer(int64_t lo, int64_t hi) {  // [lo, hi)
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo));
  }

 private:
  uint64_t state_;
};

uint64_t hash_name(const std::string& name, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The distribution with the defaults by dtype applied: floats normal(0, 1), i32 randint(0, 16), bool
// bernoulli(0.5).
InputDistribution resolved_distribution(const TensorInfo& info) {
  using K = InputDistribution::Kind;
  InputDistribution dist = info.input->distribution;
  if (dist.kind == K::standard) {
    if (info.dtype == DType::i32) dist = {K::randint, {0, 16}};
    else if (info.dtype == DType::boolean) dist = {K::bernoulli, {0.5}};
    else dist = {K::normal, {0, 1}};
  }
  return dist;
}

}  // namespace

HostTensor make_input(const TensorInfo& info, uint64_t seed) {
  HostTensor t;
  t.name = info.name;
  t.shape = info.shape;
  t.dtype = info.dtype;
  t.values.resize(static_cast<size_t>(info.elements()));
  using K = InputDistribution::Kind;
  const InputDistribution dist = resolved_distribution(info);
  // Every distribution takes a fixed number of draws per element (normal two, the others one).
  const uint64_t draws = dist.kind == K::normal ? 2 : 1;
  const uint64_t stream = hash_name(info.name, seed);
  parallel_for(static_cast<int64_t>(t.values.size()), [&](int64_t begin, int64_t end) {
    Random random(stream);
    random.skip(draws * static_cast<uint64_t>(begin));
    for (int64_t i = begin; i < end; ++i) {
      double& v = t.values[static_cast<size_t>(i)];
      switch (dist.kind) {
        case K::normal: v = dist.params[0] + dist.params[1] * random.normal(); break;
        case K::uniform: v = dist.params[0] + (dist.params[1] - dist.params[0]) * random.uniform(); break;
        case K::randint:
        case K::sorted_randint:
          v = static_cast<double>(random.integer(static_cast<int64_t>(dist.params[0]), static_cast<int64_t>(dist.params[1])));
          break;
        case K::bernoulli: v = random.uniform() < dist.params[0] ? 1 : 0; break;
        case K::standard: break;
      }
      v = round_to_dtype(v, info.dtype);
    }
  }, 1 << 16);
  if (dist.kind == K::sorted_randint && !t.shape.empty()) {
    auto row = static_cast<size_t>(t.shape.back());
    for (size_t start = 0; start < t.values.size(); start += row)
      std::sort(t.values.begin() + static_cast<std::ptrdiff_t>(start), t.values.begin() + static_cast<std::ptrdiff_t>(start + row));
  }
  return t;
}

TensorSet make_inputs(const BoundProgram& program, uint64_t seed) {
  TensorSet result;
  for (const TensorInfo* info : program.inputs()) result[info->name] = make_input(*info, seed);
  return result;
}

std::optional<InputDraw> input_draw(const TensorInfo& info, uint64_t seed) {
  namespace ri = random_inputs;
  using K = InputDistribution::Kind;
  const InputDistribution dist = resolved_distribution(info);
  InputDraw draw;
  switch (dist.kind) {
    case K::normal: draw.distribution = ri::kNormal; break;
    case K::uniform: draw.distribution = ri::kUniform; break;
    case K::randint: draw.distribution = ri::kRandint; break;
    case K::bernoulli: draw.distribution = ri::kBernoulli; break;
    case K::sorted_randint:
    case K::standard: return std::nullopt;
  }
  switch (info.dtype) {
    case DType::f32: draw.dtype = ri::kF32; break;
    case DType::f16: draw.dtype = ri::kF16; break;
    case DType::bf16: draw.dtype = ri::kBF16; break;
    case DType::f8e4m3: draw.dtype = ri::kE4M3; break;
    case DType::f8e5m2: draw.dtype = ri::kE5M2; break;
    case DType::i32: draw.dtype = ri::kI32; break;
    case DType::boolean: draw.dtype = ri::kBool; break;
  }
  draw.p0 = dist.params.size() > 0 ? dist.params[0] : 0;
  draw.p1 = dist.params.size() > 1 ? dist.params[1] : 0;
  draw.stream = hash_name(info.name, seed);
  return draw;
}

}  // namespace solder
