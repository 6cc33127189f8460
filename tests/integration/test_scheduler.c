/*  test_scheduler: resources and placement with real governors.

    - a task needing more than any governor ever offered waits for
      --resource-wait (a governor offering it may join), then fails naming
      what it needs;
    - a task needing a custom resource runs only where it is offered;
    - when the only governor offering a resource leaves, a task waiting for
      it fails with SQ_E_RESOURCES after --resource-wait (2 s here) instead
      of hanging;
    - priorities: with one slot, a high-priority task submitted last runs
      before the others that are still queued;
    - overbooking retraction: a chain overbooked behind a task whose first
      run fails (its retry goes to the other governor) is stopped where it
      waited and placed again, each task of it running exactly once;
    - no head-of-line blocking: cpu tasks behind a gpu task that waits for
      a full gpu governor run at once on idle cpu governors.
*/
#include "harness.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t
s_sleep (sq_session_t *session, double seconds)
{
    size_t size;
    void *config = sq_config_sleep (seconds, &size);
    return harness_task (session, "sleep", NULL, 0, 1, config, size);
}

static uint32_t
s_shell (sq_session_t *session, const char *script, const uint32_t *inputs, size_t n_inputs)
{
    const char *args [] = { "sh", "-c", script };
    const char *in_paths [] = { "in0" };
    const char *out_paths [] = { "" };
    size_t size;
    void *config = sq_config_execute (args, 3, in_paths, n_inputs, -1, out_paths, 1, 0, NULL, &size);
    CHECK (config, "execute config");
    return harness_task (session, "execute", inputs, n_inputs, 1, config, size);
}

