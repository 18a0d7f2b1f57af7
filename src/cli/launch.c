// `ot launch`: a MindSpore / HCCL rank table (or an Open MPI hostfile) -> mpirun.
// Thin: reading and checking the table, the files Open MPI reads and the command
// line are the library's (ot_launch_* in ot/dist.h).
#include "cli.h"
#include "ot/dist.h"
#include <errno.h>
#include <unistd.h>

typedef struct {
  const char *rank_table, *hostfile, *mpirun, *out;
  int np, threads;
  int bind;   // 1: core, 0: none
  bool dry_run;
  cli_list mpi_args;
} launch_opts;

static const cli_flag k_flags[] = {
    CLI_S("--rank-table", launch_opts, rank_table, "FILE",
          "MindSpore / HCCL rank table (rank_table_8pcs.json): server_list of\n"
          "server_id and device [{device_id, rank_id}]; checked, then written as\n"
          "an Open MPI hostfile (and a rankfile when the rank order needs one)"),
    CLI_S("--hostfile", launch_opts, hostfile, "FILE",
          "instead: an Open MPI hostfile ('host slots=N' lines), used as it is"),
    CLI_I("--np", launch_opts, np, 1, OT_LAUNCH_RANKS_MAX, "N",
          "processes (default: the table's ranks / the hostfile's slots)"),
    CLI_I("--threads", launch_opts, threads, 1, 4096, "T",
          "OMP_NUM_THREADS of each rank (default: $OMP_NUM_THREADS, else this\n"
          "machine's cores / the most ranks on one host)"),
    {"--bind", CLI_ENUM, offsetof(launch_opts, bind), 0, NULL, 0, 0, "core|none", {1, 0},
     "core (default): each rank bound to its T cores (--map-by slot:PE=T\n"
     "--bind-to core, or the rankfile's cores); none: --bind-to none"},
    {"--mpirun-arg", CLI_LIST, offsetof(launch_opts, mpi_args), 0, "ARG", 0, 32, NULL, {0},
     "one more mpirun argument, before the program; repeat it\n"
     "(e.g. --mpirun-arg=--oversubscribe --mpirun-arg=--report-bindings)"},
    CLI_S("--mpirun", launch_opts, mpirun, "PATH", "the launcher (default mpirun, Open MPI)"),
    CLI_S("--out", launch_opts, out, "DIR", "where the hostfile and rankfile go (default out/launch)"),
    CLI_B("--dry-run", launch_opts, dry_run, "print the files and the mpirun command; run nothing"),
};

const cli_command cli_launch_command = {
    "launch", "(--rank-table FILE | --hostfile FILE) [--dry-run] [options] -- COMMAND ...",
    "start an `ot` command (or any program) on the hosts of a MindSpore rank table or a hostfile",
    "Reads the rank table (every rank 0..N-1 once, server_count = the servers listed, no server\n"
    "or device listed twice), writes the Open MPI hostfile (each server with its devices as\n"
    "slots, in rank order) and runs mpirun with binding and OMP_NUM_THREADS. COMMAND is an `ot`\n"
    "command (train, eval, ...: this ot runs it) or a program.\n",
    k_flags, sizeof k_flags / sizeof k_flags[0],
    "examples:\n"
    "  ot launch --rank-table rank_table_8pcs.json -- train --data_parallel 4 --model_parallel 2\n"
    "  ot launch --hostfile hosts --np 4 --dry-run -- train --data-parallel 4\n",
    NULL, false};

// Prints a shell word, quoted when it needs it.
static void put_word(FILE *f, const char *w) {
  if (*w && !w[strcspn(w, " \t\n'\"\\$`!*?[]{}();&|<>~#")]) { fputs(w, f); return; }
  fputc('\'', f);
  for (; *w; w++) {
    if (*w == '\'') fputs("'\\''", f);
    else fputc(*w, f);
  }
  fputc('\'', f);
}

// Prints a written file, indented, under its path.
static void print_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return;
  printf("%s:\n", path);
  char line[1024];
  while (fgets(line, sizeof line, f)) printf("  %s%s", line, strchr(line, '\n') ? "" : "\n");
  fclose(f);
}

