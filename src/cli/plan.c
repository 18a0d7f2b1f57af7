// `ot plan`: the ranked layouts of a model and global batch on a machine (ot/plan.h),
// one layout in detail, or this machine measured into a machine file.
#include "cli.h"
#include "ot/dist.h"
#include "ot/plan.h"
#include "io/files.h"
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
  const char *machine, *out, *csv, *config;
  int hosts, devices, top;
  bool measure, only;
} plan_opts;

static const cli_flag k_plan_flags[] = {
    CLI_S("--machine", plan_opts, machine, "NAME|FILE",
          "a preset (a100-80gb, ascend-910) or a machine file (default out/machine.conf,\n"
          "measured first when missing)"),
    CLI_I("--hosts", plan_opts, hosts, 1, 1e6, "H", "hosts the layouts use (default 1)"),
    CLI_I("--devices", plan_opts, devices, 1, 1e7, "N",
          "ranks in all (default: hosts x the machine's devices per host)"),
    CLI_I("--top", plan_opts, top, 0, 1e6, "K", "layouts shown, best first (default 10; 0: all)"),
    CLI_B("--only", plan_opts, only,
          "predict just the layout the keys give (--data-parallel, --tensor-parallel,\n"
          "--pipeline-stages, --grad-accum, --optimizer-shard, --recompute, ...)"),
    CLI_S("--csv", plan_opts, csv, "FILE", "also write every layout, fitting or not, as CSV"),
    CLI_B("--measure", plan_opts, measure,
          "measure this machine (GEMM rate, memory bandwidth, FMA peak; under\n"
          "`mpirun -np 2` also the all-reduce) and write it to --out"),
    CLI_S("--out", plan_opts, out, "FILE", "--measure: the machine file (default out/machine.conf)"),
    CLI_S("--config", plan_opts, config, "FILE", "settings file of training keys (as ot train --config)"),
};

const cli_command cli_plan_command = {
    "plan", "[--machine NAME|FILE] [--hosts H] [--devices N] [--top K] [--only] [--KEY VALUE ...]",
    "rank the parallel layouts of a model on a machine: memory per device\n"
    "by category, predicted step time, tokens/s and MFU",
    "Every layout of N devices (data x tensor x pipeline parallel, micro-batches, ZeRO stage,\n"
    "recompute, vocab-parallel) for the model and global batch the training keys give\n"
    "(--model, --global-batch, --seq-len, --dtype, ...), ranked by predicted tokens/s. Memory is\n"
    "what the engine allocates (the same planning code, to the byte) plus the ops' scratch;\n"
    "the step time is compute, exposed communication and pipeline bubble from the machine's\n"
    "rates and links. Layouts that do not fit are listed with the reason.\n",
    k_plan_flags, sizeof k_plan_flags / sizeof k_plan_flags[0],
    "examples:\n"
    "  ot plan --measure                              # this machine -> out/machine.conf\n"
    "  mpirun -np 2 ot plan --measure                 # ... with its all-reduce\n"
    "  mpirun -np 4 --map-by node -H a:2,b:2 ot plan --measure   # ... between 2 hosts (1 and 2 a host)\n"
    "  ot plan --model gpt2 --global-batch 16 --seq-len 256 --devices 2\n"
    "  ot plan --machine a100-80gb --hosts 128 --model gpt-1t --global-batch 256 --seq-len 2048 --only \\\n"
    "      --data_parallel 8 --model_parallel 16 --pipeline_stage 8 --micro_batch_num 32 --optimizer_shard true\n",
    NULL, true};

static double gib(double b) { return b / 1073741824.0; }

static void layout_str(char *buf, size_t cap, const ot_plan_result *r) {
  char fu[16] = "", bal[24] = "";
  if (r->fusion_layers > 0) snprintf(fu, sizeof fu, " f%d", r->fusion_layers);
  if (r->balanced_stages) snprintf(bal, sizeof bal, " bal%d", r->first_stage_blocks);
  snprintf(buf, cap, "dp%d tp%d pp%d M%d B%d z%d %s%s%s%s", r->dp, r->tp, r->pp, r->micro_batches, r->batch_size,
           r->zero, ot_recompute_name(r->recompute), r->vocab_parallel ? " vp" : "", fu, bal);
}

static void print_header(FILE *f) {
  fprintf(f, "%4s  %-36s %7s %7s %7s %7s %7s %7s | %8s %8s %8s %8s | %10s %6s\n", "#", "layout", "params",
          "grads", "optim", "act", "ws+scr", "total", "compute", "bubble", "comm", "step s", "tokens/s",
          "MFU");
}

