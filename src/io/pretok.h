// Internal: Unicode class tables (generated, src/io/unicode_tables.c) and the
// UTF-8 character classifier behind ot_pretok_next.
#ifndef OT_IO_PRETOK_H
#define OT_IO_PRETOK_H
#include "ot/data.h"

extern const char ot_uc_version[];
extern const uint32_t ot_uc_letter[][2];
extern const int ot_uc_letter_n;
extern const uint32_t ot_uc_number[][2];
extern const int ot_uc_number_n;
extern const uint32_t ot_uc_space[][2];
extern const int ot_uc_space_n;

enum { OT_UC_OTHER = 0, OT_UC_LETTER, OT_UC_NUMBER, OT_UC_SPACE };

// Class of code point cp (OT_UC_*).
int ot_uc_class(uint32_t cp);
// Decodes the character at s[pos] (pos < len): returns its byte length (1 for
// an invalid or truncated sequence, which is classed OT_UC_OTHER) and its class.
size_t ot_uc_next(const uint8_t *s, size_t len, size_t pos, int *cls);

#endif
