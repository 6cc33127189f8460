/*  graph: the broker's tasks, data objects and sessions, and every change of
    their state (the task and object tables of seed 000).

    The graph knows nothing of sockets. Effects that need messages (a task
    became ready, an assigned task must be stopped, an object must be dropped
    from governors, a task or object reached a final state) are reported
    through the hooks the broker installs.

    Ownership: the graph owns every task, object and session in it. Tasks
    and object records live until their session closes (waits on finished
    ids are answered from them, and they are the lineage that recomputes a
    lost object). An object's *copies* are released (dropped on governors,
    inline bytes freed) as soon as nobody keeps it and no unfinished task
    needs it.

    Keys: a task or object is known cluster-wide by sq_key (session, id).
*/
#ifndef SQ_GRAPH_H
#define SQ_GRAPH_H

#include "proto.h"
#include "idmap.h"
#include "blob.h"

typedef struct _graph_t graph_t;
typedef struct _task_t task_t;
typedef struct _object_t object_t;
typedef struct _session_t session_t;
typedef struct _gov_t gov_t;

typedef enum {
    TASK_WAITING,               //  some input not finished
    TASK_READY,                 //  inputs finished, in the scheduler's queue
    TASK_ASSIGNED,              //  sent to a governor
    TASK_RUNNING,               //  the governor said it started
    TASK_FINISHED,
    TASK_FAILED,
    TASK_CANCELLED,
    TASK_STATE_COUNT_
} task_state_t;

typedef enum {
    OBJ_UNFINISHED,
    OBJ_FINISHED,
    OBJ_FAILED                  //  producer failed or was cancelled
} object_state_t;

//  A failure shared by a failed task and everything downstream of it.
typedef struct {
    uint32_t refs;
    uint32_t root;              //  id of the task that failed first
    int code;                   //  SQ_E_TASK_FAILED, SQ_E_CANCELLED, SQ_E_LOST
    char *message;
} failure_t;

//  Where copies of an object are (governor ids), and where copies are on
//  their way (seed 000's "assigned" vs "located").
typedef struct {
    gov_t *gov;
    bool arrived;
} location_t;

struct _object_t {
    uint64_t key;
    session_t *session;
    task_t *producer;           //  NULL for constants
    uint32_t producer_output;   //  index among the producer's outputs
    uint8_t state;              //  object_state_t
    bool keep;
    uint32_t version;           //  producer attempt that made the copies
    uint64_t size;
    char *content_type;         //  NULL means ""
    sq_blob_t *data;            //  inline bytes held by the broker, or NULL
    failure_t *failure;         //  OBJ_FAILED
    task_t **consumers;
    uint32_t n_consumers;
    uint32_t cap_consumers;
    uint32_t pending;           //  consumers not yet done
    location_t *locations;      //  -> location_inline until a second one
    uint32_t n_locations;
    uint32_t cap_locations;
    //  Most objects have one consumer and one copy: keeping the first of
    //  each inline saves two allocations per object (graph.c s_grow).
    task_t *consumer_inline;
    location_t location_inline;
    bool free_queued;           //  on the graph's list of objects to check
    //  Unneeded: its copies were dropped everywhere. The record stays (until
    //  the session closes) as lineage: if a later object that depends on it
    //  is lost, it can be recomputed from here.
    bool released;
};

struct _task_t {
    uint64_t key;
    session_t *session;
    uint8_t state;              //  task_state_t
    uint8_t kind;               //  sq_kind_t
    bool retracting;            //  RETRACT sent, answer not yet in
    uint32_t attempt;
    uint32_t n_inputs;
    uint32_t n_outputs;
    uint32_t unfinished;        //  inputs not finished yet
    object_t **io;              //  inputs, then outputs (-> io_inline if <= 2)
    object_t *io_inline [2];
    uint8_t *config;            //  raw msgpack, NULL if none
    uint32_t config_size;
    uint32_t cpus;
    uint32_t n_resources;       //  requests other than cpus
    sq_resource_t *resources;   //  names owned (malloc'd copies)
    int32_t priority;
    uint32_t max_retries;
    uint32_t timeout_ms;
    char *name;
    gov_t *gov;                 //  ASSIGNED / RUNNING
    failure_t *failure;         //  FAILED / CANCELLED
    bool watched;               //  some client waits on it (see watch.c)
    uint16_t retries;           //  failures of its own code retried so far
    uint16_t crashes;           //  governors that died while it ran
    uint32_t last_gov;          //  governor of the last failed attempt, 0 none
    uint64_t order;             //  static priority: lower runs first (order.c)
    //  Set by the broker for the event log and /metrics (eventlog.c):
    //  monotonic us when the task became READY and when it last STARTED.
    int64_t ready_at_us;
    int64_t started_at_us;
};

