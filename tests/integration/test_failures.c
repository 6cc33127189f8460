/*  test_failures: failing tasks report clearly and do not poison the
    session or the cluster; cancel stops a running task. */
#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sq_client_t *c;
static sq_session_t *s;

static uint32_t
s_execute (const char *const *args, size_t n_args, const uint32_t *inputs, size_t n_in,
           const char *const *in_paths, const char *const *out_paths, int stdout_output)
{
    size_t size;
    void *config = sq_config_execute (args, n_args, in_paths, n_in, -1,
                                      out_paths, 1, stdout_output, NULL, &size);
    CHECK (config, "sq_config_execute (%s)", args [0]);
    return harness_task (s, "execute", inputs, n_in, 1, config, size);
}

static void
s_check_failed (uint32_t task, const char *what, const char *needle1, const char *needle2)
{
    CHECK_RC (sq_wait (s, &task, 1, 30000), SQ_E_TASK_FAILED, "wait for %s", what);
    CHECK (sq_client_errid (c) == task, "%s: errid %u, expected task %u",
           what, sq_client_errid (c), task);
    const char *msg = sq_client_errmsg (c);
    CHECK (strstr (msg, needle1), "%s: message \"%s\" mentions \"%s\"", what, msg, needle1);
    CHECK (!needle2 || strstr (msg, needle2), "%s: message \"%s\" mentions \"%s\"",
           what, msg, needle2);
    harness_note ("%s -> task failed, id %u: \"%s\"", what, task, msg);
}

