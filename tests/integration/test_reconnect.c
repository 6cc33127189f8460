/*  test_reconnect: governors find their way back by themselves.

    - the broker is killed and a new one starts on the same endpoint: both
      governors reconnect (with back-off) and say READY again, as new
      governors, and a new client runs a graph on them;
    - a governor stopped (SIGSTOP) past its liveness is declared dead by the
      broker; once resumed it notices, drops what it held and joins again
      as a new governor; work submitted meanwhile ran on the other one.
*/
#include "harness.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
s_run_graph (harness_t *h, const char *what)
{
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);
    CHECK (session, "session");
    uint32_t ids [8];
    for (int i = 0; i < 8; i++) {
        size_t size;
        void *config = sq_config_sleep (0.01, &size);
        ids [i] = harness_task (session, "sleep", NULL, 0, 1, config, size);
    }
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK_RC (sq_wait (session, ids, 8, 20000), SQ_OK, "%s: the graph ran", what);
    sq_session_destroy (&session);
    harness_client_destroy (&client);
    harness_note ("%s: 8 tasks ran", what);
}

int
main (void)
{
    harness_t *h = harness_new (2, 1);
    s_run_graph (h, "before anything");

    //  1. Broker restart.
    double start = harness_now ();
    harness_restart_broker (h);
    harness_governor_expect (h, 0, "READY ");
    harness_governor_expect (h, 1, "READY ");
    harness_note ("broker restarted: both governors back in %.2f s", harness_now () - start);
    sq_client_t *client = harness_client (h);
    CHECK (harness_info_wait (client, "governors", 2, 10000) == 2, "the new broker has 2 governors");
    harness_client_destroy (&client);
    s_run_graph (h, "after the broker restart");

    //  2. A governor frozen past its liveness.
    client = harness_client (h);
    pid_t frozen = harness_governor_pid (h, 0);
    kill (frozen, SIGSTOP);
    CHECK (harness_info_wait (client, "governors", 1, 20000) == 1,
           "the broker declared the frozen governor dead");
    s_run_graph (h, "with one governor frozen");
    start = harness_now ();
    kill (frozen, SIGCONT);
    harness_governor_expect (h, 0, "READY ");
    CHECK (harness_info_wait (client, "governors", 2, 10000) == 2, "it joined again");
    harness_note ("the frozen governor rejoined %.2f s after it resumed", harness_now () - start);
    harness_client_destroy (&client);
    s_run_graph (h, "after it rejoined");

    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
    printf ("test_reconnect: all checks passed\n");
    return 0;
}