struct _session_t {
    uint32_t id;
    void *client;               //  owner (broker's client_t)
    task_t **tasks;
    uint32_t n_tasks;
    uint32_t cap_tasks;
    object_t **objects;
    uint32_t n_objects;
    uint32_t cap_objects;
    uint32_t unfinished;        //  tasks not in a final state
    uint32_t finished;
    uint32_t failed;            //  failed or cancelled
    //  first failures, for WAIT over the whole session
    uint32_t n_failures;
    task_t *failures [64];
};

typedef struct {
    void *arg;
    //  A task's inputs are all finished: queue it for the scheduler.
    void (*task_ready) (void *arg, task_t *task);
    //  An assigned or running task was cancelled or its session closed:
    //  the governor must stop it. Called before the task is reset.
    void (*task_stop) (void *arg, task_t *task);
    //  A task reached a final state (watchers, counters).
    void (*task_done) (void *arg, task_t *task);
    //  An object is being freed: every governor in its locations must drop
    //  it. Called before the object is destroyed.
    void (*object_drop) (void *arg, object_t *object);
    //  A copy of the object must go from one governor to another (a copy
    //  that was on its way came from a governor that died).
    void (*object_copy) (void *arg, object_t *object, gov_t *from, gov_t *to);
} graph_hooks_t;

graph_t *graph_new (const graph_hooks_t *hooks);
void graph_destroy (graph_t **self_p);

session_t *graph_session_open (graph_t *self, void *client);
session_t *graph_session (graph_t *self, uint32_t id);
//  Cancels the session's unfinished tasks, frees everything in it.
void graph_session_close (graph_t *self, session_t **session_p);

//  Validates a decoded SUBMIT against the graph and, if it is all valid,
//  adds it. payloads[i] is the payload frame i + 1 (constant data).
//  On error returns an sq_err_t code, fills message and *bad_id, and leaves
//  the graph untouched. max_cpus: the most cpus any governor ever declared
//  (0: no governor yet, no check); has_resource says whether some governor
//  ever declared a named resource in at least that amount.
typedef bool (graph_resource_fn) (void *arg, mpr_str_t name, uint64_t amount);
int graph_submit (graph_t *self, session_t *session, const sq_submit_t *submit,
                  zmq_msg_t *payloads, size_t n_payloads,
                  graph_resource_fn *resource_ok, void *resource_arg,
                  char *message, size_t message_size, uint32_t *bad_id);

task_t *graph_task (graph_t *self, uint64_t key);
object_t *graph_object (graph_t *self, uint64_t key);

//  Governor reports. The caller has checked that the task is assigned to
//  the reporting governor with this attempt.
void graph_task_started (graph_t *self, task_t *task);
//  outputs: what the governor reported; payload frames for inline data.
//  Returns 0, or -1 (with message) if the report does not match the task's
//  outputs, in which case the task is failed with that message.
int graph_task_finished (graph_t *self, task_t *task, gov_t *gov,
                         const sq_output_ref_t *outputs, uint32_t n_outputs,
                         zmq_msg_t *payloads, size_t n_payloads, size_t inline_max);
void graph_task_failed (graph_t *self, task_t *task, int code, const char *message);
//  Puts an assigned task back to READY (or WAITING) with a new attempt:
//  its governor left, its own code failed with retries left, or the plan
//  changed.
void graph_task_requeue (graph_t *self, task_t *task);
void graph_task_assigned (graph_t *self, task_t *task, gov_t *gov);

//  Client operations
int graph_keep (graph_t *self, object_t *object, bool keep);
//  Cancels a task (and, through failure propagation, its dependents).
void graph_cancel (graph_t *self, task_t *task);

//  Locations
void graph_object_add_location (graph_t *self, object_t *object, gov_t *gov, bool arrived);
location_t *graph_object_location (object_t *object, gov_t *gov);
//  A governor is gone: removes it from every location list it is on, and
//  recomputes what was lost with it and is still needed. Walks all
//  objects: governor loss is rare, and per-governor object lists would cost
//  on every copy.
void graph_forget_governor (graph_t *self, gov_t *gov);
//  A governor no longer holds a copy (it said so, or a copy failed).
//  Recomputes the object if that was its last copy and it is needed.
void graph_object_lost (graph_t *self, object_t *object, gov_t *gov);

//  Counters for INFO
uint64_t graph_task_count (graph_t *self, task_state_t state);
//  Objects not released (with copies, or still to be produced).
size_t graph_object_count (graph_t *self);
//  Tasks re-run because an object they made was lost.
uint64_t graph_recomputed (graph_t *self);
size_t graph_session_count (graph_t *self);

//  Reference counting of failures
failure_t *failure_new (uint32_t root, int code, const char *message);
void failure_unref (failure_t **self_p);

const char *task_state_name (task_state_t state);

#endif
