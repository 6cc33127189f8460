/*  test_builtin: every built-in task kind on a real cluster (2 governors x 2
    cpus), results compared byte-exact; big objects chained across both
    governors; keep / unkeep; wait_some; 1 000-task graphs. */
#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KIB 1024
#define MIB (1024 * 1024)

static sq_session_t *s;
static sq_client_t *s_client;

static uint32_t
s_keep (uint32_t id)
{
    CHECK_RC (sq_keep (s, id), SQ_OK, "keep %u", id);
    return id;
}

static uint32_t
s_slice (uint32_t in, uint64_t start, int64_t end)
{
    size_t size;
    void *config = sq_config_slice (start, end, &size);
    CHECK (config, "sq_config_slice (%llu, %lld)", (unsigned long long) start, (long long) end);
    return harness_task1 (s, "slice", &in, 1, config, size);
}

static uint32_t
s_concat (const uint32_t *in, size_t n)
{
    return harness_task1 (s, "concat", in, n, NULL, 0);
}

static void
s_write_file (const char *path, const void *data, size_t size)
{
    FILE *f = fopen (path, "wb");
    CHECK (f, "create %s", path);
    CHECK (fwrite (data, 1, size, f) == size, "write %s", path);
    CHECK (fclose (f) == 0, "close %s", path);
}

