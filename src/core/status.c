// Status codes and the per-thread last-error message.
#include "ot/core.h"
#include <stdarg.h>
#include <stdio.h>

static _Thread_local char g_msg[1024];

const char *ot_last_error(void) { return g_msg; }
void ot_clear_error(void) { g_msg[0] = 0; }

const char *ot_status_name(ot_status s) {
  switch (s) {
    case OT_OK: return "ok";
    case OT_EINVAL: return "invalid argument";
    case OT_ENOMEM: return "out of memory";
    case OT_EIO: return "i/o error";
    case OT_EFORMAT: return "malformed input";
    case OT_EUNSUPPORTED: return "unsupported";
    case OT_EINTERNAL: return "internal error";
  }
  return "unknown status";
}

ot_status ot_error(ot_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_msg, sizeof g_msg, fmt, ap);
  va_end(ap);
  return s;
}
