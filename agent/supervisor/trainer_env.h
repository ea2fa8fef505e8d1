// The environment gleaner-train gets: only what a trainer needs from the agent's environment
// (search path, locale, temp dir, the GPU selection and the CUDA/BLAS/torch tuning variables,
// and the synthetic kind's test hooks). Everything else stays with the agent: its enroll token,
// its settings (GLEANER_*), cloud and pool credentials. A trainer runs a job's code paths on
// outside data and must not be able to hand anyone the agent's secrets.
#pragma once

#include <string>
#include <vector>

namespace gleaner::agent {

// "NAME=value" entries of env (a null-terminated array like environ) that a trainer may see,
// in their original order.
std::vector<std::string> TrainerEnvironment(const char* const* env);

}  // namespace gleaner::agent