int
main (void)
{
    harness_t *h = harness_new (2, 2);
    c = harness_client (h);
    s = sq_session_new (c);
    CHECK (s, "session");

    //  A task exiting 3 with text on stderr, two levels of dependents, and
    //  an independent kept object.
    const char *fail_args [] = { "sh", "-c", "echo 'squall-stderr-marker' >&2; exit 3" };
    const char *out_stdout [] = { "" };
    uint32_t failing = s_execute (fail_args, 3, NULL, 0, NULL, out_stdout, 0);
    uint32_t level1 = harness_task (s, "noop", (uint32_t []) { sq_output (failing, 0) }, 1, 1, NULL, 0);
    uint32_t level2 = harness_task (s, "noop", (uint32_t []) { sq_output (level1, 0) }, 1, 1, NULL, 0);
    CHECK_RC (sq_keep (s, sq_output (level2, 0)), SQ_OK, "keep level2 output");
    uint32_t k = harness_blob_str (s, "independent");
    uint32_t k_out = harness_task1 (s, "noop", &k, 1, NULL, 0);
    CHECK_RC (sq_keep (s, k_out), SQ_OK, "keep");
    CHECK_RC (sq_submit (s), SQ_OK, "submit failing graph");

    s_check_failed (failing, "execute exiting 3", "squall-stderr-marker", "3");

    CHECK_RC (sq_wait (s, &level2, 1, 30000), SQ_E_UPSTREAM_FAILED, "wait two levels down");
    CHECK (sq_client_errroot (c) == failing, "UPSTREAM_FAILED root %u, expected %u",
           sq_client_errroot (c), failing);
    harness_note ("dependent two levels down -> upstream failed, errid %u, root %u: \"%s\"",
                  sq_client_errid (c), sq_client_errroot (c), sq_client_errmsg (c));

    void *data = NULL;
    size_t size = 0;
    int rc = sq_fetch (s, sq_output (level2, 0), 10000, &data, &size, NULL);
    CHECK (rc == SQ_E_UPSTREAM_FAILED, "fetch of the failed chain's output: %d (%s)",
           rc, sq_strerror (rc));
    CHECK (sq_client_errroot (c) == failing, "fetch names root %u (got %u)", failing,
           sq_client_errroot (c));
    harness_note ("fetch of the failed chain's kept output -> upstream failed");

    FETCH_EXPECT (s, k_out, "independent", 11);
    harness_note ("independent kept object of the same session still fetchable");

    rc = sq_wait_all (s, 30000);
    CHECK (rc == SQ_E_TASK_FAILED || rc == SQ_E_UPSTREAM_FAILED,
           "wait_all of a session with failures: %d (%s)", rc, sq_strerror (rc));

    //  The session accepts and runs a new submit.
    uint32_t in2 [] = { k_out, harness_blob_str (s, "+more") };
    uint32_t next = harness_task1 (s, "concat", in2, 2, NULL, 0);
    CHECK_RC (sq_keep (s, next), SQ_OK, "keep");
    CHECK_RC (sq_submit (s), SQ_OK, "submit after failure");
    FETCH_EXPECT (s, next, "independent+more", 16);
    harness_note ("session runs a new submit after the failure");

    //  A missing output file.
    const char *true_args [] = { "true" };
    const char *out_missing [] = { "missing-output.txt" };
    uint32_t missing = s_execute (true_args, 1, NULL, 0, NULL, out_missing, -1);
    //  A program that does not exist.
    const char *ghost_args [] = { "squall-no-such-program-xyz" };
    uint32_t ghost = s_execute (ghost_args, 1, NULL, 0, NULL, out_stdout, 0);
    CHECK_RC (sq_submit (s), SQ_OK, "submit missing-file / missing-program tasks");
    s_check_failed (missing, "missing output file", "missing-output.txt", NULL);
    s_check_failed (ghost, "program that does not exist", "squall-no-such-program-xyz", NULL);

    //  Cancel of a long sleep.
    size_t csize;
    void *config = sq_config_sleep (60.0, &csize);
    uint32_t sleeper = harness_task (s, "sleep", NULL, 0, 1, config, csize);
    uint32_t after = harness_task (s, "noop", (uint32_t []) { sq_output (sleeper, 0) }, 1, 1, NULL, 0);
    CHECK_RC (sq_submit (s), SQ_OK, "submit sleep 60");
    //  busy, not exactly 1: the broker may hand the dependent to a
    //  governor ahead of time (prefetch).
    long running = harness_info_wait_min (c, "tasks.busy", 1, 10000);
    CHECK (running >= 1, "the sleep task is on a governor (INFO tasks.busy = %ld)", running);
    running = harness_info_wait_min (c, "tasks.running", 1, 5000);
    CHECK (running == 1, "the governor's STARTED is counted: INFO tasks.running = %ld", running);
    double t0 = harness_now ();
    CHECK_RC (sq_cancel (s, &sleeper, 1), SQ_OK, "cancel sleep task");
    CHECK_RC (sq_wait (s, &sleeper, 1, 10000), SQ_E_CANCELLED, "wait on cancelled task");
    CHECK (sq_client_errid (c) == sleeper, "CANCELLED names %u (got %u)", sleeper, sq_client_errid (c));
    rc = sq_wait (s, &after, 1, 10000);
    CHECK (rc == SQ_E_CANCELLED || rc == SQ_E_UPSTREAM_FAILED,
           "dependent of a cancelled task: %d (%s)", rc, sq_strerror (rc));
    harness_note ("cancel of sleep 60 -> cancelled after %.2f s; its dependent -> %s",
                  harness_now () - t0, sq_strerror (rc));
    running = harness_info_wait (c, "tasks.busy", 0, 10000);
    CHECK (running == 0, "no task left running after cancel (INFO tasks.busy = %ld)", running);

    //  The cluster is usable: four one-cpu tasks at once need every cpu.
    t0 = harness_now ();
    uint32_t quick [4];
    for (int i = 0; i < 4; i++) {
        config = sq_config_sleep (0.5, &csize);
        quick [i] = harness_task (s, "sleep", NULL, 0, 1, config, csize);
    }
    CHECK_RC (sq_submit (s), SQ_OK, "submit after cancel");
    CHECK_RC (sq_wait (s, quick, 4, 10000), SQ_OK, "four sleep 0.5 after cancel");
    harness_note ("cluster usable after cancel: 4 x sleep 0.5 done in %.2f s", harness_now () - t0);

    sq_session_destroy (&s);
    CHECK (harness_broker_alive (h), "broker alive");
    harness_client_destroy (&c);
    CHECK (harness_destroy (&h) == 0, "broker and governors exited cleanly");
    printf ("test_failures: PASS\n");
    return 0;
}
