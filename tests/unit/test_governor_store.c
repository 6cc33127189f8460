/*  The governor's object store and deadline heap, without any sockets. */
#include "../../governor/store.h"
#include "../../governor/store.c"
#include "../../governor/deadlines.h"
#include "../../governor/deadlines.c"
#include <assert.h>
#include <stdio.h>

#define CHECK(cond) do { if (!(cond)) { \
    fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    return 1; } } while (0)

int
main (void)
{
    store_t *store = store_new ();
    CHECK (store && store_count (store) == 0 && store_bytes (store) == 0);
    CHECK (store_put (store, 1, sq_blob_copy ("hello", 5), "text/plain", 10) == 0);
    CHECK (store_put (store, 2, sq_blob_copy ("", 0), NULL, 0) == 0);
    CHECK (store_count (store) == 2 && store_bytes (store) == 5);
    const char *type = NULL;
    sq_blob_t *blob = store_get (store, 1, &type);
    CHECK (blob && sq_blob_size (blob) == 5 && strcmp (type, "text/plain") == 0);
    //  A reference outlives removal from the store.
    sq_blob_t *kept = sq_blob_ref (blob);
    CHECK (store_put (store, 1, sq_blob_copy ("bye", 3), "x", 1) == 0);
    CHECK (store_count (store) == 2 && store_bytes (store) == 3);
    CHECK (memcmp (sq_blob_data (kept), "hello", 5) == 0);
    sq_blob_unref (&kept);
    CHECK (store_get (store, 2, &type) && strcmp (type, "") == 0);
    CHECK (store_remove (store, 2) == 0 && store_remove (store, 2) == -1);
    CHECK (!store_has (store, 2) && store_has (store, 1));
    CHECK (store_get (store, 99, NULL) == NULL);
    for (uint64_t k = 100; k < 10100; k++)
        CHECK (store_put (store, k, sq_blob_copy (&k, sizeof k), "n", 1) == 0);
    CHECK (store_count (store) == 10001 && store_bytes (store) == 3 + 10000 * 8);
    store_destroy (&store);
    CHECK (store == NULL);

    //  Deadline heap: pops in order, removal from the middle.
    deadlines_t *heap = deadlines_new ();
    task_t tasks [100];
    memset (tasks, 0, sizeof tasks);
    for (int i = 0; i < 100; i++) {
        tasks [i].deadline_ns = (uint64_t) ((i * 37) % 100) + 1;
        tasks [i].heap_index = SIZE_MAX;
        CHECK (deadlines_add (heap, &tasks [i]) == 0);
    }
    deadlines_remove (heap, &tasks [50]);
    deadlines_remove (heap, &tasks [50]);
    uint64_t last = 0;
    int popped = 0;
    task_t *t;
    while ((t = deadlines_first (heap))) {
        CHECK (t->deadline_ns >= last && t != &tasks [50]);
        last = t->deadline_ns;
        deadlines_remove (heap, t);
        CHECK (t->heap_index == SIZE_MAX);
        popped++;
    }
    CHECK (popped == 99);
    deadlines_destroy (&heap);
    printf ("test_governor_store: OK\n");
    return 0;
}
