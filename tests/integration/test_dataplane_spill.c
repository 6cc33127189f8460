/*  Data plane: a governor with --memory 64MiB completes a graph whose
    intermediate objects add up to 1 GiB (256 MiB under sanitizers), all
    kept, by spilling them to its workdir; it stays under the limit (the
    store's memory as reported in INFO never passes it; its anonymous RSS
    stays under the limit plus a stated slack of 96 MiB: ZeroMQ buffers,
    the one 16 MiB object being made, and malloc's retained arenas); every
    object reads back byte-exact; freeing them empties the spill. */
#include "harness.h"
#include <stdlib.h>
#include <string.h>


#define S_MIB (1ul << 20)
#define S_LIMIT (64 * S_MIB)
#define S_SLACK (96 * S_MIB)

//  A number after "key": in the governors part of INFO (one governor).
static long
s_gov_field (sq_client_t *client, const char *key)
{
    char *json = harness_info (client);
    long value = harness_governor_field (json, NULL, key);
    free (json);
    return value;
}

static long
s_rss_anon (pid_t pid)
{
    char path [64], line [256];
    snprintf (path, sizeof path, "/proc/%d/status", (int) pid);
    FILE *file = fopen (path, "r");
    long kib = -1;
    while (file && fgets (line, sizeof line, file))
        if (sscanf (line, "RssAnon: %ld kB", &kib) == 1)
            break;
    if (file)
        fclose (file);
    return kib < 0? -1: kib * 1024;
}

int
main (void)
{
    const char *g0 [] = { "--memory", "64MiB", NULL };
    const char *const *govs [] = { g0 };
    harness_t *harness = harness_new_govs (1, 1, NULL, govs);
    sq_client_t *client = harness_client (harness);
    sq_session_t *session = sq_session_new (client);
    CHECK (session, "session");

    //  n objects of 16 MiB, each a concat of two different 8 MiB halves.
    int n = HARNESS_SANITIZED? 16: 64;
    size_t half = 8 * S_MIB;
    uint8_t *a = (uint8_t *) malloc (half), *b = (uint8_t *) malloc (half);
    harness_pattern (a, half, 1);
    harness_pattern (b, half, 2);
    uint32_t ca = harness_blob (session, a, half), cb = harness_blob (session, b, half);
    uint32_t *out = (uint32_t *) malloc ((size_t) n * sizeof *out);
    for (int i = 0; i < n; i++) {
        uint32_t inputs [2] = { i % 2? cb: ca, i % 2? ca: cb };
        out [i] = harness_task1 (session, "concat", inputs, 2, NULL, 0);
        CHECK_RC (sq_keep (session, out [i]), SQ_OK, "keep");
    }
    double start = harness_now ();
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    //  Sampled while it runs: the reported memory never passes the limit.
    long max_memory = 0, max_rss = 0;
    pid_t pid = harness_governor_pid (harness, 0);
    uint32_t done_ids [1];
    while (1) {
        long memory = s_gov_field (client, "memory");
        long rss = s_rss_anon (pid);
        if (memory > max_memory)
            max_memory = memory;
        if (rss > max_rss)
            max_rss = rss;
        done_ids [0] = out [n - 1];
        int rc = sq_wait (session, done_ids, 1, 50);
        if (rc == SQ_OK)
            break;
        CHECK (rc == SQ_E_TIMEOUT, "wait: %s", sq_strerror (rc));
        CHECK (harness_now () - start < 600, "graph too slow");
    }
    CHECK_RC (sq_wait (session, out, (size_t) n, 600000), SQ_OK, "wait all");
    harness_note ("%d x 16 MiB made in %.2f s", n, harness_now () - start);
    //  LOAD reports are sent at most every 250 ms: wait for the final one.
    long want = (long) ((uint64_t) n * 16 * S_MIB - S_LIMIT);
    double until = harness_now () + 10;
    long got = -1;
    while ((got = s_gov_field (client, "spilled")) < want && harness_now () < until)
        harness_pause (50);
    CHECK (got >= want, "spilled %ld bytes, expected at least %ld", got, want);
    long memory = s_gov_field (client, "memory");
    CHECK (memory >= 0 && memory <= (long) S_LIMIT, "memory %ld over the limit", memory);
    CHECK (max_memory <= (long) S_LIMIT, "reported memory reached %ld", max_memory);
    harness_note ("memory %ld, spilled %ld, max reported %ld, max RssAnon %ld", memory, got,
                  max_memory, max_rss);
    if (!HARNESS_SANITIZED)
        CHECK (max_rss <= (long) (S_LIMIT + S_SLACK), "RssAnon reached %ld", max_rss);

    //  Every object reads back byte-exact (from the spill mapping).
    uint8_t *expect = (uint8_t *) malloc (2 * half);
    for (int i = 0; i < n; i += (HARNESS_SANITIZED? 5: 9)) {
        memcpy (expect, i % 2? b: a, half);
        memcpy (expect + half, i % 2? a: b, half);
        FETCH_EXPECT (session, out [i], expect, 2 * half);
    }
    //  Freed objects take their spill with them: the outputs once unkept,
    //  the constants (which the broker keeps for lineage as long as their
    //  session lives) once the session closes.
    for (int i = 0; i < n; i++)
        CHECK_RC (sq_unkeep (session, out [i]), SQ_OK, "unkeep");
    sq_session_destroy (&session);
    until = harness_now () + 10;
    while ((got = s_gov_field (client, "spilled")) != 0 && harness_now () < until)
        harness_pause (50);
    CHECK (got == 0, "spilled %ld after freeing everything", got);

    free (expect);
    free (out);
    free (a);
    free (b);
    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&harness) == 0, "clean shutdown");
    printf ("test_dataplane_spill: OK\n");
    return 0;
}
