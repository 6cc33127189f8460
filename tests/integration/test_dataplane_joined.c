/*  An object that arrives in chunks is kept as the received chunks (a
    joined blob, governor/transfer.h) and never assembled by the copy. Every
    reader on the receiving governor must see the same bytes: slice across
    a chunk boundary, concat, noop, execute (its input written as a file),
    store (to a file), a directory object unpacked by store and by execute
    (these flatten it first), a copy onward to a third governor, and the
    client's fetch. A sender with 64 KiB chunks (under TRANSFER_PART_MIN)
    makes the receiver copy into one buffer instead: same checks.

    g0 offers "src", g1 "dst", g2 "small" and sends 64 KiB chunks. */
#include "harness.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_CHUNK (4u << 20)

static char s_tmp [256];

//  A task on the governor offering `place`, its outputs kept; frees config.
static uint32_t
s_task_on (sq_session_t *session, const char *kind, uint32_t *inputs, size_t n_inputs,
           size_t n_outputs, void *config, size_t config_size, const char *place)
{
    uint32_t task = harness_task (session, kind, inputs, n_inputs, n_outputs, config,
                                  config_size);
    CHECK_RC (sq_task_set_resource (session, task, place, 1), SQ_OK, "resource");
    for (size_t i = 0; i < n_outputs; i++)
        CHECK_RC (sq_keep (session, sq_output (task, (uint32_t) i)), SQ_OK, "keep");
    return task;
}

static uint32_t
s_copy_on (sq_session_t *session, uint32_t input, const char *place)
{
    return sq_output (s_task_on (session, "concat", &input, 1, 1, NULL, 0, place), 0);
}

//  An execute on g1 of `cat FILE` with the input written at "in": its
//  output, kept.
static uint32_t
s_cat_on_g1 (sq_session_t *session, uint32_t input, const char *file)
{
    const char *args [] = { "cat", file };
    const char *in_paths [] = { "in" };
    const char *out_paths [] = { "" };
    size_t config_size;
    void *config = sq_config_execute (args, 2, in_paths, 1, -1, out_paths, 1, 0, NULL,
                                      &config_size);
    return sq_output (s_task_on (session, "execute", &input, 1, 1, config, config_size, "dst"), 0);
}

static void
s_file_expect (const char *path, const uint8_t *data, size_t size)
{
    FILE *file = fopen (path, "rb");
    CHECK (file, "open %s", path);
    uint8_t *got = (uint8_t *) malloc (size + 1);
    size_t n = fread (got, 1, size + 1, file);
    fclose (file);
    CHECK (n == size && memcmp (got, data, size) == 0, "%s: %zu bytes, same as sent", path, n);
    free (got);
}

//  `size` pattern bytes made on `from`, copied to g1 and read there by
//  every kind of reader.
static void
s_readers (sq_session_t *session, size_t size, const char *from, uint32_t seed)
{
    uint8_t *data = (uint8_t *) malloc (size);
    harness_pattern (data, size, seed);
    uint32_t c = harness_blob (session, data, size);
    uint32_t made = s_copy_on (session, c, from);
    uint32_t here = s_copy_on (session, made, "dst");

    size_t config_size;
    void *config = sq_config_slice (S_CHUNK - 10, S_CHUNK + 10, &config_size);
    uint32_t sliced = sq_output (s_task_on (session, "slice", &here, 1, 1, config, config_size,
                                            "dst"), 0);
    uint32_t tail = harness_blob (session, "tail", 4);
    uint32_t two [2] = { here, tail };
    uint32_t joined = sq_output (s_task_on (session, "concat", two, 2, 1, NULL, 0, "dst"), 0);
    uint32_t same = sq_output (s_task_on (session, "noop", &here, 1, 1, NULL, 0, "dst"), 0);
    uint32_t catted = s_cat_on_g1 (session, here, "in");
    char path [512];
    snprintf (path, sizeof path, "%s/stored-%u", s_tmp, seed);
    config = sq_config_path (path, &config_size);
    uint32_t store = s_task_on (session, "store", &here, 1, 0, config, config_size, "dst");
    uint32_t onward = s_copy_on (session, here, "src");

    CHECK_RC (sq_submit (session), SQ_OK, "submit readers of %zu bytes", size);
    CHECK_RC (sq_wait (session, &store, 1, 60000), SQ_OK, "store");
    s_file_expect (path, data, size);
    //  Fetched twice, freed in between: the second fetch reuses the
    //  first one's buffer (client/buffers.c) and fills it right.
    void *first = NULL, *second = NULL;
    size_t got = 0;
    CHECK_RC (sq_fetch (session, here, 30000, &first, &got, NULL), SQ_OK, "fetch");
    CHECK (got == size && memcmp (first, data, size) == 0, "fetched bytes");
    memset (first, 0, size);
    uintptr_t was = (uintptr_t) first;
    sq_free (first);
    CHECK_RC (sq_fetch (session, here, 30000, &second, &got, NULL), SQ_OK, "fetch again");
    CHECK ((uintptr_t) second == was && got == size && memcmp (second, data, size) == 0,
           "fetched again into the same buffer, right");
    sq_free (second);
    FETCH_EXPECT (session, sliced, data + S_CHUNK - 10, 20);
    FETCH_EXPECT (session, same, data, size);
    FETCH_EXPECT (session, catted, data, size);
    FETCH_EXPECT (session, onward, data, size);
    uint8_t *with_tail = (uint8_t *) malloc (size + 4);
    memcpy (with_tail, data, size);
    memcpy (with_tail + size, "tail", 4);
    FETCH_EXPECT (session, joined, with_tail, size + 4);
    free (with_tail);
    free (data);
    harness_note ("%zu bytes from %s: every reader on g1 saw them", size, from);
}

