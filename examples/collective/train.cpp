// niox-collective-train: data-parallel training of a small synthetic model over
// niox::collective, the way PyTorch's DistributedDataParallel trains on CPUs with Gloo.
//
//   niox-collective-run -n 4 niox-collective-train --epochs 200
//
// The model is linear regression (float32 weights, mean squared error, full-batch gradient
// descent) on a dataset every rank generates from the same seed. Each rank computes the
// gradient of its shard (a block of the samples), all_reduce sums the shards' gradients, and
// every rank takes the same step. At the end the ranks check, with all_gather, that their
// weights are identical bit for bit, and each compares them with a single-process run of the
// same training on the whole dataset (which adds the gradient in another order: the same
// within floating-point tolerance, not bit for bit). Exit status 0 when both hold.
#include <command_line.hpp>

#include <niox/collective/communicator.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <span>
#include <string_view>
#include <vector>

namespace {

using niox::collective::Communicator;
using niox::collective::ReduceOp;

constexpr std::string_view kUsage =
    "usage: niox-collective-train [--samples N] [--features D] [--epochs E] [--lr X] [--seed S]\n"
    "\n"
    "Run it under a launcher: niox-collective-run -n 4 niox-collective-train\n"
    "  --samples N    samples in the dataset (default 8192)\n"
    "  --features D   weights of the model (default 64)\n"
    "  --epochs E     gradient steps (default 100)\n"
    "  --lr X         learning rate (default 0.05)\n"
    "  --seed S       the dataset's seed (default 1)\n";

struct Dataset {
  std::size_t n = 0;
  std::size_t d = 0;
  std::vector<float> x;  // n rows of d
  std::vector<float> y;
};

Dataset make_dataset(std::size_t n, std::size_t d, unsigned seed) {
  // Integer draws scaled by hand: the same values with every standard library.
  std::mt19937 rng(seed);
  auto uniform = [&] { return static_cast<float>(rng() % 2001) / 1000.0f - 1.0f; };
  Dataset ds{n, d, std::vector<float>(n * d), std::vector<float>(n)};
  std::vector<float> truth(d);
  for (auto& w : truth) w = uniform();
  for (std::size_t i = 0; i < n; ++i) {
    float dot = 0;
    for (std::size_t j = 0; j < d; ++j) {
      ds.x[i * d + j] = uniform();
      dot += ds.x[i * d + j] * truth[j];
    }
    ds.y[i] = dot + 0.01f * uniform();
  }
  return ds;
}

// Adds the gradient of the mean squared error over rows [first, first + count) (divided by the
// whole dataset's n) to `grad`, and returns their summed squared error.
double add_gradient(const Dataset& ds, std::size_t first, std::size_t count,
                    const std::vector<float>& w, std::vector<float>& grad) {
  double loss = 0;
  const float scale = 2.0f / static_cast<float>(ds.n);
  for (std::size_t i = first; i < first + count; ++i) {
    const float* row = &ds.x[i * ds.d];
    float err = -ds.y[i];
    for (std::size_t j = 0; j < ds.d; ++j) err += row[j] * w[j];
    loss += static_cast<double>(err) * err;
    for (std::size_t j = 0; j < ds.d; ++j) grad[j] += scale * err * row[j];
  }
  return loss;
}

}  // namespace

int main(int argc, char** argv) {
  using niox::examples::parse_number;
  std::size_t samples = 8192;
  std::size_t features = 64;
  int epochs = 100;
  float lr = 0.05f;
  unsigned seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (i + 1 >= argc) {
      std::cerr << "niox-collective-train: unknown argument '" << a << "' (see --help)\n";
      return 2;
    }
    std::string_view v = argv[++i];
    bool ok = a == "--samples"    ? parse_number<std::size_t>(v, 1, 1 << 24, samples)
              : a == "--features" ? parse_number<std::size_t>(v, 1, 1 << 16, features)
              : a == "--epochs"   ? parse_number(v, 0, 1000000, epochs)
              : a == "--lr"       ? parse_number(v, 0.0f, 10.0f, lr)
              : a == "--seed"     ? parse_number(v, 0u, 0xffffffffu, seed)
                                  : false;
    if (!ok) {
      std::cerr << "niox-collective-train: " << niox::examples::invalid_value(a, v, "see --help")
                << "\n";
      return 2;
    }
  }

  try {
    Communicator comm = Communicator::from_environment();
    const int rank = comm.rank();
    const int size = comm.size();
    const Dataset ds = make_dataset(samples, features, seed);
    auto [first, count] = Communicator::block(samples, size, rank);

    std::vector<float> w(features, 0.0f);
    std::vector<float> grad(features);
    std::vector<double> loss(1);
    for (int epoch = 0; epoch < epochs; ++epoch) {
      std::fill(grad.begin(), grad.end(), 0.0f);
      loss[0] = add_gradient(ds, first, count, w, grad);
      comm.all_reduce(std::span(grad), ReduceOp::sum);
      comm.all_reduce(std::span(loss), ReduceOp::sum);
      for (std::size_t j = 0; j < features; ++j) w[j] -= lr * grad[j];
      if (rank == 0 && (epoch % std::max(1, epochs / 5) == 0 || epoch == epochs - 1)) {
        std::printf("epoch %d: loss %.6g\n", epoch, loss[0] / static_cast<double>(samples));
      }
    }

    // Every rank's weights, side by side, compared bit for bit.
    std::vector<float> all(features * size);
    comm.all_gather(std::span<const float>(w), std::span(all));
    bool identical = true;
    for (int r = 0; r < size; ++r) {
      identical =
          identical && std::memcmp(&all[r * features], w.data(), features * sizeof(float)) == 0;
    }

    // The same training in one process.
    std::vector<float> ref(features, 0.0f);
    for (int epoch = 0; epoch < epochs; ++epoch) {
      std::fill(grad.begin(), grad.end(), 0.0f);
      add_gradient(ds, 0, samples, ref, grad);
      for (std::size_t j = 0; j < features; ++j) ref[j] -= lr * grad[j];
    }
    double worst = 0;
    for (std::size_t j = 0; j < features; ++j) {
      worst = std::max(worst, static_cast<double>(std::fabs(w[j] - ref[j])) /
                                  std::max(1.0, static_cast<double>(std::fabs(ref[j]))));
    }
    const bool close = worst <= 1e-4;
    if (rank == 0) {
      std::printf(
          "%d rank%s: weights %s across ranks; largest difference from one process %.3g "
          "(tolerance 1e-4)\n",
          size, size == 1 ? "" : "s", identical ? "identical bit for bit" : "DIFFER", worst);
    }
    return identical && close ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "niox-collective-train: %s\n", e.what());
    return 1;
  }
}
