/*  buffers: the memory of objects fetched from governors, reused.

    A direct fetch copies each range from its ZeroMQ frame into one buffer
    the caller gets (and frees with sq_free, so it cannot be the frames).
    Into fresh memory that copy costs a page fault per 4 KiB, which perf
    shows costing more than the copy itself (bench/transfer: the client's
    fetch spent most of its time in the kernel's fault path). A program
    fetches, reads and frees objects one after another: sq_free gives big
    buffers back here, and the next fetch of a like size gets the pages back.

    At most S_KEEP buffers of S_KEEP_BYTES in all wait for reuse (a reused
    buffer is at most 1.5 times what is asked); a buffer given back pushes
    out the oldest (the latest sizes say best what comes next). They are
    freed when the last client is destroyed. Process-wide, behind a
    mutex: sq_free may be called from any thread.

    Ownership: sq_client_buffer returns memory the caller owns until it
    goes back through sq_client_buffer_give (sq_free). */
#include "sq_client_private.h"
#include "idmap.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define S_KEEP 2
#define S_KEEP_BYTES ((size_t) 256 << 20)

typedef struct {
    void *ptr;
    size_t capacity;
} s_kept_t;

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static sq_idmap_t *s_lent;              //  pointer -> capacity, with the caller
static s_kept_t s_kept [S_KEEP];      //  oldest first
static size_t s_n_kept, s_kept_bytes;
static size_t s_clients;

void *
sq_client_buffer (size_t size)
{
    if (size < SQ_CLIENT_BUFFER_MIN)
        return malloc (size? size: 1);
    void *ptr = NULL;
    size_t capacity = size;
    pthread_mutex_lock (&s_lock);
    size_t best = S_KEEP;
    for (size_t i = 0; i < s_n_kept; i++)
        if (s_kept [i].capacity >= size && s_kept [i].capacity - size <= size / 2
        &&  (best == S_KEEP || s_kept [i].capacity < s_kept [best].capacity))
            best = i;
    if (best < S_KEEP) {
        ptr = s_kept [best].ptr;
        capacity = s_kept [best].capacity;
        s_kept_bytes -= capacity;
        memmove (&s_kept [best], &s_kept [best + 1], (--s_n_kept - best) * sizeof (s_kept_t));
    }
    else
        ptr = malloc (size);
    if (ptr && !s_lent)
        s_lent = sq_idmap_new ();
    //  Not recorded (out of memory): it is freed plainly then.
    if (ptr && s_lent)
        sq_idmap_insert (s_lent, (uint64_t) (uintptr_t) ptr, (void *) (uintptr_t) capacity);
    pthread_mutex_unlock (&s_lock);
    return ptr;
}

bool
sq_client_buffer_give (void *ptr)
{
    void *release [S_KEEP + 1];
    size_t n = 0;
    pthread_mutex_lock (&s_lock);
    size_t capacity = s_lent? (size_t) (uintptr_t) sq_idmap_remove (s_lent, (uint64_t) (uintptr_t) ptr)
                            : 0;
    bool ours = capacity > 0;
    if (ours && s_clients > 0 && capacity <= S_KEEP_BYTES) {
        while (s_n_kept == S_KEEP || s_kept_bytes + capacity > S_KEEP_BYTES) {
            release [n++] = s_kept [0].ptr;
            s_kept_bytes -= s_kept [0].capacity;
            memmove (&s_kept [0], &s_kept [1], --s_n_kept * sizeof (s_kept_t));
        }
        s_kept [s_n_kept++] = (s_kept_t) { ptr, capacity };
        s_kept_bytes += capacity;
    }
    else
    if (ours)
        release [n++] = ptr;
    pthread_mutex_unlock (&s_lock);
    for (size_t i = 0; i < n; i++)
        free (release [i]);
    return ours;
}

void
sq_client_buffers_hold (bool hold)
{
    pthread_mutex_lock (&s_lock);
    if (hold)
        s_clients++;
    else
    if (s_clients > 0)
        s_clients--;
    size_t n = 0;
    void *release [S_KEEP];
    if (s_clients == 0) {
        for (size_t i = 0; i < s_n_kept; i++)
            release [n++] = s_kept [i].ptr;
        s_n_kept = 0;
        s_kept_bytes = 0;
        //  Nothing lent out either: the map itself goes.
        if (s_lent && sq_idmap_size (s_lent) == 0)
            sq_idmap_destroy (&s_lent);
    }
    pthread_mutex_unlock (&s_lock);
    for (size_t i = 0; i < n; i++)
        free (release [i]);
}

size_t
sq_client_buffers_kept (void)
{
    pthread_mutex_lock (&s_lock);
    size_t bytes = s_kept_bytes;
    pthread_mutex_unlock (&s_lock);
    return bytes;
}
