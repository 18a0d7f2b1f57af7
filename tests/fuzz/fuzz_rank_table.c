// libFuzzer target: launch plans (ot/dist.h), the input read as a MindSpore rank
// table and as an Open MPI hostfile. Invariants: an accepted plan is consistent
// (every rank on a listed host, the slots add up to the ranks, each rank's
// position below its host's slots, a host's positions distinct), its hostfile
// (and rankfile) are written and its mpirun command is built; a refusal has a
// message naming the input; tracked memory returns to its start.
#include "fuzz_common.h"
#include <stdlib.h>
#include <string.h>

static void check_plan(const ot_launch_plan *p, const char *what) {
  FZ_CHECK(p->n_ranks >= 1 && p->n_hosts >= 1 && p->n_hosts <= p->n_ranks, "%s: %d ranks, %d hosts", what,
           p->n_ranks, p->n_hosts);
  int sum = 0;
  for (int h = 0; h < p->n_hosts; h++) sum += p->slots[h];
  FZ_CHECK(sum == p->n_ranks, "%s: slots add up to %d, not %d ranks", what, sum, p->n_ranks);
  for (int r = 0; r < p->n_ranks; r++) {
    const ot_launch_rank *k = &p->rank[r];
    FZ_CHECK(k->host >= 0 && k->host < p->n_hosts && k->local >= 0 && k->local < p->slots[k->host],
             "%s: rank %d at host %d position %d", what, r, k->host, k->local);
    for (int q = 0; q < r; q++)
      FZ_CHECK(p->rank[q].host != k->host || p->rank[q].local != k->local, "%s: ranks %d and %d share a position",
               what, q, r);
  }
  char dir[512], hf[600], rf[600];
  fz_scratch(dir, sizeof dir, "launch");
  FZ_CHECK(ot_launch_write(p, dir, 2, hf, rf, sizeof hf) == OT_OK, "%s: write: %s", what, ot_last_error());
  FZ_CHECK(!rf[0] == !p->rankfile, "%s: rankfile written %d, needed %d", what, rf[0] != 0, p->rankfile);
  const char *prog[] = {"ot", "train"};
  const ot_launch_cmd c = {NULL, 0, hf, rf[0] ? rf : NULL, 2, true, 0, NULL, 2, prog};
  char **av = NULL;
  int ac = 0;
  FZ_CHECK(ot_launch_argv(p, &c, &av, &ac) == OT_OK && av[ac] == NULL && ac > 8, "%s: argv: %s", what,
           ot_last_error());
  ot_launch_argv_free(av);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t mem0 = fz_mem_total();
  ot_launch_plan p;
  ot_status s = ot_launch_parse_rank_table(&p, (const char *)data, size, "fuzz.json");
  if (s == OT_OK) check_plan(&p, "rank table");
  else {
    fz_refused(s, "rank table");
    FZ_CHECK(!strncmp(ot_last_error(), "fuzz.json", 9) || s == OT_ENOMEM, "message does not name the input: %s",
             ot_last_error());
  }
  ot_launch_free(&p);
  char path[64];
  int fd = fz_memfile(data, size, path, sizeof path);
  s = ot_launch_read_hostfile(&p, path);
  if (s == OT_OK) check_plan(&p, "hostfile");
  else fz_refused(s, "hostfile");
  ot_launch_free(&p);
  fz_close(fd);
  fz_mem_back(mem0, "rank_table");
  return 0;
}
