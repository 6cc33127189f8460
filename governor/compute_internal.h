/*  compute_internal: the compute thread's state, shared by the files of
    that one thread (compute.c: the loop and dispatch; compute_tasks.c: the
    task queue and resources; compute_batch.c: the UPDATE batch and LOAD).
    Only the compute thread touches a compute_t: nothing here is locked.
    Not for any other file of the governor (compute.h is its interface).

    Ownership: a compute_t owns every task_t in tasks (and the lists in
    waiters and orders), the store, transfers, streams, executors and the
    pending UPDATE; compute_destroy (compute.c) frees them all. */
#ifndef GOV_COMPUTE_INTERNAL_H
#define GOV_COMPUTE_INTERNAL_H

#include "route.h"
#include "store.h"
#include "task.h"
#include "builtin.h"
#include "execute.h"
#include "pyexec.h"
#include "gpus.h"
#include "deadlines.h"
#include "transfer.h"
#include "stream.h"
#include "serve.h"
#include "tasklog.h"
#include "heap.h"
#include "balancer.h"
#include "cgroup.h"
#include "wire.h"
#include "idmap.h"
#include "log.h"
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

//  As in compute.h, which is not included: the compute_t's interface
//  (compute.c) includes this header, not the other way round.
typedef struct _compute_t compute_t;

#define S_MAX_QUEUED 1000000        //  tasks waiting or ready
#define S_MAX_PENDING_SENDS 1000000 //  SEND orders for objects not here yet
#define S_BATCH_EVENTS 2000
#define S_MAX_REFRESHING 64         //  REFRESHes awaiting their executors' end
#define S_BATCH_BYTES (4u << 20)
#define S_BATCH_FRAMES 60000        //  under SQ_MAX_FRAMES
#define S_READ_BURST 256            //  messages read before timers get a look
#define S_WAITPID_MS 5
#define S_PY_HOLD_NS 1000000ull     //  UPDATE held while Python tasks run
#define S_ERR_SIZE 8192
//  Nested tasks waiting on their children at once (s_secede): each keeps
//  its executor process.
#define S_SECEDED_MAX(cpus) (64u + 8u * (cpus))
#define S_MAX_DRAINING 4096          //  py tasks whose stream output drains

//  Tasks waiting for one object, or SEND orders waiting for one object
typedef struct {
    size_t n, cap;
    void **items;
} compute_list_t;

typedef struct {
    uint32_t version;
    uint32_t to;
    char *endpoint;
} compute_order_t;

//  A task without outputs that finished here leaves nothing in the store
//  to show it: its report may have gone to a broker that died, or that
//  restarted and did not know us yet. A reattach lists it as running and
//  reports its end again (compute.c s_inventory), so that it does not run
//  twice. The last S_RECENT_ENDS are kept.
#define S_RECENT_ENDS 256
typedef struct {
    uint64_t key;
    uint32_t attempt;
    uint64_t duration_us;
} compute_end_t;

struct _compute_t {
    void *pipe;
    balancer_load_t *load;
    uint32_t governor_id;
    uint32_t cpus;
    uint64_t inline_max;
    char *workdir;
    bool terminated;

    store_t *store;
    transfer_t *transfer;       //  chunked copies to and from peers
    stream_t *streams;          //  streams written and read here
    uint64_t memory_limit;
    char *data_endpoint;
    sq_idmap_t *tasks;          //  task key -> task, every live attempt
    sq_idmap_t *waiters;        //  object key -> compute_list_t of task_t
    sq_idmap_t *orders;         //  object key -> compute_list_t of compute_order_t
    size_t n_orders;
    task_t *ready_head, *ready_tail;
    //  Actors' calls, ready: they run on their actor's cpus, so nothing
    //  queued for cpus may hold them up.
    task_t *calls_head, *calls_tail;
    size_t n_queued;            //  waiting + ready
    size_t n_running;
    size_t n_piped;             //  of those, piped: not started yet
    uint64_t tasks_completed;   //  ran to an end here (finished or failed), for LOAD
    uint32_t cpus_used;
    uint32_t n_seceded;         //  running tasks that gave their cpus back
    //  RESTART (compute.c, s_refreshed): REFRESH messages received, and
    //  those whose retired executors have not all stopped, oldest first.
    uint64_t refreshes;
    struct {
        uint64_t seq;
        bool valid;             //  a REFRESH that did not decode retired nothing
        char tenant [SQ_MAX_NAME + 1];
    } refreshing [S_MAX_REFRESHING];
    size_t n_refreshing;
    bool has_broker_key;        //  keys: the broker's public key, for the
    uint8_t broker_key [32];    //  clients of tasks (squall.get_client())
    //  Named resources: what the governor offers, what running tasks hold.
    uint32_t n_res;
    const sq_resource_t *res;
    uint64_t res_used [SQ_MAX_RESOURCES];
    gpus_t *gpus;               //  devices (--gpus), NULL: none named
    uint64_t next_memcheck_ns;
    tasklog_t *tasklog;         //  every task's stdout and stderr
    bool piped_logged;          //  s_pipe: the task's log was started
    //  The cgroup the governor runs in (store_set_box), looked at while
    //  tasks run; NULL: none.
    cgroup_usage_t *box;
    uint64_t next_boxcheck_ns;
    deadlines_t *deadlines;
    //  py tasks that replied while their stream output drains (bounded:
    //  each holds its cpus meanwhile)
    task_t *draining [S_MAX_DRAINING];
    size_t n_draining;
    compute_end_t recent [S_RECENT_ENDS];      //  a ring (compute_end_t)
    size_t n_recent, recent_at;
    task_t **execs;             //  running execute tasks
    size_t n_execs, cap_execs;
    pyexec_t *pyexec;           //  Python executors of "py" tasks
    sandbox_t *sandbox;         //  who tasks run as

    //  Pending UPDATE
    sq_wbuf_t events;
    uint32_t n_events;
    zmq_msg_t *payloads;
    size_t n_payloads, cap_payloads;
    uint64_t payload_bytes;

    //  Load last published to the balance thread
    sq_load_t load_sent;

    zmq_pollitem_t *items;
    task_t **item_tasks;
    size_t cap_items;
    size_t n_exec_items;        //  pidfds, from items [1]
    size_t stream_at;           //  then the streams' pipes
    size_t n_stream_items;
    size_t n_py_items;          //  at the end of items
    uint64_t flushed_ns;        //  when the last UPDATE left
    uint64_t heap_bytes;        //  object bytes in memory at the last look
    uint64_t release_ns;        //  when to give freed memory back (0: nothing to give)
    char err [S_ERR_SIZE];
};

//  compute.c: an object just entered the store (its waiters, its orders)
void compute_object_stored (compute_t *self, uint64_t key);

#endif
