/*  test_stealing: a skewed load evens out, and every task runs once.

    One governor learns that tasks are quick (2000 noops), so it takes a
    deep queue; then 16 slow tasks all land on it. A second governor joins,
    idle: the broker asks the first for unstarted tasks back (RETRACT) and
    places them on the newcomer. Each slow task appends a line to a file of
    its own, so "ran exactly once" is checked on disk, not trusted from
    counters. */
#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_SLOW 16

static int
s_lines (const char *path)
{
    FILE *file = fopen (path, "r");
    if (!file)
        return 0;
    int lines = 0, c;
    while ((c = fgetc (file)) != EOF)
        lines += c == '\n';
    fclose (file);
    return lines;
}

int
main (void)
{
    char dir [] = "/tmp/squall-stealing-XXXXXX";
    CHECK (mkdtemp (dir), "mkdtemp");
    harness_t *h = harness_new (1, 1);
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);

    uint32_t warm [2000];
    for (int i = 0; i < 2000; i++)
        warm [i] = harness_task (session, "noop", NULL, 0, 1, NULL, 0);
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK_RC (sq_wait_all (session, 20000), SQ_OK, "warm-up");
    (void) warm;

    uint32_t slow [S_SLOW];
    char paths [S_SLOW][128];
    for (int i = 0; i < S_SLOW; i++) {
        char script [512];
        snprintf (paths [i], sizeof paths [i], "%s/task-%d", dir, i);
        snprintf (script, sizeof script, "echo ran >> %.120s; sleep 0.25", paths [i]);
        const char *args [] = { "sh", "-c", script };
        size_t size;
        void *config = sq_config_execute (args, 3, NULL, 0, -1, NULL, 0, -1, NULL, &size);
        slow [i] = harness_task (session, "execute", NULL, 0, 0, config, size);
    }
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    long busy = harness_info_wait (client, "tasks.busy", S_SLOW, 10000);
    CHECK (busy == S_SLOW, "all %d slow tasks went to g0 (busy %ld)", S_SLOW, busy);
    harness_add_governor (h, "g1", 1);
    CHECK_RC (sq_wait (session, slow, S_SLOW, 60000), SQ_OK, "the slow tasks finished");
    for (int i = 0; i < S_SLOW; i++)
        CHECK (s_lines (paths [i]) == 1, "task %d ran %d times", i, s_lines (paths [i]));
    char *json = harness_info (client);
    long g1 = harness_tasks_done (json, "g1");
    CHECK (g1 >= 3, "the idle governor took work over (it ran %ld of %d): %s", g1, S_SLOW, json);
    harness_note ("g1 joined idle and ran %ld of the %d tasks queued on g0; each ran exactly once",
                  g1, S_SLOW);
    free (json);
    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
    char command [128];
    snprintf (command, sizeof command, "rm -rf %s", dir);
    if (system (command))
        harness_note ("could not remove %s", dir);
    printf ("test_stealing: all checks passed\n");
    return 0;
}
