/*  The client's buffers of fetched objects (client/buffers.c): big ones
    come back through sq_free and are reused by the next fetch of a like
    size, within the bounds; small ones are plain malloc; nothing is kept
    without a client, and the last client's destroy frees what is kept. */
#include "sq_client_private.h"
#include <stdio.h>
#include <string.h>

#define CHECK(cond) do { if (!(cond)) { \
    fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    return 1; } } while (0)

#define MIB ((size_t) 1 << 20)

int
main (void)
{
    sq_client_t *client = sq_client_new ();
    CHECK (client);
    void *small = sq_client_buffer (1000);
    CHECK (small);
    sq_free (small);
    CHECK (sq_client_buffers_kept () == 0);

    char *a = (char *) sq_client_buffer (4 * MIB);
    CHECK (a);
    memset (a, 1, 4 * MIB);
    sq_free (a);
    CHECK (sq_client_buffers_kept () == 4 * MIB);
    char *b = (char *) sq_client_buffer (3 * MIB);          //  within 1.5x: reused
    CHECK (b == a && sq_client_buffers_kept () == 0);
    sq_free (b);
    void *c = sq_client_buffer (2 * MIB);                   //  4 MiB is too big for it
    CHECK (c != b && sq_client_buffers_kept () == 4 * MIB);
    void *d = sq_client_buffer (2 * MIB);
    void *e = sq_client_buffer (2 * MIB);
    sq_free (c);                                            //  kept with the 4 MiB one
    sq_free (d);                                            //  pushes the 4 MiB one out
    CHECK (sq_client_buffers_kept () == 4 * MIB);
    void *f = sq_client_buffer (2 * MIB);                   //  reuses c, the older fit
    CHECK (f == c && sq_client_buffers_kept () == 2 * MIB);
    sq_free (f);
    sq_free (e);                                            //  pushes d out
    CHECK (sq_client_buffers_kept () == 4 * MIB);
    void *h = sq_client_buffer (200 * MIB);
    sq_free (h);                                            //  pushes c out
    CHECK (sq_client_buffers_kept () == 202 * MIB);
    void *i = sq_client_buffer (100 * MIB);
    sq_free (i);                                            //  over 256 MiB: pushes e and h out
    CHECK (sq_client_buffers_kept () == 100 * MIB);
    sq_client_destroy (&client);
    CHECK (sq_client_buffers_kept () == 0);

    //  Nothing is kept without a client; over 256 MiB nothing is either.
    void *k = sq_client_buffer (2 * MIB);
    sq_free (k);
    CHECK (sq_client_buffers_kept () == 0);
    client = sq_client_new ();
    void *g = sq_client_buffer (300 * MIB);
    CHECK (g);
    sq_free (g);
    CHECK (sq_client_buffers_kept () == 0);
    sq_client_destroy (&client);
    sq_free (NULL);
    printf ("test_client_buffers: OK\n");
    return 0;
}
