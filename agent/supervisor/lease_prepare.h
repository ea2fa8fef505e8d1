// Preparing one lease's trainer run, the first step of the job runner's mainline
// (job_runner.h): the model's format checked, the inputs from the content-addressed cache (a
// folder input laid out under the work dir), the resume checkpoint (downloaded, verified,
// unpacked), and SPEC.json built through TrainerSpec (agent/protocol/trainer_spec.h), the only
// way the agent writes it.
//
// Ownership: everything works on the caller's LeaseRun (lease_run.h); downloads go into the
// BlobCache and the lease's work dir.
//
// Threading: the mainline's thread only, while the heartbeat thread runs; a 409 from the
// coordinator becomes a kLeaseRefused event (LeaseRun::Apply).
//
// Errors: Status. An input that cannot be had for a transient reason is kUnavailable or kIo
// (the runner hands the job back); any other failure is the job's input (the runner fails it
// with cause input). A remote model file's failure is reported only as kModelFileUnavailable
// (what its host answered stays in this node's log). A resume checkpoint that fails
// verification is dropped, not an error: the trainer starts from scratch.
#pragma once

#include <string>
#include <vector>

#include "agent/protocol/trainer_spec.h"
#include "agent/supervisor/api.h"
#include "agent/supervisor/lease_run.h"

namespace gleaner::agent {

// The claim's model format is one this agent can hand to its trainer: InvalidArgument naming
// it otherwise (the runner fails the lease as this node's fault, docs/agent.md "SPEC.json").
Status CheckModelFormat(const Assignment& job);

// Fetches every input (retried; one request for fresh URLs when storage refuses an expired
// one) and gives their local paths, with the model's format.
Status PrepareInputs(LeaseRun* run, std::vector<TrainerInput>* inputs);

// The resume checkpoint unpacked into the work dir, or "" (none, it failed verification, or the
// lease ended or a shutdown came while it downloaded).
std::string PrepareResume(LeaseRun* run);

// The lease's trainer spec: the claim's kind, params, steps, epoch and model config, the
// prepared inputs, the resume (resume_dir "" for none) and a replay's stop step.
TrainerSpec SpecFor(const Assignment& job, std::vector<TrainerInput> inputs,
                    const std::string& resume_dir);

// Validates the spec and writes it durably to work_dir/SPEC.json; gives that path.
// InvalidArgument for a spec the trainer would refuse, kIo when it cannot be written.
Result<std::string> WriteSpec(const TrainerSpec& spec, const std::string& work_dir);

}  // namespace gleaner::agent
