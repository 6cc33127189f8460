/*  test_drain: governors that leave cleanly (broker/peers/drain.c).

    1. SIGTERM mid-graph: of two governors running a graph of 24 tasks
       whose kept outputs (8 KB, so they stay on governors) are all needed,
       one gets SIGTERM. It drains: its queued tasks go to the other, its
       running ones finish, the outputs only it holds are copied over; the
       broker says LEAVE and it exits 0. Every task ran exactly once (a run
       log the tasks write), every result is exact, nothing was recomputed.
    2. RETIRE: a client retires a governor by id; it drains and exits 0,
       and INFO no longer lists it. A governor id nobody has is refused.
    3. A second SIGTERM leaves at once: a governor running a 60 s task gets
       SIGTERM (it would wait for the task) and then another; it exits
       long before the task would have ended.
    4. If the governor that left at once held the only copies of part 1's
       kept outputs, they are computed again: every extra run is counted
       as recomputed, results stay exact, and the run log is read (and
       removed) only once no task of the session runs or waits.
*/
#include "harness.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define S_TASKS 24
#define S_SIZE 8000

static uint32_t
s_shell (sq_session_t *session, const char *script)
{
    const char *args [] = { "sh", "-c", script };
    const char *out_paths [] = { "" };
    size_t size;
    void *config = sq_config_execute (args, 3, NULL, 0, -1, out_paths, 1, 0, NULL, &size);
    CHECK (config, "execute config");
    return harness_task (session, "execute", NULL, 0, 1, config, size);
}

static void
s_expected (char *buf, int i)
{
    //  What task i prints: "t<i> " repeated, cut at S_SIZE bytes.
    char unit [16];
    int len = snprintf (unit, sizeof unit, "t%d ", i);
    for (size_t at = 0; at < S_SIZE; at += (size_t) len)
        memcpy (buf + at, unit, at + (size_t) len <= S_SIZE? (size_t) len: S_SIZE - at);
}

