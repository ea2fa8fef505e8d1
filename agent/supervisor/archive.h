// Checkpoint archives: a checkpoint directory packed into ONE object for storage.
//
// Format (all integers little-endian), documented in docs/agent.md:
//   magic "GLNRCKPT" (8 bytes) | version u32 = 1 | entry count u32 (1..1025)
//   then per entry: name length u16 | name bytes | size u64 | size bytes of data
//   then the SHA-256 (32 bytes) of everything before it.
// Entries are the manifest's files in manifest order, then MANIFEST.json last.
// Unpacking checks magic, version, bounds and names, writes "<dir>.tmp", verifies the manifest
// (sizes + SHA-256 of every file), then renames to dir. Nothing is trusted before that check.
#pragma once

#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "shared/status.h"

namespace gleaner::agent {

// Verifies checkpoint_dir and packs it into archive_path (written durably).
Result<CheckpointManifest> PackCheckpoint(const std::string& checkpoint_dir,
                                          const std::string& archive_path);
// Unpacks archive_path into dir (replacing it); kCorruption on any malformed or mismatching byte.
Result<CheckpointManifest> UnpackCheckpoint(const std::string& archive_path,
                                            const std::string& dir);

}  // namespace gleaner::agent