int ot_cmd_launch(int argc, char **argv) {
  int sep = 0;   // the program after "--"
  while (sep < argc && strcmp(argv[sep], "--")) sep++;
  launch_opts o = {.bind = 1};
  const int pr = cli_parse(&cli_launch_command, sep, argv, &o, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  const cli_command *c = &cli_launch_command;
  if (!o.rank_table == !o.hostfile) return cli_usage_error(c, "give --rank-table FILE or --hostfile FILE (one of them)");
  if (sep + 1 >= argc) return cli_usage_error(c, "what to run? put it after --, e.g. -- train --data_parallel 2");
  ot_launch_plan plan;
  ot_status s = o.rank_table ? ot_launch_read_rank_table(&plan, o.rank_table) : ot_launch_read_hostfile(&plan, o.hostfile);
  if (s != OT_OK) {
    fprintf(stderr, "ot launch: %s\n", ot_last_error());
    return 2;
  }
  if (o.rank_table && o.np && o.np != plan.n_ranks) {
    fprintf(stderr, "ot launch: --np %d, but %s has %d ranks (drop --np)\n", o.np, o.rank_table, plan.n_ranks);
    ot_launch_free(&plan);
    return 2;
  }
  int threads = o.threads;
  const char *why = "--threads";
  if (!threads && getenv("OMP_NUM_THREADS")) {
    threads = atoi(getenv("OMP_NUM_THREADS"));
    why = "$OMP_NUM_THREADS";
  }
  if (threads < 1) {
    int most = 1;
    for (int h = 0; h < plan.n_hosts; h++) most = plan.slots[h] > most ? plan.slots[h] : most;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    threads = cores / most > 1 ? (int)(cores / most) : 1;
    why = "this machine's cores / the most ranks on one host";
  }
  char hostfile[OT_PATH_MAX + 32], rankfile[OT_PATH_MAX + 32] = "";
  if (o.rank_table) s = ot_launch_write(&plan, o.out ? o.out : "out/launch", threads, hostfile, rankfile, sizeof hostfile);
  else snprintf(hostfile, sizeof hostfile, "%s", o.hostfile);
  // the program: an `ot` command runs with this ot
  char self[OT_PATH_MAX];
  const int n_cmd = argc - sep - 1;
  const char **cmd = calloc((size_t)n_cmd + 1, sizeof *cmd);
  int k = 0;
  if (cmd && cli_is_command(argv[sep + 1])) {
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    cmd[k++] = n > 0 ? self : "ot";
  }
  for (int i = sep + 1; cmd && i < argc; i++) cmd[k++] = argv[i];
  const ot_launch_cmd lc = {o.mpirun, o.np, hostfile, rankfile[0] ? rankfile : NULL, threads, o.bind == 1,
                            o.mpi_args.n, o.mpi_args.v, k, cmd};
  char **av = NULL;
  int ac = 0;
  if (!cmd) s = ot_error(OT_ENOMEM, "out of memory");
  if (s == OT_OK) s = ot_launch_argv(&plan, &lc, &av, &ac);
  int rc = 0;
  if (s != OT_OK) {
    fprintf(stderr, "ot launch: %s\n", ot_last_error());
    rc = 1;
  } else {
    printf("ot launch: %d ranks on %d host%s from %s%s; OMP_NUM_THREADS=%d (%s)\n", lc.np ? lc.np : plan.n_ranks,
           plan.n_hosts, plan.n_hosts == 1 ? "" : "s", o.rank_table ? o.rank_table : o.hostfile,
           plan.rankfile ? " (its rank order needs a rankfile)" : "", threads, why);
    if (o.dry_run) {
      print_file(hostfile);
      if (rankfile[0]) print_file(rankfile);
    }
    for (int i = 0; i < ac; i++) {
      if (i) putchar(' ');
      put_word(stdout, av[i]);
    }
    putchar('\n');
    fflush(stdout);
    if (!o.dry_run) {
      execvp(av[0], av);
      fprintf(stderr, "ot launch: cannot run '%s': %s (install Open MPI, or give --mpirun PATH)\n", av[0],
              strerror(errno));
      rc = 127;
    }
  }
  ot_launch_argv_free(av);
  free(cmd);
  ot_launch_free(&plan);
  return rc;
}