int
main (void)
{
    harness_t *h = harness_new (2, 2);
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);
    char dir [] = "/tmp/squall-drain-XXXXXX";
    CHECK (mkdtemp (dir), "temp dir");

    //  1. SIGTERM mid-graph.
    uint32_t tasks [S_TASKS], outputs [S_TASKS];
    for (int i = 0; i < S_TASKS; i++) {
        char script [512];
        snprintf (script, sizeof script,
                  "echo %d >> %s/runs; sleep 0.3; yes t%d | tr '\\n' ' ' | head -c %d",
                  i, dir, i, S_SIZE);
        tasks [i] = s_shell (session, script);
        outputs [i] = sq_output (tasks [i], 0);
        CHECK_RC (sq_keep (session, outputs [i]), SQ_OK, "keep");
    }
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK (harness_info_wait_min (client, "tasks.running", 2, 20000) >= 2, "tasks run");
    kill (harness_governor_pid (h, 0), SIGTERM);
    CHECK_RC (sq_wait (session, tasks, S_TASKS, 60000), SQ_OK, "the graph finished");
    CHECK (harness_governor_exit (h, 0, 30000) == 0, "the drained governor exited 0 on LEAVE");
    char *expected = (char *) malloc (S_SIZE);
    for (int i = 0; i < S_TASKS; i++) {
        s_expected (expected, i);
        FETCH_EXPECT (session, outputs [i], expected, S_SIZE);
    }
    free (expected);
    char runs_path [600];
    snprintf (runs_path, sizeof runs_path, "%s/runs", dir);
    FILE *file = fopen (runs_path, "r");
    CHECK (file, "run log");
    int ran [S_TASKS] = { 0 }, n;
    while (fscanf (file, "%d", &n) == 1)
        if (n >= 0 && n < S_TASKS)
            ran [n]++;
    fclose (file);
    for (int i = 0; i < S_TASKS; i++)
        CHECK (ran [i] == 1, "task %d ran %d times", i, ran [i]);
    CHECK (harness_info_long (client, "recomputed") == 0, "nothing recomputed");
    char *json = harness_info (client);
    CHECK (harness_json_long (json, "governors") == 1 && harness_tasks_done (json, "g0") < 0,
           "the drained governor is gone: %s", json);
    sq_free (json);
    harness_note ("SIGTERM mid-graph: drained, left with status 0; %d tasks each ran once, "
                  "results exact, nothing recomputed", S_TASKS);

    //  2. RETIRE by id. With keys only an admin key may: the test's client
    //  key is refused, and an admin key is made for it.
    int third = harness_add_governor (h, "third", 1);
    uint32_t third_id = harness_governor_id (h, third);
    sq_client_t *admin = client;
    if (harness_secure ()) {
        CHECK_RC (sq_client_retire (client, third_id), SQ_E_DENIED, "a client key may not retire");
        const char *key = harness_keygen ("ops", "admin", NULL);
        CHECK (harness_reload_keys (h) == 0, "SIGHUP");
        //  The reload is the broker's next turn: connect until it knows the key.
        double deadline = harness_now () + 10;
        int rc = SQ_E_CONNECTION;
        while (rc != SQ_OK && harness_now () < deadline) {
            admin = sq_client_new ();
            CHECK_RC (sq_client_set_keys (admin, key, harness_key ("broker.pub")), SQ_OK, "keys");
            rc = sq_client_connect (admin, harness_endpoint (h), 500);
            if (rc != SQ_OK)
                sq_client_destroy (&admin);
        }
        CHECK (rc == SQ_OK, "the admin key connects after the reload");
    }
    CHECK_RC (sq_client_retire (admin, 999999), SQ_E_INVALID, "an unknown governor is refused");
    CHECK_RC (sq_client_retire (admin, third_id), SQ_OK, "retire governor %u", third_id);
    if (admin != client)
        sq_client_destroy (&admin);
    CHECK (harness_governor_exit (h, third, 30000) == 0, "the retired governor exited 0");
    json = harness_info (client);
    char name_field [64];
    snprintf (name_field, sizeof name_field, "\"name\":\"third\"");
    CHECK (!strstr (json, name_field), "INFO no longer lists it: %s", json);
    sq_free (json);
    harness_note ("RETIRE: governor %u drained and left", third_id);

    //  3. A second SIGTERM: out at once, the 60 s task notwithstanding.
    int slow = harness_add_governor (h, "slow", 1);
    uint32_t long_task = s_shell (session, "sleep 60; echo done");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK (harness_info_wait_min (client, "tasks.running", 1, 20000) >= 1, "the long task runs");
    pid_t pid = harness_governor_pid (h, slow);
    char *info = harness_info (client);
    long on_slow = harness_governor_field (info, "slow", "running");
    sq_free (info);
    if (on_slow < 1)
        pid = harness_governor_pid (h, 1);      //  it went to the other one
    int which = pid == harness_governor_pid (h, slow)? slow: 1;
    double start = harness_now ();
    kill (pid, SIGTERM);
    CHECK (harness_governor_exit (h, which, 1500) == -1, "draining: it waits for its task");
    kill (pid, SIGTERM);
    CHECK (harness_governor_exit (h, which, 20000) == 0, "a second SIGTERM: it left");
    double took = harness_now () - start;
    CHECK (took < 40, "it left in %.1f s, long before the task's 60 s", took);
    CHECK_RC (sq_cancel (session, &long_task, 1), SQ_OK, "cancel the long task");
    harness_note ("a second SIGTERM: out in %.1f s while a 60 s task ran", took);

    //  4. What that loss costs. Governor 1 held the only copies of part 1's
    //  kept outputs (g0 drained to it; third and slow came later): if it is
    //  the one that left at once, they are computed again on slow (lineage),
    //  each task echoing into the run log once more. The broker knows of
    //  the loss once INFO lists one governor; then every task of the
    //  session ends before the run log is read, and before it is removed.
    CHECK (harness_info_wait (client, "governors", 1, 20000) == 1, "the broker saw it leave");
    double deadline = harness_now () + 60;
    long active = -1;
    while (active != 0 && harness_now () < deadline) {
        json = harness_info (client);
        active = harness_json_active (json);
        sq_free (json);
        if (active != 0)
            harness_pause (50);
    }
    CHECK (active == 0, "no task of the session runs or waits: %ld still do", active);
    long recomputed = harness_info_long (client, "recomputed");
    file = fopen (runs_path, "r");
    CHECK (file, "run log");
    memset (ran, 0, sizeof ran);
    long runs = 0;
    while (fscanf (file, "%d", &n) == 1)
        if (n >= 0 && n < S_TASKS) {
            ran [n]++;
            runs++;
        }
    fclose (file);
    for (int i = 0; i < S_TASKS; i++)
        CHECK (ran [i] == 1 || ran [i] == 2, "task %d ran %d times (recomputed %ld)",
               i, ran [i], recomputed);
    CHECK (runs - S_TASKS == recomputed,
           "every run after part 1 is a recomputation: %ld runs of %d tasks, recomputed %ld",
           runs, S_TASKS, recomputed);
    CHECK (which != 1 || recomputed == S_TASKS,
           "governor 1 left with all of part 1's outputs: recomputed %ld, not %d",
           recomputed, S_TASKS);
    expected = (char *) malloc (S_SIZE);
    for (int i = 0; i < S_TASKS; i++) {
        s_expected (expected, i);
        FETCH_EXPECT (session, outputs [i], expected, S_SIZE);
    }
    free (expected);
    harness_note ("%s left at once: %ld of part 1's tasks computed again, results exact",
                  which == 1? "governor 1 (part 1's outputs only there)": "slow (nothing only there)",
                  recomputed);

    char command [600];
    snprintf (command, sizeof command, "rm -rf %s", dir);
    CHECK (system (command) == 0, "cleanup");
    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
    printf ("test_drain: all checks passed\n");
    return 0;
}
