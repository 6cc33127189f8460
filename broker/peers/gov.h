/*  gov: the broker's view of one connected governor: its identity on the
    ROUTER socket, its resources and load, the tasks assigned to it, and its
    outbox of batched messages (ASSIGN, SEND, DROP, STOP) flushed once per
    reactor turn, so that thousands of decisions cost a handful of messages.

    Ownership: the broker owns governors; tasks and objects point at them
    (task->gov, object locations) and are detached before a governor is
    destroyed (graph_forget_governor, requeue of its tasks). */
#ifndef SQ_GOV_H
#define SQ_GOV_H

#include "proto.h"
#include "idmap.h"
#include "graph.h"

//  Why a governor that said BYE ended: a clean leave, not a loss (logged at
//  info; the event log says "left", and `squall replay` does not count it
//  as a failure).
#define BX_GOODBYE "said goodbye"

//  Governors connected to one broker at once; a HELLO beyond is refused
//  (SQ_E_BUSY). The broker's table, the scheduler's and a drain's targets
//  are this size.
#define GOV_MAX 4096
//  Without --queue-ms: 2 ms of work covers a broker round trip.
#define GOV_QUEUE_US 2000

typedef struct {
    sq_wbuf_t elements;
    uint32_t count;
} gov_batch_t;

struct _gov_t {
    uint32_t id;
    char *name;
    uint8_t identity [256];
    size_t identity_size;
    int fd;                     //  connection's file descriptor, -1 unknown
    uint64_t incarnation;
    char *data_endpoint;
    char *serve_endpoint;
    uint32_t cpus;
    uint32_t n_resources;       //  named resources besides cpus
    sq_resource_t resources [SQ_MAX_RESOURCES];
    uint32_t slots;             //  tasks the broker may have assigned at once
    uint32_t prefetch_max;      //  the most queued beyond cpus (--prefetch)
    double queue_us;            //  queue this much of avg_task_us per cpu (--queue-ms)
    double avg_task_us;         //  recent task duration (EWMA), 0 unknown
    sq_idmap_t *tasks;          //  assigned and running tasks, by key
    //  Kept by gov_task_add / gov_task_remove: of those tasks, how many take
    //  no free cpu (actor hosts, counted in held_cpus instead; an actor's
    //  calls, which run on its cpus; stream readers, on their writer's),
    //  and the cpus actor hosts hold while their actors live. The
    //  scheduler counts neither as free.
    uint32_t n_apart;
    uint32_t held_cpus;
    //  Of those tasks, how many wait on tasks they submitted (SECEDED):
    //  counted apart too, and each adds a slot, so that their children can
    //  be assigned here (no deadlock of nested tasks on a full governor).
    uint32_t n_seceded;
    //  RESTART (requests.c): REFRESH messages sent it, and how many of them
    //  it said were done (REFRESHED)
    uint64_t refresh_sent;
    uint64_t refreshed;
    //  gpus (thousandths of a device) its assigned tasks take, whole
    //  devices and fractions apart: what the scheduler prefers governors
    //  with free devices by (gov_gpus_free).
    uint64_t gpus_whole;
    uint64_t gpus_frac;
    int32_t open_at;            //  scheduler.c: index among governors with a free slot, -1
    //  scheduler.c: how long until one of its running tasks frees a cpu
    //  (us, -1 never), judged from their run times at stall_at (us, monotonic).
    double stall_us;
    int64_t stall_at;
    //  Copies to this governor reported LOST and ordered again: object key
    //  -> (version << 32 | times), until one arrives or the object goes.
    sq_idmap_t *recopies;
    sq_load_t load;             //  last LOAD report
    int64_t last_recv;          //  ms, monotonic
    int64_t last_send;
    int64_t joined;             //  ms, wall clock
    uint64_t tasks_done;
    gov_batch_t assign, send, drop, stop, retract, stream, unstream;
    zmq_msg_t *payloads;        //  inline data attached to the ASSIGN batch
    size_t n_payloads;
    size_t cap_payloads;
    //  Security (docs/security.md): its public key (from the transport)
    //  and the secret its capabilities are made with.
    bool has_key;
    uint8_t key [32];
    char key_z85 [41];
    uint8_t secret [32];
    //  While it lists what it kept through a lost broker (reattach.c): the
    //  objects of unfinished tasks and the attempts it runs, settled at
    //  the end of the list. NULL otherwise.
    struct _inventory_t *inventory;
    //  Draining (drain.c): out of the scheduler, its work and the objects
    //  only it holds moving elsewhere; told LEAVE once nothing is left.
    bool draining;
    bool leaving;
    int64_t drain_started;      //  ms, monotonic
};

//  Takes the decoded HELLO; NULL if out of memory.
gov_t *gov_new (uint32_t id, const sq_hello_t *hello, const void *identity,
                size_t identity_size, uint32_t prefetch);
void gov_destroy (gov_t **self_p);
//  Amount of a named resource the governor has (cpus included).
uint64_t gov_resource (const gov_t *self, mpr_str_t name);
//  Whether the task's gpus (if any) are free there now, as far as the
//  broker can tell from what it assigned: whole devices nobody holds (the
//  fractions counted as packed onto as few devices as they fill), or room
//  for a fraction. Its governor decides device by device; this only
//  steers a task away from one whose devices are taken.
bool gov_gpus_free (const gov_t *self, const task_t *task);
//  Adds an assigned task to the governor's tasks, or takes one out (NULL
//  if it was not there); these keep n_apart and held_cpus true. 0, or -1
//  if it is there already or out of memory.
int gov_task_add (gov_t *self, task_t *task);
task_t *gov_task_remove (gov_t *self, uint64_t key);
//  A running task gave its cpus back to wait on tasks it submitted
//  (seceded true, SQ_EV_SECEDED) or took them again (false).
void gov_task_secede (gov_t *self, task_t *task, bool seceded);
//  Whether the broker may assign one more task to the governor.
static inline bool
gov_open (const gov_t *self)
{
    return sq_idmap_size (self->tasks) < (size_t) self->slots + self->n_seceded;
}
//  Attaches a payload frame to the pending ASSIGN; returns its index
//  (1-based, as in the protocol) or -1.
int gov_attach (gov_t *self, sq_blob_t *blob);
//  Learns from a finished task how long tasks take here, and sizes the
//  queue of assigned tasks to cover about two milliseconds of work.
void gov_note_duration (gov_t *self, uint64_t duration_us);
bool gov_has_output (const gov_t *self);
//  Sends every non-empty batch over the router. 0, or -1 if the governor
//  could not be reached (gone, or not reading).
int gov_flush (gov_t *self, void *router, int64_t now);

//  Orders, batched until the next flush (docs/protocol.md section 9).
//  DROP an object; STOP or RETRACT a task attempt; SEND a copy to `to`.
void gov_order_drop (gov_t *self, uint64_t key);
void gov_order_stop (gov_t *self, uint64_t key, uint32_t attempt);
void gov_order_retract (gov_t *self, uint64_t key, uint32_t attempt);
void gov_order_send (gov_t *self, uint64_t key, uint32_t version, const gov_t *to);
//  STREAM: the consumer task on `to` reads the stream this governor writes
//  (producer attempt `version`); UNSTREAM: that consumer will not.
void gov_order_stream (gov_t *self, uint64_t key, uint32_t version, uint64_t consumer,
                       const gov_t *to);
void gov_order_unstream (gov_t *self, uint64_t key, uint32_t version, uint64_t consumer);

#endif
