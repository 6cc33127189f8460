/*  pipeline: a small squall pipeline, using only the public C API.

        squall-example-pipeline tcp://127.0.0.1:7760

    It generates a few hundred lines of text, uploads them as one constant,
    splits them on line boundaries into four parts with `slice` tasks, runs
    two `execute` tasks on every part (`tr a-z A-Z` and `wc -l`, both reading
    the part on standard input) and joins all results with one `concat` task:

        text --slice--> part0 --execute tr--> upper0 --+
             |                --execute wc--> count0 --+
             +-slice--> part1 ...                      +--concat--> result
             ...                                       |
             +-slice--> part3 ...                    --+

    The result is kept, fetched, printed and compared with what this program
    computes by itself. Exits 0 when they match, 1 on a mismatch or error.
*/
#include <squall.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINES 240
#define PARTS 4
#define TIMEOUT_MS 60000

static sq_client_t *s_client;

//  Reports a failed call with the client's message and exits.
static void
s_die (const char *what, int rc)
{
    fprintf (stderr, "pipeline: %s failed: %s (%s", what,
             s_client? sq_client_errmsg (s_client): "no client", sq_strerror (rc));
    if (s_client && sq_client_errid (s_client))
        fprintf (stderr, ", id %u", sq_client_errid (s_client));
    if (s_client && sq_client_errroot (s_client))
        fprintf (stderr, ", root %u", sq_client_errroot (s_client));
    fprintf (stderr, ")\n");
    exit (1);
}

//  Ids are 0 on failure; rc codes are positive on failure.
static uint32_t
s_id (const char *what, uint32_t id)
{
    if (id == 0)
        s_die (what, sq_client_errcode (s_client));
    return id;
}

static void
s_check (const char *what, int rc)
{
    if (rc != SQ_OK)
        s_die (what, rc);
}

//  An `execute` task running `sh -c script` with its one input on standard
//  input and its standard output as its one output.
static uint32_t
s_shell (sq_session_t *session, uint32_t input, const char *script, const char *name)
{
    const char *args [] = { "sh", "-c", script };
    const char *in_paths [] = { "" };
    const char *out_paths [] = { "" };
    size_t size;
    void *config = sq_config_execute (args, 3, in_paths, 1, 0, out_paths, 1, 0, NULL, &size);
    if (!config) {
        fprintf (stderr, "pipeline: sq_config_execute refused its arguments\n");
        exit (1);
    }
    uint32_t task = s_id ("sq_task (execute)",
                          sq_task (session, "execute", &input, 1, 1, config, size));
    sq_free (config);
    s_check ("sq_task_set_name", sq_task_set_name (session, task, name));
    s_check ("sq_object_set_content_type",
             sq_object_set_content_type (session, sq_output (task, 0), "text/plain"));
    return task;
}

