// The HMAC key that signs built-in blob URLs.
//
// Every coordinator process serving one database must use the same key, and it must survive
// restarts (URLs already handed out stay valid). Source, in order: the GLEANER_SIGNING_KEY value
// (at least 16 bytes), else <data-dir>/signing.key, created on first start with 32 random bytes
// (64 hex characters, mode 0600, durable write). Creation is race-free across processes: the key
// is written to a temp file and hard-linked into place; a process that loses the race reads the
// winner's key.
#pragma once

#include <string>

#include "coordinator/native/blob/fs.h"
#include "shared/status.h"

namespace gleaner::native {

// env_key: the GLEANER_SIGNING_KEY value or nullptr.
Result<std::string> LoadOrCreateSigningKey(Fs* fs, const std::string& data_dir,
                                           const char* env_key);

}  // namespace gleaner::native