static void print_row(FILE *f, int i, const ot_plan_result *r) {
  char lay[96];
  layout_str(lay, sizeof lay, r);
  const double ws = (double)r->mem[OT_MEM_WORKSPACE] + (double)r->scratch;
  fprintf(f, "%4d  %-36s %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f | %8.3f %8.3f %8.3f %8.3f | %10.0f %5.1f%%\n", i,
          lay, gib((double)r->mem[OT_MEM_PARAMS]), gib((double)r->mem[OT_MEM_GRADS]),
          gib((double)r->mem[OT_MEM_OPTIM]), gib((double)r->mem[OT_MEM_ACTIVATIONS]), gib(ws),
          gib((double)r->mem_total), r->t_compute, r->t_bubble, r->t_comm + r->t_optim, r->t_step,
          r->tokens_per_s, 100 * r->mfu);
}

static void print_detail(FILE *f, const ot_plan_result *r) {
  char lay[96];
  layout_str(lay, sizeof lay, r);
  fprintf(f, "layout %s on %d host%s x %d ranks%s\n", lay, r->hosts, r->hosts > 1 ? "s" : "", r->ranks_per_host,
          r->balanced_stages ? " (bal: stages balanced by compute, N blocks on the first)" : "");
  if (!r->fits) {
    fprintf(f, "  does not fit: %s\n", r->why);
    if (!r->mem_total) return;
  }
  fprintf(f, "  memory of the fullest rank (rank %d), GiB: params %.3f, grads %.3f, optimizer %.3f, activations "
          "%.3f, workspace %.3f, ops' scratch %.3f, other %.3f; total %.3f\n", r->mem_rank,
          gib((double)r->mem[OT_MEM_PARAMS]), gib((double)r->mem[OT_MEM_GRADS]), gib((double)r->mem[OT_MEM_OPTIM]),
          gib((double)r->mem[OT_MEM_ACTIVATIONS]), gib((double)r->mem[OT_MEM_WORKSPACE]), gib((double)r->scratch),
          gib((double)r->mem[OT_MEM_OTHER]), gib((double)r->mem_total));
  size_t sum = r->scratch;
  for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) sum += r->mem[k];
  if (r->mem_total > sum)
    fprintf(f, "  (the total: its peak while the trainer is created, ZeRO-3's whole initial weights before they "
            "are sharded; %.3f GiB during the steps)\n", gib((double)sum));
  if (r->resident > r->mem_total)
    fprintf(f, "  resident set of that rank (+ %.3f GiB of code, libraries, MPI buffers, stacks): %.3f GiB\n",
            gib((double)(r->resident - r->mem_total)), gib((double)r->resident));
  fprintf(f, "  step %.3f s = compute %.3f + pipeline bubble %.3f + exposed communication %.3f + optimizer "
          "and gathers %.3f; %.0f tokens/s, MFU %.1f%%\n", r->t_step, r->t_compute, r->t_bubble, r->t_comm,
          r->t_optim, r->tokens_per_s, 100 * r->mfu);
}

static int write_csv(const char *path, const ot_plan_result *r, int n) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "ot plan: %s: cannot write\n", path);
    return 1;
  }
  fprintf(f, "dp,tp,pp,micro_batches,batch_size,zero,recompute,vocab_parallel,fusion_layers,balanced_stages,fits,why,params,grads,optim,"
          "activations,workspace,scratch,other,total_bytes,t_compute,t_bubble,t_comm,t_optim,t_step,"
          "tokens_per_s,mfu,resident_bytes\n");
  for (int i = 0; i < n; i++) {
    const ot_plan_result *x = &r[i];
    char why[sizeof x->why];
    snprintf(why, sizeof why, "%s", x->why);
    for (char *p = why; *p; p++)
      if (*p == '"' || *p == ',') *p = ';';
    fprintf(f, "%d,%d,%d,%d,%d,%d,%s,%d,%d,%d,%d,\"%s\",%zu,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%zu\n",
            x->dp, x->tp, x->pp, x->micro_batches, x->batch_size, x->zero, ot_recompute_name(x->recompute),
            x->vocab_parallel, x->fusion_layers, x->balanced_stages, x->fits, why, x->mem[OT_MEM_PARAMS], x->mem[OT_MEM_GRADS], x->mem[OT_MEM_OPTIM],
            x->mem[OT_MEM_ACTIVATIONS], x->mem[OT_MEM_WORKSPACE], x->scratch, x->mem[OT_MEM_OTHER],
            x->mem_total, x->t_compute, x->t_bubble, x->t_comm, x->t_optim, x->t_step, x->tokens_per_s, x->mfu,
            x->resident);
  }
  const bool bad = ferror(f) != 0;
  if (fclose(f) != 0 || bad) {
    fprintf(stderr, "ot plan: %s: write failed\n", path);
    return 1;
  }
  return 0;
}

