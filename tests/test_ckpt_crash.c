// Interrupted saves (tiny model, synthetic shards):
//  - what a killed save of an older version left is handled: a run directory
//    with only latest.tmp (no latest) resumes from its whole step_000001; a
//    step_000002/ holding only *.tmp files that latest names is skipped for the
//    newest complete checkpoint (a note says so), and removed by the next start
//  - a .step_N.old directory (a replace killed between its two renames) is put
//    back; .step_N.tmp / .step_N.del leftovers and latest.tmp are removed
//  - kill -9 at many points of a save: a forked child resumes from the run
//    directory and checkpoints after every step (keep 3) until the parent kills
//    it with SIGKILL after a delay; 32 delays spread over two step + save
//    periods (measured first). After each kill every step_*
//    directory is whole and loads, and loading the run directory gives the
//    checkpoint `latest` names (or, without one, the newest). At the end a
//    resumed run from the directory works and no leftover remains.
#include "ckpt_common.h"
#include <poll.h>
#include <signal.h>

#define V 50
#define KILLS 32

static ot_train_config run_config(const char *data, const char *out) {
  ot_train_config c = tiny_config(data);
  snprintf(c.out, sizeof c.out, "%s", out);
  c.keep = 3;
  c.steps = 100000;   // the child never reaches it
  c.eval_every = 0;
  return c;
}

// The child (forked): resume from out, then step + checkpoint until killed;
// one byte on fd after the first checkpoint.
static void child(ot_trainer *t, const char *out, int fd) {
  if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(2);
  if (ot_trainer_load(t, out, false) != OT_OK) _exit(3);
  for (bool told = false;;) {
    ot_step_info st;
    if (ot_trainer_step(t, &st) != OT_OK || ot_trainer_checkpoint(t, NULL, 0) != OT_OK) _exit(4);
    if (!told && write(fd, "r", 1) == 1) told = true;
  }
}

// Threads of this process (a fork is only safe with one: no OpenMP team yet).
static int threads_here(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

// Step of the checkpoint named in <out>/latest, -1 without one.
static int64_t latest_step(const char *out) {
  char p[600], line[64] = "";
  snprintf(p, sizeof p, "%s/latest", out);
  FILE *f = fopen(p, "r");
  if (!f) return -1;
  if (!fgets(line, sizeof line, f)) line[0] = 0;
  fclose(f);
  return strncmp(line, "step_", 5) ? -2 : atoll(line + 5);
}

typedef struct { int leftovers, lagging, fallbacks; int64_t newest; } crash_stats;

// Every step_* directory of out loads whole; loading out gives the expected one.
static bool check_run_dir(ot_trainer *r, const char *out, crash_stats *cs, int kill) {
  DIR *d = opendir(out);
  int64_t newest = -1;
  bool ok = d != NULL, left = false;
  char p[OT_PATH_MAX + 300];
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) left = true;
    if (strstr(e->d_name, ".tmp")) left = true;
    if (strncmp(e->d_name, "step_", 5)) continue;
    snprintf(p, sizeof p, "%s/%s", out, e->d_name);
    const int64_t s = atoll(e->d_name + 5);
    if (ot_trainer_load(r, p, false) != OT_OK || ot_trainer_steps_done(r) != s) {
      printf("  kill %d: %s does not load whole: %s\n", kill, e->d_name, ot_last_error());
      ok = false;
    }
    if (s > newest) newest = s;
  }
  if (d) closedir(d);
  cs->leftovers += left;
  const int64_t named = latest_step(out);
  snprintf(p, sizeof p, "%s/step_%06lld", out, (long long)named);
  const int64_t want = named >= 0 && file_exists(p) ? named : newest;
  if (want != named) cs->fallbacks++;
  if (named >= 0 && named < newest) cs->lagging++;
  if (ot_trainer_load(r, out, false) != OT_OK || ot_trainer_steps_done(r) != want) {
    printf("  kill %d: loading the run directory gave step %lld, expected %lld (latest names %lld): %s\n", kill,
           (long long)ot_trainer_steps_done(r), (long long)want, (long long)named, ot_last_error());
    ok = false;
  }
  cs->newest = newest;
  return ok;
}

