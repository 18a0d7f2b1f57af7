// Launch plans (ot_launch_* in ot/dist.h):
//  - MindSpore / HCCL rank tables: HCCL's string numbers and plain integers,
//    hosts in rank order, each rank's position on its host by device_id, a
//    rankfile only when a host's ranks are not one run
//  - every refusal names the file and the problem: bad JSON, a missing or
//    wrong server_count, duplicate or missing ranks, a device or server listed
//    twice, a bad server_id, status not "completed"
//  - Open MPI hostfiles: slots, bare hosts, repeated hosts, comments, refusals
//  - the hostfile and rankfile written, the mpirun command line
//  - tracked memory returns to its start
#include "harness.h"
#include <sys/stat.h>
#include <unistd.h>

static ot_status parse(ot_launch_plan *p, const char *json) {
  return ot_launch_parse_rank_table(p, json, strlen(json), "rt.json");
}

// The 8-device table of two servers as hccl_tools.py writes it (numbers as strings).
static const char k_table8[] =
    "{\"version\": \"1.0\", \"server_count\": \"2\", \"server_list\": [\n"
    " {\"server_id\": \"10.0.0.1\", \"device\": [\n"
    "  {\"device_id\": \"0\", \"device_ip\": \"192.1.27.6\", \"rank_id\": \"0\"},\n"
    "  {\"device_id\": \"1\", \"device_ip\": \"192.2.27.6\", \"rank_id\": \"1\"},\n"
    "  {\"device_id\": \"2\", \"device_ip\": \"192.3.27.6\", \"rank_id\": \"2\"},\n"
    "  {\"device_id\": \"3\", \"device_ip\": \"192.4.27.6\", \"rank_id\": \"3\"}], \"host_nic_ip\": \"reserve\"},\n"
    " {\"server_id\": \"10.0.0.2\", \"device\": [\n"
    "  {\"device_id\": \"0\", \"device_ip\": \"192.1.27.7\", \"rank_id\": \"4\"},\n"
    "  {\"device_id\": \"1\", \"device_ip\": \"192.2.27.7\", \"rank_id\": \"5\"},\n"
    "  {\"device_id\": \"2\", \"device_ip\": \"192.3.27.7\", \"rank_id\": \"6\"},\n"
    "  {\"device_id\": \"3\", \"device_ip\": \"192.4.27.7\", \"rank_id\": \"7\"}], \"host_nic_ip\": \"reserve\"}],\n"
    " \"status\": \"completed\"}\n";

static void test_good(void) {
  ot_launch_plan p;
  th_check(parse(&p, k_table8) == OT_OK, "8-device table: %s", ot_last_error());
  th_check(p.n_ranks == 8 && p.n_hosts == 2 && !strcmp(p.host[0], "10.0.0.1") && !strcmp(p.host[1], "10.0.0.2") &&
               p.slots[0] == 4 && p.slots[1] == 4 && !p.rankfile,
           "two servers of 4 slots, no rankfile");
  bool ok = true;
  for (int r = 0; r < 8; r++) ok &= p.rank[r].host == r / 4 && p.rank[r].device == r % 4 && p.rank[r].local == r % 4;
  th_check(ok, "rank r on host r / 4, device r %% 4");
  ot_launch_free(&p);

  // the servers listed out of rank order, numbers as integers, devices out of order
  th_check(parse(&p, "{\"server_count\": 2, \"server_list\": ["
                     "{\"server_id\": \"b\", \"device\": [{\"device_id\": 1, \"rank_id\": 3}, {\"device_id\": 0, \"rank_id\": 2}]},"
                     "{\"server_id\": \"a\", \"device\": [{\"device_id\": 5, \"rank_id\": 1}, {\"device_id\": 4, \"rank_id\": 0}]}]}") == OT_OK,
           "integers: %s", ot_last_error());
  th_check(p.n_hosts == 2 && !strcmp(p.host[0], "a") && !strcmp(p.host[1], "b") && !p.rankfile &&
               p.rank[0].host == 0 && p.rank[0].device == 4 && p.rank[0].local == 0 && p.rank[1].local == 1 &&
               p.rank[2].host == 1 && p.rank[2].local == 0 && p.rank[3].local == 1,
           "hosts by their lowest rank; positions by device_id");
  ot_launch_free(&p);

  // interleaved: a rankfile keeps the order
  th_check(parse(&p, "{\"server_count\": \"2\", \"server_list\": ["
                     "{\"server_id\": \"a\", \"device\": [{\"device_id\": \"0\", \"rank_id\": \"0\"}, {\"device_id\": \"1\", \"rank_id\": \"2\"}]},"
                     "{\"server_id\": \"b\", \"device\": [{\"device_id\": \"0\", \"rank_id\": \"1\"}, {\"device_id\": \"1\", \"rank_id\": \"3\"}]}]}") == OT_OK &&
               p.rankfile && p.rank[1].host == 1 && p.rank[2].host == 0 && p.rank[2].local == 1,
           "interleaved ranks need a rankfile");
  ot_launch_free(&p);
}

