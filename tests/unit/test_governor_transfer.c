/*  The sending half of governor/transfer.c, alone: which copies go when.

    Chunks of 4 KiB and a window of one chunk (SQUALL_CHUNK_BYTES,
    SQUALL_WINDOW), so that an object of two chunks holds its slot until a
    CREDIT comes. Chunks are read from the pipe the transfer writes to;
    CREDITs are fed back as the data socket would. Checked: at most
    TRANSFER_ACTIVE_DEST copies to one destination, TRANSFER_ACTIVE in all;
    a one-chunk object goes even when every slot is held; a slot freed
    while the governor's limit held destinations back goes to them in
    turn, not to the busy destination that freed it; every copy is sent
    whole, once; nothing is left at the end (under ASan: no leak). */
#include "transfer.h"
#include "store.h"
#include "files.h"
#include "route.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#define CHECK(cond) do { if (!(cond)) { \
    fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    exit (1); } } while (0)

#define S_CHUNK 4096
#define S_DESTS 5

//  transfer.c takes its clock from task.c, not linked here.
static void *s_pipe_out;        //  where the transfer's chunks arrive
static void *s_credit_in, *s_credit_out;

//  Every copy seen on the pipe, in the order its first chunk came.
typedef struct {
    int dest;                   //  index of "tcp://d<i>:1"
    uint32_t transfer;
    uint64_t key;
    uint64_t next;              //  offset of the chunk expected next
    bool open;                  //  chunks still to come
} s_copy_t;

static s_copy_t s_copies [512];
static size_t s_n_copies;
static int s_chunks_of [1001];  //  by object key

//  Reads the next chunk the transfer sent into s_copies: the copy it
//  belongs to, or NULL if no chunk is waiting. Every chunk must follow the
//  previous one of its copy.
static s_copy_t *
s_next_chunk (void)
{
    sq_msg_t msg;
    sq_msg_init (&msg);
    if (sq_msg_recv (&msg, s_pipe_out, ZMQ_DONTWAIT, 8)) {
        sq_msg_release (&msg);
        return NULL;
    }
    CHECK (msg.n == 3);
    const char *route = (const char *) sq_msg_data (&msg, 0);
    CHECK (sq_msg_size (&msg, 0) > 8 && route [0] == GOV_ROUTE_PEER
           && memcmp (route + 1, "tcp://d", 7) == 0);
    sq_chunk_t chunk;
    sq_errbuf_t err;
    CHECK (sq_chunk_decode (&chunk, sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &err) == 0);
    size_t len = sq_msg_size (&msg, 2);
    CHECK (len == (chunk.size - chunk.offset < S_CHUNK? chunk.size - chunk.offset: S_CHUNK));
    CHECK (chunk.key <= 1000);
    s_chunks_of [chunk.key]++;
    s_copy_t *copy = NULL;
    if (chunk.offset == 0) {
        CHECK (s_n_copies < 512);
        copy = &s_copies [s_n_copies++];
        copy->dest = route [8] - '0';
        CHECK (copy->dest >= 0 && copy->dest < S_DESTS);
        copy->transfer = chunk.transfer;
        copy->key = chunk.key;
    }
    else {
        for (size_t i = 0; i < s_n_copies && !copy; i++)
            if (s_copies [i].open && s_copies [i].transfer == chunk.transfer)
                copy = &s_copies [i];
        CHECK (copy && copy->key == chunk.key && copy->next == chunk.offset);
    }
    copy->next = chunk.offset + len;
    copy->open = copy->next < chunk.size;
    sq_msg_release (&msg);
    return copy;
}

//  Reads every chunk waiting; returns how many first chunks per destination.
static int
s_drain (int per_dest [S_DESTS])
{
    memset (per_dest, 0, S_DESTS * sizeof (int));
    int n = 0;
    s_copy_t *copy;
    while ((copy = s_next_chunk ()))
        if (copy->next <= S_CHUNK) {
            per_dest [copy->dest]++;
            n++;
        }
    return n;
}