static void test_kill(const char *data, const char *tmp) {
  char out[512];
  snprintf(out, sizeof out, "%s/killed", tmp);
  // the first checkpoint, and one step + checkpoint period measured here
  ot_train_config c = run_config(data, out);
  ot_trainer *t = make_trainer(&c), *r = make_trainer(&c);
  double t0 = 0;
  for (int i = 0; i < 5; i++) {
    if (i == 1) t0 = ot_now();
    ot_step_info st;
    ot_trainer_step(t, &st);
    th_check(ot_trainer_checkpoint(t, NULL, 0) == OT_OK, "checkpoint: %s", ot_last_error());
  }
  const double period = (ot_now() - t0) / 4;
  if (!th_check(threads_here() == 1, "one thread before fork (%d)", threads_here())) goto out;
  crash_stats cs = {0, 0, 0, -1};
  int failures = 0;
  for (int i = 0; i < KILLS && failures < 3; i++) {
    int fds[2];
    if (!th_check(pipe(fds) == 0, "pipe")) break;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      child(t, out, fds[1]);
    }
    close(fds[1]);
    struct pollfd pf = {fds[0], POLLIN, 0};
    char b = 0;
    const bool ready = pid > 0 && poll(&pf, 1, 30000) == 1 && read(fds[0], &b, 1) == 1;
    if (ready) {   // kill points spread over two periods (golden-ratio sequence)
      const double frac = fmod(0.618033988749895 * (i + 1), 1.0);
      usleep((useconds_t)(frac * 2 * period * 1e6));
    }
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
    }
    close(fds[0]);
    if (!th_check(ready, "kill %d: the child made its first checkpoint", i)) { failures++; continue; }
    if (!th_check(check_run_dir(r, out, &cs, i), "kill %d: every checkpoint whole, the run directory loads", i))
      failures++;
  }
  printf("%d kills at spread points of a %.1f ms step + save: %d left a partial save behind, %d found latest "
         "behind the newest directory, %d without a usable latest; %lld checkpoints written in all\n",
         KILLS, period * 1e3, cs.leftovers, cs.lagging, cs.fallbacks, (long long)cs.newest);
  // a resumed run from the directory: removes the leftovers and continues
  ot_train_config rc = run_config(data, out);
  snprintf(rc.resume, sizeof rc.resume, "%s", out);
  rc.steps = cs.newest + 2;
  FILE *sink = fopen("/dev/null", "w");
  th_check(ot_train_run(&rc, sink, NULL, NULL) == OT_OK, "resume from the killed run: %s", ot_last_error());
  fclose(sink);
  char list[512];
  th_check(names_with(out, ".tmp", list, sizeof list) == 0 && names_with(out, ".step_", list, sizeof list) == 0,
           "no leftovers after the resumed run (%s)", list);
out:
  ot_trainer_free(t);
  ot_trainer_free(r);
}

// Runs ot_train_run resuming `run` to `steps`; *text receives its output.
static bool resume_run(const char *data, const char *run, int steps, char *text, size_t cap) {
  ot_train_config c = run_config(data, run);
  snprintf(c.resume, sizeof c.resume, "%s", run);
  c.steps = steps;
  c.save_every = 1;
  FILE *f = tmpfile();
  bool ok = f && ot_train_run(&c, f, NULL, NULL) == OT_OK;
  if (!ok) printf("  resume %s: %s\n", run, ot_last_error());
  text[0] = 0;
  if (f) {
    rewind(f);
    size_t n = fread(text, 1, cap - 1, f);
    text[n] = 0;
    fclose(f);
  }
  return ok;
}

static void test_leftovers(const char *data, const char *tmp) {
  char run[512], p[700], text[16384], list[512];
  snprintf(run, sizeof run, "%s/left", tmp);
  ot_train_config c = run_config(data, run);
  ot_trainer *t = make_trainer(&c);
  ot_step_info st;
  ot_trainer_step(t, &st);
  th_check(ot_trainer_checkpoint(t, NULL, 0) == OT_OK, "checkpoint 1: %s", ot_last_error());
  ot_trainer_free(t);
  // killed right after the first checkpoint, while writing latest (older versions)
  snprintf(p, sizeof p, "%s/latest", run);
  unlink(p);
  snprintf(p, sizeof p, "%s/latest.tmp", run);
  write_text(p, "step_0");
  th_check(resume_run(data, run, 2, text, sizeof text), "resume with only latest.tmp");
  th_check(strstr(text, "note: no 'latest'") && strstr(text, "step_000001 at step 1"),
           "resumed from step_000001 with a note: %.300s", text);
  th_check(!file_exists(p), "latest.tmp removed");
  // step_000003 holding only *.tmp files, named by latest
  th_check(sh("mkdir -p '%s/step_000003' && cp '%s/step_000002/model.safetensors' "
              "'%s/step_000003/model.safetensors.tmp' && echo step_000003 > '%s/latest'", run, run, run, run),
           "a half-written step_000003");
  th_check(resume_run(data, run, 4, text, sizeof text), "resume past a half-written step_000003");
  th_check(strstr(text, "names step_000003, which is") && strstr(text, "step_000002 at step 2"),
           "resumed from step_000002 with a note: %.300s", text);
  snprintf(p, sizeof p, "%s/step_000003/model.safetensors.tmp", run);
  th_check(!file_exists(p), "the half-written directory's files are gone");
  t = make_trainer(&c);
  snprintf(p, sizeof p, "%s/step_000003", run);
  th_check(ot_trainer_load(t, p, false) == OT_OK && ot_trainer_steps_done(t) == 3, "step_000003 rewritten whole: %s",
           ot_last_error());
  // a replace killed between its renames, a half-written new directory, a half-removed old one
  th_check(sh("cd '%s' && mv step_000004 .step_000004.old && mkdir .step_000004.tmp .step_000002.del && "
              "echo x > .step_000004.tmp/model.safetensors.tmp && echo x > .step_000002.del/config.json", run),
           "leftovers of a replace and a prune");
  th_check(resume_run(data, run, 5, text, sizeof text), "resume with .old / .tmp / .del leftovers");
  th_check(strstr(text, "step_000004 at step 4") && !strstr(text, "note: "), "resumed from the restored "
           "step_000004: %.300s", text);
  th_check(names_with(run, ".step_", list, sizeof list) == 0, "leftovers removed (%s)", list);
  ot_trainer_free(t);
}

int main(void) {
  char dir[64], tmp[128];
  if (!make_data(dir, sizeof dir, V, 20000, 1000)) return th_finish();
  snprintf(tmp, sizeof tmp, "%s/ck", dir);
  mkdir(tmp, 0755);
  double t0 = ot_now();
  test_kill(dir, tmp);   // first: forks while this process has one thread
  test_leftovers(dir, tmp);
  printf("(%.1f s)\n", ot_now() - t0);
  remove_tree(dir);
  return th_finish();
}