//  A directory object of several chunks, made on g0, unpacked on g1 by
//  store and by execute.
static void
s_directory (sq_session_t *session)
{
    char tree [512], path [600];
    snprintf (tree, sizeof tree, "%s/tree", s_tmp);
    CHECK (mkdir (tree, 0755) == 0, "mkdir");
    size_t size = 2 * S_CHUNK + 333;
    uint8_t *data = (uint8_t *) malloc (size);
    harness_pattern (data, size, 99);
    snprintf (path, sizeof path, "%s/big", tree);
    FILE *file = fopen (path, "wb");
    CHECK (file && fwrite (data, 1, size, file) == size, "write %s", path);
    fclose (file);

    size_t config_size;
    void *config = sq_config_path (tree, &config_size);
    uint32_t load = s_task_on (session, "load", NULL, 0, 1, config, config_size, "src");
    uint32_t packed = sq_output (load, 0);
    CHECK_RC (sq_object_set_content_type (session, packed, "dir"), SQ_OK, "dir");
    uint32_t here = s_copy_on (session, packed, "dst");
    CHECK_RC (sq_object_set_content_type (session, here, "dir"), SQ_OK, "dir");
    char out [512];
    snprintf (out, sizeof out, "%s/out", s_tmp);
    config = sq_config_path (out, &config_size);
    uint32_t store = s_task_on (session, "store", &here, 1, 0, config, config_size, "dst");
    uint32_t catted = s_cat_on_g1 (session, here, "in/big");
    CHECK_RC (sq_submit (session), SQ_OK, "submit directory");
    CHECK_RC (sq_wait (session, &store, 1, 60000), SQ_OK, "store directory");
    snprintf (path, sizeof path, "%s/big", out);
    s_file_expect (path, data, size);
    FETCH_EXPECT (session, catted, data, size);
    free (data);
    harness_note ("a %zu-byte directory object unpacked on g1 by store and execute", size);
}

int
main (void)
{
    snprintf (s_tmp, sizeof s_tmp, "/tmp/squall-joined-XXXXXX");
    CHECK (mkdtemp (s_tmp), "mkdtemp");
    const char *g0 [] = { "--resource", "src=8", NULL };
    const char *g1 [] = { "--resource", "dst=8", NULL };
    const char *const *govs [] = { g0, g1 };
    harness_t *harness = harness_new_govs (2, 2, NULL, govs);
    //  The environment is inherited: only g2 sends in 64 KiB chunks.
    setenv ("SQUALL_CHUNK_BYTES", "65536", 1);
    const char *g2 [] = { "--resource", "small=8", NULL };
    harness_add_governor_args (harness, "g2", 2, g2);
    unsetenv ("SQUALL_CHUNK_BYTES");
    sq_client_t *client = harness_client (harness);
    sq_session_t *session = sq_session_new (client);
    CHECK (session, "session");

    s_readers (session, 2 * S_CHUNK + 7, "src", 1);
    s_readers (session, S_CHUNK + 20, "small", 2);
    s_directory (session);

    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&harness) == 0, "clean shutdown");
    char command [600];
    snprintf (command, sizeof command, "rm -rf '%s'", s_tmp);
    CHECK (system (command) == 0, "cleanup");
    printf ("test_dataplane_joined: OK\n");
    return 0;
}
