/*  The governor's object store and deadline heap, without any sockets. */
#include "store.h"
#include "files.h"
#include "deadlines.h"
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHECK(cond) do { if (!(cond)) { \
    fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    return 1; } } while (0)

static int s_relieved;

static void
s_relieve (void *arg)
{
    (void) arg;
    s_relieved++;
}

//  What runs beside the store, as the test sets it.
static uint64_t
s_beside (void *arg, uint64_t store_memory)
{
    (void) store_memory;
    return *(uint64_t *) arg;
}

//  A blob of `size` bytes, all `value`.
static sq_blob_t *
s_filled (size_t size, int value)
{
    uint8_t *data = (uint8_t *) malloc (size);
    if (!data)
        return NULL;
    memset (data, value, size);
    sq_blob_t *blob = sq_blob_copy (data, size);
    free (data);
    return blob;
}

//  Bytes of object data held, in memory and spilled.
static uint64_t
s_bytes (store_t *store)
{
    return store_memory (store) + store_spilled (store);
}

//  Shared segments (blob.c) and the store's copy of an object into one:
//  sealed segments cannot change, and a memory file another process wrote
//  is taken only when nobody can change it any more and its size is the
//  one it was said to be.
static int
s_check_segments (void)
{
    uint8_t sevens [100];
    memset (sevens, 7, sizeof sevens);
    sq_blob_t *heap7 = sq_blob_copy (sevens, sizeof sevens);
    sq_blob_t *seg = heap7? sq_blob_shm_copy (heap7): NULL;
    sq_blob_unref (&heap7);
    CHECK (seg && sq_blob_shm_fd (seg) >= 0 && sq_blob_shm_id (seg) != 0);
    int fd = sq_blob_shm_fd (seg);
    CHECK (write (fd, "x", 1) < 0 && errno == EPERM);
    CHECK (mmap (NULL, 100, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
    CHECK (ftruncate (fd, 50) < 0);
    CHECK (((const uint8_t *) sq_blob_data (seg)) [99] == 7 && !sq_blob_mapped (seg));
    sq_blob_t *other = sq_blob_shm_copy (seg);
    CHECK (other && sq_blob_shm_id (other) != sq_blob_shm_id (seg));
    sq_blob_unref (&other);
    //  Sealed against writes through any mapping (its writable one gone):
    //  another process (a governor of this host) may take it as it is.
    void *view = mmap (NULL, 100, PROT_READ, MAP_SHARED, fd, 0);
    CHECK (view != MAP_FAILED && munmap (view, 100) == 0);
    sq_blob_t *taken = sq_blob_shm_adopt (dup (fd), 100);
    CHECK (taken && ((const uint8_t *) sq_blob_data (taken)) [0] == 7);
    sq_blob_unref (&taken);
    sq_blob_t *heap = sq_blob_copy ("x", 1);
    CHECK (heap && sq_blob_shm_fd (heap) == -1 && sq_blob_shm_id (heap) == 0);
    sq_blob_unref (&heap);
    sq_blob_unref (&seg);

    //  Written by "another process": taken once sealed, with its size.
    int w = memfd_create ("squall-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK (w >= 0 && write (w, "abcdef", 6) == 6);
    sq_blob_t *got = sq_blob_shm_adopt (w, 6);
    CHECK (got && memcmp (sq_blob_data (got), "abcdef", 6) == 0);
    CHECK (write (sq_blob_shm_fd (got), "z", 1) < 0);
    sq_blob_unref (&got);
    //  The wrong size, no sealing allowed, a writer still mapping it
    //  writable, not a memory file: refused (and the descriptor closed).
    w = memfd_create ("squall-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK (w >= 0 && write (w, "abcdef", 6) == 6);
    CHECK (sq_blob_shm_adopt (w, 5) == NULL);
    CHECK (fcntl (w, F_GETFD) < 0 && errno == EBADF);
    w = memfd_create ("squall-test", MFD_CLOEXEC);
    CHECK (w >= 0 && write (w, "abcdef", 6) == 6);
    CHECK (sq_blob_shm_adopt (w, 6) == NULL);
    w = memfd_create ("squall-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK (w >= 0 && ftruncate (w, 4096) == 0);
    void *writable = mmap (NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, w, 0);
    CHECK (writable != MAP_FAILED);
    int w2 = dup (w);
    CHECK (sq_blob_shm_adopt (w, 4096) == NULL);
    munmap (writable, 4096);
    //  Once the writer let go, it can be taken.
    got = sq_blob_shm_adopt (w2, 4096);
    CHECK (got != NULL);
    sq_blob_unref (&got);
    char path [] = "/tmp/squall-test-segment-XXXXXX";
    int file = mkstemp (path);
    CHECK (file >= 0 && write (file, "abcdef", 6) == 6);
    unlink (path);
    CHECK (sq_blob_shm_adopt (file, 6) == NULL);
    sq_blob_t *none = sq_blob_new (0);
    CHECK (none && sq_blob_shm_copy (none) == NULL && errno == EINVAL);
    sq_blob_unref (&none);
    //  A copy of a joined blob (chunks as they came): sealed against every
    //  write, its bytes in order, taken by another process as they are.
    sq_blob_t *parts [3] = { sq_blob_copy ("abc", 3), sq_blob_copy ("de", 2),
                             sq_blob_copy ("f", 1) };
    sq_blob_t *joined = sq_blob_join (parts, 3);
    sq_blob_t *copied = joined? sq_blob_shm_copy (joined): NULL;
    CHECK (copied && sq_blob_size (copied) == 6
           && memcmp (sq_blob_data (copied), "abcdef", 6) == 0);
    CHECK (fcntl (sq_blob_shm_fd (copied), F_GET_SEALS) & F_SEAL_WRITE);
    CHECK (write (sq_blob_shm_fd (copied), "x", 1) < 0 && errno == EPERM);
    got = sq_blob_shm_adopt (dup (sq_blob_shm_fd (copied)), 6);
    CHECK (got && memcmp (sq_blob_data (got), "abcdef", 6) == 0);
    sq_blob_unref (&got);
    sq_blob_unref (&copied);
    sq_blob_unref (&joined);
    sq_blob_t *empty = sq_blob_copy ("", 0);
    CHECK (empty && sq_blob_shm_copy (empty) == NULL);
    sq_blob_unref (&empty);

    //  The store hands out an object as a segment: copied once, replacing
    //  the stored blob; a segment is handed out as it is.
    store_t *store = store_new ();
    CHECK (store_put (store, 1, sq_blob_copy ("hello", 5), "t", 1) == 0);
    CHECK (store_put (store, 2, sq_blob_copy ("", 0), "t", 1) == 0);
    const char *type = NULL;
    sq_blob_t *shared = store_get_shared (store, 1, &type);
    CHECK (shared && sq_blob_shm_fd (shared) >= 0 && strcmp (type, "t") == 0);
    CHECK (fcntl (sq_blob_shm_fd (shared), F_GET_SEALS) & F_SEAL_WRITE);
    CHECK (memcmp (sq_blob_data (shared), "hello", 5) == 0);
    CHECK (store_get (store, 1, NULL) == shared && store_memory (store) == 5);
    sq_blob_t *twice = store_get_shared (store, 1, NULL);
    CHECK (twice == shared);
    sq_blob_unref (&twice);
    CHECK (store_get_shared (store, 2, NULL) == NULL);     //  empty
    CHECK (store_get_shared (store, 3, NULL) == NULL);     //  absent
    //  Removed from the store, it lives on in the reference handed out.
    CHECK (store_remove (store, 1) == 0 && store_memory (store) == 0);
    CHECK (memcmp (sq_blob_data (shared), "hello", 5) == 0);
    sq_blob_unref (&shared);
    store_destroy (&store);
    return 0;
}

//  What store_set_forget told, in order.
typedef struct {
    uint64_t keys [8], gens [8];
    int n;
} s_forgot_t;

static void
s_forget (void *arg, uint64_t key, uint64_t gen)
{
    s_forgot_t *f = (s_forgot_t *) arg;
    if (f->n < 8) {
        f->keys [f->n] = key;
        f->gens [f->n] = gen;
    }
    f->n++;
}

//  Generations (what the executors' input caches key by, with the key):
//  a replaced object has a new one, spilling and sharing keep it, and the
//  store says when each leaves it.
static int
s_check_generations (void)
{
    store_t *store = store_new ();
    s_forgot_t forgot = { { 0 }, { 0 }, 0 };
    CHECK (store);
    store_set_forget (store, s_forget, &forgot);
    CHECK (store_generation (store, 1) == 0);
    CHECK (store_put (store, 1, sq_blob_copy ("one", 3), "py/pickle", 9) == 0);
    CHECK (store_put (store, 2, sq_blob_copy ("two", 3), "py/pickle", 9) == 0);
    uint64_t g1 = store_generation (store, 1), g2 = store_generation (store, 2);
    CHECK (g1 && g2 && g1 != g2 && forgot.n == 0);
    //  Held another way, the same object.
    sq_blob_t *shared = store_get_shared (store, 1, NULL);
    CHECK (shared && store_generation (store, 1) == g1 && forgot.n == 0);
    sq_blob_unref (&shared);
    //  Replaced: a new generation; the old one is told, before its blob goes.
    CHECK (store_put (store, 1, sq_blob_copy ("uno", 3), "py/pickle", 9) == 0);
    uint64_t g1b = store_generation (store, 1);
    CHECK (g1b && g1b != g1 && g1b != g2);
    CHECK (forgot.n == 1 && forgot.keys [0] == 1 && forgot.gens [0] == g1);
    //  Removed: told; gone, generation 0.
    CHECK (store_remove (store, 2) == 0);
    CHECK (forgot.n == 2 && forgot.keys [1] == 2 && forgot.gens [1] == g2);
    CHECK (store_generation (store, 2) == 0);
    //  Put again under a key once freed: never a generation seen before.
    CHECK (store_put (store, 2, sq_blob_copy ("two", 3), "py/pickle", 9) == 0);
    CHECK (store_generation (store, 2) > g1b);
    //  Unhooked, nothing is told; destroyed hooked, every object is.
    store_set_forget (store, NULL, NULL);
    CHECK (store_remove (store, 2) == 0 && forgot.n == 2);
    store_set_forget (store, s_forget, &forgot);
    store_destroy (&store);
    CHECK (forgot.n == 3 && forgot.keys [2] == 1 && forgot.gens [2] == g1b);
    return 0;
}

//  Spilling's choice: an object whose segment another governor of the
//  host holds too (store_set_shared) goes after every unshared one, since
//  spilling it frees nothing while the other keeps it; when the unshared
//  ones are not enough it goes too. The mark follows the blob.
static int
s_check_shared_spill (const char *dir)
{
    const size_t mib = 1 << 20;
    store_t *store = store_new ();
    CHECK (store && store_configure (store, 4 * mib + 4096, dir) == 0);  //  2.8 MiB down to 2
    sq_blob_t *heap = s_filled (mib, 1);
    sq_blob_t *seg = heap? sq_blob_shm_copy (heap): NULL;
    CHECK (seg);
    CHECK (store_put (store, 1, seg, "a", 1) == 0);
    //  Only the stored blob itself, and only a segment, is marked.
    store_set_shared (store, 1, heap);
    CHECK (store_shared (store) == 0);
    CHECK (store_put (store, 2, heap, "b", 1) == 0);
    store_set_shared (store, 2, heap);
    CHECK (store_shared (store) == 0);
    store_set_shared (store, 1, seg);
    store_set_shared (store, 1, seg);                   //  counted once
    CHECK (store_shared (store) == mib && store_memory (store) == 2 * mib);
    //  1 is the least recently used, yet 2 is spilled for the third.
    CHECK (store_put (store, 3, s_filled (mib, 3), "c", 1) == 0);
    CHECK (store_spilled (store) == mib && store_memory (store) == 2 * mib);
    CHECK (sq_blob_mapped (store_get (store, 2, NULL)));
    CHECK (!sq_blob_mapped (store_get (store, 1, NULL)) && store_shared (store) == mib);
    //  Unshared ones that are read (referenced) cannot go: the shared one
    //  does, least recently used first, and is no longer counted shared.
    sq_blob_t *held3 = sq_blob_ref (store_get (store, 3, NULL));
    sq_blob_t *four = s_filled (mib, 4);
    sq_blob_t *held4 = four? sq_blob_ref (four): NULL;
    CHECK (held3 && held4 && store_put (store, 4, four, "d", 1) == 0);
    CHECK (store_spilled (store) == 2 * mib && sq_blob_mapped (store_get (store, 1, NULL)));
    CHECK (store_shared (store) == 0 && store_memory (store) == 2 * mib);
    const uint8_t *one = (const uint8_t *) sq_blob_data (store_get (store, 1, NULL));
    CHECK (one && one [0] == 1 && one [mib - 1] == 1);
    sq_blob_unref (&held3);
    sq_blob_unref (&held4);
    //  Removed or replaced: no longer counted.
    seg = sq_blob_shm_copy (store_get (store, 4, NULL));
    CHECK (seg && store_put (store, 5, seg, "e", 1) == 0);
    store_set_shared (store, 5, seg);
    CHECK (store_shared (store) == mib);
    CHECK (store_remove (store, 5) == 0 && store_shared (store) == 0);
    seg = sq_blob_shm_copy (store_get (store, 4, NULL));
    CHECK (seg && store_put (store, 5, seg, "e", 1) == 0);
    store_set_shared (store, 5, seg);
    CHECK (store_put (store, 5, sq_blob_copy ("x", 1), "e", 1) == 0 && store_shared (store) == 0);
    store_destroy (&store);
    return 0;
}

int
main (void)
{
    if (s_check_segments () || s_check_generations ())
        return 1;
    store_t *store = store_new ();
    CHECK (store && store_count (store) == 0 && s_bytes (store) == 0);
    CHECK (store_put (store, 1, sq_blob_copy ("hello", 5), "text/plain", 10) == 0);
    CHECK (store_put (store, 2, sq_blob_copy ("", 0), NULL, 0) == 0);
    CHECK (store_count (store) == 2 && s_bytes (store) == 5);
    const char *type = NULL;
    sq_blob_t *blob = store_get (store, 1, &type);
    CHECK (blob && sq_blob_size (blob) == 5 && strcmp (type, "text/plain") == 0);
    //  A reference outlives removal from the store.
    sq_blob_t *kept = sq_blob_ref (blob);
    CHECK (store_put (store, 1, sq_blob_copy ("bye", 3), "x", 1) == 0);
    CHECK (store_count (store) == 2 && s_bytes (store) == 3);
    CHECK (memcmp (sq_blob_data (kept), "hello", 5) == 0);
    sq_blob_unref (&kept);
    CHECK (store_get (store, 2, &type) && strcmp (type, "") == 0);
    CHECK (store_remove (store, 2) == 0 && store_remove (store, 2) == -1);
    CHECK (!store_has (store, 2) && store_has (store, 1));
    CHECK (store_get (store, 99, NULL) == NULL);
    for (uint64_t k = 100; k < 10100; k++)
        CHECK (store_put (store, k, sq_blob_copy (&k, sizeof k), "n", 1) == 0);
    CHECK (store_count (store) == 10001 && s_bytes (store) == 3 + 10000 * 8);
    store_destroy (&store);
    CHECK (store == NULL);

    //  Joined blobs: an object kept as the chunks it arrived in.
    char bytes [300000];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes [i] = (char) (i * 7 + i / 251);
    sq_blob_t *parts [4] = {
        sq_blob_copy (bytes, 100000), sq_blob_copy ("", 0),
        sq_blob_copy (bytes + 100000, 100000), sq_blob_copy (bytes + 200000, 100000)
    };
    sq_blob_t *joined = sq_blob_join (parts, 4);
    CHECK (joined && !sq_blob_flat (joined) && sq_blob_data (joined) == NULL);
    CHECK (sq_blob_size (joined) == sizeof bytes && sq_blob_refs (joined) == 1);
    size_t len;
    const char *span = (const char *) sq_blob_span (joined, 150000, &len);
    CHECK (len == 50000 && memcmp (span, bytes + 150000, len) == 0);
    char back [300000];
    sq_blob_read (joined, 99990, back, 100020);          //  across three parts
    CHECK (memcmp (back, bytes + 99990, 100020) == 0);
    //  A range inside a part goes zero-copy and holds that part only;
    //  one across parts is copied.
    zmq_msg_t msg;
    CHECK (sq_blob_msg_range (joined, 100000, 100000, &msg) == 0);
    CHECK (zmq_msg_size (&msg) == 100000 && memcmp (zmq_msg_data (&msg), bytes + 100000, 100000) == 0);
    CHECK (sq_blob_refs (joined) == 2);                  //  the part is being read
    zmq_msg_close (&msg);
    CHECK (sq_blob_refs (joined) == 1);
    CHECK (sq_blob_msg_range (joined, 50000, 100000, &msg) == 0);
    CHECK (memcmp (zmq_msg_data (&msg), bytes + 50000, 100000) == 0 && sq_blob_refs (joined) == 1);
    zmq_msg_close (&msg);
    CHECK (sq_blob_msg_range (joined, 200010, 20, &msg) == 0);   //  tiny: copied
    CHECK (memcmp (zmq_msg_data (&msg), bytes + 200010, 20) == 0);
    zmq_msg_close (&msg);
    CHECK (sq_blob_msg (joined, &msg) == 0 && zmq_msg_size (&msg) == sizeof bytes);
    CHECK (memcmp (zmq_msg_data (&msg), bytes, sizeof bytes) == 0);
    zmq_msg_close (&msg);
    sq_blob_t *one [1] = { sq_blob_copy ("abc", 3) };
    sq_blob_t *single = sq_blob_join (one, 1);
    CHECK (single == one [0] && sq_blob_flat (single));
    sq_blob_unref (&single);

    //  In the store: spilled part by part, flattened once for a reader
    //  that needs one buffer.
    char dir [] = "/tmp/squall-store-test-XXXXXX";
    CHECK (mkdtemp (dir));
    if (s_check_shared_spill (dir))
        return 1;
    store = store_new ();
    CHECK (store && store_configure (store, 0, dir) == 0);
    CHECK (store_put (store, 7, sq_blob_ref (joined), "j", 1) == 0);
    CHECK (store_memory (store) == sizeof bytes);
    sq_blob_t *flat = store_get_flat (store, 7, &type);
    CHECK (flat && sq_blob_flat (flat) && strcmp (type, "j") == 0);
    CHECK (memcmp (sq_blob_data (flat), bytes, sizeof bytes) == 0);
    CHECK (store_get (store, 7, NULL) == flat && store_memory (store) == sizeof bytes);
    CHECK (store_get_flat (store, 7, NULL) == flat);
    store_destroy (&store);
    store = store_new ();
    CHECK (store && store_configure (store, 100000, dir) == 0);
    CHECK (store_put (store, 8, joined, "j", 1) == 0);  //  over 70 %: spilled
    CHECK (store_memory (store) == 0 && store_spilled (store) == sizeof bytes);
    sq_blob_t *spilled = store_get (store, 8, NULL);
    CHECK (sq_blob_mapped (spilled) && memcmp (sq_blob_data (spilled), bytes, sizeof bytes) == 0);
    store_destroy (&store);
    CHECK (rmdir (dir) == 0);

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

    //  The store's budget: a Compose governor of 1 GiB with 2 CPU slots
    //  and a quarter kept as copy heap (issue: 24 results of 60 MB killed
    //  it, the store's limit being the whole container's) spills before
    //  its store, heap and executors together reach the box's limit.
    const uint64_t mib = 1ull << 20, gib = 1ull << 30;
    uint64_t budget = store_budget (gib, 2, gib / 4);
    CHECK (budget == gib - gib / 4 - 2 * STORE_EXEC_RESERVE - STORE_BASE_RESERVE);
    CHECK (budget == 448 * mib);
    CHECK (budget / 100 * STORE_SPILL_HIGH + gib / 4 + 2 * STORE_EXEC_RESERVE
           + STORE_BASE_RESERVE < gib);
    //  A big machine: the reserves are a small part.
    CHECK (store_budget (64 * gib, 16, 2 * gib) == 64 * gib - 2 * gib - 16 * STORE_EXEC_RESERVE
                                                   - STORE_BASE_RESERVE);
    //  Reserves beyond the box: a quarter of it, never nothing.
    CHECK (store_budget (64 * mib, 1, 16 * mib) == 16 * mib);
    CHECK (store_budget (gib, 64, gib / 4) == gib / 4);
    CHECK (store_budget (gib, UINT32_MAX, UINT64_MAX) == gib / 4);
    CHECK (store_budget (UINT64_MAX, UINT32_MAX, UINT64_MAX) == UINT64_MAX / 4);
    //  No limit stays no limit.
    CHECK (store_budget (0, 2, gib) == 0);

    //  The box (store_set_box): whatever grows beside the store, the store
    //  spills before the box's limit; with nothing beside, its own limit
    //  rules as before.
    {
        char dir [] = "/tmp/squall-store-box-XXXXXX";
        CHECK (mkdtemp (dir));
        store_t *box = store_new ();
        CHECK (box && store_configure (box, 0, dir) == 0);      //  no limit of its own
        static uint64_t beside;
        beside = 0;
        uint64_t box_limit = 100 * mib;
        store_set_box (box, box_limit, s_beside, s_relieve, &beside);
        for (uint64_t k = 1; k <= 8; k++)
            CHECK (store_put (box, k, s_filled (5 * mib, (int) k), "", 0) == 0);
        CHECK (store_memory (box) == 40 * mib && store_spilled (box) == 0);
        CHECK (!store_check_box (box));                         //  40 of 100: fine
        CHECK (s_relieved == 0);
        beside = 50 * mib;                                      //  tasks grew: 90 of 100
        CHECK (store_check_box (box));
        CHECK (s_relieved == 1);                                //  the heap gives it back
        CHECK (store_memory (box) + beside <= box_limit / 100 * STORE_BOX_LOW);
        CHECK (store_memory (box) + beside <= box_limit / 100 * STORE_BOX_HIGH);
        CHECK (store_spilled (box) > 0 && s_bytes (box) == 40 * mib);
        //  Every object still reads back, spilled or not.
        for (uint64_t k = 1; k <= 8; k++) {
            sq_blob_t *b = store_get_flat (box, k, NULL);
            CHECK (b && sq_blob_size (b) == 5 * mib);
            const uint8_t *p = (const uint8_t *) sq_blob_data (b);
            CHECK (p [0] == (uint8_t) k && p [5 * mib - 1] == (uint8_t) k);
        }
        //  More than the box beside: all the store can give, no more.
        beside = 120 * mib;
        store_check_box (box);
        CHECK (store_memory (box) == 0);
        //  Puts look at the box too (here: at once, the put being big).
        beside = 60 * mib;
        CHECK (store_put (box, 9, s_filled (20 * mib, 9), "", 0) == 0);
        CHECK (store_memory (box) + beside <= box_limit / 100 * STORE_BOX_HIGH);
        CHECK (store_make_room (box, 30 * mib));
        CHECK (store_memory (box) == 0);
        //  No box: nothing spilled whatever `beside` says.
        store_set_box (box, 0, s_beside, s_relieve, &beside);
        CHECK (store_put (box, 10, s_filled (5 * mib, 10), "", 0) == 0);
        CHECK (!store_check_box (box) && store_memory (box) == 5 * mib);
        store_destroy (&box);
        rmdir (dir);
    }
    printf ("test_governor_store: OK\n");
    return 0;
}