int
main (void)
{
    //  A short resource wait: case 3 waits it out.
    const char *broker_args [] = { "--resource-wait", "2", NULL };
    harness_t *h = harness_new_args (1, 2, broker_args);
    const char *gpu [] = { "--resource", "gpu=1", NULL };
    int gpu_gov = harness_add_governor_args (h, "gpu-box", 1, gpu);
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);

    //  1. More cpus than anyone ever had, a resource nobody offered yet:
    //  accepted (a governor offering them may still join), they wait
    //  --resource-wait like any task no connected governor fits, then fail
    //  naming what they need. Case 2 runs meanwhile.
    uint32_t big = harness_task (session, "noop", NULL, 0, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (session, big, "cpus", 64), SQ_OK, "cpus");
    uint32_t alien = harness_task (session, "noop", NULL, 0, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (session, alien, "tpu", 1), SQ_OK, "tpu");
    CHECK_RC (sq_submit (session), SQ_OK, "tasks above every offer are accepted");

    //  2. Three tasks needing the gpu: all on gpu-box (the other governor
    //  has 2 free cpus but no gpu), and they all finish.
    uint32_t gpu_tasks [3];
    for (int i = 0; i < 3; i++) {
        gpu_tasks [i] = s_sleep (session, 0.05);
        CHECK_RC (sq_task_set_resource (session, gpu_tasks [i], "gpu", 1), SQ_OK, "gpu");
    }
    CHECK_RC (sq_submit (session), SQ_OK, "submit gpu tasks");
    CHECK_RC (sq_wait (session, gpu_tasks, 3, 20000), SQ_OK, "gpu tasks ran");
    char *json = harness_info (client);
    CHECK (harness_tasks_done (json, "gpu-box") == 3, "gpu-box ran the 3 gpu tasks: %s", json);
    free (json);
    harness_note ("3 gpu tasks ran on the one governor offering gpu=1");
    CHECK_RC (sq_wait (session, &big, 1, 20000), SQ_E_TASK_FAILED, "the 64-cpu task fails");
    CHECK (strstr (sq_client_errmsg (client), "it needs cpus=64")
        && strstr (sq_client_errmsg (client), "waited 2.0 s"), "after its wait: %s",
           sq_client_errmsg (client));
    CHECK_RC (sq_wait (session, &alien, 1, 20000), SQ_E_TASK_FAILED, "the tpu task fails");
    CHECK (strstr (sq_client_errmsg (client), "tpu=1"), "naming it: %s", sq_client_errmsg (client));
    harness_note ("above every offer, after the wait: %s", sq_client_errmsg (client));

    //  3. The gpu governor leaves while a gpu task waits behind a long one:
    //  the waiting task is reported, not left hanging.
    uint32_t hold = s_sleep (session, 30);
    CHECK_RC (sq_task_set_resource (session, hold, "gpu", 1), SQ_OK, "gpu");
    uint32_t after = s_sleep (session, 0.01);
    CHECK_RC (sq_task_set_resource (session, after, "gpu", 1), SQ_OK, "gpu");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK (harness_info_wait_min (client, "tasks.running", 1, 10000) >= 1, "the long gpu task runs");
    harness_kill_governor (h, gpu_gov, SIGKILL);
    CHECK_RC (sq_wait (session, &after, 1, 20000), SQ_E_TASK_FAILED,
              "a task needing a resource that left fails");
    CHECK (strstr (sq_client_errmsg (client), "no live governor can run this task"),
           "and says why");
    harness_note ("after the gpu governor left: %s", sq_client_errmsg (client));

    //  4. Priority: one governor with 2 cpus is kept busy by two sleeps;
    //  then 5 low and 1 high priority tasks queue; the high one runs first.
    uint32_t busy [2] = { s_sleep (session, 0.5), s_sleep (session, 0.5) };
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    (void) busy;
    uint32_t low [5], high;
    for (int i = 0; i < 5; i++)
        low [i] = s_sleep (session, 0.2);
    high = s_sleep (session, 0.01);
    CHECK_RC (sq_task_set_priority (session, high, 10), SQ_OK, "priority");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    uint32_t first [6];
    size_t n_done = 0;
    uint32_t all [6] = { low [0], low [1], low [2], low [3], low [4], high };
    CHECK_RC (sq_wait_some (session, all, 6, 20000, first, &n_done), SQ_OK, "wait some");
    CHECK (n_done >= 1 && first [0] == high, "the high-priority task finished first (got %u)", first [0]);
    CHECK_RC (sq_wait (session, all, 6, 20000), SQ_OK, "the rest");
    harness_note ("the priority-10 task ran before 5 earlier ones");

    //  5. Overbooking retraction. a fails on its first run and is retried
    //  on the other governor (a retry avoids the one it failed on); b and c
    //  were overbooked behind a where it first ran, waiting for its output.
    harness_add_governor (h, "spare", 2);
    char dir [] = "/tmp/squall-overbook-XXXXXX";
    CHECK (mkdtemp (dir), "temp dir");
    char a_script [512], b_script [512], c_script [512];
    snprintf (a_script, sizeof a_script,
              "n=$(cat %s/a 2>/dev/null || echo 0); echo $((n+1)) > %s/a; "
              "if [ $n -eq 0 ]; then echo first run fails >&2; exit 1; fi; printf x", dir, dir);
    snprintf (b_script, sizeof b_script, "echo b >> %s/runs; cat in0; printf y", dir);
    snprintf (c_script, sizeof c_script, "echo c >> %s/runs; cat in0; printf z", dir);
    uint32_t a = s_shell (session, a_script, NULL, 0);
    CHECK_RC (sq_task_set_max_retries (session, a, 1), SQ_OK, "retries");
    uint32_t a_out = sq_output (a, 0);
    uint32_t b = s_shell (session, b_script, &a_out, 1);
    uint32_t b_out = sq_output (b, 0);
    uint32_t c = s_shell (session, c_script, &b_out, 1);
    uint32_t c_out = sq_output (c, 0);
    CHECK_RC (sq_keep (session, c_out), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit chain");
    CHECK_RC (sq_wait (session, &c, 1, 30000), SQ_OK, "the chain finished after a moved");
    FETCH_EXPECT (session, c_out, "xyz", 3);
    char runs_path [600], runs [16] = "";
    snprintf (runs_path, sizeof runs_path, "%s/runs", dir);
    FILE *file = fopen (runs_path, "r");
    size_t got = file? fread (runs, 1, sizeof runs - 1, file): 0;
    if (file)
        fclose (file);
    runs [got] = 0;
    CHECK (strcmp (runs, "b\nc\n") == 0, "b and c ran once each, got '%s'", runs);
    harness_note ("a chain overbooked behind a failing task was retracted and ran once, elsewhere");
    char command [600];
    snprintf (command, sizeof command, "rm -rf %s", dir);
    CHECK (system (command) == 0, "cleanup");

    //  6. No head-of-line blocking: three gpu tasks of priority 10 on a
    //  one-cpu gpu governor (one runs for 30 s, one waits in its queue,
    //  the third must wait at the broker: every governor that could run it
    //  is full) and four cpu tasks of priority 0 behind them. The idle
    //  cpu governors run the cpu tasks at once, while the long gpu task
    //  still runs; they do not wait for the gpu.
    const char *gpu2_args [] = { "--resource", "gpu=1", NULL };
    harness_add_governor_args (h, "gpu-2", 1, gpu2_args);
    uint32_t g [3] = { s_sleep (session, 30), s_sleep (session, 0.01), s_sleep (session, 0.01) };
    for (int i = 0; i < 3; i++) {
        CHECK_RC (sq_task_set_resource (session, g [i], "gpu", 1), SQ_OK, "gpu");
        CHECK_RC (sq_task_set_priority (session, g [i], 10), SQ_OK, "priority");
    }
    uint32_t cpu_tasks [4];
    for (int i = 0; i < 4; i++)
        cpu_tasks [i] = s_sleep (session, 0.01);
    CHECK_RC (sq_submit (session), SQ_OK, "submit gpu and cpu tasks");
    CHECK_RC (sq_wait (session, cpu_tasks, 4, 20000), SQ_OK,
              "the cpu tasks ran while the gpu tasks waited for the gpu");
    CHECK_RC (sq_wait (session, g, 1, 0), SQ_E_TIMEOUT,
              "the long gpu task is still running: nothing waited for it");
    CHECK_RC (sq_cancel (session, g, 3), SQ_OK, "cancel the gpu tasks");
    harness_note ("cpu tasks behind a gpu task waiting for a full governor ran at once");

    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
    printf ("test_scheduler: all checks passed\n");
    return 0;
}
