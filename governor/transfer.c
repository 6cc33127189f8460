/*  transfer: chunked copies, both ends.

    The sender's window and slots and the receiver's checks of every chunk
    are one protocol (docs/protocol.md section 10) and are kept together,
    so that a change to one end is read beside the other: over 800 lines
    for that reason. */
#include "transfer.h"
#include "grow.h"
#include "route.h"
#include "task.h"
#include "idmap.h"
#include "log.h"
#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_TICK_MS 1000
#define S_CANCELLED_RING 256

typedef struct _s_dest_t s_dest_t;

//  An outgoing copy
typedef struct _s_out_t s_out_t;
struct _s_out_t {
    uint32_t id;
    s_dest_t *dest;
    uint64_t key;
    uint32_t version;
    sq_blob_t *blob;            //  our reference: the store may drop it meanwhile
    char *content_type;
    char *endpoint;
    uint64_t offset;            //  next byte to send
    bool started;               //  chunk 0 sent (a 0-byte object has one)
    uint32_t credits;
    uint64_t last_ns;           //  last credit (or start)
    s_out_t *next;              //  in its destination's waiting FIFO
    bool local;                 //  handed over on this host (LCOPY), no slot held
};

//  A governor copies go to: its copies under way and waiting. A slow or
//  frozen receiver holds its own slots only (TRANSFER_ACTIVE_DEST), not
//  those of copies to others. Kept while it has either.
struct _s_dest_t {
    char *endpoint;
    size_t n_active;
    s_out_t *head, *tail;
    bool blocked;               //  in the governor's FIFO of destinations
    s_dest_t *next_blocked;     //  waiting for a slot of TRANSFER_ACTIVE
};

//  An incoming copy
typedef struct {
    uint64_t id;                //  from << 32 | transfer
    uint32_t from;
    uint32_t transfer;
    uint64_t key;
    uint32_t version;
    uint64_t size;
    uint64_t received;
    char *content_type;
    char *reply_to;
    //  Where the bytes go: the received chunks themselves, joined at the
    //  end (no copy); one buffer they are copied into (chunks under
    //  TRANSFER_PART_MIN, not worth a part each); or a spill file.
    sq_blob_t **parts;
    size_t n_parts, cap_parts;
    uint64_t part_size;         //  the first chunk's: every one's but the last
    sq_blob_t *blob;
    int fd;                     //  -1 if none
    char *path;
    bool reserved;              //  size counted in in_bytes
    uint64_t last_ns;
    uint64_t start_ns;
    bool upload;                //  PUT by a client, not a copy from a peer
} s_in_t;

struct _transfer_t {
    void *pipe;
    store_t *store;
    uint32_t governor_id;
    char *data_endpoint;
    transfer_fn *done;
    void *arg;
    size_t chunk;
    uint32_t window;

    transfer_hand_fn *hand;     //  our stream directory's socket, or NULL
    transfer_take_fn *take;
    void *local_arg;
    uint32_t next_id;
    sq_idmap_t *out;            //  transfer id -> s_out_t, under way
    size_t n_local;             //  of which hand-overs awaiting their answer
    size_t n_active;
    size_t n_queued;
    zhashx_t *dests;            //  endpoint -> s_dest_t
    s_dest_t *blocked_head, *blocked_tail;

    sq_idmap_t *in;             //  from << 32 | transfer -> s_in_t
    sq_idmap_t *in_keys;        //  object key -> s_in_t
    sq_idmap_t *uploads;        //  object key -> s_in_t, PUT by clients
    uint64_t in_bytes;
    uint64_t cancelled [S_CANCELLED_RING];
    size_t cancelled_next;
    uint64_t last_tick_ns;
};

static uint64_t
s_env (const char *name, uint64_t fallback, uint64_t min, uint64_t max)
{
    const char *text = getenv (name);
    if (!text || !*text)
        return fallback;
    char *end;
    unsigned long long v = strtoull (text, &end, 10);
    if (*end || v < min || v > max) {
        sq_warn ("ignoring %s=%s (%llu .. %llu)", name, text,
                 (unsigned long long) min, (unsigned long long) max);
        return fallback;
    }
    return v;
}