// Why the first is chosen: its margin over the next and over the best layout of
// another (dp, tp, pp) shape.
static void print_why(FILE *f, const ot_plan_result *r, int n) {
  if (n < 1 || !r[0].fits) return;
  char a[96], b[96];
  layout_str(a, sizeof a, &r[0]);
  fprintf(f, "chosen: %s, %.0f tokens/s (compute %.0f%%, bubble %.0f%%, communication and optimizer %.0f%% of "
          "the step)\n", a, r[0].tokens_per_s, 100 * r[0].t_compute / r[0].t_step,
          100 * r[0].t_bubble / r[0].t_step, 100 * (r[0].t_comm + r[0].t_optim) / r[0].t_step);
  for (int i = 1; i < n && r[i].fits; i++) {
    if (r[i].dp == r[0].dp && r[i].tp == r[0].tp && r[i].pp == r[0].pp) continue;
    layout_str(b, sizeof b, &r[i]);
    fprintf(f, "  the best other shape, %s: %.2fx slower (bubble %.3f s, communication %.3f s vs %.3f, %.3f)\n",
            b, r[0].tokens_per_s / r[i].tokens_per_s, r[i].t_bubble, r[i].t_comm + r[i].t_optim, r[0].t_bubble,
            r[0].t_comm + r[0].t_optim);
    break;
  }
}

static int machine_of(const plan_opts *o, ot_machine *m) {
  const char *name = o->machine ? o->machine : "out/machine.conf";
  if (access(name, R_OK) == 0) {
    if (ot_machine_read(name, m) == OT_OK) return 0;
    fprintf(stderr, "ot plan: %s\n", ot_last_error());
    return 2;
  }
  if (o->machine) {
    if (ot_machine_preset(name, m) == OT_OK) return 0;
    fprintf(stderr, "ot plan: %s\n", ot_last_error());
    return 2;
  }
  printf("no out/machine.conf: measuring this machine (ot plan --measure writes it)\n");
  if (ot_machine_measure(m, stdout) != OT_OK) {
    fprintf(stderr, "ot plan: %s\n", ot_last_error());
    return 1;
  }
  return 0;
}

static int measure(const plan_opts *o) {
  ot_machine m;
  if (ot_machine_measure(&m, stdout) != OT_OK) {
    fprintf(stderr, "ot plan: %s\n", ot_last_error());
    return 1;
  }
  if (ot_dist_world_rank() != 0) return 0;
  const char *out = o->out ? o->out : "out/machine.conf";
  char dir[OT_PATH_MAX];
  snprintf(dir, sizeof dir, "%s", out);
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = 0;
    if (ot__mkdirs(dir) != OT_OK) {
      fprintf(stderr, "ot plan: %s\n", ot_last_error());
      return 1;
    }
  }
  if (ot_machine_write(out, &m) != OT_OK) {
    fprintf(stderr, "ot plan: %s\n", ot_last_error());
    return 1;
  }
  printf("wrote %s\n", out);
  return 0;
}

