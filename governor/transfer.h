/*  transfer: object copies between governors, chunked and flow-controlled
    by credits (both ends of every copy this governor takes part in).

    Sender: a SEND order becomes an outgoing copy. It sends CHUNKs of
    TRANSFER_CHUNK bytes, each a zero-copy slice of the stored blob (a
    ZeroMQ message holding a reference, no memcpy), to the receiver's data
    PULL, at most `window` chunks ahead of the receiver's CREDITs. At most
    TRANSFER_ACTIVE_DEST copies to one destination are under way at once,
    TRANSFER_ACTIVE in all; more wait in a FIFO per destination (bounded
    in all by TRANSFER_MAX_QUEUED), and destinations held back by the
    governor's limit take its freed slots in turn. An object of one chunk
    holds no slot and goes at once. Since every copy has its own window
    and the socket queues are FIFO, the chunks of copies under way
    interleave: a huge object delays a small one by at most a window per
    copy (never by its whole length, even when huge ones hold every slot),
    and never fills memory; a frozen receiver stalls its own copies only,
    until TRANSFER_STALL_MS ends them.

    Receiver: the first chunk (offset 0) decides where the object goes: to
    memory (after making room in the store for all of it), or, when the
    store says it is too big or the copies arriving already hold half of
    the memory limit, to a spill file. In memory the received frames are
    kept as they are and joined into one blob at the end (sq_blob_join):
    the bytes are never copied in user space, and no buffer of the whole
    object is allocated (fresh pages cost the kernel more than the copy);
    readers that need contiguous bytes flatten it then (store_get_flat).
    Chunks under TRANSFER_PART_MIN are copied into one buffer instead, and
    the spill file is written with pwrite. Every chunk is answered with
    CREDIT 1 to the sender's data endpoint (reply_to). A chunk out of
    order, past the end, of another size (every chunk but the last is the
    size of the first) or version, or a copy silent for TRANSFER_STALL_MS, is discarded
    (CREDIT 0 tells the sender to stop) and reported lost, so that the
    broker orders it again, from another holder if there is one. A
    complete copy is stored and reported located.

    Both ends run in the compute thread, which owns the store.

    Ownership: transfer_new borrows the pipe and the store (the caller's,
    outliving the transfer_t); transfer_destroy drops every copy. */
#ifndef GOV_TRANSFER_H
#define GOV_TRANSFER_H

#include <stdint.h>
#include "store.h"
#include "wire.h"

#define TRANSFER_CHUNK (4u << 20)       //  default chunk (bench/transfer)
#define TRANSFER_WINDOW 4               //  default chunks ahead per copy
#define TRANSFER_ACTIVE 64              //  outgoing copies under way
#define TRANSFER_ACTIVE_DEST 16         //  of which to one destination
#define TRANSFER_MAX_QUEUED 100000      //  outgoing copies waiting
#define TRANSFER_MAX_INCOMING 4096      //  incoming copies under way
#define TRANSFER_STALL_MS 20000         //  silence that ends a copy
#define TRANSFER_PART_MIN (256u << 10)  //  chunks kept as they came, not copied

typedef struct _transfer_t transfer_t;

//  A copy arrived and is in the store (located), or could not be had
//  (lost), or a client's upload is complete and in the store (uploaded).
//  duration_us: how long a located copy of several chunks took, from its
//  first chunk's arrival to its last, scaled to the whole object (the
//  first chunk's own time is not seen here); 0 otherwise. The broker
//  learns the cluster's copy rate from it (placement weighs copies).
typedef enum {
    TRANSFER_LOST, TRANSFER_LOCATED, TRANSFER_UPLOADED,
    TRANSFER_UPLOADED_LOCAL,            //  handed over on this host (transfer_put_local)
    TRANSFER_LOCATED_LOCAL              //  a copy handed over on this host (LCOPY)
} transfer_outcome_t;
typedef void (transfer_fn) (void *arg, uint64_t key, uint64_t size, transfer_outcome_t outcome,
                            uint64_t duration_us);

