// diffusers' FlowMatchEulerDiscreteScheduler (FLUX.1, SD3): the rectified-flow schedule of
// sigmas in (0, 1], FluxPipeline's inference schedule and the deterministic Euler step.
//
// Contract: ParseFlowMatchConfig reads a `scheduler/scheduler_config.json` as diffusers'
// `from_config` does (missing fields take the scheduler's defaults, unknown ones are ignored);
// a field of the wrong type or out of range, another `_class_name`, and the features this
// implementation does not have (Karras/exponential/beta sigmas, stochastic sampling) are an
// InvalidArgument naming the field. Values are computed as diffusers computes them: fp32 for
// every schedule value (numpy float32 / torch fp32, same operations in the same order), double
// only for `mu`, so a schedule equals diffusers' bit for bit and the doubles in
// FlowMatchSchedule are exactly those fp32 values. Pure functions; thread-safe.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train::sampling {

// How a resolution-dependent shift `mu` moves a sigma (diffusers' time_shift_type).
enum class TimeShiftType { kExponential, kLinear };

struct FlowMatchConfig {
  int64_t num_train_timesteps = 1000;
  double shift = 1.0;                 // static shift (when use_dynamic_shifting is false)
  bool use_dynamic_shifting = false;  // shift by mu from the image sequence length instead
  double base_shift = 0.5;            // mu at base_image_seq_len
  double max_shift = 1.15;            // mu at max_image_seq_len
  int64_t base_image_seq_len = 256;
  int64_t max_image_seq_len = 4096;
  bool invert_sigmas = false;            // Mochi: sigmas 1 - σ, terminal sigma 1
  std::optional<double> shift_terminal;  // stretch so that the last sigma is this value
  TimeShiftType time_shift_type = TimeShiftType::kExponential;
};

Result<FlowMatchConfig> ParseFlowMatchConfig(const Json& config);
// Reads and parses a scheduler_config.json file (errors name the file).
Result<FlowMatchConfig> LoadFlowMatchConfig(const std::string& path);
// True when the config's `_class_name` is FlowMatchEulerDiscreteScheduler.
bool IsFlowMatchConfig(const Json& config);

struct FlowMatchSchedule {
  std::vector<double> timesteps;  // [steps], σ · num_train_timesteps (fp32 values)
  std::vector<double> sigmas;     // [steps + 1], with the final 0 (1 with invert_sigmas)
  double mu = 0;                  // the dynamic shift used; 0 without use_dynamic_shifting
};

// FluxPipeline's calculate_shift: mu linear in the image sequence length (packed latent tokens,
// (H/16)·(W/16) for FLUX), base_shift at base_seq_len and max_shift at max_seq_len (double).
double CalculateShift(int64_t image_seq_len, int64_t base_seq_len, int64_t max_seq_len,
                      double base_shift, double max_shift);
// CalculateShift with the config's parameters.
double CalculateShift(const FlowMatchConfig& config, int64_t image_seq_len);
// The dynamic shift of one sigma in fp32: exponential e^mu / (e^mu + (1/σ - 1)), linear
// mu / (mu + (1/σ - 1)). σ = 1 stays 1.
double TimeShift(const FlowMatchConfig& config, double mu, double sigma);
// The static shift s·σ / (1 + (s - 1)·σ) in fp32 (the identity for s = 1).
double StaticShift(double shift, double sigma);

// FluxPipeline's inference schedule: sigmas = linspace(1, 1/steps, steps), shifted by mu =
// CalculateShift(image_seq_len) with use_dynamic_shifting (else by the static shift), stretched
// to shift_terminal when set, timesteps = σ · num_train_timesteps, then the terminal sigma.
// InvalidArgument unless 1 <= steps <= 10000 and, with use_dynamic_shifting, image_seq_len >= 1.
Result<FlowMatchSchedule> InferenceSchedule(const FlowMatchConfig& config, int steps,
                                            int64_t image_seq_len);

// One Euler step of the flow ODE: x + (σ_next − σ)·v in fp32 (σ_next − σ rounded to fp32 first,
// as diffusers), returned in model_output's dtype. x and model_output: same shape and device.
torch::Tensor EulerStep(const torch::Tensor& model_output, double sigma, double sigma_next,
                        const torch::Tensor& x);

}  // namespace gleaner::train::sampling
