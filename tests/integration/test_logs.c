/*  test_logs: a task's stdout and stderr through libsquall's sq_client_log
    (LOG to the broker, LOGREAD on the governor; with keys, the broker's
    capability), read while the task runs and after, from offsets, and a
    log whose governor was killed ("log lost with governor N"). */
#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t
s_execute (sq_session_t *s, const char *script)
{
    const char *args [] = { "sh", "-c", script };
    size_t size;
    void *config = sq_config_execute (args, 3, NULL, 0, -1, NULL, 0, -1, NULL, &size);
    CHECK (config, "sq_config_execute");
    return harness_task (s, "execute", NULL, 0, 0, config, size);
}

//  Everything of a stream from `offset` until the attempt ended.
static char *
s_read_all (sq_client_t *client, uint32_t session, uint32_t task, int stream, uint64_t offset)
{
    size_t cap = 1 << 16, len = 0;
    char *all = (char *) malloc (cap);
    CHECK (all, "out of memory");
    double deadline = harness_now () + 60;
    while (1) {
        char *data = NULL;
        size_t size = 0;
        uint64_t next = 0;
        uint32_t attempt = 99;
        int state = -1;
        CHECK_RC (sq_client_log (client, session, task, -1, stream, offset, 0, &data, &size,
                                 &next, &attempt, &state), SQ_OK, "log of task %u", task);
        CHECK (attempt == 0, "attempt %u", attempt);
        CHECK (len + size < cap, "more output than expected");
        if (size)
            memcpy (all + len, data, size);
        len += size;
        sq_free (data);
        CHECK (next >= offset, "went back from %llu to %llu", (unsigned long long) offset,
               (unsigned long long) next);
        offset = next;
        if (state == SQ_LOG_DONE)
            break;
        CHECK (harness_now () < deadline, "the log never ended (state %d)", state);
        if (size == 0)
            harness_pause (20);
    }
    all [len] = 0;
    return all;
}

int
main (void)
{
    harness_t *h = harness_new (1, 2);
    sq_client_t *client = harness_client (h);
    sq_session_t *s = sq_session_new (client);
    CHECK (s, "session");
    uint32_t sid = sq_session_id (s);
    char dir [] = "/tmp/squall-test-logs-XXXXXX";
    CHECK (mkdtemp (dir), "mkdtemp");

    //  1. A task that prints, then waits for a file: its first line is
    //  read while it runs, the rest once it ends; stderr apart.
    char script [600];
    snprintf (script, sizeof script, "echo first; echo oops >&2; "
              "while [ ! -e %s/go ]; do sleep 0.02; done; echo second", dir);
    uint32_t t = s_execute (s, script);
    CHECK_RC (sq_submit (s), SQ_OK, "submit");
    double deadline = harness_now () + 60;
    char *data = NULL;
    size_t size = 0;
    uint64_t next = 0;
    int state = -1;
    while (1) {
        CHECK_RC (sq_client_log (client, sid, t, -1, SQ_LOG_STDOUT, 0, 0, &data, &size, &next,
                                 NULL, &state), SQ_OK, "log while it runs");
        if (size)
            break;
        sq_free (data);
        CHECK (harness_now () < deadline, "no output while it runs");
        harness_pause (20);
    }
    CHECK (state == SQ_LOG_RUNNING && size == 6 && memcmp (data, "first\n", 6) == 0 && next == 6,
           "state %d, %zu bytes", state, size);
    sq_free (data);
    char go [600];
    snprintf (go, sizeof go, "%s/go", dir);
    FILE *f = fopen (go, "w");
    CHECK (f && fclose (f) == 0, "create %s", go);
    char *rest = s_read_all (client, sid, t, SQ_LOG_STDOUT, 6);
    CHECK (strcmp (rest, "second\n") == 0, "the rest: '%s'", rest);
    free (rest);
    char *err = s_read_all (client, sid, t, SQ_LOG_STDERR, 0);
    CHECK (strcmp (err, "oops\n") == 0, "stderr: '%s'", err);
    free (err);

    //  2. Bad arguments and unknown tasks are errors, not hangs.
    CHECK_RC (sq_client_log (client, sid, t, -1, 3, 0, 0, &data, &size, &next, NULL, &state),
              SQ_E_INVALID, "stream 3");
    CHECK_RC (sq_client_log (client, sid, 999, -1, SQ_LOG_STDOUT, 0, 0, &data, &size, &next,
                             NULL, &state), SQ_E_UNKNOWN_ID, "task 999");
    CHECK_RC (sq_client_log (client, sid, t, 7, SQ_LOG_STDOUT, 0, 0, &data, &size, &next,
                             NULL, &state), SQ_E_UNKNOWN_ID, "attempt 7");
    CHECK_RC (sq_client_log (client, sid + 100, t, -1, SQ_LOG_STDOUT, 0, 0, &data, &size, &next,
                             NULL, &state), SQ_E_SESSION, "another session");

    //  3. The governor that ran it is killed: its logs are gone, said so.
    uint32_t gid = harness_governor_id (h, 0);
    harness_kill_governor (h, 0, SIGKILL);
    deadline = harness_now () + 60;
    while (harness_info_long (client, "governors") != 0) {
        CHECK (harness_now () < deadline, "the broker never saw the governor go");
        harness_pause (20);
    }
    int rc = sq_client_log (client, sid, t, -1, SQ_LOG_STDOUT, 0, 0, &data, &size, &next,
                            NULL, &state);
    CHECK (rc == SQ_E_LOST, "rc %d", rc);
    char want [64];
    snprintf (want, sizeof want, "log lost with governor %u", gid);
    CHECK (strstr (sq_client_errmsg (client), want), "message: %s", sq_client_errmsg (client));

    remove (go);
    rmdir (dir);
    sq_session_destroy (&s);
    harness_client_destroy (&client);
    harness_destroy (&h);
    printf ("test_logs: OK\n");
    return 0;
}
