// Loss-curve SVG from the JSONL training log: train loss (line) and held-out
// loss (line with markers) against the step, with axes, ticks and a legend.
// Hand-written SVG; no dependencies.
#include "train/train_impl.h"
#include "io/json.h"
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

typedef struct { double step, v; long order; } pt;
typedef struct { pt *p; long n, cap; } series;

static int push(series *s, double step, double v, long order) {
  if (s->n == s->cap) {
    long nc = s->cap ? 2 * s->cap : 256;
    pt *q = realloc(s->p, (size_t)nc * sizeof *q);
    if (!q) return -1;
    s->p = q;
    s->cap = nc;
  }
  s->p[s->n++] = (pt){step, v, order};
  return 0;
}

static int by_step(const void *a, const void *b) {
  const pt *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

// Sorted by step, the last record of each step kept.
static void dedup(series *s) {
  if (s->n > 1) qsort(s->p, (size_t)s->n, sizeof *s->p, by_step);   // p is NULL when empty
  long k = 0;
  for (long i = 0; i < s->n; i++) {
    if (k > 0 && s->p[k - 1].step == s->p[i].step) s->p[k - 1] = s->p[i];
    else s->p[k++] = s->p[i];
  }
  s->n = k;
}

typedef struct { char *b; size_t n, cap; bool oom; } sbuf;

static void put(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *s, const char *fmt, ...) {
  if (s->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(s->b + s->n, s->cap - s->n, fmt, ap);
    va_end(ap);
    if (k < 0) { s->oom = true; return; }
    if ((size_t)k < s->cap - s->n) { s->n += (size_t)k; return; }
    size_t nc = (s->cap + (size_t)k) * 2;
    char *q = realloc(s->b, nc);
    if (!q) { s->oom = true; return; }
    s->b = q;
    s->cap = nc;
  }
}

// A "nice" tick spacing (1, 2 or 5 x 10^k) giving about n ticks over range.
static double nice_step(double range, int n) {
  if (!(range > 0)) return 1;
  double raw = range / n, p = pow(10, floor(log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void esc(sbuf *s, const char *t) {
  for (; *t; t++) {
    if (*t == '<') put(s, "&lt;");
    else if (*t == '>') put(s, "&gt;");
    else if (*t == '&') put(s, "&amp;");
    else put(s, "%c", *t);
  }
}

ot_status ot_train_plot(const char *log_path, const char *svg_path, const char *title) {
  static const char fn[] = "ot_train_plot";
  OT_CHECK_PTR(log_path, fn);
  OT_CHECK_PTR(svg_path, fn);
  char *text = NULL;
  size_t len = 0;
  OT_TRY(ot__read_text(log_path, (size_t)1 << 30, &text, &len));
  series tr = {0}, ev = {0};
  long order = 0;
  bool oom = false;
  for (char *p = text; *p && !oom;) {
    char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    ot_json_doc doc = {0};
    if (n && ot_json_parse(&doc, p, n, 0, log_path) == OT_OK) {
      const ot_json *st = ot_json_get(doc.root, "step"), *l = ot_json_get(doc.root, "loss"),
                    *vl = ot_json_get(doc.root, "val_loss");
      if (st && st->type == OT_JNUM) {
        if (l && l->type == OT_JNUM) oom |= push(&tr, st->d, l->d, order++) != 0;
        if (vl && vl->type == OT_JNUM) oom |= push(&ev, st->d, vl->d, order++) != 0;
      }
      ot_json_free(&doc);
    }
    p = nl ? nl + 1 : p + n;
  }
  ot_clear_error();
  free(text);
  if (oom) { free(tr.p); free(ev.p); return ot_error(OT_ENOMEM, "%s: out of memory", fn); }
  dedup(&tr);
  dedup(&ev);

  double x0 = 0, x1 = 1, y0 = INFINITY, y1 = -INFINITY;
  series *all[2] = {&tr, &ev};
  for (int k = 0; k < 2; k++)
    for (long i = 0; i < all[k]->n; i++) {
      const pt *q = &all[k]->p[i];
      if (q->step > x1) x1 = q->step;
      if (q->v < y0) y0 = q->v;
      if (q->v > y1) y1 = q->v;
    }
  if (!(y0 <= y1)) { y0 = 0; y1 = 1; }
  if (y1 - y0 < 1e-6) { y0 -= 0.5; y1 += 0.5; }
  double ys = nice_step(y1 - y0, 6), xs = nice_step(x1 - x0, 8);
  y0 = floor(y0 / ys) * ys;
  y1 = ceil(y1 / ys) * ys;
  x1 = ceil(x1 / xs) * xs;

  const double W = 800, H = 480, L = 70, R = 20, T = 40, B = 55;
  const double pw = W - L - R, ph = H - T - B;
#define PX(x) (L + ((x) - x0) / (x1 - x0) * pw)
#define PY(y) (T + (1 - ((y) - y0) / (y1 - y0)) * ph)
  sbuf s = {0};
  put(&s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
  put(&s, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  put(&s, "<text x=\"%.0f\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">", W / 2);
  esc(&s, title && title[0] ? title : "training loss");
  put(&s, "</text>\n");
  for (double y = y0; y <= y1 + ys * 1e-9; y += ys) {
    put(&s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", L, PY(y), L + pw, PY(y));
    put(&s, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6, PY(y) + 4, round(y / ys) * ys);
  }
  for (double x = x0; x <= x1 + xs * 1e-9; x += xs) {
    put(&s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", PX(x), T, PX(x), T + ph);
    put(&s, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", PX(x), T + ph + 18, x);
  }
  put(&s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n", L, T, pw, ph);
  put(&s, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step</text>\n", L + pw / 2, H - 12);
  put(&s, "<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\">loss (nats/token)</text>\n",
      T + ph / 2);
  static const char *const color[2] = {"#1f77b4", "#ff7f0e"};
  for (int k = 0; k < 2; k++) {
    if (!all[k]->n) continue;
    put(&s, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"", color[k], k ? "2" : "1.2");
    for (long i = 0; i < all[k]->n; i++)
      put(&s, "%.1f,%.1f ", PX(all[k]->p[i].step), PY(all[k]->p[i].v));
    put(&s, "\"/>\n");
    if (k == 1)
      for (long i = 0; i < all[k]->n; i++)
        put(&s, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", PX(all[k]->p[i].step),
            PY(all[k]->p[i].v), color[k]);
  }
  const char *lab[2] = {"train loss", "held-out loss"};
  for (int k = 0; k < 2; k++) {
    double ly = T + 16 + 18 * k;
    put(&s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
        L + pw - 150, ly - 4, L + pw - 125, ly - 4, color[k]);
    put(&s, "<text x=\"%.1f\" y=\"%.1f\">%s%s</text>\n", L + pw - 118, ly, lab[k], all[k]->n ? "" : " (none)");
  }
  if (tr.n) put(&s, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">last train %.4f%s</text>\n",
                L + pw - 8, T + ph - 24, tr.p[tr.n - 1].v, "");
  if (ev.n) put(&s, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">last held-out %.4f</text>\n",
                L + pw - 8, T + ph - 8, ev.p[ev.n - 1].v);
  put(&s, "</svg>\n");
#undef PX
#undef PY
  free(tr.p);
  free(ev.p);
  if (s.oom) { free(s.b); return ot_error(OT_ENOMEM, "%s: out of memory", fn); }
  ot_status st = ot__write_atomic(svg_path, s.b, s.n);
  free(s.b);
  return st;
}
