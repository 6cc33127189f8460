/*  transfer_inline: where should objects stop riding inline in control
    messages? Measures, per object size, the mean time of "a task makes the
    object, the client fetches it" on a cluster started with a given
    --inline-max (bench/transfer.sh inline runs it twice: everything inline,
    and nothing inline), so the two curves can be compared.

    usage: squall-bench-transfer-inline ENDPOINT [repetitions] */
#include "squall.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int
main (int argc, char *argv [])
{
    if (argc < 2) {
        fprintf (stderr, "usage: %s ENDPOINT [repetitions]\n", argv [0]);
        return 2;
    }
    int reps = argc > 2? atoi (argv [2]): 50;
    sq_client_t *client = sq_client_new ();
    if (sq_client_connect (client, argv [1], 10000)) {
        fprintf (stderr, "bench: %s\n", sq_client_errmsg (client));
        return 1;
    }
    sq_session_t *session = sq_session_new (client);
    size_t sizes [] = { 1024, 4096, 16384, 65536, 262144, 1048576 };
    char *data = (char *) calloc (1, 1048576);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes [0]; s++) {
        //  The constant is made on the governor once (a slice of it is the
        //  object measured), so only the task's output travels.
        uint32_t c = sq_blob (session, data, sizes [s], NULL);
        sq_keep (session, c);
        double total = 0;
        for (int r = 0; r < reps; r++) {
            size_t config_size;
            void *config = sq_config_slice (0, -1, &config_size);
            uint32_t task = sq_task (session, "slice", &c, 1, 1, config, config_size);
            sq_free (config);
            uint32_t out = sq_output (task, 0);
            sq_keep (session, out);
            double start = s_now ();
            void *got;
            size_t size;
            if (sq_submit (session) || sq_fetch (session, out, 30000, &got, &size, NULL)) {
                fprintf (stderr, "bench: %s\n", sq_client_errmsg (client));
                return 1;
            }
            total += s_now () - start;
            sq_free (got);
            sq_unkeep (session, out);
        }
        printf ("%8zu bytes: %7.1f us per make + fetch\n", sizes [s], total / reps * 1e6);
    }
    free (data);
    sq_session_destroy (&session);
    sq_client_destroy (&client);
    return 0;
}