//  Part 1: every kind once, small data.
static void
s_small_kinds (const char *dir)
{
    const char *hello = "hello, squall";
    uint32_t a = s_keep (harness_blob_str (s, "alpha-"));
    uint32_t b = harness_blob_str (s, "beta-");
    uint32_t c = harness_blob_str (s, "gamma");
    uint32_t h = s_keep (harness_blob_str (s, hello));
    uint32_t empty = s_keep (harness_blob (s, "", 0));

    //  noop: two inputs, three outputs (the third is empty).
    uint32_t in2 [] = { a, b };
    uint32_t noop = harness_task (s, "noop", in2, 2, 3, NULL, 0);
    for (uint32_t i = 0; i < 3; i++)
        s_keep (sq_output (noop, i));

    uint32_t in3 [] = { a, b, c };
    uint32_t cat = s_keep (s_concat (in3, 3));
    uint32_t sl = s_keep (s_slice (h, 2, 5));
    uint32_t sl_end = s_keep (s_slice (h, 7, -1));
    uint32_t sl_empty = s_keep (s_slice (h, 3, 3));

    size_t size;
    void *config = sq_config_sleep (0.1, &size);
    CHECK (config, "sq_config_sleep");
    uint32_t slept = s_keep (harness_task1 (s, "sleep", &h, 1, config, size));

    //  load of a file the test wrote
    char path [512];
    snprintf (path, sizeof path, "%s/loaded.txt", dir);
    s_write_file (path, "file contents\n", 14);
    config = sq_config_path (path, &size);
    CHECK (config, "sq_config_path");
    uint32_t loaded = s_keep (harness_task1 (s, "load", NULL, 0, config, size));

    //  store to a path; loaded back in a later submit
    char stored_path [512];
    snprintf (stored_path, sizeof stored_path, "%s/stored.bin", dir);
    config = sq_config_path (stored_path, &size);
    uint32_t store = harness_task (s, "store", &cat, 1, 0, config, size);

    //  execute: tr over stdin -> stdout
    const char *tr_args [] = { "sh", "-c", "tr a-z A-Z" };
    const char *in_stdin [] = { "" };
    const char *out_stdout [] = { "" };
    config = sq_config_execute (tr_args, 3, in_stdin, 1, 0, out_stdout, 1, 0, NULL, &size);
    CHECK (config, "sq_config_execute (tr)");
    uint32_t upper = s_keep (harness_task1 (s, "execute", &h, 1, config, size));

    //  execute: files in, files out
    const char *cp_args [] = { "cp", "in.txt", "out.txt" };
    const char *in_file [] = { "in.txt" };
    const char *out_file [] = { "out.txt" };
    config = sq_config_execute (cp_args, 3, in_file, 1, -1, out_file, 1, -1, NULL, &size);
    CHECK (config, "sq_config_execute (cp)");
    uint32_t copied = s_keep (harness_task1 (s, "execute", &cat, 1, config, size));

    //  execute: environment
    const char *env_args [] = { "sh", "-c", "printf %s \"$FOO\"" };
    const char *env [] = { "FOO=bar baz=qux", NULL };
    config = sq_config_execute (env_args, 3, NULL, 0, -1, out_stdout, 1, 0, env, &size);
    CHECK (config, "sq_config_execute (env)");
    uint32_t envout = s_keep (harness_task1 (s, "execute", NULL, 0, config, size));

    CHECK_RC (sq_submit (s), SQ_OK, "submit of every kind");
    CHECK_RC (sq_wait_all (s, 30000), SQ_OK, "wait_all of every kind");

    FETCH_EXPECT (s, a, "alpha-", 6);
    FETCH_EXPECT (s, h, hello, strlen (hello));
    FETCH_EXPECT (s, empty, "", 0);
    harness_note ("constants (incl. an empty one) fetched");
    FETCH_EXPECT (s, sq_output (noop, 0), "alpha-", 6);
    FETCH_EXPECT (s, sq_output (noop, 1), "beta-", 5);
    FETCH_EXPECT (s, sq_output (noop, 2), "", 0);
    harness_note ("noop passes its inputs through, extra output empty");
    FETCH_EXPECT (s, cat, "alpha-beta-gamma", 16);
    harness_note ("concat of 3 blobs");
    FETCH_EXPECT (s, sl, "llo", 3);
    FETCH_EXPECT (s, sl_end, "squall", 6);
    FETCH_EXPECT (s, sl_empty, "", 0);
    harness_note ("slice [2,5), [7,-1), [3,3)");
    FETCH_EXPECT (s, slept, hello, strlen (hello));
    harness_note ("sleep 0.1 s passes its input through");
    FETCH_EXPECT (s, loaded, "file contents\n", 14);
    harness_note ("load of %s", path);
    FETCH_EXPECT (s, upper, "HELLO, SQUALL", 13);
    harness_note ("execute tr with stdin/stdout objects");
    FETCH_EXPECT (s, copied, "alpha-beta-gamma", 16);
    harness_note ("execute cp with in_paths/out_paths files");
    FETCH_EXPECT (s, envout, "bar baz=qux", 11);
    harness_note ("execute with env FOO");
    CHECK_RC (sq_wait (s, &store, 1, 10000), SQ_OK, "store task finished");

    //  The stored file exists with the right bytes, and a later submit can
    //  load it back and use objects of the first submit.
    struct stat st;
    CHECK (stat (stored_path, &st) == 0 && st.st_size == 16, "stored file %s has 16 bytes", stored_path);
    config = sq_config_path (stored_path, &size);
    uint32_t reloaded = s_keep (harness_task1 (s, "load", NULL, 0, config, size));
    uint32_t again [] = { reloaded, upper, sl };
    uint32_t mixed = s_keep (s_concat (again, 3));
    CHECK_RC (sq_submit (s), SQ_OK, "second submit");
    FETCH_EXPECT (s, reloaded, "alpha-beta-gamma", 16);
    FETCH_EXPECT (s, mixed, "alpha-beta-gammaHELLO, SQUALLllo", 32);
    harness_note ("store then load back in a later submit; objects of earlier submits reused");
}