typedef struct {
    void *pipe;                 //  PAIR to the receive thread (borrowed)
    store_t *store;             //  borrowed
    uint32_t governor_id;
    const char *data_endpoint;  //  ours, for CREDITs to come back to
    transfer_fn *done;
    void *arg;
} transfer_args_t;

//  Where to answer a peer whose message came on the data socket (msg
//  frame 0 is the route 'D', plus the Z85 key it connected with under
//  CURVE): its data endpoint reply_to, named with that key. A new string,
//  NULL if out of memory or too long.
char *transfer_reply_address (sq_msg_t *msg, mpr_str_t reply_to);

//  Chunk size and window come from the environment when set
//  (SQUALL_CHUNK_BYTES, SQUALL_WINDOW: for measuring), else the defaults.
transfer_t *transfer_new (const transfer_args_t *args);
void transfer_destroy (transfer_t **self_p);
//  Starts (or queues) a copy of a stored object to the governor at
//  endpoint. 0, or -1 when it is not stored or too many copies wait.
int transfer_send (transfer_t *self, uint64_t key, uint32_t version,
                   const char *endpoint);
//  msg: [D][CHUNK][payload] and [D][CREDIT] from the data socket.
void transfer_on_chunk (transfer_t *self, sq_msg_t *msg);
void transfer_on_credit (transfer_t *self, sq_msg_t *msg);
//  msg: [D][LCOPY] from a governor of this host. Its memory file (handed to
//  our stream socket with the token the LCOPY carries) stored as the copy,
//  with no byte copied, and reported located (local); CREDIT 0 tells the
//  sender so. When it cannot be had (no file with that token, not a sealed
//  memory file of the size said), CREDIT asks for chunks instead.
void transfer_on_lcopy (transfer_t *self, sq_msg_t *msg);
//  Copies to and from governors of this host: `hand` hands a memory file
//  to the governor of data endpoint `endpoint` (`len` bytes) with a fresh
//  16-byte token (0, or -1: not on this host, or it cannot go);
//  `take` takes out the file handed to us with `token` (-1 if none). The
//  stream directory's socket (stream_hand_segment, stream_take_segment);
//  not set: every copy goes as chunks.
typedef int (transfer_hand_fn) (void *arg, const char *endpoint, size_t len, int fd,
                                uint8_t *token);
typedef int (transfer_take_fn) (void *arg, const uint8_t *token);
void transfer_set_local (transfer_t *self, transfer_hand_fn *hand, transfer_take_fn *take,
                         void *arg);
//  One range of a constant a client uploads (PUT on the serve socket), in
//  order from offset 0 (its frame is taken over or copied), stored and
//  reported uploaded when complete: the broker counts it only once both
//  this report and the client's SUBMIT naming this governor have come.
//  0, or an sq_err_t code with a message.
int transfer_put (transfer_t *self, const sq_put_t *put, zmq_msg_t *frame, char *err,
                  size_t err_size);
//  A whole upload handed over on this host (PUTLOCAL): `*blob` (a sealed
//  segment) stored under key and reported uploaded (local), the reference
//  taken over (*blob NULL) on success. 0, or an sq_err_t code with a
//  message (an object of that key here or arriving).
int transfer_put_local (transfer_t *self, uint64_t key, sq_blob_t **blob, mpr_str_t content_type,
                        char *err, size_t err_size);
//  The object was dropped here: incoming copies of it are cancelled.
void transfer_forget (transfer_t *self, uint64_t key);
//  True while a copy of key is arriving.
bool transfer_arriving (transfer_t *self, uint64_t key);
//  Ends stalled copies. Returns the ms until the next check is due, -1 if
//  no copy is under way.
long transfer_tick (transfer_t *self);
//  Bytes preallocated in memory for copies still arriving.
uint64_t transfer_incoming_bytes (transfer_t *self);
//  True when no copy is sent or waits to be, and no destination is kept
//  (what every send leaves behind once credited to its end).
bool transfer_sending_idle (transfer_t *self);

#endif
