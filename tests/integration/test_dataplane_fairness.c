/*  Data plane: copies stalled on a frozen receiver, holding every slot a
    governor gives one destination, hold up neither a small copy nor a big
    one to another governor.

    g0 offers "src", g1 "dst" (32 cpus: room for every consumer at once),
    g2 "other". Chunks are 64 KiB (SQUALL_CHUNK_BYTES) so that an object of
    2 MiB is a long copy and one of 64 KiB a single chunk. 17 big objects
    and a small one are made on g0. g1 is stopped (SIGSTOP) and handed 16
    consumers of big ones (TRANSFER_ACTIVE_DEST): g0 starts their copies,
    which stall after their first window for want of credits. Then tasks on
    g2 need the small object and the 17th big one. They must run at once:
    before, the copies to g2 waited in one FIFO until the stalled ones were
    abandoned (TRANSFER_STALL_MS, 20 s), which the 10 s wait below does not
    allow. g1 then resumes, and its copies complete byte-exact. */
#include "harness.h"
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define S_BIG 16                //  TRANSFER_ACTIVE_DEST
#define S_KIB 1024u

int
main (void)
{
    //  Inherited by the governors the harness starts.
    setenv ("SQUALL_CHUNK_BYTES", "65536", 1);
    const char *broker [] = { "--liveness", "60", NULL };
    const char *src [] = { "--resource", "src=1024", NULL };
    const char *const *govs [] = { src };
    harness_t *harness = harness_new_govs (1, 2, broker, govs);
    const char *dst [] = { "--resource", "dst=1024", NULL };
    const char *other [] = { "--resource", "other=1024", NULL };
    int g1 = harness_add_governor_args (harness, "g1", 32, dst);
    harness_add_governor_args (harness, "g2", 1, other);
    sq_client_t *client = harness_client (harness);
    sq_session_t *session = sq_session_new (client);
    CHECK (session, "session");

    //  The objects, made on g0.
    static uint8_t unit [1024 * 1024];
    harness_pattern (unit, sizeof unit, 3);
    uint32_t c = harness_blob (session, unit, sizeof unit);
    uint32_t pair [2] = { c, c };
    uint32_t big [S_BIG + 1];
    for (int i = 0; i < S_BIG + 1; i++) {
        uint32_t t = harness_task (session, "concat", pair, 2, 1, NULL, 0);
        CHECK_RC (sq_task_set_resource (session, t, "src", 1), SQ_OK, "resource");
        big [i] = sq_output (t, 0);
        CHECK_RC (sq_keep (session, big [i]), SQ_OK, "keep");
    }
    static uint8_t small_bytes [64 * 1024];
    harness_pattern (small_bytes, sizeof small_bytes, 4);
    uint32_t sc = harness_blob (session, small_bytes, sizeof small_bytes);
    uint32_t st = harness_task (session, "concat", &sc, 1, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (session, st, "src", 1), SQ_OK, "resource");
    uint32_t small = sq_output (st, 0);
    CHECK_RC (sq_keep (session, small), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit makers");
    CHECK_RC (sq_wait (session, NULL, 0, 60000), SQ_OK, "wait makers");

    //  g1 frozen, then given the 16 big copies: they hold g0's slots.
    harness_kill_governor (harness, g1, SIGSTOP);
    uint32_t copies [S_BIG];
    for (int i = 0; i < S_BIG; i++) {
        uint32_t t = harness_task (session, "concat", &big [i], 1, 1, NULL, 0);
        CHECK_RC (sq_task_set_resource (session, t, "dst", 1), SQ_OK, "resource");
        copies [i] = sq_output (t, 0);
        CHECK_RC (sq_keep (session, copies [i]), SQ_OK, "keep");
    }
    CHECK_RC (sq_submit (session), SQ_OK, "submit big consumers");
    char *json = NULL;
    long assigned = -1;
    double until = harness_now () + 30;
    while (assigned < S_BIG && harness_now () < until) {
        json = harness_info (client);
        assigned = harness_governor_field (json, "g1", "assigned");
        free (json);
        if (assigned < S_BIG)
            harness_pause (10);
    }
    CHECK (assigned == S_BIG, "g1 was assigned %ld of the %d big consumers", assigned, S_BIG);

    //  Copies to g2, ordered after those (the same control connection to
    //  g0), must not wait for them.
    uint32_t to_g2 [2] = { small, big [S_BIG] };
    uint32_t on_g2 [2];
    for (int i = 0; i < 2; i++) {
        uint32_t t = harness_task (session, "concat", &to_g2 [i], 1, 1, NULL, 0);
        CHECK_RC (sq_task_set_resource (session, t, "other", 1), SQ_OK, "resource");
        on_g2 [i] = sq_output (t, 0);
        CHECK_RC (sq_keep (session, on_g2 [i]), SQ_OK, "keep");
    }
    CHECK_RC (sq_submit (session), SQ_OK, "submit the consumers on g2");
    double start = harness_now ();
    CHECK_RC (sq_wait (session, on_g2, 2, 10000), SQ_OK,
              "the copies to g2 waited behind the stalled ones to g1");
    harness_note ("the copies to g2 arrived in %.3f s while 16 to g1 stalled",
                  harness_now () - start);
    FETCH_EXPECT (session, on_g2 [0], small_bytes, sizeof small_bytes);

    //  g1 resumes: the stalled copies go on and arrive whole.
    harness_kill_governor (harness, g1, SIGCONT);
    CHECK_RC (sq_wait (session, copies, S_BIG, 60000), SQ_OK, "the big copies");
    static uint8_t whole [2 * 1024 * 1024];
    memcpy (whole, unit, sizeof unit);
    memcpy (whole + sizeof unit, unit, sizeof unit);
    for (int i = 0; i < S_BIG; i++)
        FETCH_EXPECT (session, copies [i], whole, sizeof whole);
    FETCH_EXPECT (session, on_g2 [1], whole, sizeof whole);

    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&harness) == 0, "clean shutdown");
    printf ("test_dataplane_fairness: OK\n");
    return 0;
}