//  Part 2: objects over the inline limit, moved between governors.
static void
s_big_objects (void)
{
    size_t a_size = 1 * MIB, b_size = 5 * MIB, c_size = a_size + b_size;
    uint8_t *a_data = (uint8_t *) malloc (a_size);
    uint8_t *b_data = (uint8_t *) malloc (b_size);
    uint8_t *expect = (uint8_t *) malloc (c_size);
    uint8_t *work = (uint8_t *) malloc (c_size);
    CHECK (a_data && b_data && expect && work, "malloc");
    harness_pattern (a_data, a_size, 1);
    harness_pattern (b_data, b_size, 2);
    double started = harness_now ();

    uint32_t a = s_keep (harness_blob (s, a_data, a_size));
    uint32_t b = harness_blob (s, b_data, b_size);
    uint32_t ab [] = { a, b };
    uint32_t c0 = s_keep (s_concat (ab, 2));
    memcpy (expect, a_data, a_size);
    memcpy (expect + a_size, b_data, b_size);

    //  Eight parallel slices land on different cpus of both governors; the
    //  concat that joins them (reversed) must pull copies from both.
    const int parts = 8;
    size_t part = c_size / parts;
    uint32_t pieces [8], reversed [8];
    for (int k = 0; k < parts; k++) {
        uint32_t p = s_slice (c0, (uint64_t) k * part, (int64_t) ((k + 1) * part));
        //  one more hop so that each piece moves again
        uint32_t q = s_slice (p, 0, -1);
        pieces [k] = q;
        reversed [parts - 1 - k] = q;
    }
    s_keep (pieces [3]);
    uint32_t r = s_keep (s_concat (reversed, parts));
    for (int k = 0; k < parts; k++)
        memcpy (work + (size_t) k * part, expect + (size_t) (parts - 1 - k) * part, part);
    memcpy (expect, work, c_size);         //  expect = r now

    //  A chain of rotations by one byte: slice + slice + concat per step.
    uint32_t t = r;
    const int steps = 10;
    for (int i = 0; i < steps; i++) {
        uint32_t parts2 [] = { s_slice (t, 1, -1), s_slice (t, 0, 1) };
        t = s_concat (parts2, 2);
    }
    s_keep (t);
    //  Boundary sizes around the inline limit.
    uint32_t at_limit = s_keep (s_slice (a, 0, 4096));
    uint32_t over_limit = s_keep (s_slice (a, 0, 4097));

    CHECK_RC (sq_submit (s), SQ_OK, "submit of big-object graph");
    CHECK_RC (sq_wait_all (s, 120000), SQ_OK, "wait for big-object graph");

    uint8_t *c0_data = (uint8_t *) malloc (c_size);
    memcpy (c0_data, a_data, a_size);
    memcpy (c0_data + a_size, b_data, b_size);
    FETCH_EXPECT (s, a, a_data, a_size);
    FETCH_EXPECT (s, c0, c0_data, c_size);
    FETCH_EXPECT (s, pieces [3], c0_data + 3 * part, part);
    FETCH_EXPECT (s, r, expect, c_size);
    memcpy (work, expect + steps, c_size - steps);
    memcpy (work + c_size - steps, expect, steps);
    FETCH_EXPECT (s, t, work, c_size);
    FETCH_EXPECT (s, at_limit, a_data, 4096);
    FETCH_EXPECT (s, over_limit, a_data, 4097);
    harness_note ("1 MiB + 5 MiB objects through %d slices/concats (%d rotation steps), "
                  "fetched byte-exact in %.2f s", 2 * parts + 2 + 3 * steps, steps,
                  harness_now () - started);

    free (a_data);
    free (b_data);
    free (c0_data);
    free (expect);
    free (work);
}