//  One CREDIT for a copy, as the receiver would send it.
static void
s_give_credit (transfer_t *transfer, uint32_t id, uint64_t key)
{
    sq_credit_t credit = { .transfer = id, .key = key, .credits = 1 };
    sq_wbuf_t header;
    sq_wbuf_init (&header);
    sq_credit_encode (&header, &credit);
    CHECK (sq_send (s_credit_out, "D", 1, &header, NULL, 0, 0) == 0);
    sq_wbuf_release (&header);
    sq_msg_t msg;
    sq_msg_init (&msg);
    CHECK (sq_msg_recv (&msg, s_credit_in, 0, 8) == 0);
    transfer_on_credit (transfer, &msg);
    sq_msg_release (&msg);
}

static char s_endpoint [S_DESTS][32];

//  Same host (LCOPY): a stand-in for the stream directory's socket. d1 is
//  on this host (its files are kept, as its socket would), the others not.
static int s_handed = -1;
static int s_take_fd = -1;
static transfer_outcome_t s_outcome;
static uint64_t s_outcome_key;

static int
s_fake_hand (void *arg, const char *endpoint, size_t len, int fd, uint8_t *token)
{
    (void) arg;
    if (len != strlen ("tcp://d1:1") || memcmp (endpoint, "tcp://d1:1", len))
        return -1;
    memset (token, 7, 16);
    if (s_handed >= 0)
        close (s_handed);
    s_handed = dup (fd);
    return 0;
}

static int
s_fake_take (void *arg, const uint8_t *token)
{
    (void) arg;
    for (int i = 0; i < 16; i++)
        CHECK (token [i] == 9);
    int fd = s_take_fd;
    s_take_fd = -1;
    return fd;
}

static void
s_done (void *arg, uint64_t key, uint64_t size, transfer_outcome_t outcome, uint64_t us)
{
    (void) arg, (void) size, (void) us;
    s_outcome = outcome;
    s_outcome_key = key;
}

//  A message on the data socket, as the receive thread passes it on.
static void
s_feed (transfer_t *transfer, sq_wbuf_t *header)
{
    CHECK (sq_send (s_credit_out, "D", 1, header, NULL, 0, 0) == 0);
    sq_msg_t msg;
    sq_msg_init (&msg);
    CHECK (sq_msg_recv (&msg, s_credit_in, 0, 8) == 0);
    uint32_t type, req;
    CHECK (sq_proto_peek (sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &type, &req) == 0);
    if (type == SQ_MSG_CREDIT)
        transfer_on_credit (transfer, &msg);
    else
        transfer_on_lcopy (transfer, &msg);
    sq_msg_release (&msg);
}

static void
s_credit_n (transfer_t *transfer, uint32_t id, uint64_t key, uint32_t credits)
{
    sq_credit_t credit = { .transfer = id, .key = key, .credits = credits };
    sq_wbuf_t header;
    sq_wbuf_init (&header);
    sq_credit_encode (&header, &credit);
    s_feed (transfer, &header);
    sq_wbuf_release (&header);
}

//  The next message on the pipe: an LCOPY to d1 (its transfer id), or a
//  CREDIT to d3 (its credits); CHECKed.
static uint32_t
s_next_lcopy (uint64_t key)
{
    sq_msg_t msg;
    sq_msg_init (&msg);
    CHECK (sq_msg_recv (&msg, s_pipe_out, ZMQ_DONTWAIT, 8) == 0 && msg.n == 2);
    CHECK (sq_msg_size (&msg, 0) == 11 && memcmp (sq_msg_data (&msg, 0), "Ptcp://d1:1", 11) == 0);
    sq_lcopy_t lcopy;
    sq_errbuf_t err;
    CHECK (sq_lcopy_decode (&lcopy, sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &err) == 0);
    CHECK (lcopy.key == key && lcopy.size == 2 * S_CHUNK + 100 && lcopy.from == 1
           && lcopy.token.len == 16 && ((const uint8_t *) lcopy.token.ptr) [15] == 7
           && mpr_str_eq (lcopy.reply_to, "tcp://self:1"));
    uint32_t id = lcopy.transfer;
    sq_msg_release (&msg);
    return id;
}

