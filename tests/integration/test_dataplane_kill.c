/*  Data plane: the governor receiving a copy is killed in the middle of it.

    g0 offers "src", g1 and g2 offer "dst". A 512 MiB object (128 MiB under
    sanitizers) is made on g0; a task that copies it (one-input concat,
    retries allowed) goes to g1 or g2, and that governor is SIGKILLed as
    soon as the broker has assigned the task there, while the chunks flow.
    The task must then run on the other dst governor, the copy must come
    again from g0, byte-exact, and g0 must go on serving: its abandoned copy
    holds nothing for ever (a later copy to the survivor works). */
#include "harness.h"
#include <signal.h>
#include <stdlib.h>
#include <string.h>


#define S_MIB (1u << 20)

//  "assigned" of the governor named name in INFO, -1 if not found.
static long
s_assigned (sq_client_t *client, const char *name)
{
    char *json = harness_info (client);
    long value = harness_governor_field (json, name, "assigned");
    free (json);
    return value;
}

int
main (void)
{
    const char *src [] = { "--resource", "src=1", NULL };
    const char *dst [] = { "--resource", "dst=1", NULL };
    const char *const *govs [] = { src, dst, dst };
    harness_t *harness = harness_new_govs (3, 2, NULL, govs);
    sq_client_t *client = harness_client (harness);
    sq_session_t *session = sq_session_new (client);
    CHECK (session, "session");

    size_t units = HARNESS_SANITIZED? 128: 512;
    uint8_t *unit = (uint8_t *) malloc (S_MIB);
    harness_pattern (unit, S_MIB, 5);
    uint32_t c = harness_blob (session, unit, S_MIB);
    uint32_t *inputs = (uint32_t *) malloc (units * sizeof *inputs);
    for (size_t i = 0; i < units; i++)
        inputs [i] = c;
    uint32_t maker = harness_task (session, "concat", inputs, units, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (session, maker, "src", 1), SQ_OK, "resource");
    uint32_t big = sq_output (maker, 0);
    CHECK_RC (sq_keep (session, big), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit maker");
    CHECK_RC (sq_wait (session, &big, 1, 120000), SQ_OK, "wait maker");

    uint32_t copier = harness_task (session, "concat", &big, 1, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (session, copier, "dst", 1), SQ_OK, "resource");
    CHECK_RC (sq_task_set_max_retries (session, copier, 3), SQ_OK, "retries");
    uint32_t copy = sq_output (copier, 0);
    CHECK_RC (sq_keep (session, copy), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit copier");
    int victim = -1;
    double until = harness_now () + 30;
    while (victim < 0 && harness_now () < until) {
        if (s_assigned (client, "g1") > 0)
            victim = 1;
        else
        if (s_assigned (client, "g2") > 0)
            victim = 2;
        else
            harness_pause (1);
    }
    CHECK (victim > 0, "the copy task was never assigned");
    harness_kill_governor (harness, victim, SIGKILL);
    harness_note ("killed g%d while it received the copy", victim);

    double start = harness_now ();
    void *got = NULL;
    size_t got_size = 0;
    CHECK_RC (sq_fetch (session, copy, 120000, &got, &got_size, NULL), SQ_OK, "fetch the copy");
    CHECK (got_size == units * S_MIB, "copy of %zu bytes", got_size);
    for (size_t i = 0; i < units; i++)
        CHECK (memcmp ((uint8_t *) got + i * S_MIB, unit, S_MIB) == 0, "unit %zu differs", i);
    sq_free (got);
    harness_note ("the copy arrived on g%d %.2f s after the kill", 3 - victim,
                  harness_now () - start);

    //  g0 still serves copies to the survivor.
    uint8_t small [100000];
    harness_pattern (small, sizeof small, 9);
    uint32_t s = harness_blob (session, small, sizeof small);
    uint32_t t0 = harness_task (session, "concat", &s, 1, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (session, t0, "src", 1), SQ_OK, "resource");
    uint32_t o0 = sq_output (t0, 0);
    uint32_t t1 = harness_task (session, "concat", &o0, 1, 1, NULL, 0);
    CHECK_RC (sq_task_set_resource (session, t1, "dst", 1), SQ_OK, "resource");
    uint32_t o1 = sq_output (t1, 0);
    CHECK_RC (sq_keep (session, o1), SQ_OK, "keep");
    CHECK_RC (sq_submit (session), SQ_OK, "submit after");
    FETCH_EXPECT (session, o1, small, sizeof small);

    free (inputs);
    free (unit);
    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&harness) == 0, "clean shutdown");
    printf ("test_dataplane_kill: OK\n");
    return 0;
}
