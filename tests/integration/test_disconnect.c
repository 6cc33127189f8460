/*  test_disconnect: a client that vanishes without closing its session.
    The broker must close the session, cancel its tasks, free its objects,
    and give the governors back to other clients promptly. Two ways to
    vanish: a forked child process that _exit()s (no goodbye of any kind:
    its session waits --session-grace for it to come back and RESUME, then
    closes), and sq_client_destroy without sq_session_destroy (a BYE: the
    session closes at once). */
#include "harness.h"
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLEEP_SECONDS 60.0
//  Everything (detection, cancel, new work) must be done within this long
//  after the vanishing; the sleeps would still have SLEEP - LIMIT left.
#define LIMIT_SECONDS 40.0

//  Kept here so that leak checkers see it as reachable: the session of the
//  destroyed client is deliberately never destroyed.
static sq_session_t *s_orphan;

//  Submits 4 x sleep 60 (one cpu each: the whole cluster) with kept
//  outputs and a kept constant. Returns 0 or an error code.
static int
s_occupy (sq_session_t *session)
{
    uint32_t blob = sq_blob (session, "kept by the vanishing client", 28, NULL);
    if (!blob || sq_keep (session, blob))
        return -1;
    for (int i = 0; i < 4; i++) {
        size_t size;
        void *config = sq_config_sleep (SLEEP_SECONDS, &size);
        uint32_t t = sq_task (session, "sleep", &blob, 1, 1, config, size);
        sq_free (config);
        if (!t || sq_keep (session, sq_output (t, 0)))
            return -1;
    }
    return sq_submit (session);
}

//  The child: connects, occupies the cluster, reports, waits for the word,
//  then _exit()s without any cleanup. Never uses CHECK (its exit handler
//  would kill the parent's broker).
static void
s_child (const char *endpoint, int report_fd, int go_fd)
{
    char line [256];
    sq_client_t *client = sq_client_new ();
    if (client && harness_secure ())
        sq_client_set_keys (client, harness_key ("client.key"), harness_key ("broker.pub"));
    int rc = client? sq_client_connect (client, endpoint, 10000): -1;
    sq_session_t *session = rc == 0? sq_session_new (client): NULL;
    if (session)
        rc = s_occupy (session);
    if (!session || rc)
        snprintf (line, sizeof line, "ERROR %d %s\n", rc,
                  client? sq_client_errmsg (client): "no client");
    else
        snprintf (line, sizeof line, "SESSION %u\n", sq_session_id (session));
    if (write (report_fd, line, strlen (line)) < 0)
        _exit (3);
    char go;
    while (read (go_fd, &go, 1) < 0 && errno == EINTR)
        ;
    _exit (0);
}

static void
s_read_report (int fd, char *line, size_t max)
{
    struct pollfd pfd = { fd, POLLIN, 0 };
    CHECK (poll (&pfd, 1, 20000) == 1, "child reported within 20 s");
    ssize_t n = read (fd, line, max - 1);
    CHECK (n > 0, "child report readable");
    line [n] = 0;
}

//  After the vanishing at t_gone: session count back to `sessions`, no
//  task running, objects back to `objects`; then four one-cpu tasks of
//  the survivor run at once, all within LIMIT_SECONDS of t_gone.
static void
s_expect_recovery (sq_client_t *b, sq_session_t *sb, double t_gone, long sessions,
                   long objects, const char *who)
{
    int left_ms = (int) ((t_gone + LIMIT_SECONDS - harness_now ()) * 1000);
    long n = harness_info_wait (b, "sessions", sessions, left_ms);
    CHECK (n == sessions, "%s: INFO sessions = %ld after %.1f s, expected %ld",
           who, n, harness_now () - t_gone, sessions);
    harness_note ("%s: session closed by the broker after %.2f s", who, harness_now () - t_gone);
    left_ms = (int) ((t_gone + LIMIT_SECONDS - harness_now ()) * 1000);
    n = harness_info_wait (b, "tasks.busy", 0, left_ms);
    CHECK (n == 0, "%s: INFO tasks.busy = %ld, expected 0", who, n);
    char *json = harness_info (b);
    long active = harness_json_active (json);
    CHECK (active == 0, "%s: %ld unfinished tasks left in INFO: %.400s", who, active, json);
    sq_free (json);
    left_ms = (int) ((t_gone + LIMIT_SECONDS - harness_now ()) * 1000);
    n = harness_info_wait (b, "objects", objects, left_ms);
    CHECK (n == objects, "%s: INFO objects = %ld, expected %ld (its objects freed)", who, n, objects);
    harness_note ("%s: its tasks cancelled and objects freed after %.2f s", who, harness_now () - t_gone);

    double t0 = harness_now ();
    uint32_t quick [4];
    for (int i = 0; i < 4; i++) {
        size_t size;
        void *config = sq_config_sleep (0.2, &size);
        quick [i] = harness_task (sb, "sleep", NULL, 0, 1, config, size);
    }
    CHECK_RC (sq_submit (sb), SQ_OK, "%s: survivor submits", who);
    CHECK_RC (sq_wait (sb, quick, 4, 10000), SQ_OK, "%s: survivor's 4 x sleep 0.2 within 10 s", who);
    CHECK (harness_now () - t_gone < LIMIT_SECONDS,
           "%s: survivor's work done %.1f s after the vanishing", who, harness_now () - t_gone);
    harness_note ("%s: governors free again: survivor's 4 one-cpu tasks done in %.2f s "
                  "(%.1f s after the vanishing; the sleeps had %.0f s left)",
                  who, harness_now () - t0, harness_now () - t_gone,
                  SLEEP_SECONDS - (harness_now () - t_gone));
}

