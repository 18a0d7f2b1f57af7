// The one flag parser of `ot` (flags.h): argv against a command's table, the
// training key table for the keys of train / eval, and the help from the table.
#include "flags.h"
#include "internal.h"
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

// What a flag's value must be, for messages: "an integer in [1, 4096]".
static void describe(const cli_flag *f, char *out, size_t cap) {
  switch (f->kind) {
    case CLI_INT: snprintf(out, cap, "an integer in [%.0f, %.0f]", f->lo, f->hi); break;
    case CLI_FLOAT: case CLI_DOUBLE: snprintf(out, cap, "a number in [%g, %g]", f->lo, f->hi); break;
    case CLI_U64: snprintf(out, cap, "an unsigned integer"); break;
    case CLI_ENUM: snprintf(out, cap, "one of %s", f->choices); break;
    default: snprintf(out, cap, "%s", f->arg && f->arg[0] ? f->arg : "a value"); break;
  }
}

// Index of v among "a|b|c", or -1.
static int choice_index(const char *choices, const char *v) {
  const size_t n = strlen(v);
  int i = 0;
  for (const char *p = choices; *p; i++) {
    const size_t k = strcspn(p, "|");
    if (k == n && !strncmp(p, v, n)) return i;
    p += k + (p[k] == '|');
  }
  return -1;
}

// Stores val into the flag's destination in opts; false (value unusable) otherwise.
static bool store(const cli_flag *f, const char *val, char *opts) {
  void *dst = opts + f->off;
  char *end;
  errno = 0;
  switch (f->kind) {
    case CLI_STR: *(const char **)dst = val; return true;
    case CLI_LIST: {
      cli_list *l = dst;
      if (l->n >= (int)f->hi || l->n >= CLI_LIST_MAX) return false;
      l->v[l->n++] = val;
      return true;
    }
    case CLI_INT: {
      const long v = strtol(val, &end, 10);
      if (errno || *end || end == val || v < f->lo || v > f->hi) return false;
      *(int *)dst = (int)v;
      return true;
    }
    case CLI_FLOAT: case CLI_DOUBLE: {
      const double v = strtod(val, &end);
      if (errno || *end || end == val || !(v >= f->lo && v <= f->hi)) return false;
      if (f->kind == CLI_FLOAT) *(float *)dst = (float)v;
      else *(double *)dst = v;
      return true;
    }
    case CLI_U64: {
      const unsigned long long v = strtoull(val, &end, 0);
      if (errno || *end || end == val || *val == '-') return false;
      *(uint64_t *)dst = (uint64_t)v;
      return true;
    }
    case CLI_ENUM: {
      const int i = choice_index(f->choices, val);
      if (i < 0) return false;
      *(int *)dst = f->values[i];
      return true;
    }
    case CLI_SWITCH: *(bool *)dst = true; return true;
  }
  return false;
}

// The row of the table named name[0, n) exactly, NULL if none.
static const cli_flag *find_flag(const cli_command *c, const char *name, size_t n) {
  for (int i = 0; i < c->n_flags; i++)
    if (strlen(c->flags[i].name) == n && !strncmp(c->flags[i].name, name, n)) return &c->flags[i];
  return NULL;
}

// The flag of the table (or --help) nearest to name, NULL if none is close.
static const char *nearest(const cli_command *c, const char *name) {
  const char *who = NULL;
  int best = 99;
  for (int i = -1; i < c->n_flags; i++) {
    const char *cand = i < 0 ? "--help" : c->flags[i].name;
    const int d = ot__edit_distance(name, cand);
    if (d < best) { best = d; who = cand; }
  }
  const int lim = (int)strlen(name) / 4;
  return best <= (lim < 2 ? 2 : lim) ? who : NULL;
}

int cli_usage_error(const cli_command *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ot %s: ", c->name);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n\n");
  cli_help(c, stderr);
  return CLI_ERR;
}

// True if --name is a key of the training key table (or --no-KEY of a boolean one).
static bool is_key(const char *name) {
  return ot_train_key_canonical(name) || ot_train_key_is_bool(name) ||
         (!strncmp(name, "no-", 3) && ot_train_key_is_bool(name + 3));
}

