// safetensors reader/writer and the strict JSON parser: round trips, every
// validation rule with a hand-made malformed file and its message, and fuzzing
// (truncations, byte flips, header mutations, garbage) that must never crash
// (run it under ASan: every image is malloc'd to its exact length).
#include "harness.h"
#include "io/json.h"
#include <unistd.h>
#include <sys/stat.h>

static const char *tmpdir(void) {
  static char d[256];
  if (!d[0]) {
    snprintf(d, sizeof d, "/tmp/ot_test_st_%d", (int)getpid());
    mkdir(d, 0755);
  }
  return d;
}

// ------------------------------------------------------------------ JSON ----
static ot_status jparse(ot_json_doc *d, const char *s) { return ot_json_parse(d, s, strlen(s), 0, "t"); }

static void test_json(void) {
  ot_json_doc d;
  th_check(jparse(&d, " {\"a\": [1, -2, 3.5, 1e2, true, false, null], \"b\": \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\", \"c\": {}} ") == OT_OK,
           "json: valid document parses (%s)", ot_last_error());
  if (d.root) {
    const ot_json *a = ot_json_get(d.root, "a"), *b = ot_json_get(d.root, "b");
    th_check(a && a->type == OT_JARR && a->n == 7, "json: array of 7");
    th_check(ot_json_at(a, 0)->is_int && ot_json_at(a, 0)->i == 1, "json: int 1");
    th_check(ot_json_at(a, 1)->is_int && ot_json_at(a, 1)->i == -2, "json: int -2");
    th_check(!ot_json_at(a, 2)->is_int && ot_json_at(a, 2)->d == 3.5, "json: double 3.5");
    th_check(!ot_json_at(a, 3)->is_int && ot_json_at(a, 3)->d == 100.0, "json: 1e2 is a double");
    th_check(ot_json_at(a, 4)->type == OT_JBOOL && ot_json_at(a, 4)->b, "json: true");
    th_check(ot_json_at(a, 5)->type == OT_JBOOL && !ot_json_at(a, 5)->b, "json: false");
    th_check(ot_json_at(a, 6)->type == OT_JNULL && !ot_json_at(a, 7), "json: null, then end");
    const char *want = "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80";
    th_check(b && b->type == OT_JSTR && b->len == strlen(want) && strcmp(b->s, want) == 0,
             "json: escapes, \\u00e9 and a surrogate pair decode to UTF-8");
    th_check(ot_json_get(d.root, "c")->type == OT_JOBJ && ot_json_get(d.root, "c")->n == 0, "json: empty object");
    th_check(!ot_json_get(d.root, "zz"), "json: absent key");
  }
  ot_json_free(&d);
  th_check(jparse(&d, "[9223372036854775807, -9223372036854775808, 9223372036854775808, -0]") == OT_OK, "json: int64 bounds");
  if (d.root) {
    th_check(ot_json_at(d.root, 0)->is_int && ot_json_at(d.root, 0)->i == INT64_MAX, "json: INT64_MAX exact");
    th_check(ot_json_at(d.root, 1)->is_int && ot_json_at(d.root, 1)->i == INT64_MIN, "json: INT64_MIN exact");
    th_check(!ot_json_at(d.root, 2)->is_int && ot_json_at(d.root, 2)->d == 9223372036854775808.0, "json: 2^63 is a double");
    th_check(ot_json_at(d.root, 3)->is_int && ot_json_at(d.root, 3)->i == 0, "json: -0 is int 0");
  }
  ot_json_free(&d);
  th_check(jparse(&d, "\"\\u20ac\\u0041\"") == OT_OK && strcmp(d.root->s, "\xe2\x82\xac" "A") == 0,
           "json: 3-byte \\u20ac and ASCII \\u0041");
  ot_json_free(&d);
  th_check(jparse(&d, "\"a\\u0000b\"") == OT_OK && d.root->len == 3 && d.root->s[1] == 0, "json: \\u0000 kept with its length");
  ot_json_free(&d);

  static const struct { const char *text, *needle; } bad[] = {
      {"", "end of input"}, {"   ", "end of input"}, {"{", "expected a string key"},
      {"[1,]", "value expected"}, {"{\"a\":1,}", "expected a string key"}, {"[1 2]", "expected ','"},
      {"01", "leading zero"}, {"-", "'-' must be followed"}, {"1.", "digit expected after '.'"},
      {"1e", "exponent"}, {".5", "value expected"}, {"+1", "value expected"}, {"1e999", "out of double range"},
      {"tru", "invalid literal"}, {"nul", "invalid literal"}, {"\"abc", "unterminated string"},
      {"\"a\tb\"", "control character 0x09"}, {"\"\\x\"", "invalid escape"}, {"\"\\u12G4\"", "4 hex digits"},
      {"\"\\u12\"", "4 hex digits"}, {"\"\\ud800\"", "not followed by a low surrogate"},
      {"\"\\udc00\"", "lone low surrogate"}, {"\"\xc3\x28\"", "invalid UTF-8"}, {"\"\xe0\x80\xaf\"", "invalid UTF-8"},
      {"\"\xed\xa0\x80\"", "invalid UTF-8"}, {"\"\xf4\x90\x80\x80\"", "invalid UTF-8"}, {"\"\xc3\"", "invalid UTF-8"},
      {"{} x", "after the top-level value"}, {"{\"a\" 1}", "expected ':'"}, {"{1:2}", "expected a string key"},
      {"[1]\n\n  ]", "line 3, column 3"}, {"\\", "value expected"}, {"NaN", "value expected"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ot_status s = jparse(&d, bad[i].text);
    char what[64]; snprintf(what, sizeof what, "json: bad input #%zu", i);
    th_check_error(s, OT_EFORMAT, bad[i].needle, what);
    th_check(d.root == NULL && d.mem == NULL, "json: bad input #%zu leaves the doc empty", i);
  }
  // Depth limit: 64 nested arrays parse, 65 do not; a depth-2 limit is honored.
  char deep[200];
  for (int n = 64; n <= 65; n++) {
    memset(deep, '[', (size_t)n); memset(deep + n, ']', (size_t)n); deep[2 * n] = 0;
    ot_status s = jparse(&d, deep);
    if (n == 64) th_check(s == OT_OK, "json: depth 64 accepted (%s)", ot_last_error());
    else th_check_error(s, OT_EFORMAT, "nesting deeper than 64", "json: depth 65");
    ot_json_free(&d);
  }
  th_check_error(ot_json_parse(&d, "[[[1]]]", 7, 2, "t"), OT_EFORMAT, "deeper than 2", "json: max_depth=2");
  // Not NUL-terminated: parse only the first 3 bytes of "[1]]".
  th_check(ot_json_parse(&d, "[1]]", 3, 0, "t") == OT_OK, "json: length respected");
  ot_json_free(&d);
  th_check(ot_json_utf8_valid("\xe2\x82\xac", 3) && !ot_json_utf8_valid("\xe2\x82", 2), "json: utf8_valid");
}

// --------------------------------------------------------- image helpers ----
// A safetensors image: 8-byte length, header, `data_len` bytes of data (0..255 ramp).
static uint8_t *mk_image(const char *header, size_t data_len, size_t *len) {
  size_t h = strlen(header);
  *len = 8 + h + data_len;
  uint8_t *b = th_alloc(*len);
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
  memcpy(b + 8, header, h);
  for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (uint8_t)i;
  return b;
}

static ot_status open_image(const char *header, size_t data_len, ot_st_file **f) {
  size_t len;
  uint8_t *b = mk_image(header, data_len, &len);
  ot_status s = ot_st_open_mem(f, b, len, "t.safetensors");
  if (s == OT_OK) ot_st_close(*f);
  free(b);
  return s;
}

static void check_bad(const char *header, size_t data_len, const char *needle, const char *what) {
  ot_st_file *f = (ot_st_file *)1;
  ot_status s = open_image(header, data_len, &f);
  th_check_error(s, OT_EFORMAT, needle, what);
  th_check(f == NULL, "%s: *out is NULL on failure", what);
}

#define F32_12 "{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":"

static void test_malformed(void) {
  ot_st_file *f;
  // Too short, absurd header length, header longer than the file.
  uint8_t five[5] = {1, 2, 3, 4, 5};
  th_check_error(ot_st_open_mem(&f, five, 5, "t.safetensors"), OT_EFORMAT,
                 "t.safetensors: file is 5 bytes, shorter than the 8-byte header length", "short file");
  th_check_error(ot_st_open_mem(&f, NULL, 0, "t.safetensors"), OT_EFORMAT, "file is 0 bytes", "empty file");
  uint8_t img[64] = {0};
  uint64_t hl = 200000000;
  for (int i = 0; i < 8; i++) img[i] = (uint8_t)(hl >> (8 * i));
  th_check_error(ot_st_open_mem(&f, img, sizeof img, "t.safetensors"), OT_EFORMAT,
                 "header length 200000000 is absurd", "absurd header length");
  memset(img, 0xff, 8);
  th_check_error(ot_st_open_mem(&f, img, sizeof img, "t.safetensors"), OT_EFORMAT, "is absurd", "header length 2^64-1");
  memset(img, 0, 8); img[0] = 57;
  th_check_error(ot_st_open_mem(&f, img, sizeof img, "t.safetensors"), OT_EFORMAT,
                 "header length 57 is larger than the 56 bytes after the length field", "header beyond file");

  // The reader refuses what the writer refuses: an empty tensor name, an empty metadata key.
  check_bad("{\"__metadata__\": {\"\": \"x\"}}", 0, "t.safetensors: __metadata__ has an empty key",
            "empty metadata key");
  check_bad("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
            "t.safetensors: tensor 0 has an empty name", "empty tensor name");
  check_bad("not json", 0, "t.safetensors: header: invalid JSON at byte 0", "header not JSON");
  check_bad("{\"a\":", 0, "header: invalid JSON at byte 5", "header JSON truncated");
  check_bad("[1,2]", 0, "header is a JSON array, not an object", "header is an array");
  check_bad("{\"x\":5}", 0, "tensor 'x': entry is a number, not an object", "entry not an object");
  check_bad("{\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'x': missing \"dtype\"", "missing dtype");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'x': missing \"shape\"", "missing shape");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'x': missing \"data_offsets\"", "missing data_offsets");
  check_bad("{\"x\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "\"dtype\" is a number, not a string", "dtype not a string");
  check_bad("{\"x\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
            "tensor 'x': dtype F64 is not supported (supported: F32, BF16, F16, I8, I32, U16", "F64 rejected");
  check_bad("{\"x\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "dtype I64 is not supported", "I64 rejected");
  check_bad("{\"x\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'x': unknown dtype 'Q7'", "unknown dtype");
  check_bad("{\"x\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype 'f32'", "dtype is case-sensitive");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,12]}}", 12, "\"shape\" is a number, not an array", "shape not an array");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[3,-4],\"data_offsets\":[0,48]}}", 48,
            "tensor 'x': shape dim 1 is negative (-4)", "negative dim");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[3,2.5],\"data_offsets\":[0,48]}}", 48,
            "tensor 'x': shape dim 1 is not an integer (got 2.5)", "fractional dim");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[\"3\"],\"data_offsets\":[0,12]}}", 12,
            "shape dim 0 is not an integer (got a string)", "string dim");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1e1],\"data_offsets\":[0,40]}}", 40,
            "shape dim 0 is not an integer (got 10)", "1e1 dim");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4,
            "shape dim 0 is not an integer", "dim beyond int64");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
            "shape has 7 dims, at most 6 are supported", "too many dims");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
            "tensor 'x': shape [4294967296,4294967296] of F32 overflows", "numel overflow");
  check_bad("{\"x\":{\"dtype\":\"BF16\",\"shape\":[3037000500,3037000500],\"data_offsets\":[0,4]}}", 4,
            "overflows", "numel*size overflow");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0]}}", 48,
            "tensor 'x': \"data_offsets\" must be [begin, end], got an array of 1 element", "data_offsets of 1");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":{}}}", 48,
            "\"data_offsets\" must be [begin, end], got an object", "data_offsets object");
  check_bad("{\"x\":" F32_12 "[0,-48]}}", 48, "data_offsets[1] is not a non-negative integer (got -48)", "negative offset");
  check_bad("{\"x\":" F32_12 "[0,4.5]}}", 48, "data_offsets[1] is not a non-negative integer (got 4.5)", "fractional offset");
  check_bad("{\"x\":" F32_12 "[48,0]}}", 48, "tensor 'x': data_offsets [48, 0) has begin > end", "begin > end");
  check_bad("{\"x\":" F32_12 "[0,48]}}", 40,
            "tensor 'x': data_offsets [0, 48) end beyond the data region of 40 bytes", "end beyond file");
  check_bad("{\"h.0.attn.c_attn.weight\":" F32_12 "[0,100]}}", 100,
            "t.safetensors: tensor 'h.0.attn.c_attn.weight': data_offsets [0, 100) hold 100 bytes but "
            "shape [3,4] of F32 needs 48", "byte size mismatch (exact message)");
  check_bad("{\"a\":" F32_12 "[0,48]},\"b\":" F32_12 "[40,88]}}", 88,
            "tensor 'b': data_offsets [40, 88) overlap tensor 'a' [0, 48)", "overlap");
  check_bad("{\"a\":" F32_12 "[0,48]},\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}", 48,
            "tensor 'z': data_offsets [8, 8) overlap tensor 'a'", "empty tensor inside another");
  check_bad("{\"b\":" F32_12 "[56,104]},\"a\":" F32_12 "[0,48]}}", 104,
            "bytes [48, 56) of the data region are not covered by any tensor (gap before tensor 'b')", "gap");
  check_bad("{\"a\":" F32_12 "[8,56]}}", 56, "bytes [0, 8) of the data region are not covered", "leading gap");
  check_bad("{\"a\":" F32_12 "[0,48]}}", 52, "bytes [48, 52) of the data region are not covered by any tensor (4 trailing bytes)", "trailing bytes");
  check_bad("{}", 3, "bytes [0, 3) of the data region are not covered", "data without tensors");
  check_bad("{\"a\":" F32_12 "[0,48]},\"a\":" F32_12 "[48,96]}}", 96, "duplicate tensor name 'a'", "duplicate names");
  check_bad("{\"a\\u0000b\":" F32_12 "[0,48]}}", 48, "tensor name 'a...' contains a NUL character", "NUL in a name");
  check_bad("{\"__metadata__\":{\"k\":1},\"a\":" F32_12 "[0,48]}}", 48,
            "__metadata__ value of key 'k' is a number, not a string", "metadata value not a string");
  check_bad("{\"__metadata__\":{\"k\":\"v\",\"j\":null}}", 0, "value of key 'j' is null, not a string", "metadata null");
  check_bad("{\"__metadata__\":[\"k\"]}", 0, "__metadata__ is an array, not an object", "metadata array");
  check_bad("{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0, "__metadata__ key 'k' appears twice", "metadata duplicate key");
  check_bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__ appears twice", "two __metadata__");
  check_bad("{\"__metadata__\":{\"k\":\"a\\u0000\"}}", 0, "contains a NUL character", "NUL in a metadata value");
  check_bad("{\"__metadata__\":{\"k\\u0000\":\"a\"}}", 0, "__metadata__ key 'k...' contains a NUL", "NUL in a metadata key");
  check_bad("{\"__metadata__\":\"x\"}", 0, "__metadata__ is a string, not an object", "metadata string");
  check_bad("{\"x\":" F32_12 "[0,48,96]}}", 96, "got an array of 3 elements", "data_offsets of 3");
  check_bad("{\"x\":" F32_12 "\"0,48\"}}", 48, "\"data_offsets\" must be [begin, end], got a string", "data_offsets string");
  check_bad("{\"x\":[]}", 0, "tensor 'x': entry is an array, not an object", "entry array");
  check_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[true],\"data_offsets\":[0,4]}}", 4,
            "shape dim 0 is not an integer (got a boolean)", "boolean dim");

  // Two empty tensors at the same offset are valid and ordered by name.
  size_t l2;
  uint8_t *b2 = mk_image("{\"z\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[0,0]},"
                         "\"y\":{\"dtype\":\"U16\",\"shape\":[2,0],\"data_offsets\":[0,0]},"
                         "\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &l2);
  th_check(ot_st_open_mem(&f, b2, l2, "t") == OT_OK && ot_st_count(f) == 3 &&
           strcmp(ot_st_get(f, 0)->name, "y") == 0 && strcmp(ot_st_get(f, 1)->name, "z") == 0 &&
           strcmp(ot_st_get(f, 2)->name, "a") == 0 && ot_st_get(f, 0)->dtype == OT_U16,
           "empty tensors at one offset: valid, ties ordered by name (%s)", ot_last_error());
  ot_st_close(f);
  free(b2);
  th_check(strcmp(ot_st_dtype_name(OT_BF16), "BF16") == 0 && strcmp(ot_st_dtype_name(OT_U16), "U16") == 0,
           "ot_st_dtype_name");

  // Valid corner cases: empty header, zero-size tensors, a scalar, trailing spaces.
  th_check(open_image("{}", 0, &f) == OT_OK, "empty header {} is valid (%s)", ot_last_error());
  th_check(open_image("{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                      "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
                      "\"f\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[4,4]},\"extra\":1}    ", 4, &f) != OT_OK,
           "an entry that is a number is rejected even when others are fine");
  size_t len;
  uint8_t *b = mk_image("{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                        "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4],\"x\":[]}}      ", 4, &len);
  ot_status s = ot_st_open_mem(&f, b, len, "t.safetensors");
  th_check(s == OT_OK, "scalar + zero-size tensor + unknown entry key + padding accepted (%s)", ot_last_error());
  if (s == OT_OK) {
    const ot_st_tensor *sc = ot_st_find(f, "s"), *e = ot_st_find(f, "e");
    th_check(sc && sc->ndim == 0 && sc->nbytes == 4 && e && e->ndim == 2 && e->nbytes == 0, "scalar and empty tensor");
    th_check(ot_st_count(f) == 2 && ot_st_get(f, 0) == sc && ot_st_get(f, 1) == e && !ot_st_get(f, 2), "data order");
    ot_st_close(f);
  }
  free(b);
}