int
main (int argc, char *argv [])
{
    if (argc != 2) {
        fprintf (stderr, "usage: %s BROKER-ENDPOINT   (e.g. tcp://127.0.0.1:7760)\n", argv [0]);
        return 2;
    }

    //  The input: LINES lines of lower-case text.
    size_t cap = LINES * 80, size = 0;
    char *text = malloc (cap);
    if (!text) {
        fprintf (stderr, "pipeline: out of memory\n");
        return 1;
    }
    static const char *words [] = {
        "squall", "broker", "governor", "task", "object", "session",
        "graph", "pipeline", "wind", "storm"
    };
    for (int i = 0; i < LINES; i++)
        size += (size_t) snprintf (text + size, cap - size, "line %03d: the %s and the %s go by\n",
                                   i, words [i % 10], words [(i * 7 + 3) % 10]);

    //  Part boundaries: about size / PARTS bytes each, cut after a newline.
    size_t cut [PARTS + 1];
    cut [0] = 0;
    for (int p = 1; p < PARTS; p++) {
        size_t at = size * p / PARTS;
        while (at < size && text [at - 1] != '\n')
            at++;
        cut [p] = at;
    }
    cut [PARTS] = size;

    //  What the cluster must answer: every part in upper case, then the line
    //  count of every part.
    size_t expected_cap = size + PARTS * 24, expected_size = 0;
    char *expected = malloc (expected_cap);
    if (!expected) {
        fprintf (stderr, "pipeline: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < size; i++)
        expected [expected_size++] = (char) toupper ((unsigned char) text [i]);
    for (int p = 0; p < PARTS; p++) {
        unsigned lines = 0;
        for (size_t i = cut [p]; i < cut [p + 1]; i++)
            lines += text [i] == '\n';
        expected_size += (size_t) snprintf (expected + expected_size,
                                            expected_cap - expected_size, "%u\n", lines);
    }

    //  Connect and build the graph.
    s_client = sq_client_new ();
    if (!s_client) {
        fprintf (stderr, "pipeline: out of memory\n");
        return 1;
    }
    s_check ("sq_client_connect", sq_client_connect (s_client, argv [1], 10000));
    sq_session_t *session = sq_session_new (s_client);
    if (!session)
        s_die ("sq_session_new", sq_client_errcode (s_client));

    uint32_t source = s_id ("sq_blob", sq_blob (session, text, size, "text/plain"));
    uint32_t joined [2 * PARTS];
    for (int p = 0; p < PARTS; p++) {
        char name [32];
        size_t config_size;
        void *config = sq_config_slice (cut [p], (int64_t) cut [p + 1], &config_size);
        if (!config) {
            fprintf (stderr, "pipeline: sq_config_slice refused its arguments\n");
            return 1;
        }
        uint32_t slice = s_id ("sq_task (slice)",
                               sq_task (session, "slice", &source, 1, 1, config, config_size));
        sq_free (config);
        snprintf (name, sizeof name, "slice-%d", p);
        s_check ("sq_task_set_name", sq_task_set_name (session, slice, name));
        uint32_t part = sq_output (slice, 0);

        snprintf (name, sizeof name, "upper-%d", p);
        joined [p] = sq_output (s_shell (session, part, "tr a-z A-Z", name), 0);
        snprintf (name, sizeof name, "count-%d", p);
        //  tr -d ' ': some wc implementations pad the number
        joined [PARTS + p] = sq_output (s_shell (session, part, "wc -l | tr -d ' '", name), 0);
    }
    uint32_t concat = s_id ("sq_task (concat)",
                            sq_task (session, "concat", joined, 2 * PARTS, 1, NULL, 0));
    s_check ("sq_task_set_name", sq_task_set_name (session, concat, "join"));
    uint32_t result = sq_output (concat, 0);
    s_check ("sq_object_set_content_type",
             sq_object_set_content_type (session, result, "text/plain"));
    s_check ("sq_keep", sq_keep (session, result));
    s_check ("sq_submit", sq_submit (session));
    printf ("pipeline: submitted %d tasks (session %u), waiting\n",
            1 + 3 * PARTS, sq_session_id (session));

    //  Fetch (this waits for the result), then make sure nothing else failed.
    void *data = NULL;
    size_t data_size = 0;
    char *content_type = NULL;
    s_check ("sq_fetch", sq_fetch (session, result, TIMEOUT_MS, &data, &data_size, &content_type));
    s_check ("sq_wait_all", sq_wait_all (session, TIMEOUT_MS));

    printf ("pipeline: result (%zu bytes, content type \"%s\"):\n",
            data_size, content_type? content_type: "");
    fwrite (data, 1, data_size, stdout);
    int status = 0;
    if (data_size != expected_size || memcmp (data, expected, data_size) != 0) {
        size_t at = 0;
        while (at < data_size && at < expected_size
           &&  ((const char *) data) [at] == expected [at])
            at++;
        fprintf (stderr, "pipeline: MISMATCH: got %zu bytes, expected %zu; first difference at byte %zu\n",
                 data_size, expected_size, at);
        status = 1;
    }
    else
        printf ("pipeline: OK, %zu bytes in %d parts match the local computation\n",
                data_size, PARTS);

    sq_free (data);
    sq_free (content_type);
    sq_session_destroy (&session);
    sq_client_destroy (&s_client);
    free (expected);
    free (text);
    return status;
}
