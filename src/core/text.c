// Small text helpers shared by every layer.
#include "internal.h"

int ot__edit_distance(const char *a, const char *b) {
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la > 63 || lb > 63) return 99;
  int d[64][64];
  for (int i = 0; i <= la; i++) d[i][0] = i;
  for (int j = 0; j <= lb; j++) d[0][j] = j;
  for (int i = 1; i <= la; i++)
    for (int j = 1; j <= lb; j++) {
      int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
      d[i][j] = c;
    }
  return d[la][lb];
}
