/*  test_durable: the broker's journal through libsquall (the chaos test
    tests/chaos/test_broker_restart.py kills it at random moments; this one
    checks each path once, deterministically).

    - killed while a graph runs and restarted on its journal: the client
      (libsquall) resumes its session, its wait and fetch just take longer,
      results are exact, the governors came back with the same ids and what
      they held, and no task ran twice (their own tasks_run counts);
    - the session's next submits go on after a restart (that a SUBMIT
      whose reply was lost is not applied twice is the chaos test's "kill
      during the submit");
    - stopped with SIGTERM, it leaves at once even with a governor frozen,
      and its journal is whole: the next start has every session;
    - restarted without its journal, it is another cluster: the client
      gets SQ_E_SESSION naming its session, new sessions work, and the
      governors start afresh (READY again).
*/
#include "harness.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long
s_tasks_run (sq_client_t *client)
{
    char *json = harness_info (client);
    long sum = 0;
    for (const char *p = json; (p = strstr (p, "\"tasks_run\":")); ) {
        p += strlen ("\"tasks_run\":");
        sum += strtol (p, NULL, 10);
    }
    sq_free (json);
    return sum;
}

//  Waits until the governors' counts (reported every 2 s at most) say n.
static long
s_wait_tasks_run (sq_client_t *client, long n)
{
    double deadline = harness_now () + 10;
    long got = s_tasks_run (client);
    while (got != n && harness_now () < deadline) {
        harness_pause (50);
        got = s_tasks_run (client);
    }
    return got;
}

int
main (void)
{
    char dir [] = "/tmp/squall-durable-XXXXXX";
    CHECK (mkdtemp (dir), "mkdtemp");
    char journal [300];
    snprintf (journal, sizeof journal, "%s/journal", dir);
    const char *with_journal [] = { "--journal", journal, "--heartbeat-ms", "200",
                                    "--reattach-wait", "10000", NULL };
    const char *gov_args [] = { "--heartbeat-ms", "200", NULL };
    const char *const *per_gov [2] = { gov_args, gov_args };
    harness_t *h = harness_new_govs (2, 1, with_journal, per_gov);
    harness_set_restart_args (h, with_journal);
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);
    CHECK (session, "session");
    uint32_t g0 = harness_governor_id (h, 0), g1 = harness_governor_id (h, 1);

    //  1. Killed while sleeps run; a concat of their outputs (20 KB each,
    //  too big for the broker to hold: they stay on the governors).
    uint8_t parts [4][20000];
    uint32_t outs [4];
    for (int i = 0; i < 4; i++) {
        harness_pattern (parts [i], sizeof parts [i], (uint32_t) i);
        uint32_t c = harness_blob (session, parts [i], sizeof parts [i]);
        size_t size;
        void *config = sq_config_sleep (0.5, &size);
        outs [i] = harness_task1 (session, "sleep", &c, 1, config, size);
    }
    uint32_t all = harness_task1 (session, "concat", outs, 4, NULL, 0);
    CHECK_RC (sq_keep (session, all), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    long base = s_tasks_run (client);
    CHECK (harness_info_wait (client, "tasks.running", 2, 10000) == 2, "two sleeps running");
    harness_restart_broker (h);
    uint8_t whole [80000];
    for (int i = 0; i < 4; i++)
        memcpy (whole + i * 20000, parts [i], 20000);
    CHECK_RC (sq_wait_all (session, 30000), SQ_OK, "the graph finished across the restart");
    FETCH_EXPECT (session, all, whole, sizeof whole);
    CHECK (s_wait_tasks_run (client, base + 5) == base + 5, "5 tasks ran once each (%ld)",
           s_tasks_run (client) - base);
    char *json = harness_info (client);
    CHECK (harness_json_long (json, "epoch") == 2 && harness_json_long (json, "governors") == 2,
           "epoch 2, both governors back: %.300s", json);
    char want [64];
    snprintf (want, sizeof want, "\"id\":%u,", g0);
    CHECK (strstr (json, want), "governor %u kept its id", g0);
    snprintf (want, sizeof want, "\"id\":%u,", g1);
    CHECK (strstr (json, want), "governor %u kept its id", g1);
    sq_free (json);
    harness_note ("killed mid-graph: the client resumed, the governors reattached with their "
                  "ids, the result is exact and no task ran twice");

    //  2. Submits before and after a restart, each applied once (a second
    //  time would be refused as DUPLICATE_ID).
    uint32_t more = harness_task1 (session, "noop", &all, 1, NULL, 0);
    CHECK_RC (sq_keep (session, more), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    harness_restart_broker (h);
    uint32_t again = harness_task1 (session, "noop", &more, 1, NULL, 0);
    CHECK_RC (sq_keep (session, again), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit after the restart");
    FETCH_EXPECT (session, again, whole, sizeof whole);
    harness_note ("a session's submits go on after a restart, each once");

    //  3. SIGTERM with a governor frozen: bounded, and the journal whole.
    kill (harness_governor_pid (h, 1), SIGSTOP);
    double start = harness_now ();
    pid_t broker = harness_broker_pid (h);
    kill (broker, SIGTERM);
    int status = 0;
    while (waitpid (broker, &status, WNOHANG) == 0 && harness_now () - start < 15)
        harness_pause (10);
    double took = harness_now () - start;
    CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0 && took < 5,
           "SIGTERM: the broker left in %.2f s (status 0x%x) with a governor frozen", took, status);
    kill (harness_governor_pid (h, 1), SIGCONT);
    harness_restart_broker (h);
    FETCH_EXPECT (session, again, whole, sizeof whole);
    harness_note ("SIGTERM with a frozen governor: out in %.2f s; the next start had it all", took);

    //  4. Without its journal: another cluster.
    harness_set_restart_args (h, gov_args);
    harness_restart_broker (h);
    void *data = NULL;
    size_t size = 0;
    int rc = sq_fetch (session, again, 10000, &data, &size, NULL);
    char name [32];
    snprintf (name, sizeof name, "session %u", sq_session_id (session));
    CHECK (rc == SQ_E_SESSION && strstr (sq_client_errmsg (client), name),
           "a broker without the journal: SQ_E_SESSION naming the session (%d: %s)", rc,
           sq_client_errmsg (client));
    harness_note ("%s", sq_client_errmsg (client));
    sq_session_t *fresh = sq_session_new (client);
    CHECK (fresh, "a new session on the new cluster");
    harness_governor_expect (h, 0, "READY ");
    harness_governor_expect (h, 1, "READY ");
    uint32_t c = harness_blob_str (fresh, "anew");
    uint32_t copy = harness_task1 (fresh, "concat", &c, 1, NULL, 0);
    CHECK_RC (sq_keep (fresh, copy), SQ_OK, "keep");
    CHECK_RC (sq_submit (fresh), SQ_OK, "submit");
    FETCH_EXPECT (fresh, copy, "anew", 4);
    harness_note ("the governors started afresh with it, and new sessions work");

    sq_session_destroy (&fresh);
    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
    char cmd [400];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK (system (cmd) == 0, "cleanup");
    printf ("test_durable: all checks passed\n");
    return 0;
}
