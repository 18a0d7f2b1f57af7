// A small strict JSON parser (RFC 8259) for safetensors headers and HF
// config.json: objects, arrays, strings (escapes incl. \uXXXX and surrogate
// pairs, UTF-8 validated), numbers (int64 when the literal is an integer that
// fits, double otherwise), true/false/null. Nesting depth is limited, input is
// read only within [text, text + len), and the whole tree lives in one tracked
// block (OT_MEM_OTHER) released by ot_json_free.
#ifndef OT_IO_JSON_H
#define OT_IO_JSON_H

#include "ot/core.h"

typedef enum { OT_JNULL = 0, OT_JBOOL, OT_JNUM, OT_JSTR, OT_JARR, OT_JOBJ } ot_jtype;

typedef struct ot_json ot_json;
struct ot_json {
  ot_jtype type;
  bool b;                   // JBOOL
  bool is_int;              // JNUM: the literal is an integer in int64 range (i exact)
  int64_t i;                // JNUM with is_int
  double d;                 // JNUM: always set (finite)
  const char *s;            // JSTR: decoded UTF-8, NUL-terminated (may hold \0 inside)
  size_t len;               // JSTR: bytes in s, without the terminator
  const char *key;          // member of an object: its decoded key (NUL-terminated)
  size_t key_len;
  int n;                    // JARR/JOBJ: number of children
  ot_json *first, *next;    // children (in input order) / next sibling
  size_t pos;               // byte offset of the value in the input (for messages)
};

typedef struct {
  ot_json *root;
  void *mem;                // one tracked block: nodes + strings
} ot_json_doc;

#define OT_JSON_MAX_DEPTH 64

// Parses text[0, len) (need not be NUL-terminated). Only whitespace may follow
// the top-level value. max_depth <= 0 means OT_JSON_MAX_DEPTH. On error returns
// OT_EFORMAT with "<what>: invalid JSON at byte N (line L, column C): <reason>"
// (or OT_ENOMEM) and leaves doc empty.
ot_status ot_json_parse(ot_json_doc *doc, const char *text, size_t len, int max_depth,
                        const char *what);
void ot_json_free(ot_json_doc *doc);

// First member of object `obj` named `key` (NULL if absent or obj is not an object).
const ot_json *ot_json_get(const ot_json *obj, const char *key);
// Element i of array `arr` (NULL if out of range or not an array). O(i).
const ot_json *ot_json_at(const ot_json *arr, int i);
const char *ot_json_type_name(ot_jtype t);   // "null", "boolean", "number", ...
// True if s[0, len) is valid UTF-8 (no overlongs, surrogates or > U+10FFFF).
bool ot_json_utf8_valid(const char *s, size_t len);

#endif
