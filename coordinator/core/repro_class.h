// Reproducibility class (docs/architecture.md "Verified training"): what a node reports it
// trains with, so that a replay goes only to a node whose sums come out bit for bit the same
// (cuBLAS promises identical bits only for the same toolkit, architecture and SM count, PyTorch
// none across releases or builds). Agents send it at registration and with each claim
// (`repro_class`: an object of the known keys below, each a string of at most 128 bytes or an
// integer); the coordinator stores it as one canonical text (keys sorted, compact JSON) and
// compares the texts: a replay of a segment trained under class C goes only to a node of class
// C. A segment trained by a node that reported no class (an older agent) goes, as before
// classes, to any node of its GPU model; a node without a class takes only such segments.
// Pure parsing; no errors beyond the returned Status.
#pragma once

#include <string>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::core {

// Reads body[field]: absent or null -> NotFound; not an object of known keys with short string
// or integer values -> Invalid naming the field; else *canonical is the class's text.
Status ReadReproClass(const Json& body, const char* field, std::string* canonical);

}  // namespace gleaner::core
