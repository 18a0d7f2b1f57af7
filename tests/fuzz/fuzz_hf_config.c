// libFuzzer target: Hugging Face config.json (ot_model_config_from_hf).
// Invariants: an accepted config validates (ot_model_config_validate); a
// refusal has a message; tracked memory returns to its start.
#include "fuzz_common.h"
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t mem0 = fz_mem_total();
  char path[64];
  int fd = fz_memfile(data, size, path, sizeof path);
  ot_model_config c;
  memset(&c, 0, sizeof c);
  ot_status s = ot_model_config_from_hf(&c, path);
  if (s == OT_OK)
    FZ_CHECK(ot_model_config_validate(&c) == OT_OK, "an accepted config.json does not validate: %s",
             ot_last_error());
  else
    fz_refused(s, "ot_model_config_from_hf");
  fz_close(fd);
  fz_mem_back(mem0, "hf_config");
  return 0;
}
