// Status codes and the per-thread last-error message.
#include "ot/core.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

// Formats into a local buffer first: an argument may be ot_last_error() itself (a
// caller prefixing the message of the call that failed), which vsnprintf must not
// overwrite while it reads it.
ot_status ot_error(ot_status s, const char *fmt, ...) {
  char buf[sizeof g_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  memcpy(g_msg, buf, sizeof g_msg);
  return s;
}