static uint32_t
s_next_credit (uint32_t transfer)
{
    sq_msg_t msg;
    sq_msg_init (&msg);
    CHECK (sq_msg_recv (&msg, s_pipe_out, ZMQ_DONTWAIT, 8) == 0 && msg.n == 2);
    CHECK (sq_msg_size (&msg, 0) == 11 && memcmp (sq_msg_data (&msg, 0), "Ptcp://d3:1", 11) == 0);
    sq_credit_t credit;
    sq_errbuf_t err;
    CHECK (sq_credit_decode (&credit, sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &err) == 0);
    CHECK (credit.transfer == transfer);
    sq_msg_release (&msg);
    return credit.credits;
}

//  Sends copy of key to its end, a credit per chunk.
static void
s_finish (transfer_t *transfer, s_copy_t *copy)
{
    while (copy->open) {
        s_give_credit (transfer, copy->transfer, copy->key);
        CHECK (s_next_chunk () == copy);
    }
    CHECK (!s_next_chunk ());
}

int
main (void)
{
    setenv ("SQUALL_CHUNK_BYTES", "4096", 1);
    setenv ("SQUALL_WINDOW", "1", 1);
    void *ctx = zmq_ctx_new ();
    void *pipe_in = zmq_socket (ctx, ZMQ_PAIR);
    s_pipe_out = zmq_socket (ctx, ZMQ_PAIR);
    s_credit_in = zmq_socket (ctx, ZMQ_PAIR);
    s_credit_out = zmq_socket (ctx, ZMQ_PAIR);
    int hwm = 0;
    zmq_setsockopt (pipe_in, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt (s_pipe_out, ZMQ_RCVHWM, &hwm, sizeof hwm);
    CHECK (zmq_bind (s_pipe_out, "inproc://pipe") == 0 && zmq_connect (pipe_in, "inproc://pipe") == 0);
    CHECK (zmq_bind (s_credit_in, "inproc://credit") == 0
           && zmq_connect (s_credit_out, "inproc://credit") == 0);
    for (int d = 0; d < S_DESTS; d++)
        snprintf (s_endpoint [d], sizeof s_endpoint [d], "tcp://d%d:1", d);

    store_t *store = store_new ();
    CHECK (store);
    //  Objects 1..200 of two chunks (and a bit), 1000 of one chunk.
    static uint8_t bytes [2 * S_CHUNK + 100];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes [i] = (uint8_t) i;
    for (uint64_t key = 1; key <= 200; key++)
        CHECK (store_put (store, key, sq_blob_copy (bytes, sizeof bytes), "", 0) == 0);
    CHECK (store_put (store, 1000, sq_blob_copy (bytes, S_CHUNK), "", 0) == 0);
    transfer_args_t args = { .pipe = pipe_in, .store = store, .governor_id = 1,
                             .data_endpoint = "tcp://self:1", .done = s_done };
    transfer_t *transfer = transfer_new (&args);
    CHECK (transfer);

    //  d0 is asked for 20 copies, d1-d3 for 16 each, d4 for 4: 64 start
    //  (16 per destination for d0-d3), d0 keeps 4 waiting (its own limit),
    //  d4 all 4 (the governor's).
    uint64_t key = 1;
    int asked [S_DESTS] = { 20, 16, 16, 16, 4 };
    for (int d = 0; d < S_DESTS; d++)
        for (int i = 0; i < asked [d]; i++)
            CHECK (transfer_send (transfer, key++, 0, s_endpoint [d]) == 0);
    int per [S_DESTS];
    CHECK (s_drain (per) == TRANSFER_ACTIVE);
    CHECK (per [0] == 16 && per [1] == 16 && per [2] == 16 && per [3] == 16 && per [4] == 0);

    //  A one-chunk object goes at once all the same.
    CHECK (transfer_send (transfer, 1000, 0, s_endpoint [4]) == 0);
    s_copy_t *copy = s_next_chunk ();
    CHECK (copy && copy->key == 1000 && copy->dest == 4 && !copy->open && !s_next_chunk ());

    //  d0's copies end one by one (two credits each: second chunk, last
    //  chunk). Each frees a slot of d0's and one of the governor's: the
    //  first goes to d4, held back longest, not to d0's own waiting copies;
    //  then both get some.
    int started [S_DESTS] = { 0 };
    for (int round = 0; round < 4; round++) {
        copy = NULL;
        for (size_t i = 0; i < s_n_copies && !copy; i++)
            if (s_copies [i].dest == 0 && s_copies [i].open && s_copies [i].next == S_CHUNK)
                copy = &s_copies [i];
        CHECK (copy);
        s_give_credit (transfer, copy->transfer, copy->key);
        CHECK (s_next_chunk () == copy && copy->open);
        s_give_credit (transfer, copy->transfer, copy->key);
        CHECK (s_next_chunk () == copy && !copy->open);
        s_copy_t *next = s_next_chunk ();
        CHECK (next && next->next == S_CHUNK && !s_next_chunk ());
        CHECK (round > 0 || next->dest == 4);
        started [next->dest]++;
    }
    CHECK (started [0] >= 1 && started [4] >= 1 && started [0] + started [4] == 4);

    //  Then every copy to its end, credits answered as chunks come: each
    //  object is sent exactly once, whole.
    bool any = true;
    while (any) {
        any = false;
        for (size_t i = 0; i < s_n_copies; i++) {
            if (!s_copies [i].open)
                continue;
            any = true;
            s_give_credit (transfer, s_copies [i].transfer, s_copies [i].key);
            //  The copy's next chunk, then first chunks of copies it let start.
            CHECK (s_next_chunk () == &s_copies [i]);
            while (s_next_chunk ())
                ;
        }
    }
    for (uint64_t k = 1; k < key; k++)
        CHECK (s_chunks_of [k] == 3);
    CHECK (s_chunks_of [1000] == 1);
    CHECK (transfer_sending_idle (transfer));
    CHECK (transfer_tick (transfer) == -1);

    //  Same host: an object in a sealed memory file goes to d1 as LCOPY
    //  (its file handed over), no chunk; the receiver's CREDIT 0 ends it.
    //  (Written and sealed against writes as an executor's result is.)
    int memfd = memfd_create ("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK (memfd >= 0 && write (memfd, bytes, sizeof bytes) == (ssize_t) sizeof bytes);
    CHECK (fcntl (memfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW) == 0);
    sq_blob_t *seg = sq_blob_shm_adopt (memfd, sizeof bytes);
    CHECK (seg);
    CHECK (store_put (store, 500, sq_blob_ref (seg), "", 0) == 0);
    transfer_set_local (transfer, s_fake_hand, s_fake_take, NULL);
    CHECK (transfer_send (transfer, 500, 0, s_endpoint [1]) == 0);
    uint32_t id = s_next_lcopy (500);
    CHECK (s_handed >= 0 && !s_next_chunk () && !transfer_sending_idle (transfer));
    CHECK (transfer_tick (transfer) != -1);
    s_credit_n (transfer, id, 500, 0);
    CHECK (!s_next_chunk () && transfer_sending_idle (transfer));
    //  Not taken there (CREDIT > 0): the same transfer as chunks from 0.
    CHECK (transfer_send (transfer, 500, 0, s_endpoint [1]) == 0);
    id = s_next_lcopy (500);
    s_credit_n (transfer, id, 500, 1);
    copy = s_next_chunk ();
    CHECK (copy && copy->key == 500 && copy->transfer == id && copy->dest == 1 && copy->open);
    s_finish (transfer, copy);
    //  Not on this host (d2): chunks at once.
    CHECK (transfer_send (transfer, 500, 0, s_endpoint [2]) == 0);
    copy = s_next_chunk ();
    CHECK (copy && copy->key == 500 && copy->dest == 2);
    s_finish (transfer, copy);
    //  A copy in a plain blob (not a memory file) goes as chunks to d1.
    CHECK (transfer_send (transfer, 1, 0, s_endpoint [1]) == 0);
    copy = s_next_chunk ();
    CHECK (copy && copy->key == 1 && copy->dest == 1);
    s_finish (transfer, copy);
    //  A segment the governor made itself (a stored object copied into one
    //  for its executors, store_get_shared) is sealed against writes as an
    //  executor's result is: handed over too, no chunk.
    sq_blob_t *heap = sq_blob_copy (bytes, sizeof bytes);
    sq_blob_t *ours = heap? sq_blob_shm_copy (heap): NULL;
    sq_blob_unref (&heap);
    CHECK (ours);
    CHECK (fcntl (sq_blob_shm_fd (ours), F_GET_SEALS) & F_SEAL_WRITE);
    CHECK (store_put (store, 501, ours, "", 0) == 0);
    CHECK (transfer_send (transfer, 501, 0, s_endpoint [1]) == 0);
    id = s_next_lcopy (501);
    CHECK (!s_next_chunk () && !transfer_sending_idle (transfer));
    s_credit_n (transfer, id, 501, 0);
    CHECK (!s_next_chunk ());
    CHECK (transfer_sending_idle (transfer));

    //  The receiving end: LCOPYs from d3 for objects 4000 and 4001.
    sq_lcopy_t lc = {
        .transfer = 5, .key = 4000, .version = 2, .size = sizeof bytes,
        .content_type = { "", 0 }, .from = 9, .reply_to = { "tcp://d3:1", 10 },
        .token = { "\11\11\11\11\11\11\11\11\11\11\11\11\11\11\11\11", 16 }
    };
    sq_wbuf_t header;
    sq_wbuf_init (&header);
    //  No file came with the token: chunks asked for, nothing stored.
    sq_lcopy_encode (&header, &lc);
    s_feed (transfer, &header);
    CHECK (s_next_credit (5) > 0 && !store_has (store, 4000));
    //  A file of another size: the same.
    s_take_fd = dup (sq_blob_shm_fd (seg));
    lc.size++;
    sq_wbuf_reset (&header);
    sq_lcopy_encode (&header, &lc);
    s_feed (transfer, &header);
    CHECK (s_next_credit (5) > 0 && !store_has (store, 4000) && s_take_fd == -1);
    //  The file itself: stored (the same pages), CREDIT 0, LOCATED local.
    s_take_fd = dup (sq_blob_shm_fd (seg));
    lc.size--;
    sq_wbuf_reset (&header);
    sq_lcopy_encode (&header, &lc);
    s_feed (transfer, &header);
    CHECK (s_next_credit (5) == 0 && store_has (store, 4000));
    CHECK (s_outcome == TRANSFER_LOCATED_LOCAL && s_outcome_key == 4000);
    sq_blob_t *got = store_get (store, 4000, NULL);
    CHECK (got && sq_blob_size (got) == sizeof bytes
           && memcmp (sq_blob_data (got), bytes, sizeof bytes) == 0);
    //  The holder's copy dropped: the receiver's stays whole.
    sq_blob_unref (&seg);
    CHECK (store_remove (store, 500) == 0);
    got = store_get (store, 4000, NULL);
    CHECK (got && memcmp (sq_blob_data (got), bytes, sizeof bytes) == 0);
    //  Already here: CREDIT 0 and LOCATED again (plain).
    sq_wbuf_reset (&header);
    lc.transfer = 6;
    sq_lcopy_encode (&header, &lc);
    s_feed (transfer, &header);
    CHECK (s_next_credit (6) == 0 && s_outcome == TRANSFER_LOCATED);
    sq_wbuf_release (&header);
    close (s_handed);

    transfer_destroy (&transfer);
    CHECK (transfer == NULL);
    store_destroy (&store);
    zmq_close (pipe_in);
    zmq_close (s_pipe_out);
    zmq_close (s_credit_in);
    zmq_close (s_credit_out);
    zmq_ctx_term (ctx);
    printf ("test_governor_transfer: OK\n");
    return 0;
}
