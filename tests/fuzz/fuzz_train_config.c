// libFuzzer target: training config files (ot_settings_read_file: JSON or
// key = value lines) applied to the defaults and resolved. Invariants: a
// resolved config resolves again to the same printout (no writer of config
// files exists to round-trip through); a refusal
// has a message; tracked memory returns to its start.
#define _GNU_SOURCE
#include "fuzz_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ot_settings g_l;

// c printed into a fresh heap string (free it).
static char *printed(const ot_train_config *c, size_t *n) {
  char *p = NULL;
  FILE *f = open_memstream(&p, n);
  FZ_CHECK(f != NULL, "open_memstream");
  ot_train_config_print(f, c);
  fclose(f);
  return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t mem0 = fz_mem_total();
  char path[64];
  int fd = fz_memfile(data, size, path, sizeof path);
  memset(&g_l, 0, sizeof g_l);
  ot_train_config c;
  ot_train_config_default(&c);
  ot_status s = ot_settings_read_file(&g_l, path);
  if (s == OT_OK) s = ot_train_config_apply(&c, &g_l, NULL);
  if (s == OT_OK) s = ot_train_config_resolve(&c);
  if (s == OT_OK) {   // a resolved config resolves again to itself
    size_t n = 0, n2 = 0;
    char *a = printed(&c, &n);
    ot_train_config d = c;
    s = ot_train_config_resolve(&d);
    FZ_CHECK(s == OT_OK, "a resolved config does not resolve again: %s\n%s", ot_last_error(), a);
    char *b = printed(&d, &n2);
    FZ_CHECK(n == n2 && memcmp(a, b, n) == 0, "resolving twice differs:\n%s\n---\n%s", a, b);
    free(a);
    free(b);
  } else {
    fz_refused(s, "train config");
  }
  fz_close(fd);
  fz_mem_back(mem0, "train_config");
  return 0;
}