static void test_bad(void) {
  struct { const char *json, *needle; } bad[] = {
      {"{\"server_count\": \"1\",", "rt.json: invalid JSON"},
      {"[1, 2]", "rt.json: the rank table is a array, not an object"},
      {"{\"server_list\": []}", "rt.json: 'server_count' is missing"},
      {"{\"server_count\": \"x\", \"server_list\": []}", "'server_count' is \"x\", not a positive integer"},
      {"{\"server_count\": 1}", "'server_list' is missing, not a list of servers"},
      {"{\"server_count\": \"2\", \"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": 0, \"rank_id\": 0}]}]}",
       "rt.json: 'server_count' is 2 but 'server_list' holds 1 server"},
      {"{\"server_count\": 1, \"status\": \"initializing\", \"server_list\": []}", "'status' is \"initializing\", not \"completed\""},
      {"{\"server_count\": 1, \"server_list\": [{\"device\": [{\"device_id\": 0, \"rank_id\": 0}]}]}",
       "server_list[0]: 'server_id' is missing, not a host name"},
      {"{\"server_count\": 1, \"server_list\": [{\"server_id\": \"a b\", \"device\": []}]}",
       "server_list[0]: 'server_id' is \"a b\", not a host name or IP address"},
      {"{\"server_count\": 1, \"server_list\": [{\"server_id\": \"a\", \"device\": []}]}",
       "server_list[0] (a): 'device' is empty, not a non-empty list"},
      {"{\"server_count\": 1, \"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": 0}]}]}",
       "server_list[0] (a) device[0]: 'rank_id' is missing, not an integer"},
      {"{\"server_count\": 1, \"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": \"-1\", \"rank_id\": 0}]}]}",
       "device[0]: 'device_id' is \"-1\", not a non-negative integer"},
      {"{\"server_count\": 1, \"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": 0, \"rank_id\": 1.5}]}]}",
       "'rank_id' is 1.5, not an integer"},
      {"{\"server_count\": 1, \"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": 0, \"rank_id\": 0}, "
       "{\"device_id\": 0, \"rank_id\": 1}]}]}",
       "server_list[0] (a): device_id 0 is listed twice"},
      {"{\"server_count\": 2, \"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": 0, \"rank_id\": 0}]}, "
       "{\"server_id\": \"b\", \"device\": [{\"device_id\": 0, \"rank_id\": 0}]}]}",
       "rt.json: rank_id 0 appears twice: server_list[0] (a) device[0] and server_list[1] (b) device[0]"},
      {"{\"server_count\": 1, \"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": 0, \"rank_id\": 0}, "
       "{\"device_id\": 1, \"rank_id\": 2}]}]}",
       "rt.json: rank_id 1 is missing: 2 devices need ranks 0..1, but the table has rank_id 2"},
      {"{\"server_count\": 2, \"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": 0, \"rank_id\": 0}]}, "
       "{\"server_id\": \"a\", \"device\": [{\"device_id\": 1, \"rank_id\": 1}]}]}",
       "server 'a' is listed twice (server_list[0] and [1])"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ot_launch_plan p;
    memset(&p, 0x5a, sizeof p);
    th_check_error(parse(&p, bad[i].json), OT_EFORMAT, bad[i].needle, bad[i].needle);
    th_check(p.rank == NULL && p.n_ranks == 0, "a refused table leaves an empty plan (%zu)", i);
  }
  ot_launch_plan p;
  th_check_error(ot_launch_read_rank_table(&p, "/nonexistent/rank_table.json"), OT_EIO, "/nonexistent/rank_table.json",
                 "a missing file is named");
}

static const char *write_tmp(const char *name, const char *text) {
  static char path[256];
  snprintf(path, sizeof path, "/tmp/ot_test_launch_%d_%s", (int)getpid(), name);
  FILE *f = fopen(path, "w");
  if (f) { fputs(text, f); fclose(f); }
  return path;
}

static char *slurp(const char *path) {
  static char buf[4096];
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  buf[n] = 0;
  if (f) fclose(f);
  return buf;
}

static void test_hostfile(void) {
  ot_launch_plan p;
  const char *path = write_tmp("hosts", "# cluster\nnode1 slots=2 max_slots=4\n\nnode2   # one slot\nnode1 slots=1\n");
  th_check(ot_launch_read_hostfile(&p, path) == OT_OK, "hostfile: %s", ot_last_error());
  th_check(p.n_ranks == 4 && p.n_hosts == 2 && !strcmp(p.host[0], "node1") && p.slots[0] == 3 && p.slots[1] == 1 &&
               p.rank[2].host == 0 && p.rank[2].local == 2 && p.rank[3].host == 1 && !p.rankfile,
           "slots add up per host, bare host = 1 slot, ranks fill hosts in order");
  ot_launch_free(&p);
  struct { const char *text, *needle; } bad[] = {
      {"# nothing\n", "no host in the hostfile"},
      {"node1 slots=0\n", ":1: slots=0 is not a positive integer"},
      {"node1\nnode2 slots=x\n", ":2: slots=x is not a positive integer"},
      {"node1 cpus=4\n", ":1: 'cpus=' is not a hostfile field"},
      {"node1 4\n", ":1: '4' is not slots=N"},
      {"no/de slots=1\n", ":1: 'no/de' is not a host name"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    path = write_tmp("badhosts", bad[i].text);
    th_check_error(ot_launch_read_hostfile(&p, path), OT_EFORMAT, bad[i].needle, bad[i].needle);
    th_check(strstr(ot_last_error(), "badhosts") != NULL, "the hostfile is named");
  }
  unlink(path);
}

// argv joined by spaces.
static const char *joined(char **av, int ac) {
  static char buf[2048];
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < ac; i++) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? " " : "", av[i]);
  return buf;
}