int ot_cmd_plan(int argc, char **argv) {
  plan_opts o = {0};
  o.top = 10;
  ot_plan_result *r = NULL;
  int n = 0;
  ot_machine m;
  ot_settings *flags = calloc(1, sizeof *flags), *user = calloc(1, sizeof *user);
  ot_train_config *c = malloc(sizeof *c);
  int rc = flags && user && c ? 0 : 1;
  if (!rc && ot_dist_init(&argc, &argv) != OT_OK) rc = 1;
  if (!rc) rc = cli_parse(&cli_plan_command, argc, argv, &o, flags);
  if (rc == CLI_HELP) { rc = 0; goto out; }
  if (!rc && o.measure) { rc = measure(&o); goto out; }
  if (!rc && o.config && ot_settings_read_file(user, o.config) != OT_OK) {
    fprintf(stderr, "ot plan: %s\n", ot_last_error());
    rc = 2;
  }
  for (int i = 0; !rc && i < flags->n; i++)
    if (ot_settings_add(user, flags->item[i].key, flags->item[i].val, flags->item[i].origin) != OT_OK) rc = 2;
  if (!rc) {
    ot_train_config_default(c);
    c->data[0] = 0;   // planning reads no data
    if (ot_train_config_apply(c, user, stderr) != OT_OK) {
      fprintf(stderr, "ot plan: %s\n", ot_last_error());
      rc = 2;
    }
  }
  if (!rc) rc = machine_of(&o, &m);
  const int hosts = o.hosts ? o.hosts : 1;
  if (!rc && hosts > m.hosts) m.hosts = hosts;   // (a measured machine file says 1)
  const int devices = o.devices ? o.devices : hosts * m.devices_per_host;
  if (!rc) {
    printf("model %s: %d blocks, d_model %d, %d heads, vocabulary %d, %.2fB parameters; global batch %d rows x "
           "%d tokens, %s\n", c->model.name, ot_model_n_blocks(&c->model), c->model.d_model, c->model.n_heads,
           c->model.vocab, (double)ot_model_n_params(&c->model) / 1e9,
           c->global_batch ? c->global_batch : c->batch_size * c->grad_accum * c->data_parallel, c->seq_len,
           ot_dtype_name(c->dtype));
    printf("machine %s: %d host%s x %d %s, %.1f GiB %s, GEMM %.1f TFLOP/s%s, links %.2f GB/s inside a host, "
           "%.2f GB/s between hosts\n  (%s)\n", m.name, hosts, hosts > 1 ? "s" : "", devices / hosts,
           m.shared ? "ranks on shared cores" : "devices", gib(m.mem_bytes), m.shared ? "per host" : "per device",
           m.gemm_flops / 1e12, m.shared ? " per host" : "", m.intra_bw / 1e9, m.inter_bw / 1e9, m.source);
  }
  if (!rc && o.only) {
    ot_plan_result one;
    if (devices != c->data_parallel * c->tensor_parallel * c->pipeline_stages && o.devices) {
      fprintf(stderr, "ot plan: --devices %d, but the layout has %d x %d x %d = %d ranks\n", devices,
              c->data_parallel, c->tensor_parallel, c->pipeline_stages,
              c->data_parallel * c->tensor_parallel * c->pipeline_stages);
      rc = 2;
    } else if (ot_plan_eval(c, &m, hosts, &one) != OT_OK) {
      fprintf(stderr, "ot plan: %s\n", ot_last_error());
      rc = 2;
    } else {
      print_detail(stdout, &one);
      if (o.csv) rc = write_csv(o.csv, &one, 1);
      if (!one.fits) {   // 1: it does not fit the memory; 2: the engine refuses the layout
        fprintf(stderr, "ot plan: the layout %s: %s\n", one.mem_total ? "does not fit" : "is refused", one.why);
        rc = one.mem_total ? 1 : 2;
      }
    }
    goto out;
  }
  if (!rc && ot_plan_search(c, &m, hosts, devices, &r, &n) != OT_OK) {
    fprintf(stderr, "ot plan: %s\n", ot_last_error());
    rc = 2;
  }
  if (!rc) {
    int fit = 0;
    while (fit < n && r[fit].fits) fit++;
    printf("%d layouts of %d devices on %d host%s: %d fit, %d do not. Memory of the fullest rank (GiB; ws+scr: the "
           "workspace and the ops' scratch); step time (s): compute, pipeline bubble, communication + optimizer\n",
           n, devices, hosts, hosts > 1 ? "s" : "", fit, n - fit);
    if (fit) {
      print_header(stdout);
      for (int i = 0; i < fit && (o.top == 0 || i < o.top); i++) print_row(stdout, i + 1, &r[i]);
      print_why(stdout, r, fit);
    } else {
      int refused = 0;   // layouts the engine refuses (no memory figure), not ones too big
      for (int i = 0; i < n; i++) refused += r[i].mem_total == 0;
      if (refused == n && n > 0) {
        fprintf(stderr, "ot plan: no layout of %d devices can be planned: %s\n", devices, r[0].why);
        rc = 2;
      } else {
        fprintf(stderr, "ot plan: no layout of %d devices fits: the model needs more memory than %d devices of "
                "%.1f GiB give (add devices or hosts, recompute, ZeRO, or a smaller batch)\n", devices, devices,
                gib(m.mem_bytes));
        rc = 1;
      }
    }
    if (n > fit) {
      printf("not fitting (%d), e.g.:\n", n - fit);
      for (int i = fit; i < n && i < fit + (o.top ? o.top : n); i++) {
        char lay[96];
        layout_str(lay, sizeof lay, &r[i]);
        printf("  %-36s %s\n", lay, r[i].why);
      }
    }
    if (o.csv && write_csv(o.csv, r, n)) rc = 1;
  }
out:
  free(r);
  free(flags);
  free(user);
  free(c);
  ot_dist_finalize();
  return rc;
}