transfer_t *
transfer_new (const transfer_args_t *args)
{
    transfer_t *self = (transfer_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pipe = args->pipe;
    self->store = args->store;
    self->governor_id = args->governor_id;
    self->data_endpoint = strdup (args->data_endpoint? args->data_endpoint: "");
    self->done = args->done;
    self->arg = args->arg;
    self->chunk = (size_t) s_env ("SQUALL_CHUNK_BYTES", TRANSFER_CHUNK, 4096, SQ_CHUNK_MAX);
    self->window = (uint32_t) s_env ("SQUALL_WINDOW", TRANSFER_WINDOW, 1, 64);
    self->out = sq_idmap_new ();
    self->in = sq_idmap_new ();
    self->in_keys = sq_idmap_new ();
    self->uploads = sq_idmap_new ();
    self->dests = zhashx_new ();
    if (!self->data_endpoint || !self->out || !self->in || !self->in_keys || !self->uploads
    ||  !self->dests) {
        transfer_destroy (&self);
        return NULL;
    }
    return self;
}

static void
s_out_destroy (s_out_t **out_p)
{
    s_out_t *out = *out_p;
    sq_blob_unref (&out->blob);
    free (out->content_type);
    free (out->endpoint);
    free (out);
    *out_p = NULL;
}

static void
s_in_destroy (transfer_t *self, s_in_t **in_p)
{
    s_in_t *in = *in_p;
    if (in->reserved)
        self->in_bytes -= in->size;
    for (size_t i = 0; i < in->n_parts; i++)
        sq_blob_unref (&in->parts [i]);
    free (in->parts);
    sq_blob_unref (&in->blob);
    if (in->fd >= 0) {
        close (in->fd);
        unlink (in->path);
    }
    free (in->path);
    free (in->content_type);
    free (in->reply_to);
    free (in);
    *in_p = NULL;
}

void
transfer_destroy (transfer_t **self_p)
{
    transfer_t *self = *self_p;
    if (!self)
        return;
    size_t cursor = 0;
    void *item;
    while (self->out && (item = sq_idmap_next (self->out, &cursor, NULL))) {
        s_out_t *out = (s_out_t *) item;
        s_out_destroy (&out);
    }
    s_dest_t *dest;
    while (self->dests && (dest = (s_dest_t *) zhashx_first (self->dests))) {
        while (dest->head) {
            s_out_t *out = dest->head;
            dest->head = out->next;
            s_out_destroy (&out);
        }
        zhashx_delete (self->dests, dest->endpoint);
        free (dest->endpoint);
        free (dest);
    }
    zhashx_destroy (&self->dests);
    cursor = 0;
    while (self->in && (item = sq_idmap_next (self->in, &cursor, NULL))) {
        s_in_t *in = (s_in_t *) item;
        s_in_destroy (self, &in);
    }
    cursor = 0;
    while (self->uploads && (item = sq_idmap_next (self->uploads, &cursor, NULL))) {
        s_in_t *in = (s_in_t *) item;
        s_in_destroy (self, &in);
    }
    sq_idmap_destroy (&self->uploads);
    sq_idmap_destroy (&self->out);
    sq_idmap_destroy (&self->in);
    sq_idmap_destroy (&self->in_keys);
    free (self->data_endpoint);
    free (self);
    *self_p = NULL;
}

//  --------------------------------------------------------------------------
//  Sender

//  Sends chunks while the copy has credits. Returns true when the last
//  chunk has gone (the copy is over for us).
static bool
s_pump (transfer_t *self, s_out_t *out)
{
    uint64_t size = sq_blob_size (out->blob);
    char route [SQ_MAX_NAME + 2];
    int route_len = snprintf (route, sizeof route, "%c%s", GOV_ROUTE_PEER, out->endpoint);
    while (out->credits > 0 && (out->offset < size || !out->started)) {
        uint64_t len = size - out->offset;
        if (len > self->chunk)
            len = self->chunk;
        sq_chunk_t chunk = {
            .transfer = out->id, .key = out->key, .version = out->version,
            .offset = out->offset, .size = size,
            .content_type = { out->content_type, (uint32_t) strlen (out->content_type) },
            .from = self->governor_id,
            .reply_to = { self->data_endpoint, (uint32_t) strlen (self->data_endpoint) }
        };
        sq_wbuf_t header;
        sq_wbuf_init (&header);
        sq_chunk_encode (&header, &chunk);
        zmq_msg_t payload;
        int rc = sq_blob_msg_range (out->blob, (size_t) out->offset, (size_t) len, &payload);
        if (rc == 0)
            rc = sq_send (self->pipe, route, (size_t) route_len, &header, &payload, 1, 0);
        sq_wbuf_release (&header);
        if (rc) {
            sq_warn ("cannot send a chunk of %" PRIx64 ": %s", out->key, zmq_strerror (errno));
            return true;        //  the receiver stalls and reports it lost
        }
        out->started = true;
        out->offset += len;
        out->credits--;
    }
    return out->started && out->offset >= size;
}

//  Starts what waits for dest while it and the governor have slots. Held
//  back by the governor's limit, dest queues for the next slot freed.
static void
s_dest_start (transfer_t *self, s_dest_t *dest)
{
    while (dest->head && dest->n_active < TRANSFER_ACTIVE_DEST
       &&  self->n_active < TRANSFER_ACTIVE) {
        s_out_t *out = dest->head;
        dest->head = out->next;
        if (!dest->head)
            dest->tail = NULL;
        self->n_queued--;
        out->next = NULL;
        out->credits = self->window;
        out->last_ns = task_now_ns ();
        if (s_pump (self, out))
            s_out_destroy (&out);
        else
        if (sq_idmap_insert (self->out, out->id, out)) {
            sq_error ("out of memory: copy of %" PRIx64 " abandoned", out->key);
            s_out_destroy (&out);
        }
        else {
            dest->n_active++;
            self->n_active++;
        }
    }
    if (dest->head && dest->n_active < TRANSFER_ACTIVE_DEST && !dest->blocked) {
        dest->blocked = true;
        dest->next_blocked = NULL;
        if (self->blocked_tail)
            self->blocked_tail->next_blocked = dest;
        else
            self->blocked_head = dest;
        self->blocked_tail = dest;
    }
}

//  Forgets dest once nothing is left of it.
static void
s_dest_gc (transfer_t *self, s_dest_t *dest)
{
    if (dest->n_active == 0 && !dest->head && !dest->blocked) {
        zhashx_delete (self->dests, dest->endpoint);
        free (dest->endpoint);
        free (dest);
    }
}

//  An outgoing copy under way is over (done, cancelled or abandoned). Its
//  slot of the governor's goes first to the destinations that limit held
//  back, in turn (a busy destination must not keep it for itself), then
//  its destination's slot to what waits there.
static void
s_out_over (transfer_t *self, s_out_t *out)
{
    s_dest_t *dest = out->dest;
    sq_idmap_remove (self->out, out->id);
    s_out_destroy (&out);
    dest->n_active--;
    self->n_active--;
    while (self->blocked_head && self->n_active < TRANSFER_ACTIVE) {
        s_dest_t *next = self->blocked_head;
        self->blocked_head = next->next_blocked;
        if (!self->blocked_head)
            self->blocked_tail = NULL;
        next->blocked = false;
        s_dest_start (self, next);
        if (next != dest)
            s_dest_gc (self, next);
    }
    s_dest_start (self, dest);
    s_dest_gc (self, dest);
}

static int s_out_start (transfer_t *self, s_out_t *out);

//  Same host: an object in a sealed memory file goes to the receiver's
//  governor as that file, handed to its socket in the shared stream
//  directory, and named by an LCOPY over the data channel (CURVE). The
//  copy waits (no slot held) for the receiver's CREDIT: 0 when it took the
//  file, more when it did not (then it goes as chunks). False when it
//  cannot be handed over (not in a memory file, no such socket: another
//  host or another directory): the caller sends chunks.
static bool
s_hand_over (transfer_t *self, s_out_t *out)
{
    //  Only a file sealed against writes (F_SEAL_WRITE: every segment a
    //  store holds, whoever wrote it; sq_blob_shm_copy, _adopt) can
    //  be taken there: any other would be refused, a round trip lost.
    int fd = sq_blob_shm_fd (out->blob);
    int seals = fd >= 0? fcntl (fd, F_GET_SEALS): -1;     //  -1: not a memory file
    if (!self->hand || seals < 0 || !(seals & F_SEAL_WRITE) || sq_blob_size (out->blob) == 0
    ||  self->n_local >= TRANSFER_MAX_QUEUED)
        return false;
    //  The route's address: "K" and the receiver's key in Z85 under CURVE
    //  (route.h), then its data endpoint, which names its socket.
    const char *plain = out->endpoint [0] == 'K' && strlen (out->endpoint) > 41
                      ? out->endpoint + 41: out->endpoint;
    uint8_t token [16];
    if (self->hand (self->local_arg, plain, strlen (plain), fd, token))
        return false;
    sq_lcopy_t lcopy = {
        .transfer = out->id, .key = out->key, .version = out->version,
        .size = sq_blob_size (out->blob),
        .content_type = { out->content_type, (uint32_t) strlen (out->content_type) },
        .from = self->governor_id,
        .reply_to = { self->data_endpoint, (uint32_t) strlen (self->data_endpoint) },
        .token = { (const char *) token, sizeof token }
    };
    //  Waiting for its answer before it is asked.
    if (sq_idmap_insert (self->out, out->id, out))
        return false;
    char route [SQ_MAX_NAME + 50];
    int route_len = snprintf (route, sizeof route, "%c%s", GOV_ROUTE_PEER, out->endpoint);
    sq_wbuf_t header;
    sq_wbuf_init (&header);
    sq_lcopy_encode (&header, &lcopy);
    int rc = route_len > 0 && (size_t) route_len < sizeof route
           ? sq_send (self->pipe, route, (size_t) route_len, &header, NULL, 0, 0): -1;
    sq_wbuf_release (&header);
    if (rc) {
        //  The file handed over expires unclaimed at the receiver.
        sq_idmap_remove (self->out, out->id);
        sq_warn ("copy of %" PRIx64 ": chunks, not a hand-over: cannot send LCOPY", out->key);
        return false;
    }
    out->local = true;
    out->last_ns = task_now_ns ();
    self->n_local++;
    sq_debug ("copy %u of %" PRIx64 " handed over to %s", out->id, out->key, plain);
    return true;
}

int
transfer_send (transfer_t *self, uint64_t key, uint32_t version, const char *endpoint)
{
    const char *type = NULL;
    sq_blob_t *blob = store_get (self->store, key, &type);
    if (!blob || self->n_queued >= TRANSFER_MAX_QUEUED)
        return -1;
    s_out_t *out = (s_out_t *) calloc (1, sizeof *out);
    if (!out)
        return -1;
    out->id = ++self->next_id;
    if (out->id == 0)
        out->id = ++self->next_id;
    out->key = key;
    out->version = version;
    out->blob = sq_blob_ref (blob);
    out->content_type = strdup (type);
    out->endpoint = strdup (endpoint);
    if (!out->content_type || !out->endpoint) {
        s_out_destroy (&out);
        return -1;
    }
    if (s_hand_over (self, out))
        return 0;
    return s_out_start (self, out);
}

//  Sends out as chunks (at once when it is one chunk, else queued for a
//  slot). 0, or -1 (out destroyed) when out of memory.
static int
s_out_start (transfer_t *self, s_out_t *out)
{
    const char *endpoint = out->endpoint;
    //  One chunk is all of it: it holds no slot, so it goes now rather
    //  than behind big copies waiting for one (which may take minutes).
    if (sq_blob_size (out->blob) <= self->chunk) {
        out->credits = 1;
        s_pump (self, out);
        s_out_destroy (&out);
        return 0;
    }
    s_dest_t *dest = (s_dest_t *) zhashx_lookup (self->dests, endpoint);
    if (!dest) {
        dest = (s_dest_t *) calloc (1, sizeof *dest);
        if (dest && !(dest->endpoint = strdup (endpoint))) {
            free (dest);
            dest = NULL;
        }
        if (!dest || zhashx_insert (self->dests, endpoint, dest)) {
            if (dest)
                free (dest->endpoint);
            free (dest);
            s_out_destroy (&out);
            return -1;
        }
    }
    out->dest = dest;
    if (dest->tail)
        dest->tail->next = out;
    else
        dest->head = out;
    dest->tail = out;
    self->n_queued++;
    s_dest_start (self, dest);
    s_dest_gc (self, dest);
    return 0;
}

void
transfer_on_credit (transfer_t *self, sq_msg_t *msg)
{
    sq_credit_t credit;
    sq_errbuf_t err;
    if (msg->n != 2) {
        sq_warn ("CREDIT with payload frames; discarded");
        return;
    }
    if (sq_credit_decode (&credit, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        sq_warn ("bad CREDIT: %s", err.text);
        return;
    }
    s_out_t *out = (s_out_t *) sq_idmap_lookup (self->out, credit.transfer);
    if (!out || out->key != credit.key)
        return;                 //  a copy already over: late credit
    if (out->local) {
        //  The receiver's answer to LCOPY: taken (0), or chunks wanted.
        sq_idmap_remove (self->out, out->id);
        self->n_local--;
        out->local = false;
        if (credit.credits == 0) {
            //  Both now hold the pages: spilling ours frees nothing while
            //  the receiver keeps its (store_set_shared).
            store_set_shared (self->store, out->key, out->blob);
            s_out_destroy (&out);
        }
        else {
            sq_debug ("copy %u of %" PRIx64 ": not taken on this host; chunks", out->id, out->key);
            s_out_start (self, out);
        }
        return;
    }
    bool over = true;
    if (credit.credits > 0) {
        //  Never more than a window ahead, whatever the receiver says.
        uint64_t credits = (uint64_t) out->credits + credit.credits;
        out->credits = credits > self->window? self->window: (uint32_t) credits;
        out->last_ns = task_now_ns ();
        over = s_pump (self, out);
    }
    else
        sq_debug ("copy %u of %" PRIx64 " cancelled by the receiver", out->id, out->key);
    if (over)
        s_out_over (self, out);
}

//  --------------------------------------------------------------------------
//  Receiver

static void
s_report_timed (transfer_t *self, uint64_t key, uint64_t size, transfer_outcome_t outcome,
                uint64_t duration_us)
{
    if (self->done)
        self->done (self->arg, key, size, outcome, duration_us);
}

static void
s_report (transfer_t *self, uint64_t key, uint64_t size, transfer_outcome_t outcome)
{
    s_report_timed (self, key, size, outcome, 0);
}

static void
s_credit (transfer_t *self, const char *reply_to, uint32_t transfer, uint64_t key,
          uint32_t credits)
{
    char route [SQ_MAX_NAME + 2];
    int len = snprintf (route, sizeof route, "%c%s", GOV_ROUTE_PEER, reply_to);
    sq_credit_t credit = { .transfer = transfer, .key = key, .credits = credits };
    sq_wbuf_t header;
    sq_wbuf_init (&header);
    sq_credit_encode (&header, &credit);
    if (sq_send (self->pipe, route, (size_t) len, &header, NULL, 0, 0))
        sq_warn ("cannot pass CREDIT on: %s", zmq_strerror (errno));
    sq_wbuf_release (&header);
}

static bool
s_was_cancelled (transfer_t *self, uint64_t id)
{
    for (size_t i = 0; i < S_CANCELLED_RING; i++)
        if (self->cancelled [i] == id)
            return true;
    return false;
}

//  Ends an incoming copy: tells the sender to stop, forgets it, and
//  reports it lost unless `quiet` (another copy of it continues).
static void
s_in_abort (transfer_t *self, s_in_t *in, bool quiet, const char *why)
{
    if (in->upload) {
        sq_warn ("upload of %" PRIx64 " discarded: %s", in->key, why);
        sq_idmap_remove (self->uploads, in->key);
        s_in_destroy (self, &in);
        return;
    }
    sq_warn ("copy of %" PRIx64 " from governor %u discarded: %s", in->key, in->from, why);
    s_credit (self, in->reply_to, in->transfer, in->key, 0);
    self->cancelled [self->cancelled_next++ % S_CANCELLED_RING] = in->id;
    sq_idmap_remove (self->in, in->id);
    if (sq_idmap_lookup (self->in_keys, in->key) == in)
        sq_idmap_remove (self->in_keys, in->key);
    uint64_t key = in->key;
    s_in_destroy (self, &in);
    if (!quiet)
        s_report (self, key, 0, TRANSFER_LOST);
}

//  Where CREDITs for a copy go: the sender's data endpoint, with the key
//  its chunks came with when the connection is CURVE (msg frame 0 is the
//  route 'D' and that key in Z85, governor.h). NULL if out of memory.
char *
transfer_reply_address (sq_msg_t *msg, mpr_str_t reply_to)
{
    char address [SQ_MAX_NAME + 48];
    uint8_t key [32];
    const char *route = (const char *) sq_msg_data (msg, 0);
    char z85 [41];
    const uint8_t *from_key = NULL;
    if (sq_msg_size (msg, 0) == 41) {
        memcpy (z85, route + 1, 40);
        z85 [40] = 0;
        if (zmq_z85_decode (key, z85))
            from_key = key;
    }
    if (gov_peer_address (address, sizeof address, from_key, reply_to.ptr, reply_to.len) < 0)
        return NULL;
    return strdup (address);
}

//  First chunk of a copy (`len` bytes): makes its state and decides where
//  the bytes go. NULL when it is refused (reported as needed).
static s_in_t *
s_in_new (transfer_t *self, const sq_chunk_t *chunk, uint64_t id, size_t len, char *reply_to)
{
    s_in_t *in = (s_in_t *) calloc (1, sizeof *in);
    if (!in) {
        free (reply_to);
        return NULL;
    }
    in->id = id;
    in->from = chunk->from;
    in->transfer = chunk->transfer;
    in->key = chunk->key;
    in->version = chunk->version;
    in->size = chunk->size;
    in->fd = -1;
    in->content_type = mpr_strdup (chunk->content_type);
    in->reply_to = reply_to;
    in->last_ns = in->start_ns = task_now_ns ();
    in->part_size = len;
    if (!in->content_type || !in->reply_to) {
        free (in->content_type);
        free (in->reply_to);
        free (in);
        return NULL;
    }
    if (chunk->size > SIZE_MAX / 2)
        goto refused;
    //  Straight to disk when it is big, or when the copies already arriving
    //  would take memory past the limit (many at once must not add up).
    uint64_t limit = store_limit (self->store);
    if (store_too_big (self->store, chunk->size)
    ||  (limit && self->in_bytes + chunk->size > limit / 2)) {
        //  Straight to disk: assembled in a spill file, mapped at the end.
        char path [4096];
        if (store_spill_path (self->store, path, sizeof path) == 0
        &&  (in->path = strdup (path))
        &&  (in->fd = open (path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0
        &&  ftruncate (in->fd, (off_t) chunk->size) == 0)
            return in;
        sq_warn ("cannot make spill file for %" PRIx64 ": %s", chunk->key, strerror (errno));
        goto refused;
    }
    store_make_room (self->store, chunk->size);
    if (len < TRANSFER_PART_MIN && !(in->blob = sq_blob_new ((size_t) chunk->size)))
        goto refused;
    in->reserved = true;
    self->in_bytes += in->size;
    return in;
refused:
    if (chunk->from == 0 && chunk->transfer == 0) {
        s_in_destroy (self, &in);       //  an upload: the caller answers
        return NULL;
    }
    s_credit (self, in->reply_to, in->transfer, in->key, 0);
    self->cancelled [self->cancelled_next++ % S_CANCELLED_RING] = id;
    s_in_destroy (self, &in);
    s_report (self, chunk->key, 0, TRANSFER_LOST);
    return NULL;
}

static int
s_pwrite_all (int fd, const void *data, size_t size, uint64_t offset)
{
    const char *p = (const char *) data;
    while (size > 0) {
        ssize_t n = pwrite (fd, p, size, (off_t) offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        size -= (size_t) n;
        offset += (uint64_t) n;
    }
    return 0;
}

//  Takes the next chunk's bytes: the frame itself becomes a part, or is
//  copied into the buffer or the file. NULL, or why the copy must end.
static const char *
s_in_append (s_in_t *in, zmq_msg_t *frame)
{
    size_t len = zmq_msg_size (frame);
    if (len > SQ_CHUNK_MAX || len > in->size - in->received)
        return "a chunk past the end of the object";
    if (len == 0 && in->size > 0)
        return "an empty chunk";
    //  Equal chunks bound the parts (and their overhead) by the size.
    if (len != in->part_size && len != in->size - in->received)
        return "a chunk of another size";
    if (in->fd >= 0) {
        if (s_pwrite_all (in->fd, zmq_msg_data (frame), len, in->received))
            return "cannot write the spill file";
    }
    else
    if (in->blob)
        memcpy ((char *) sq_blob_wdata (in->blob) + in->received, zmq_msg_data (frame), len);
    else {
        if (in->n_parts == in->cap_parts
        &&  sq_grow ((void **) &in->parts, &in->cap_parts, in->n_parts + 1, sizeof *in->parts, 16, SIZE_MAX))
            return "out of memory";
        sq_blob_t *part = sq_blob_from_msg (frame);
        zmq_msg_init (frame);
        if (!part)
            return "out of memory";
        in->parts [in->n_parts++] = part;
    }
    in->received += len;
    in->last_ns = task_now_ns ();
    return NULL;
}

//  The complete object's blob (the caller's), NULL if it cannot be had.
static sq_blob_t *
s_in_take (transfer_t *self, s_in_t *in)
{
    sq_blob_t *blob = NULL;
    if (in->fd >= 0) {
        close (in->fd);
        in->fd = -1;
        blob = sq_blob_map_file (in->path);
        unlink (in->path);
    }
    else
    if (in->blob) {
        blob = in->blob;
        in->blob = NULL;
    }
    else {
        blob = sq_blob_join (in->parts, in->n_parts);
        in->n_parts = 0;
    }
    if (in->reserved) {
        in->reserved = false;
        self->in_bytes -= in->size;
    }
    return blob;
}

//  The last byte arrived: into the store, reported located.
static void
s_in_complete (transfer_t *self, s_in_t *in)
{
    sq_idmap_remove (self->in, in->id);
    if (sq_idmap_lookup (self->in_keys, in->key) == in)
        sq_idmap_remove (self->in_keys, in->key);
    sq_blob_t *blob = s_in_take (self, in);
    uint64_t key = in->key, size = in->size;
    uint64_t ns = task_now_ns () - in->start_ns;
    sq_debug ("copy of %" PRIx64 " from governor %u: %" PRIu64 " bytes in %.1f ms", key,
              in->from, size, ns / 1e6);
    //  The clock started with the first chunk in: the rest took `ns`.
    uint64_t rest = size > in->part_size? size - in->part_size: 0;
    uint64_t duration_us = rest && !in->upload? 1 + (uint64_t) (ns / 1e3 * ((double) size / rest)): 0;
    bool ok = blob && store_put (self->store, key, blob, in->content_type,
                                 strlen (in->content_type)) == 0;
    if (ok)
        store_set_version (self->store, key, in->version);
    s_in_destroy (self, &in);
    if (!ok)
        sq_error ("cannot store the copy of %" PRIx64 ": %s", key, strerror (errno));
    s_report_timed (self, key, size, ok? TRANSFER_LOCATED: TRANSFER_LOST, ok? duration_us: 0);
}

void
transfer_on_chunk (transfer_t *self, sq_msg_t *msg)
{
    sq_chunk_t chunk;
    sq_errbuf_t err;
    if (msg->n != 3 || msg->truncated) {
        sq_warn ("CHUNK with %zu frames instead of 2; discarded", msg->n - 1);
        return;
    }
    if (sq_chunk_decode (&chunk, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        sq_warn ("bad CHUNK: %s", err.text);
        return;
    }
    if (chunk.reply_to.len < 7 || memcmp (chunk.reply_to.ptr, "tcp://", 6)) {
        sq_warn ("CHUNK with reply_to '%.*s' refused", (int) chunk.reply_to.len,
                 chunk.reply_to.ptr);
        return;
    }
    size_t len = sq_msg_size (msg, 2);
    uint64_t id = (uint64_t) chunk.from << 32 | chunk.transfer;
    s_in_t *in = (s_in_t *) sq_idmap_lookup (self->in, id);
    if (!in) {
        if (s_was_cancelled (self, id))
            return;             //  the tail of a copy we ended
        char *reply_to = transfer_reply_address (msg, chunk.reply_to);
        if (!reply_to)
            return;
        if (store_has (self->store, chunk.key)) {
            //  Already here (another copy won): stop this one, and say
            //  located again so that the broker's order is answered.
            s_credit (self, reply_to, chunk.transfer, chunk.key, 0);
            self->cancelled [self->cancelled_next++ % S_CANCELLED_RING] = id;
            free (reply_to);
            s_report (self, chunk.key, sq_blob_size (store_get (self->store, chunk.key, NULL)), TRANSFER_LOCATED);
            return;
        }
        s_in_t *other = (s_in_t *) sq_idmap_lookup (self->in_keys, chunk.key);
        if (chunk.offset != 0 || (other && other->version >= chunk.version)) {
            //  A copy we never saw start (its head was lost), or a second
            //  copy of what already arrives: stop it.
            s_credit (self, reply_to, chunk.transfer, chunk.key, 0);
            self->cancelled [self->cancelled_next++ % S_CANCELLED_RING] = id;
            free (reply_to);
            if (chunk.offset != 0 && !other)
                s_report (self, chunk.key, 0, TRANSFER_LOST);
            return;
        }
        free (reply_to);
        if (other)              //  from an older attempt: the newer one wins
            s_in_abort (self, other, true, "a copy of a newer version arrives");
        if (len == chunk.size && len <= SQ_CHUNK_MAX && !store_too_big (self->store, len)) {
            //  The whole object in one chunk: the received frame becomes
            //  the stored blob, no copy at all.
            store_make_room (self->store, len);
            sq_blob_t *blob = sq_blob_from_msg (&msg->frames [2]);
            zmq_msg_init (&msg->frames [2]);
            bool ok = blob && store_put (self->store, chunk.key, blob, chunk.content_type.ptr,
                                         chunk.content_type.len) == 0;
            if (ok)
                store_set_version (self->store, chunk.key, chunk.version);
            s_report (self, chunk.key, chunk.size, ok? TRANSFER_LOCATED: TRANSFER_LOST);
            return;
        }
        if (sq_idmap_size (self->in) >= TRANSFER_MAX_INCOMING) {
            sq_warn ("too many copies arriving; refusing one of %" PRIx64, chunk.key);
            return;
        }
        in = s_in_new (self, &chunk, id, len, transfer_reply_address (msg, chunk.reply_to));
        if (!in)
            return;
        if (sq_idmap_insert (self->in, id, in) || sq_idmap_insert (self->in_keys, in->key, in)) {
            sq_idmap_remove (self->in, id);
            s_in_destroy (self, &in);
            s_report (self, chunk.key, 0, TRANSFER_LOST);
            return;
        }
    }
    if (chunk.key != in->key || chunk.version != in->version || chunk.size != in->size) {
        s_in_abort (self, in, false, "a chunk of another object, version or size");
        return;
    }
    if (chunk.offset != in->received) {
        s_in_abort (self, in, false, "a chunk out of order (a part is missing)");
        return;
    }
    const char *why = s_in_append (in, &msg->frames [2]);
    if (why) {
        s_in_abort (self, in, false, why);
        return;
    }
    if (in->received == in->size)
        s_in_complete (self, in);
    else
        s_credit (self, in->reply_to, in->transfer, in->key, 1);
}

void
transfer_on_lcopy (transfer_t *self, sq_msg_t *msg)
{
    sq_lcopy_t lcopy;
    sq_errbuf_t err;
    if (msg->n != 2) {
        sq_warn ("LCOPY with payload frames; discarded");
        return;
    }
    if (sq_lcopy_decode (&lcopy, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        sq_warn ("bad LCOPY: %s", err.text);
        return;
    }
    if (lcopy.reply_to.len < 7 || memcmp (lcopy.reply_to.ptr, "tcp://", 6)) {
        sq_warn ("LCOPY with reply_to '%.*s' refused", (int) lcopy.reply_to.len,
                 lcopy.reply_to.ptr);
        return;
    }
    char *reply_to = transfer_reply_address (msg, lcopy.reply_to);
    if (!reply_to)
        return;
    //  Taken out now, whatever follows: a file left unclaimed would wait
    //  for its expiry.
    int fd = self->take? self->take (self->local_arg, (const uint8_t *) lcopy.token.ptr): -1;
    uint64_t id = (uint64_t) lcopy.from << 32 | lcopy.transfer;
    s_in_t *other = (s_in_t *) sq_idmap_lookup (self->in_keys, lcopy.key);
    if (store_has (self->store, lcopy.key) || (other && other->version >= lcopy.version)) {
        //  Already here, or arriving: as for a CHUNK (transfer_on_chunk).
        if (fd >= 0)
            close (fd);
        s_credit (self, reply_to, lcopy.transfer, lcopy.key, 0);
        self->cancelled [self->cancelled_next++ % S_CANCELLED_RING] = id;
        free (reply_to);
        if (!other)
            s_report (self, lcopy.key, sq_blob_size (store_get (self->store, lcopy.key, NULL)),
                      TRANSFER_LOCATED);
        return;
    }
    sq_blob_t *blob = NULL;
    if (fd >= 0 && lcopy.size <= SIZE_MAX)
        store_make_room (self->store, lcopy.size);
    const char *why = fd < 0? "no memory file came with its token"
                    : lcopy.size > SIZE_MAX? "too big"
                    : !(blob = sq_blob_shm_adopt (fd, (size_t) lcopy.size))
                    ? "not a sealed memory file of its size": NULL;
    //  Held across the put to mark it shared with the sender (the put takes
    //  it over).
    sq_blob_t *taken = blob? sq_blob_ref (blob): NULL;
    bool ok = !why && store_put (self->store, lcopy.key, blob, lcopy.content_type.ptr,
                                 lcopy.content_type.len) == 0;
    blob = NULL;                //  the store's, even on failure (sq_blob_shm_adopt
                                //  closed fd on its own failure)
    if (ok)
        store_set_shared (self->store, lcopy.key, taken);
    sq_blob_unref (&taken);
    if (!ok) {
        //  Chunks then, from offset 0 (the sender waits for this credit).
        sq_warn ("copy of %" PRIx64 " from governor %u: chunks, not a hand-over: %s",
                 lcopy.key, lcopy.from, why? why: "cannot store it");
        s_credit (self, reply_to, lcopy.transfer, lcopy.key, self->window);
        free (reply_to);
        return;
    }
    if (other)                  //  from an older attempt: the newer one wins
        s_in_abort (self, other, true, "a copy of a newer version arrives");
    store_set_version (self->store, lcopy.key, lcopy.version);
    s_credit (self, reply_to, lcopy.transfer, lcopy.key, 0);
    free (reply_to);
    sq_debug ("copy of %" PRIx64 " from governor %u: %" PRIu64 " bytes handed over", lcopy.key,
              lcopy.from, lcopy.size);
    s_report (self, lcopy.key, lcopy.size, TRANSFER_LOCATED_LOCAL);
}

void
transfer_set_local (transfer_t *self, transfer_hand_fn *hand, transfer_take_fn *take, void *arg)
{
    self->hand = hand;
    self->take = take;
    self->local_arg = arg;
}

int
transfer_put (transfer_t *self, const sq_put_t *put, zmq_msg_t *frame, char *err,
              size_t err_size)
{
    s_in_t *in = (s_in_t *) sq_idmap_lookup (self->uploads, put->key);
    if (!in) {
        if (store_has (self->store, put->key) || transfer_arriving (self, put->key)) {
            snprintf (err, err_size, "object %u/%u exists on this governor",
                      sq_key_session (put->key), sq_key_id (put->key));
            return SQ_E_DUPLICATE_ID;
        }
        if (put->offset != 0) {
            snprintf (err, err_size, "an upload starts at offset 0");
            return SQ_E_INVALID;
        }
        if (sq_idmap_size (self->uploads) >= TRANSFER_MAX_INCOMING) {
            snprintf (err, err_size, "too many uploads under way");
            return SQ_E_BUSY;
        }
        //  An upload is a copy from "governor 0, transfer 0" that answers
        //  its client instead of sending credits.
        sq_chunk_t chunk = {
            .key = put->key, .size = put->size, .content_type = put->content_type,
            .reply_to = { "client", 6 }
        };
        in = s_in_new (self, &chunk, put->key, zmq_msg_size (frame), strdup ("client"));
        if (!in) {
            snprintf (err, err_size, "no room for %" PRIu64 " bytes on this governor", put->size);
            return SQ_E_NOMEM;
        }
        in->upload = true;
        if (sq_idmap_insert (self->uploads, put->key, in)) {
            s_in_destroy (self, &in);
            snprintf (err, err_size, "out of memory");
            return SQ_E_NOMEM;
        }
    }
    const char *why = NULL;
    if (put->size != in->size)
        why = "a range with another size";
    else
    if (put->offset != in->received)
        why = "a range out of order";
    else
        why = s_in_append (in, frame);
    if (why) {
        snprintf (err, err_size, "upload of %u/%u discarded: %s", sq_key_session (put->key),
                  sq_key_id (put->key), why);
        s_in_abort (self, in, true, why);
        return SQ_E_INVALID;
    }
    if (in->received == in->size) {
        sq_idmap_remove (self->uploads, in->key);
        sq_blob_t *blob = s_in_take (self, in);
        uint64_t key = in->key, size = in->size;
        bool ok = blob && store_put (self->store, key, blob, in->content_type,
                                     strlen (in->content_type)) == 0;
        s_in_destroy (self, &in);
        if (!ok) {
            snprintf (err, err_size, "cannot store the upload");
            return SQ_E_NOMEM;
        }
        s_report (self, key, size, TRANSFER_UPLOADED);
    }
    return 0;
}

int
transfer_put_local (transfer_t *self, uint64_t key, sq_blob_t **blob, mpr_str_t content_type,
                    char *err, size_t err_size)
{
    if (store_has (self->store, key) || transfer_arriving (self, key)
    ||  sq_idmap_lookup (self->uploads, key)) {
        snprintf (err, err_size, "object %u/%u exists on this governor",
                  sq_key_session (key), sq_key_id (key));
        return SQ_E_DUPLICATE_ID;
    }
    uint64_t size = sq_blob_size (*blob);
    sq_blob_t *taken = *blob;
    *blob = NULL;               //  the store's, even on failure
    if (store_put (self->store, key, taken, content_type.ptr, content_type.len)) {
        snprintf (err, err_size, "cannot store the upload");
        return SQ_E_NOMEM;
    }
    s_report (self, key, size, TRANSFER_UPLOADED_LOCAL);
    return 0;
}

void
transfer_forget (transfer_t *self, uint64_t key)
{
    s_in_t *up = (s_in_t *) sq_idmap_lookup (self->uploads, key);
    if (up)
        s_in_abort (self, up, true, "the object was dropped");
    s_in_t *in = (s_in_t *) sq_idmap_lookup (self->in_keys, key);
    if (in)
        s_in_abort (self, in, true, "the object was dropped");
}

bool
transfer_arriving (transfer_t *self, uint64_t key)
{
    return sq_idmap_lookup (self->in_keys, key) != NULL;
}

long
transfer_tick (transfer_t *self)
{
    if (sq_idmap_size (self->in) == 0 && self->n_active == 0
    &&  sq_idmap_size (self->uploads) == 0 && self->n_local == 0)
        return -1;
    uint64_t now = task_now_ns ();
    if (now - self->last_tick_ns >= (uint64_t) S_TICK_MS * 1000000ull) {
        self->last_tick_ns = now;
        uint64_t stall = (uint64_t) TRANSFER_STALL_MS * 1000000ull;
        //  Collect first: ending a copy changes the maps.
        void *late [64];
        size_t n_late = 0, cursor = 0;
        void *item;
        while (n_late < 64 && (item = sq_idmap_next (self->in, &cursor, NULL)))
            if (now - ((s_in_t *) item)->last_ns > stall)
                late [n_late++] = item;
        for (size_t i = 0; i < n_late; i++)
            s_in_abort (self, (s_in_t *) late [i], false, "the sender went silent");
        n_late = 0;
        cursor = 0;
        while (n_late < 64 && (item = sq_idmap_next (self->uploads, &cursor, NULL)))
            if (now - ((s_in_t *) item)->last_ns > stall)
                late [n_late++] = item;
        for (size_t i = 0; i < n_late; i++)
            s_in_abort (self, (s_in_t *) late [i], true, "the client went silent");
        n_late = 0;
        cursor = 0;
        while (n_late < 64 && (item = sq_idmap_next (self->out, &cursor, NULL)))
            if (now - ((s_out_t *) item)->last_ns > stall)
                late [n_late++] = item;
        for (size_t i = 0; i < n_late; i++) {
            s_out_t *out = (s_out_t *) late [i];
            sq_warn ("copy of %" PRIx64 " to %s abandoned: the receiver went silent",
                     out->key, out->endpoint);
            if (out->local) {
                sq_idmap_remove (self->out, out->id);
                self->n_local--;
                s_out_destroy (&out);
            }
            else
                s_out_over (self, out);
        }
    }
    return S_TICK_MS;
}

uint64_t
transfer_incoming_bytes (transfer_t *self)
{
    return self->in_bytes;
}

bool
transfer_sending_idle (transfer_t *self)
{
    return self->n_active == 0 && self->n_queued == 0 && zhashx_size (self->dests) == 0
        && !self->blocked_head && self->n_local == 0;
}
