/*  test_recovery: the broker's fault tolerance with real processes.

    - retries: a task whose own code fails twice and then succeeds runs
      three times with max_retries 2, and fails with its message with 1;
    - timeout: a task over its timeout is killed and fails saying so;
    - lineage: a governor holding the only copy of an intermediate object
      (whose own input was already released) is killed; the objects are
      recomputed on a governor that joins later, under the same name as
      the dead one (and is treated as new), and the final result is exact;
    - crash limit: a task that kills every governor it runs on fails as the
      suspected cause after --allowed-failures deaths, and the cluster
      keeps serving;
    - memory: a task killed for using more memory than it asked for is
      retried with twice the memory on a governor that has it.
*/
#include "harness.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char s_dir [] = "/tmp/squall-recovery-XXXXXX";

static uint32_t
s_shell (sq_session_t *session, const char *script, const uint32_t *inputs, size_t n_inputs)
{
    const char *args [] = { "sh", "-c", script };
    const char *in_paths [4] = { "in0", "in1", "in2", "in3" };
    const char *out_paths [] = { "" };
    size_t size;
    void *config = sq_config_execute (args, 3, in_paths, n_inputs, -1, out_paths, 1, 0, NULL, &size);
    CHECK (config, "execute config");
    return harness_task (session, "execute", inputs, n_inputs, 1, config, size);
}

static long
s_read_counter (const char *path)
{
    FILE *file = fopen (path, "r");
    long value = -1;
    if (file) {
        if (fscanf (file, "%ld", &value) != 1)
            value = -1;
        fclose (file);
    }
    return value;
}

static void
s_test_retries (harness_t *h)
{
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);
    CHECK (session, "session");
    char script [1024], counter [128];
    for (int retries = 2; retries >= 1; retries--) {
        snprintf (counter, sizeof counter, "%s/count-%d", s_dir, retries);
        snprintf (script, sizeof script,
                  "n=$(cat %s 2>/dev/null || echo 0); n=$((n+1)); echo $n > %s; "
                  "if [ $n -lt 3 ]; then echo attempt $n fails >&2; exit 1; fi; printf ok",
                  counter, counter);
        uint32_t task = s_shell (session, script, NULL, 0);
        uint32_t out = sq_output (task, 0);
        CHECK_RC (sq_task_set_max_retries (session, task, (uint32_t) retries), SQ_OK, "retries");
        CHECK_RC (sq_keep (session, out), SQ_OK, "keep");
        CHECK_RC (sq_submit (session), SQ_OK, "submit");
        int rc = sq_wait (session, &task, 1, 30000);
        if (retries == 2) {
            CHECK_RC (rc, SQ_OK, "task with 2 retries succeeds on its third run");
            FETCH_EXPECT (session, out, "ok", 2);
            CHECK (s_read_counter (counter) == 3, "ran %ld times, expected 3", s_read_counter (counter));
            harness_note ("max_retries 2: failed twice, succeeded on the third run");
        }
        else {
            CHECK_RC (rc, SQ_E_TASK_FAILED, "task with 1 retry fails");
            CHECK (strstr (sq_client_errmsg (client), "attempt 2 fails"),
                   "the message is the last attempt's: %s", sq_client_errmsg (client));
            CHECK (s_read_counter (counter) == 2, "ran %ld times, expected 2", s_read_counter (counter));
            harness_note ("max_retries 1: ran twice, failed with the last attempt's message");
        }
    }
    sq_session_destroy (&session);
    harness_client_destroy (&client);
}

static void
s_test_timeout (harness_t *h)
{
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);
    size_t size;
    void *config = sq_config_sleep (30, &size);
    uint32_t task = harness_task (session, "sleep", NULL, 0, 1, config, size);
    CHECK_RC (sq_task_set_timeout (session, task, 0.3), SQ_OK, "timeout");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    double start = harness_now ();
    CHECK_RC (sq_wait (session, &task, 1, 20000), SQ_E_TASK_FAILED, "timed-out task fails");
    CHECK (strstr (sq_client_errmsg (client), "timed out"), "message: %s", sq_client_errmsg (client));
    CHECK (harness_now () - start < 10, "it failed in time");
    harness_note ("timeout 0.3 s on a 30 s sleep: failed after %.2f s", harness_now () - start);
    sq_session_destroy (&session);
    harness_client_destroy (&client);
}

static void
s_test_lineage (void)
{
    //  One governor first, so that we know where everything runs; two cpus
    //  so that the sleep does not hold up a1.
    harness_t *h = harness_new (1, 2);
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);
    const size_t big = 1 << 20, half = big / 2;
    char *expect = (char *) malloc (big);
    for (size_t i = 0; i < big; i++)
        expect [i] = "squall\n" [i % 7];
    //  a0: 1 MiB made by a program; a1: its first half (a0 is released once
    //  a1 exists: nobody keeps it); c: a1 joined with the output of a sleep
    //  that is still running when the governor dies.
    uint32_t a0 = sq_output (s_shell (session, "yes squall | head -c 1048576", NULL, 0), 0);
    size_t size;
    void *config = sq_config_slice (0, (int64_t) half, &size);
    uint32_t a1_task = harness_task (session, "slice", &a0, 1, 1, config, size);
    uint32_t a1 = sq_output (a1_task, 0);
    config = sq_config_sleep (1.5, &size);
    uint32_t nap = sq_output (harness_task (session, "sleep", NULL, 0, 1, config, size), 0);
    uint32_t parts [2] = { a1, nap };
    uint32_t c = harness_task1 (session, "concat", parts, 2, NULL, 0);
    CHECK_RC (sq_keep (session, c), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK_RC (sq_wait (session, &a1_task, 1, 20000), SQ_OK, "a1 done");
    long finished = harness_info_long (client, "tasks.finished");
    CHECK (finished == 2, "a0 and a1 finished first (INFO tasks.finished = %ld)", finished);
    uint32_t old_id = harness_governor_id (h, 0);
    double killed = harness_now ();
    harness_kill_governor (h, 0, SIGKILL);
    CHECK (harness_info_wait (client, "governors", 0, 10000) == 0, "the broker saw the governor go");
    int i = harness_add_governor (h, "g0", 2);
    CHECK (harness_governor_id (h, i) != old_id,
           "a governor restarting under the same name is a new one (id %u, was %u)",
           harness_governor_id (h, i), old_id);
    FETCH_EXPECT (session, c, expect, half);
    long recomputed = harness_info_long (client, "recomputed");
    CHECK (recomputed >= 2, "a0 and a1 were recomputed (INFO recomputed = %ld)", recomputed);
    harness_note ("lost a1 (and released a0) recomputed on the new g0 (id %u, was %u): "
                  "result exact, %.2f s after the kill, %ld task(s) re-run",
                  harness_governor_id (h, i), old_id, harness_now () - killed, recomputed);
    free (expect);
    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
}

