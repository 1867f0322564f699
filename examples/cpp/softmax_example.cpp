// Compile a row softmax written in .sol, call it on our own buffers, and check the result.
// Runs on the CPU executor (host buffers); docs/cpp-api.md shows the same call on the GPU.
#include <solder/solder.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  const char* source = R"(program softmax
dim T = 4096, N = 32768
in x[T, N] : f32
m[t] = max(n) x[t, n]
e[t, n] = exp(x[t, n] - m[t])
z[t] = sum(n) e[t, n]
out y[t, n] : f32 = e[t, n] / z[t]
)";
  try {
    solder::Program program = solder::Program::from_text(source, "softmax.sol");
    solder::CompileOptions options;
    options.dims = {{"T", 4}, {"N", 100}};   // override the default sizes
    options.device = solder::Device::cpu;    // host buffers
    solder::Kernel kernel = program.compile(options);
    std::printf("compiled '%s' into %d kernel(s) for %s\n", kernel.name().c_str(), kernel.kernel_count(),
                std::string(solder::device_name(kernel.device())).c_str());

    const int64_t T = 4, N = 100;
    std::vector<float> x(T * N), y(T * N);
    for (int64_t i = 0; i < T * N; ++i) x[i] = std::sin(0.1f * static_cast<float>(i));
    kernel({solder::TensorArg(x.data(), solder::DType::f32, {T, N})},
           {solder::TensorArg(y.data(), solder::DType::f32, {T, N})});

    double worst = 0;
    for (int64_t t = 0; t < T; ++t) {
      double m = -INFINITY, z = 0;
      for (int64_t n = 0; n < N; ++n) m = std::fmax(m, x[t * N + n]);
      for (int64_t n = 0; n < N; ++n) z += std::exp(x[t * N + n] - m);
      for (int64_t n = 0; n < N; ++n) worst = std::fmax(worst, std::fabs(y[t * N + n] - std::exp(x[t * N + n] - m) / z));
    }
    std::printf("largest difference from float64: %.3g\n", worst);
    if (worst > 1e-6) return 1;

    // A bad call is a solder::Error that says what was expected.
    try {
      kernel({solder::TensorArg(x.data(), solder::DType::f32, {N, T})}, {solder::TensorArg(y.data(), solder::DType::f32, {T, N})});
    } catch (const solder::Error& e) {
      std::printf("as expected: %s\n", e.what());
    }
    std::printf("ok\n");
    return 0;
  } catch (const solder::Error& e) {
    std::fprintf(stderr, "%s\n", e.formatted().c_str());
    return 2;
  }
}