// A --KEY of the training key table (cli_command.keys): the rules of `ot train`.
static int parse_key(const cli_command *c, const char *key, const char *val, int argc, char **argv, int *i,
                     ot_settings *keys) {
  if (!val && !strncmp(key, "no-", 3) && ot_train_key_is_bool(key + 3)) {
    key += 3;
    val = "false";
  } else if (!val) {
    const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (ot_train_key_is_bool(key) && (!next || !strncmp(next, "--", 2))) val = "true";
    else if (next) val = argv[++*i];
    else {
      fprintf(stderr, "ot %s: --%s needs a value (see `ot %s --help`)\n", c->name, key, c->name);
      return CLI_ERR;
    }
  }
  if (ot_settings_add(keys, key, val, "command line") != OT_OK) {
    fprintf(stderr, "ot %s: %s\n", c->name, ot_last_error());
    return CLI_ERR;
  }
  return CLI_OK;
}

int cli_parse(const cli_command *c, int argc, char **argv, void *opts, ot_settings *keys) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { cli_help(c, stdout); return CLI_HELP; }
    if (strncmp(a, "--", 2) != 0 || !a[2]) {
      fprintf(stderr, "ot %s: unexpected argument '%s' (options are --name value; see `ot %s --help`)\n",
              c->name, a, c->name);
      return CLI_ERR;
    }
    const char *eq = strchr(a, '=');
    const size_t n = eq ? (size_t)(eq - a) : strlen(a);
    const cli_flag *f = find_flag(c, a, n);
    const char *val = eq ? eq + 1 : NULL;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)n, a);
    const char *near = f ? NULL : nearest(c, name);
    if (!f && c->keys && (!near || is_key(name + 2))) {   // the key table names its own near misses
      if (parse_key(c, name + 2, val, argc, argv, &i, keys) != CLI_OK) return CLI_ERR;
      continue;
    }
    if (!f) {
      if (near) return cli_usage_error(c, "unknown option '%s' (did you mean '%s'?)", name, near);
      return cli_usage_error(c, "unknown option '%s'", name);
    }
    char what[96];
    describe(f, what, sizeof what);
    if (f->kind == CLI_SWITCH && val) {
      fprintf(stderr, "ot %s: %s takes no value (drop '=%s')\n", c->name, f->name, val);
      return CLI_ERR;
    }
    if (f->kind != CLI_SWITCH && !val) {
      if (i + 1 >= argc) {
        fprintf(stderr, "ot %s: %s needs a value (%s)\n", c->name, f->name, what);
        return CLI_ERR;
      }
      val = argv[++i];
    }
    if (!store(f, val ? val : "", opts)) {
      if (f->kind == CLI_LIST)
        fprintf(stderr, "ot %s: %s given more than %.0f times\n", c->name, f->name, f->hi);
      else
        fprintf(stderr, "ot %s: %s '%s' is not %s\n", c->name, f->name, val, what);
      return CLI_ERR;
    }
    if (f->mark) *((bool *)((char *)opts + f->mark - 1)) = true;
  }
  return CLI_OK;
}

// "  --name ARG    help", continuation lines of the help indented to its column.
static void help_row(const cli_flag *f, FILE *out) {
  enum { COL = 22 };
  char label[96];
  const char *arg = f->kind == CLI_ENUM ? f->choices : f->arg;
  snprintf(label, sizeof label, "  %s%s%s", f->name, arg && arg[0] ? " " : "", arg ? arg : "");
  const int len = (int)strlen(label);
  fprintf(out, "%-*s", COL - 1, label);
  fputs(len >= COL - 1 ? "  " : " ", out);
  for (const char *p = f->help; *p;) {
    const size_t k = strcspn(p, "\n");
    fwrite(p, 1, k, out);
    fputc('\n', out);
    p += k;
    if (*p == '\n' && *++p) fprintf(out, "%*s", COL, "");
  }
}

void cli_help(const cli_command *c, FILE *f) {
  fprintf(f, "usage: ot %s%s%s\n", c->name, c->synopsis[0] ? " " : "", c->synopsis);
  if (c->about) fputs(c->about, f);
  for (int i = 0; i < c->n_flags; i++) help_row(&c->flags[i], f);
  if (c->epilog) fputs(c->epilog, f);
  if (c->more_help) c->more_help(f);
}
