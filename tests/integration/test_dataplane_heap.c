/*  The receiving governor keeps the memory of freed copies for the next
    ones, and gives it back once nothing has been freed for
    HEAP_RELEASE_IDLE_MS (governor/heap.h): its resident memory stays up
    right after the objects go, and comes down within the idle time.

    g0 offers "src", g1 "dst"; 256 MiB in 4 MiB-chunked copies go g0 ->
    g1. glibc's malloc only: under the sanitizers malloc is theirs, and the
    test says so and passes. */
#include "harness.h"
#include "../../governor/heap.h"
#include <stdlib.h>
#include <string.h>

#define S_MIB (1u << 20)

//  Resident memory of a process in MiB, from /proc.
static long
s_rss_mib (pid_t pid)
{
    char path [64], line [256];
    snprintf (path, sizeof path, "/proc/%d/status", (int) pid);
    FILE *file = fopen (path, "r");
    CHECK (file, "open %s", path);
    long kib = -1;
    while (fgets (line, sizeof line, file))
        if (strncmp (line, "VmRSS:", 6) == 0)
            kib = strtol (line + 6, NULL, 10);
    fclose (file);
    CHECK (kib >= 0, "VmRSS of %d", (int) pid);
    return kib / 1024;
}

int
main (void)
{
    if (HARNESS_SANITIZED) {
        printf ("test_dataplane_heap: OK (skipped: the sanitizers' malloc is not glibc's)\n");
        return 0;
    }
    const char *g0 [] = { "--resource", "src=64", NULL };
    const char *g1 [] = { "--resource", "dst=64", NULL };
    const char *const *govs [] = { g0, g1 };
    harness_t *harness = harness_new_govs (2, 2, NULL, govs);
    sq_client_t *client = harness_client (harness);
    pid_t receiver = harness_governor_pid (harness, 1);
    long before = s_rss_mib (receiver);

    //  16 objects of 16 MiB made on g0 from a 1 MiB constant, copied to g1.
    sq_session_t *session = sq_session_new (client);
    CHECK (session, "session");
    uint8_t *unit = (uint8_t *) malloc (S_MIB);
    harness_pattern (unit, S_MIB, 5);
    uint32_t c = harness_blob (session, unit, S_MIB);
    uint32_t inputs [16], copies [16];
    for (int i = 0; i < 16; i++)
        inputs [i] = c;
    for (int i = 0; i < 16; i++) {
        uint32_t made = harness_task1 (session, "concat", inputs, 16, NULL, 0);
        CHECK_RC (sq_task_set_resource (session, made - 1, "src", 1), SQ_OK, "src");
        copies [i] = harness_task1 (session, "concat", &made, 1, NULL, 0);
        CHECK_RC (sq_task_set_resource (session, copies [i] - 1, "dst", 1), SQ_OK, "dst");
        CHECK_RC (sq_keep (session, copies [i]), SQ_OK, "keep");
    }
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK_RC (sq_wait (session, copies, 16, 120000), SQ_OK, "copies");
    long holding = s_rss_mib (receiver);
    CHECK (holding >= before + 200, "g1 holds the copies: %ld MiB resident, %ld before",
           holding, before);

    //  The session goes: g1 drops the objects but keeps their memory.
    sq_session_destroy (&session);
    long objects = -1;
    double deadline = harness_now () + 10;
    while (objects != 0 && harness_now () < deadline) {
        char *json = harness_info (client);
        objects = harness_governor_field (json, "g1", "objects");
        sq_free (json);
        if (objects != 0)
            harness_pause (20);
    }
    double dropped = harness_now ();
    CHECK (objects == 0, "g1 dropped its objects (%ld left)", objects);
    long kept = s_rss_mib (receiver);
    if (harness_now () - dropped < HEAP_RELEASE_IDLE_MS / 2000.0)
        CHECK (kept >= before + 200, "freed copies stay for reuse: %ld MiB resident", kept);

    //  Then gives it back.
    deadline = dropped + HEAP_RELEASE_IDLE_MS / 1000.0 + 10;
    long now = kept;
    while ((now = s_rss_mib (receiver)) > before + 64 && harness_now () < deadline)
        harness_pause (100);
    CHECK (now <= before + 64, "freed memory returned: %ld MiB resident, %ld before", now, before);
    harness_note ("g1 resident: %ld MiB before, %ld holding, %ld right after the drop, "
                  "%ld at the end", before, holding, kept, now);
    free (unit);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&harness) == 0, "clean shutdown");
    printf ("test_dataplane_heap: OK\n");
    return 0;
}
