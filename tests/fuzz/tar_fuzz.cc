// libFuzzer target for the tar reader (archive.h): ustar, GNU long names, pax records, gzip.
#include "tests/fuzz/archive_fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 2 && data[0] == 'P' && data[1] == 'K') return 0;  // the zip target covers these
  CheckArchive(data, size);
  return 0;
}