// ----------------------------------------------------------- round trip ----
static void test_roundtrip(void) {
  size_t mem0 = ot_mem_current(OT_MEM_OTHER);
  th_rng r = {42};
  float a[12], sc[1]; uint16_t bf[5], hf[2], u16[3]; int32_t i32[6]; int8_t i8[7];
  th_fill(&r, a, 12, -1, 1); th_fill(&r, sc, 1, -1, 1);
  for (int i = 0; i < 5; i++) bf[i] = ot_f32_to_bf16(th_uniform(&r, -1, 1));
  for (int i = 0; i < 2; i++) hf[i] = ot_f32_to_f16(th_uniform(&r, -1, 1));
  for (int i = 0; i < 3; i++) u16[i] = (uint16_t)(th_next(&r) & 0xffff);
  for (int i = 0; i < 6; i++) i32[i] = (int32_t)th_next(&r);
  for (int i = 0; i < 7; i++) i8[i] = (int8_t)th_next(&r);
  ot_st_tensor t[] = {
      {"bf", OT_BF16, 1, {5}, bf, sizeof bf},            // 10 bytes: the next F32 would be misaligned
      {"h.0.w \"quoted\"\\\n\x01", OT_F32, 2, {3, 4}, a, sizeof a},
      {"scalar", OT_F32, 0, {0}, sc, 4},
      {"empty", OT_F32, 2, {0, 3}, NULL, 0},
      {"i8", OT_I8, 1, {7}, i8, 7},
      {"u16", OT_U16, 1, {3}, u16, 6},
      {"i32", OT_I32, 2, {2, 3}, i32, 24},
      {"f16 \xc3\xa9", OT_F16, 3, {1, 1, 2}, hf, 4},
  };
  int n = (int)(sizeof t / sizeof *t);
  const char *mk[] = {"format", "note"}, *mv[] = {"pt", "line1\nline2 \"q\" \xe2\x82\xac"};
  char path[512], tmp[520];
  snprintf(path, sizeof path, "%s/rt.safetensors", tmpdir());
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  for (int rep = 0; rep < 2; rep++) {  // second time overwrites the existing file
    ot_status s = ot_st_write(path, t, n, mk, mv, 2);
    th_check(s == OT_OK, "write #%d (%s)", rep, ot_last_error());
    th_check(access(tmp, F_OK) != 0, "write #%d: no .tmp left behind", rep);
  }
  FILE *fp = fopen(path, "rb");
  uint8_t hdr8[8] = {0};
  th_check(fp && fread(hdr8, 1, 8, fp) == 8, "read back the length");
  if (fp) fclose(fp);
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | hdr8[i];
  th_check((8 + hl) % 8 == 0, "data region starts at a multiple of 8 (8 + %llu)", (unsigned long long)hl);

  ot_st_file *f = NULL;
  ot_status s = ot_st_open(&f, path);
  th_check(s == OT_OK, "open written file (%s)", ot_last_error());
  if (s != OT_OK) return;
  th_check(ot_st_count(f) == n, "count %d == %d", ot_st_count(f), n);
  for (int i = 0; i < n && i < ot_st_count(f); i++) {
    const ot_st_tensor *g = ot_st_get(f, i);
    bool ok = strcmp(g->name, t[i].name) == 0 && g->dtype == t[i].dtype && g->ndim == t[i].ndim &&
              g->nbytes == t[i].nbytes && (!g->nbytes || memcmp(g->data, t[i].data, g->nbytes) == 0);
    for (int d = 0; d < t[i].ndim; d++) ok = ok && g->shape[d] == t[i].shape[d];
    th_check(ok, "tensor %d '%s' round-trips in order", i, t[i].name);
    th_check((uintptr_t)g->data % ot_dtype_size(g->dtype) == 0, "tensor '%s' data aligned", t[i].name);
    th_check(ot_st_find(f, t[i].name) == g, "find '%s'", t[i].name);
  }
  th_check(!ot_st_find(f, "nope") && !ot_st_find(f, "") && !ot_st_find(f, NULL), "find absent names");
  th_check(ot_st_meta(f, "format") && strcmp(ot_st_meta(f, "format"), "pt") == 0, "meta format");
  th_check(ot_st_meta(f, "note") && strcmp(ot_st_meta(f, "note"), mv[1]) == 0, "meta with escapes");
  th_check(!ot_st_meta(f, "x") && ot_st_meta_count(f) == 2, "meta absent key, count");
  const char *v = NULL;
  th_check(ot_st_meta_at(f, 1, &v) && strcmp(v, mv[1]) == 0 && !ot_st_meta_at(f, 2, &v), "meta_at");
  th_check(strcmp(ot_st_name(f), path) == 0, "name");
  ot_st_close(f);

  // Misaligned image (data region at an odd offset): tensors are copied aligned.
  size_t len;
  uint8_t *b = mk_image("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} ", 8, &len);
  s = ot_st_open_mem(&f, b, len, "odd");
  th_check(s == OT_OK, "odd-offset image opens (%s)", ot_last_error());
  if (s == OT_OK) {
    const ot_st_tensor *x = ot_st_find(f, "x");
    th_check((uintptr_t)x->data % 4 == 0 && memcmp(x->data, b + len - 8, 8) == 0, "misaligned tensor copied aligned");
    ot_st_close(f);
  }
  free(b);

  // Writer argument errors.
  ot_st_tensor w = {"w", OT_F32, 2, {3, 4}, a, 48};
  ot_st_tensor dup[2] = {w, w};
  th_check_error(ot_st_write(path, dup, 2, NULL, NULL, 0), OT_EINVAL, "duplicate tensor name 'w'", "write: duplicate");
  ot_st_tensor bad = w; bad.nbytes = 40;
  th_check_error(ot_st_write(path, &bad, 1, NULL, NULL, 0), OT_EINVAL, "nbytes=40 but shape [3,4] of F32 needs 48", "write: nbytes");
  bad = w; bad.name = "__metadata__";
  th_check_error(ot_st_write(path, &bad, 1, NULL, NULL, 0), OT_EINVAL, "reserved", "write: reserved name");
  bad = w; bad.name = "";
  th_check_error(ot_st_write(path, &bad, 1, NULL, NULL, 0), OT_EINVAL, "empty name", "write: empty name");
  bad = w; bad.data = NULL;
  th_check_error(ot_st_write(path, &bad, 1, NULL, NULL, 0), OT_EINVAL, "data is NULL", "write: NULL data");
  bad = w; bad.ndim = 7;
  th_check_error(ot_st_write(path, &bad, 1, NULL, NULL, 0), OT_EINVAL, "ndim=7", "write: ndim");
  bad = w; bad.shape[1] = -1;
  th_check_error(ot_st_write(path, &bad, 1, NULL, NULL, 0), OT_EINVAL, "shape[1]=-1 is negative", "write: negative dim");
  bad = w; bad.name = "\xff";
  th_check_error(ot_st_write(path, &bad, 1, NULL, NULL, 0), OT_EINVAL, "not valid UTF-8", "write: bad UTF-8 name");
  bad = w; bad.shape[0] = (int64_t)1 << 40; bad.shape[1] = (int64_t)1 << 40;
  th_check_error(ot_st_write(path, &bad, 1, NULL, NULL, 0), OT_EINVAL, "overflows", "write: overflow");
  bad = w; bad.dtype = OT_DTYPE_COUNT;
  th_check_error(ot_st_write(path, &bad, 1, NULL, NULL, 0), OT_EINVAL, "dtype 6 out of range", "write: dtype");
  const char *nk[] = {"k"}, *nv[] = {NULL};
  th_check_error(ot_st_write(path, &w, 1, nk, nv, 1), OT_EINVAL, "metadata value 0 is NULL", "write: NULL meta value");
  const char *dk[] = {"k", "k"}, *dv[] = {"a", "b"};
  th_check_error(ot_st_write(path, &w, 1, dk, dv, 2), OT_EINVAL, "duplicate metadata key name 'k'", "write: duplicate meta");
  th_check_error(ot_st_write("/nonexistent_dir_ot/x.safetensors", &w, 1, NULL, NULL, 0), OT_EIO,
                 "/nonexistent_dir_ot/x.safetensors.tmp: cannot create", "write: unwritable path");
  th_check_error(ot_st_open(&f, "/nonexistent_dir_ot/x.safetensors"), OT_EIO, "cannot open", "open: missing file");
  th_check_error(ot_st_open(&f, tmpdir()), OT_EIO, "not a regular file", "open: a directory");
  // A zero-tensor file with metadata only.
  th_check(ot_st_write(path, NULL, 0, mk, mv, 1) == OT_OK && ot_st_open(&f, path) == OT_OK &&
           ot_st_count(f) == 0 && strcmp(ot_st_meta(f, "format"), "pt") == 0, "metadata-only file");
  ot_st_close(f);
  // Truncated file on disk goes through the mmap path with a clear message.
  struct stat st;
  th_check(ot_st_write(path, &w, 1, NULL, NULL, 0) == OT_OK && stat(path, &st) == 0 &&
           truncate(path, st.st_size - 8) == 0, "truncate");
  th_check_error(ot_st_open(&f, path), OT_EFORMAT, "end beyond the data region", "open: truncated file");
  unlink(path);
  th_check(ot_mem_current(OT_MEM_OTHER) == mem0, "OT_MEM_OTHER back to %zu (now %zu)", mem0, ot_mem_current(OT_MEM_OTHER));
}