static void test_files_and_argv(void) {
  ot_launch_plan p;
  char dir[128], hf[512], rf[512];
  snprintf(dir, sizeof dir, "/tmp/ot_test_launch_%d_dir", (int)getpid());
  th_check(parse(&p, k_table8) == OT_OK, "parse");
  th_check(ot_launch_write(&p, dir, 2, hf, rf, sizeof hf) == OT_OK && rf[0] == 0, "write: %s", ot_last_error());
  th_check(strstr(slurp(hf), "\n10.0.0.1 slots=4\n10.0.0.2 slots=4\n") != NULL, "hostfile: %s", slurp(hf));
  const char *prog[] = {"/bin/ot", "train", "--data_parallel", "8"};
  const char *extra[] = {"--oversubscribe"};
  ot_launch_cmd c = {NULL, 0, hf, NULL, 2, true, 1, extra, 4, prog};
  char **av;
  int ac;
  char want[1024];
  th_check(ot_launch_argv(&p, &c, &av, &ac) == OT_OK, "argv: %s", ot_last_error());
  snprintf(want, sizeof want, "mpirun -np 8 --hostfile %s --map-by slot:PE=2 --bind-to core -x OMP_NUM_THREADS=2 "
           "--oversubscribe /bin/ot train --data_parallel 8", hf);
  th_check(!strcmp(joined(av, ac), want) && av[ac] == NULL, "command: %s", joined(av, ac));
  ot_launch_argv_free(av);
  c.threads = 1;
  c.bind = false;
  c.n_extra = 0;
  c.mpirun = "/opt/mpi/bin/mpirun";
  // (the call first: a check's arguments are evaluated in an unspecified order)
  const bool built = ot_launch_argv(&p, &c, &av, &ac) == OT_OK;
  th_check(built && strstr(joined(av, ac), "/opt/mpi/bin/mpirun -np 8") &&
               strstr(joined(av, ac), "--map-by slot --bind-to none -x OMP_NUM_THREADS=1 /bin/ot"),
           "unbound: %s", built ? joined(av, ac) : ot_last_error());
  ot_launch_argv_free(av);
  c.threads = 0;
  th_check_error(ot_launch_argv(&p, &c, &av, &ac), OT_EINVAL, "threads >= 1", "threads 0");
  ot_launch_free(&p);

  // interleaved: the rankfile with each rank's cores
  th_check(parse(&p, "{\"server_count\": 2, \"server_list\": ["
                     "{\"server_id\": \"a\", \"device\": [{\"device_id\": 0, \"rank_id\": 0}, {\"device_id\": 1, \"rank_id\": 2}]},"
                     "{\"server_id\": \"b\", \"device\": [{\"device_id\": 0, \"rank_id\": 1}, {\"device_id\": 1, \"rank_id\": 3}]}]}") == OT_OK,
           "parse");
  th_check(ot_launch_write(&p, dir, 4, hf, rf, sizeof hf) == OT_OK && rf[0], "rankfile written");
  th_check(strstr(slurp(rf), "\nrank 0=a slot=0-3\nrank 1=b slot=0-3\nrank 2=a slot=4-7\nrank 3=b slot=4-7\n") != NULL,
           "rankfile: %s", slurp(rf));
  c = (ot_launch_cmd){NULL, 0, hf, NULL, 4, true, 0, NULL, 4, prog};
  th_check_error(ot_launch_argv(&p, &c, &av, &ac), OT_EINVAL, "needs its rankfile", "the rankfile is required");
  c.rankfile = rf;
  const bool with_rf = ot_launch_argv(&p, &c, &av, &ac) == OT_OK;
  th_check(with_rf && strstr(joined(av, ac), "--rankfile") && !strstr(joined(av, ac), "--map-by"),
           "rankfile command: %s", with_rf ? joined(av, ac) : ot_last_error());
  ot_launch_argv_free(av);
  ot_launch_free(&p);
  unlink(hf);
  unlink(rf);
  rmdir(dir);
}

int main(void) {
  const size_t mem0 = ot_mem_current(OT_MEM_OTHER);
  test_good();
  test_bad();
  test_hostfile();
  test_files_and_argv();
  th_check(ot_mem_current(OT_MEM_OTHER) == mem0, "tracked memory back to its start (%zu vs %zu)",
           ot_mem_current(OT_MEM_OTHER), mem0);
  return th_finish();
}