//  The governor holding a kept object freezes (SIGSTOP) while the client
//  fetches it: the fetch does not fail; once the broker gives the governor
//  up, the object is recomputed elsewhere and the fetch returns it.
static void
s_test_fetch_from_frozen (void)
{
    harness_t *h = harness_new (2, 1);
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);
    const size_t big = 1 << 20;
    char *expect = (char *) malloc (big);
    for (size_t i = 0; i < big; i++)
        expect [i] = "squall\n" [i % 7];
    uint32_t task = s_shell (session, "yes squall | head -c 1048576", NULL, 0);
    uint32_t out = sq_output (task, 0);
    CHECK_RC (sq_keep (session, out), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK_RC (sq_wait (session, &task, 1, 20000), SQ_OK, "made");
    char *json = harness_info (client);
    int holder = harness_tasks_done (json, "g0") == 1? 0: 1;
    free (json);
    pid_t frozen = harness_governor_pid (h, holder);
    kill (frozen, SIGSTOP);
    double start = harness_now ();
    FETCH_EXPECT (session, out, expect, big);
    harness_note ("fetch from a frozen governor returned the recomputed object after %.2f s",
                  harness_now () - start);
    kill (frozen, SIGCONT);
    harness_kill_governor (h, holder, SIGKILL);
    free (expect);
    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
}

static void
s_test_crash_limit (void)
{
    const char *args [] = { "--allowed-failures", "2", NULL };
    harness_t *h = harness_new_args (2, 1, args);
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);
    //  $PPID of the program is the governor that started it.
    uint32_t killer = s_shell (session, "sleep 0.2; kill -9 $PPID; sleep 30", NULL, 0);
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK_RC (sq_wait (session, &killer, 1, 60000), SQ_E_TASK_FAILED, "the killer fails");
    CHECK (strstr (sq_client_errmsg (client), "suspected"), "message: %s", sq_client_errmsg (client));
    harness_note ("a task that killed 2 governors failed: %s", sq_client_errmsg (client));
    harness_kill_governor (h, 0, SIGKILL);      //  reap both: their deaths were the point
    harness_kill_governor (h, 1, SIGKILL);
    harness_add_governor (h, "g2", 1);
    uint32_t fine = harness_task (session, "noop", NULL, 0, 1, NULL, 0);
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK_RC (sq_wait (session, &fine, 1, 20000), SQ_OK, "the cluster still runs tasks");
    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
}

//  A task asking for 200 MiB that uses about 300 MiB is killed for it, and
//  retried with twice the memory, which only the big governor has. It holds
//  the memory 4 s, 20 of the governor's 200 ms memory checks, so that a
//  loaded machine still sees it over its limit before it ends.
static void
s_test_memory (void)
{
    harness_t *h = harness_new (0, 1);
    const char *small [] = { "--memory", "256MiB", NULL };
    const char *big [] = { "--memory", "4GiB", NULL };
    harness_add_governor_args (h, "small", 1, small);
    harness_add_governor_args (h, "big", 1, big);
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);
    uint32_t hog = s_shell (session,
        "python3 -c 'b = b\"x\" * (300 << 20); import time; time.sleep(4); print(len(b) >> 20)'",
        NULL, 0);
    uint32_t out = sq_output (hog, 0);
    CHECK_RC (sq_task_set_resource (session, hog, "memory", 200u << 20), SQ_OK, "memory");
    CHECK_RC (sq_keep (session, out), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK_RC (sq_wait (session, &hog, 1, 60000), SQ_OK, "the memory hog succeeds in the end");
    FETCH_EXPECT (session, out, "300\n", 4);
    char *json = harness_info (client);
    long on_small = harness_tasks_done (json, "small"), on_big = harness_tasks_done (json, "big");
    CHECK (on_small + on_big == 2 && on_big >= 1,
           "one attempt was killed, the retry ran on the big governor (small %ld, big %ld)",
           on_small, on_big);
    harness_note ("a task over its memory was killed and retried with twice the memory on "
                  "the governor that has it (attempts: small %ld, big %ld)", on_small, on_big);
    free (json);
    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
}

int
main (void)
{
    CHECK (mkdtemp (s_dir), "mkdtemp");
    harness_t *h = harness_new (2, 1);
    s_test_retries (h);
    s_test_timeout (h);
    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
    s_test_lineage ();
    s_test_fetch_from_frozen ();
    s_test_crash_limit ();
    s_test_memory ();
    char command [300];
    snprintf (command, sizeof command, "rm -rf %s", s_dir);
    if (system (command) != 0)
        harness_note ("could not remove %s", s_dir);
    printf ("test_recovery: all checks passed\n");
    return 0;
}