// ---------------------------------------------------------------- fuzz -----
// Opens buf[0, len) from an exact-size copy; on success checks the invariants.
static bool fuzz_one(const uint8_t *src, size_t len, int *n_ok) {
  uint8_t *b = th_alloc(len);
  if (len) memcpy(b, src, len);
  ot_st_file *f = NULL;
  ot_status s = ot_st_open_mem(&f, b, len, "fuzz");
  bool ok = true;
  if (s == OT_OK) {
    (*n_ok)++;
    for (int i = 0; i < ot_st_count(f); i++) {
      const ot_st_tensor *t = ot_st_get(f, i);
      uint64_t numel = 1;
      for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
      ok = ok && numel * ot_dtype_size(t->dtype) == t->nbytes && ot_st_find(f, t->name) == t;
      volatile uint8_t sink = 0;
      for (size_t k = 0; k < t->nbytes; k++) sink ^= ((const uint8_t *)t->data)[k];
      (void)sink;
    }
    ot_st_close(f);
  } else {
    ok = (s == OT_EFORMAT) && f == NULL && strncmp(ot_last_error(), "fuzz", 4) == 0;
  }
  free(b);
  return ok;
}

static void test_fuzz(void) {
  size_t mem0 = ot_mem_current(OT_MEM_OTHER);
  // A valid image from the writer.
  float a[12] = {0}; uint16_t h[3] = {0}; int32_t q[2] = {0};
  ot_st_tensor t[] = {{"w", OT_F32, 2, {3, 4}, a, 48}, {"b\\u", OT_BF16, 1, {3}, h, 6},
                      {"ids", OT_I32, 1, {2}, q, 8}};
  const char *mk[] = {"k"}, *mv[] = {"v"};
  char path[512];
  snprintf(path, sizeof path, "%s/fz.safetensors", tmpdir());
  if (!th_check(ot_st_write(path, t, 3, mk, mv, 1) == OT_OK, "fuzz: write base (%s)", ot_last_error())) return;
  FILE *fp = fopen(path, "rb");
  uint8_t img[4096]; size_t len = fp ? fread(img, 1, sizeof img, fp) : 0;
  if (fp) fclose(fp);
  unlink(path);
  int n_ok = 0, bad = 0;
  th_check(fuzz_one(img, len, &n_ok) && n_ok == 1, "fuzz: base image valid");
  // Every truncation must fail cleanly.
  n_ok = 0;
  for (size_t l = 0; l < len; l++) bad += !fuzz_one(img, l, &n_ok);
  th_check(bad == 0 && n_ok == 0, "fuzz: all %zu truncations rejected (%d accepted, %d bad)", len, n_ok, bad);
  // Random byte flips anywhere, and JSON-flavored mutations inside the header.
  th_rng r = {7};
  uint8_t m[4096];
  static const char alphabet[] = "{}[]\":,0123456789-.eE \\uFTBI8612x";
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | img[i];
  n_ok = 0;
  for (int it = 0; it < 50000; it++) {
    memcpy(m, img, len);
    size_t l = len;
    int k = 1 + (int)(th_next(&r) % 4);
    for (int j = 0; j < k; j++) {
      if (it % 3 == 0) m[th_next(&r) % l] = (uint8_t)th_next(&r);
      else m[8 + th_next(&r) % hl] = (uint8_t)alphabet[th_next(&r) % (sizeof alphabet - 1)];
    }
    if (it % 7 == 1) {  // insert or delete a header byte, keeping the length field right
      size_t at = 8 + th_next(&r) % hl, nh = hl;
      if (th_next(&r) & 1) {
        memmove(m + at + 1, m + at, l - at); m[at] = (uint8_t)alphabet[th_next(&r) % (sizeof alphabet - 1)];
        l++; nh++;
      } else {
        memmove(m + at, m + at + 1, l - at - 1); l--; nh--;
      }
      for (int j = 0; j < 8; j++) m[j] = (uint8_t)((uint64_t)nh >> (8 * j));
    }
    if (it % 5 == 0) l = th_next(&r) % (l + 1);
    bad += !fuzz_one(m, l, &n_ok);
  }
  th_check(bad == 0, "fuzz: 50000 mutated images handled (%d accepted, %d bad)", n_ok, bad);
  // Pure garbage with a plausible or random header length.
  for (int it = 0; it < 5000; it++) {
    size_t l = th_next(&r) % 300;
    for (size_t j = 0; j < l; j++) m[j] = (uint8_t)th_next(&r);
    if (l >= 8 && it % 2) { uint64_t x = th_next(&r) % l; for (int j = 0; j < 8; j++) m[j] = (uint8_t)(x >> (8 * j)); }
    bad += !fuzz_one(m, l, &n_ok);
  }
  th_check(bad == 0, "fuzz: garbage handled (%d bad)", bad);
  th_check(ot_mem_current(OT_MEM_OTHER) == mem0, "fuzz: no leaked tracked memory");
}

int main(void) {
  test_json();
  test_malformed();
  test_roundtrip();
  test_fuzz();
  rmdir(tmpdir());
  return th_finish();
}
