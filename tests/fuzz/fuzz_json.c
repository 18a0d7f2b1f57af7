// libFuzzer target: the JSON parser (src/io/json.h). Invariants: an accepted
// document's strings are valid UTF-8 of the stated length, numbers are finite;
// a refused one has a message; tracked memory returns to its start.
#include "fuzz_common.h"
#include "io/json.h"
#include <math.h>
#include <string.h>

// Walks v (depth-first), checking each node.
static int walk(const ot_json *v, int depth) {
  FZ_CHECK(depth <= OT_JSON_MAX_DEPTH + 1, "tree deeper than the limit");
  int n = 1;
  if (v->type == OT_JSTR) {
    FZ_CHECK(v->s[v->len] == 0 && ot_json_utf8_valid(v->s, v->len), "string not NUL-terminated UTF-8");
  } else if (v->type == OT_JNUM) {
    FZ_CHECK(isfinite(v->d), "non-finite number");
    FZ_CHECK(!v->is_int || (double)v->i == v->d || fabs((double)v->i - v->d) <= fabs(v->d) * 1e-15,
             "int and double of a number disagree");
  }
  int k = 0;
  for (const ot_json *c = v->first; c; c = c->next, k++) {
    if (v->type == OT_JOBJ)
      FZ_CHECK(c->key && c->key[c->key_len] == 0 && ot_json_utf8_valid(c->key, c->key_len), "bad key");
    n += walk(c, depth + 1);
  }
  FZ_CHECK(k == v->n, "child count %d vs n %d", k, v->n);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t mem0 = fz_mem_total();
  ot_json_doc d = {0};
  ot_status s = ot_json_parse(&d, (const char *)data, size, 0, "fuzz");
  if (s == OT_OK) {
    walk(d.root, 1);
    if (d.root->type == OT_JOBJ && d.root->first && strlen(d.root->first->key) == d.root->first->key_len)
      FZ_CHECK(ot_json_get(d.root, d.root->first->key) != NULL, "first key not found");
  } else {
    fz_refused(s, "ot_json_parse");
    FZ_CHECK(strncmp(ot_last_error(), "fuzz", 4) == 0 || s == OT_ENOMEM, "message does not name the input");
  }
  ot_json_free(&d);
  fz_mem_back(mem0, "json");
  return 0;
}
