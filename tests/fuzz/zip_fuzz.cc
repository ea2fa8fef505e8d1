// libFuzzer target for the zip reader (archive.h): headers, zip64, inflate, CRC, path rules.
#include "tests/fuzz/archive_fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || data[0] != 'P' || data[1] != 'K') return 0;  // the tar target covers the rest
  CheckArchive(data, size);
  return 0;
}