//  Part 3: keep / unkeep / NOT_KEPT, wait_some.
static void
s_keep_and_wait_some (void)
{
    uint32_t k = s_keep (harness_blob_str (s, "keep me"));
    size_t size;
    void *config = sq_config_sleep (2.0, &size);
    uint32_t slow = harness_task (s, "sleep", &k, 1, 1, config, size);
    uint32_t slow_out = sq_output (slow, 0);
    config = sq_config_sleep (0.1, &size);
    uint32_t fast = harness_task (s, "sleep", &k, 1, 1, config, size);
    uint32_t fast_out = sq_output (fast, 0);
    uint32_t plain = harness_blob_str (s, "not kept");
    uint32_t in1 [] = { plain };
    uint32_t plain_user = harness_task (s, "noop", in1, 1, 0, NULL, 0);
    CHECK_RC (sq_submit (s), SQ_OK, "submit keep/wait_some graph");

    //  slow_out is not kept: a fetch is refused.
    void *data = NULL;
    size_t got;
    CHECK_RC (sq_fetch (s, slow_out, 5000, &data, &got, NULL), SQ_E_NOT_KEPT,
              "fetch of not-kept object %u", slow_out);
    CHECK (sq_client_errid (s_client) == slow_out, "NOT_KEPT names object %u (errid %u)",
           slow_out, sq_client_errid (s_client));
    harness_note ("fetch of a not-kept object gives SQ_E_NOT_KEPT");

    //  wait_some on {fast, slow} returns fast only (slow sleeps 2 s).
    uint32_t ids [] = { slow, fast };
    uint32_t done [2] = { 0, 0 };
    size_t n_done = 99;
    double t0 = harness_now ();
    CHECK_RC (sq_wait_some (s, ids, 2, 10000, done, &n_done), SQ_OK, "wait_some");
    CHECK (n_done == 1 && done [0] == fast, "wait_some gave %zu ids (first %u), expected only %u",
           n_done, done [0], fast);
    CHECK (harness_now () - t0 < 1.9, "wait_some returned before the slow task could finish");
    harness_note ("wait_some returned the subset {%u} of {%u, %u}", fast, slow, fast);

    //  keep after submit, while the producer still runs, then fetch.
    CHECK_RC (sq_keep (s, slow_out), SQ_OK, "keep after submit");
    FETCH_EXPECT (s, slow_out, "keep me", 7);
    harness_note ("keep after submit makes the object fetchable");
    CHECK_RC (sq_wait (s, &plain_user, 1, 10000), SQ_OK, "noop on plain");

    //  unkeep: the object can no longer be fetched.
    (void) fast_out;
    CHECK_RC (sq_unkeep (s, slow_out), SQ_OK, "unkeep");
    int rc = sq_fetch (s, slow_out, 5000, &data, &got, NULL);
    CHECK (rc == SQ_E_NOT_KEPT || rc == SQ_E_UNKNOWN_ID,
           "fetch after unkeep gave %d (%s), expected NOT_KEPT or UNKNOWN_ID", rc, sq_strerror (rc));
    harness_note ("fetch after unkeep refused (%s)", sq_strerror (rc));
}

//  Part 4: many small tasks.
static void
s_many_tasks (void)
{
    double t0 = harness_now ();
    for (int i = 0; i < 1000; i++)
        harness_task (s, "noop", NULL, 0, 1, NULL, 0);
    CHECK_RC (sq_submit (s), SQ_OK, "submit 1000 independent noops");
    CHECK_RC (sq_wait_all (s, 120000), SQ_OK, "wait 1000 independent noops");
    double took = harness_now () - t0;
    char *json = harness_info (s_client);
    CHECK (harness_json_active (json) == 0, "no unfinished task after wait_all: %.300s", json);
    CHECK (harness_json_long (json, "tasks.finished") >= 1000, "INFO counts the finished tasks: %.300s", json);
    sq_free (json);
    harness_note ("1000 independent noop tasks in %.3f s", took);

    t0 = harness_now ();
    uint32_t x = harness_blob_str (s, "s");
    uint32_t dot = harness_blob_str (s, ".");
    size_t dots = 0;
    for (int i = 0; i < 1000; i++) {
        if (i % 10 == 0) {
            uint32_t in [] = { x, dot };
            x = s_concat (in, 2);
            dots++;
        }
        else
            x = sq_output (harness_task (s, "noop", &x, 1, 1, NULL, 0), 0);
    }
    s_keep (x);
    CHECK_RC (sq_submit (s), SQ_OK, "submit chain of 1000");
    char expect [128] = "s";
    memset (expect + 1, '.', dots);
    FETCH_EXPECT (s, x, expect, 1 + dots);
    harness_note ("chain of 1000 dependent noop/concat tasks in %.3f s", harness_now () - t0);
}

int
main (void)
{
    harness_t *h = harness_new (2, 2);
    sq_client_t *client = harness_client (h);
    s_client = client;
    s = sq_session_new (client);
    CHECK (s, "session");

    char dir [] = "/tmp/squall-it-XXXXXX";
    CHECK (mkdtemp (dir), "mkdtemp");

    s_small_kinds (dir);
    s_big_objects ();
    s_keep_and_wait_some ();
    s_many_tasks ();

    long governors = harness_info_long (client, "governors");
    CHECK (governors == 2, "INFO lists %ld governors, expected 2", governors);
    sq_session_destroy (&s);
    harness_client_destroy (&client);

    char cmd [600];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK (system (cmd) == 0, "cleanup %s", dir);
    CHECK (harness_destroy (&h) == 0, "broker and governors exited cleanly");
    printf ("test_builtin: PASS\n");
    return 0;
}