int
main (void)
{
    const char *broker_args [] = { "--heartbeat-ms", "500", "--session-grace", "5000", NULL };
    harness_t *h = harness_new_args (2, 2, broker_args);

    //  Fork before this process makes any ZeroMQ context, so the child
    //  owns a clean one.
    int report [2], go [2];
    CHECK (pipe (report) == 0 && pipe (go) == 0, "pipes");
    fflush (stdout);
    pid_t child = fork ();
    CHECK (child >= 0, "fork");
    if (child == 0) {
        close (report [0]);
        close (go [1]);
        s_child (harness_endpoint (h), report [1], go [0]);
    }
    close (report [1]);
    close (go [0]);
    char line [256];
    s_read_report (report [0], line, sizeof line);
    unsigned session_a = 0;
    CHECK (sscanf (line, "SESSION %u", &session_a) == 1, "child: %s", line);
    harness_note ("child process %d opened session %u and occupies all 4 cpus", (int) child, session_a);

    sq_client_t *b = harness_client (h);
    sq_session_t *sb = sq_session_new (b);
    CHECK (sb, "survivor session");
    long n = harness_info_wait (b, "tasks.busy", 4, 10000);
    CHECK (n == 4, "the child's 4 sleeps run (INFO tasks.busy = %ld)", n);
    n = harness_info_long (b, "sessions");
    CHECK (n == 2, "INFO sessions = %ld with the child connected, expected 2", n);
    n = harness_info_long (b, "clients");
    CHECK (n == 2, "INFO clients = %ld with the child connected, expected 2", n);

    //  The child vanishes.
    CHECK (write (go [1], "x", 1) == 1, "tell child to go");
    int status;
    CHECK (waitpid (child, &status, 0) == child && WIFEXITED (status) && WEXITSTATUS (status) == 0,
           "child exited 0 (status 0x%x)", status);
    double t_gone = harness_now ();
    n = harness_info_wait (b, "clients", 1, 10000);
    CHECK (n == 1, "INFO clients = %ld after the child vanished, expected 1", n);
    //  Its connection is gone, its session is not: it waits for a resume.
    n = harness_info_long (b, "sessions");
    CHECK (n == 2 || harness_now () - t_gone > 4.0,
           "the vanished client's session is kept within the grace (INFO sessions = %ld)", n);
    s_expect_recovery (b, sb, t_gone, 1, 0, "vanished process");
    long objects_b = harness_info_long (b, "objects");

    //  Same with sq_client_destroy while the session is open.
    sq_client_t *a2 = harness_client (h);
    s_orphan = sq_session_new (a2);
    CHECK (s_orphan, "session of the client to destroy");
    CHECK_RC (s_occupy (s_orphan), SQ_OK, "occupy with the second client");
    harness_set_client (b);
    n = harness_info_wait (b, "tasks.busy", 4, 10000);
    CHECK (n == 4, "the second client's 4 sleeps run (INFO tasks.busy = %ld)", n);
    CHECK (harness_info_long (b, "sessions") == 2, "2 sessions");
    sq_client_destroy (&a2);
    t_gone = harness_now ();
    s_expect_recovery (b, sb, t_gone, 1, objects_b, "destroyed client");

    //  The library orphans the sessions of a destroyed client, so this
    //  only frees memory (and keeps leak checkers quiet).
    sq_session_destroy (&s_orphan);
    sq_session_destroy (&sb);
    CHECK (harness_broker_alive (h), "broker alive");
    harness_client_destroy (&b);
    CHECK (harness_destroy (&h) == 0, "broker and governors exited cleanly");
    printf ("test_disconnect: PASS\n");
    return 0;
}
