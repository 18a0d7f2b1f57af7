// `ot info`: what this machine offers and which kernels will run.
#include "cli.h"
#include <oneapi/dnnl/dnnl.h>

const cli_command cli_info_command = {
    "info", "", "CPU features, active kernel ISA, threads, oneDNN version, GEMM choice",
    "Prints the CPU's features, the kernel ISA that runs (and those it supports), oneDNN's\n"
    "version, the thread count and how GEMMs run (OT_GEMM). No options.\n",
    NULL, 0, NULL, NULL, false};

int ot_cmd_info(int argc, char **argv) {
  char none;
  const int pr = cli_parse(&cli_info_command, argc, argv, &none, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  const ot_cpu_features *c = ot_cpu();
  printf("cpu features: avx2=%d fma=%d f16c=%d avx512f=%d avx512bw=%d avx512vl=%d avx512_bf16=%d avx512_vnni=%d\n",
         c->avx2, c->fma, c->f16c, c->avx512f, c->avx512bw, c->avx512vl, c->avx512_bf16, c->avx512_vnni);
  printf("kernel isa:   %s (supported:", ot_isa_name(ot_isa_active()));
  for (int i = 0; i < OT_ISA_COUNT; i++)
    if (ot_isa_supported((ot_isa)i)) printf(" %s", ot_isa_name((ot_isa)i));
  printf(")\n");
  const dnnl_version_t *v = dnnl_version();
  printf("oneDNN:       %d.%d.%d (cpu runtime %s)\n", v->major, v->minor, v->patch,
         v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
  printf("threads:      %d\n", ot_threads_get());
  char g[320];
  ot_gemm_describe(g, sizeof g);
  printf("gemm:         %s\n", g);
  return 0;
}
