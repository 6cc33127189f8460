/*  graph: the broker's tasks, data objects and sessions, and every change of
    their state (a task: waiting, ready, assigned, running, final; an object:
    unfinished, finished with its locations, failed).

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
typedef struct _actor_t actor_t;

//  A tenant's share of the broker (tenancy.h makes one per tenant): its
//  limits, and what its sessions use. The graph keeps `cpus`, `constants`,
//  `sessions` and `stored` current for every session whose `share` points
//  here; the scheduler reads them to pick whose task runs next.
typedef struct {
    char *name;                 //  the tenant ("" for the keyless one)
    uint32_t index;             //  dense from 1: the scheduler's queue for it
    uint32_t weight;            //  its share of cpus relative to others, >= 1
    uint64_t max_cpus;          //  limits, 0 for none
    uint64_t max_stored;
    uint64_t max_constants;
    uint64_t max_sessions;
    uint64_t cpus;              //  cpus of its assigned and running tasks
    //  Its assigned and running tasks of 0 cpus (gather's joins, cpus=0
    //  tasks): they hold no cpu, so no cap, but each holds a governor's
    //  slot, and the fair share counts each as one cpu: else a tenant of
    //  such tasks is always furthest below its share and takes every slot.
    uint64_t cpuless;
    uint64_t constants;         //  bytes of constants in its open sessions
    uint64_t sessions;          //  its open sessions (attached or not)
    uint64_t stored;            //  bytes of its sessions' results on governors
    uint64_t streams_local;     //  its streams that went over the same-host path
    uint64_t uploads_local;     //  its constants handed over on their governor's host
    uint64_t copies_local;      //  its copies handed over between governors of one host
} share_t;

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
//  their way (a copy ordered there, "assigned", is not yet a copy "located" there).
typedef struct {
    gov_t *gov;
    bool arrived;
} location_t;

//  The broker keeps a record per task and per object of every open
//  session (a million-task graph is a million of each), so both records
//  are laid out to stay small: a task and its one output take one 208-byte
//  allocation (graph.c embeds a task's outputs in the task's block), rare
//  task fields live out of line in task_extra_t, and the first consumer
//  and first copy of an object live in the record itself.

struct _object_t {
    uint64_t key;
    session_t *session;
    task_t *producer;           //  NULL for constants
    uint64_t size;
    char *content_type;         //  NULL means ""
    sq_blob_t *data;            //  inline bytes held by the broker, or NULL
    failure_t *failure;         //  OBJ_FAILED
    //  Read through object_consumers () and object_locations (): the first
    //  element is in place, from the second on they are on the heap.
    union { task_t *one; task_t **many; } consumer_;
    union { location_t one; location_t *many; } location_;
    uint32_t producer_output;   //  index among the producer's outputs
    uint32_t version;           //  producer attempt that made the copies
    uint32_t n_consumers;
    uint32_t pending;           //  consumers not yet done
    uint32_t n_locations;
    uint8_t state;              //  object_state_t
    bool keep: 1;
    bool free_queued: 1;        //  on the graph's list of objects to check
    //  Unneeded: its copies were dropped everywhere. The record stays (until
    //  the session closes) as lineage: if a later object that depends on it
    //  is lost, it can be recomputed from here.
    bool released: 1;
    bool consumers_on_heap: 1;
    bool locations_on_heap: 1;
    bool embedded: 1;           //  lives in its producer's block
    //  Streams (graph_stream.c): read while produced, never stored. Open
    //  while its producer runs: consumers count it as there. `size` is
    //  the bytes written so far until it is finished.
    bool stream: 1;
    bool stream_open: 1;
};

static inline task_t **
object_consumers (object_t *object)
{
    return object->consumers_on_heap? object->consumer_.many: &object->consumer_.one;
}

static inline location_t *
object_locations (object_t *object)
{
    return object->locations_on_heap? object->location_.many: &object->location_.one;
}

//  Task fields most tasks leave at their defaults. task_extra () reads
//  them (defaults when absent); graph_task_extra () makes them writable.
typedef struct {
    char *name;                 //  NULL if none
    uint32_t cpus;
    int32_t priority;
    uint32_t max_retries;
    uint32_t timeout_ms;
    uint32_t n_resources;       //  requests other than cpus
    sq_resource_t *resources;   //  names owned (malloc'd copies)
    uint16_t retries;           //  failures of its own code retried so far
    uint16_t crashes;           //  governors that died while it ran
    uint32_t last_gov;          //  governor of the last failed attempt, 0 none
    //  The governors it may run on (SUBMIT's options; NULL: any), or only
    //  prefers when `loose` (scheduler.c).
    uint32_t *governors;
    uint32_t n_governors;
    bool loose;
    //  Actors (graph_actor.c): a call's host, the task that started its
    //  actor; a host's queue of calls.
    task_t *host;
    struct _actor_t *actor;
    //  Jobs (jobs.c, TASKS): the governor and wall-clock times (ms) of its
    //  last attempt, attempts that ran, an execute program's exit status.
    uint32_t run_gov;
    uint32_t runs;
    uint32_t run_attempt;       //  attempt + 1 of the last one counted in runs
    int32_t exit_code;
    bool has_exit_code;
    int64_t started_ms;
    int64_t ended_ms;
    //  Array tasks (jobs.c): an array task's elements (owned), or an
    //  element's array task and position.
    struct _jobarray_t *array;
    task_t *parent;
    uint32_t element;
} task_extra_t;

//  A task is one block (graph.c): the task, its outputs, its io array,
//  then its config.
struct _task_t {
    uint64_t key;
    session_t *session;
    object_t **io;              //  inputs, then outputs
    gov_t *gov;                 //  ASSIGNED / RUNNING
    failure_t *failure;         //  FAILED / CANCELLED
    task_extra_t *extra;        //  NULL: all defaults
    uint64_t order;             //  static priority: lower runs first (order.c)
    //  Monotonic us, set by the event log (eventlog.c): when the task became
    //  READY until it is assigned, then when it STARTED (0 if it did not say).
    int64_t stamp_us;
    uint32_t attempt;
    //  The governor given the attempt `ran_attempt`, the latest assigned
    //  (0: none yet): where its output is read (LOG).
    uint32_t ran_gov;
    uint32_t ran_attempt;
    uint32_t n_inputs;
    uint32_t n_outputs;
    uint32_t unfinished;        //  inputs not finished yet
    uint32_t config_size;       //  raw msgpack after the io array, 0 if none
    uint8_t state;              //  task_state_t
    uint8_t kind;               //  sq_kind_t
    bool retracting: 1;         //  RETRACT sent, answer not yet in
    bool watched: 1;            //  some client waits on it (see watch.c)
    bool actor_host: 1;         //  starts an actor (py config `actor`)
    bool actor_call: 1;         //  calls an actor's method (py config `call`)
    bool actor_dirty: 1;        //  host: on the graph's list to settle
    bool stream_in: 1;          //  reads a stream (placed by streams.c, not the scheduler)
    bool stream_out: 1;         //  writes a stream
    bool seceded: 1;            //  waits on tasks it submitted, its cpus given
                                //  back (SECEDED, until REJOINED; gov.c)
    bool array_parent: 1;       //  an array task: never placed, its elements are (jobs.c)
    bool array_element: 1;      //  an element of an array task
};

extern const task_extra_t task_extra_default;

static inline const uint8_t *
task_config (const task_t *task)
{
    return task->config_size? (const uint8_t *) (task->io + task->n_inputs + task->n_outputs): NULL;
}

static inline const task_extra_t *
task_extra (const task_t *task)
{
    return task->extra? task->extra: &task_extra_default;
}

struct _session_t {
    uint32_t id;
    void *client;               //  the connection using it (broker's peer), NULL while detached
    //  Who it belongs to (docs/security.md): the tenant of the key that
    //  opened it (NULL without keys), that key (Z85, NULL without keys),
    //  and the token a client presents to RESUME it.
    char *tenant;
    char *owner;
    share_t *share;             //  its tenant's share (graph_session_set_share), or NULL
    uint64_t constants;         //  bytes of its constants (inline and uploaded)
    //  Bytes of its task results held on governors, each object once
    //  however many copies (not inline at the broker, not released): what
    //  a tenant's `stored` quota counts (gx_stored).
    uint64_t stored;
    uint8_t token [SQ_TOKEN_LEN];
    int64_t detached_at;        //  ms (monotonic) since no connection uses it; 0 attached
    uint32_t max_id;            //  largest id declared in it
    uint32_t counts [TASK_STATE_COUNT_];    //  its tasks by state
    //  Tasks and objects by id. Client libraries number ids densely from
    //  1, so ids index an array; an id far past it (a client numbering
    //  its own way) goes to the `sparse` map, so that memory follows the
    //  number of ids, never their values.
    void **items;               //  tagged pointers, see graph.c
    uint32_t cap_items;
    sq_idmap_t *sparse;         //  NULL until needed
    uint32_t n_tasks;
    uint32_t n_objects;
    uint32_t live_objects;      //  objects not released
    uint32_t unfinished;        //  tasks not in a final state
    uint32_t finished;
    uint32_t failed;            //  failed or cancelled
    //  first failures, for WAIT over the whole session
    uint32_t n_failures;
    task_t *failures [64];
    //  Jobs (jobs.c, docs/protocol.md "Jobs"): its name (NULL: none, owned),
    //  a session that outlives its client, when it was opened and when it
    //  last stopped running (ms since the Unix epoch; ended 0 while
    //  running), and the job's own state (jobs.c owns it; NULL if none).
    char *name;
    bool job;
    int64_t created_ms;
    int64_t ended_ms;
    struct _jobx_t *jobx;
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
    //  A consumer of a stream being written will not read it (it failed or
    //  was cancelled): the producer's governor must not wait for it.
    void (*stream_unread) (void *arg, object_t *stream, task_t *consumer);
} graph_hooks_t;

graph_t *graph_new (const graph_hooks_t *hooks);
void graph_destroy (graph_t **self_p);

session_t *graph_session_open (graph_t *self, void *client);
//  Opens a session with a given id (journal replay); NULL if taken.
session_t *graph_session_open_as (graph_t *self, uint32_t id, void *client);
//  The id the next session gets, and setting it (journal replay).
uint32_t graph_next_session (graph_t *self);
void graph_set_next_session (graph_t *self, uint32_t next);
//  Iterates over sessions: *cursor starts at 0; NULL at the end.
session_t *graph_session_next (graph_t *self, size_t *cursor);
session_t *graph_session (graph_t *self, uint32_t id);
//  Counts the session (and what it uses now) in its tenant's share from
//  here on; once per session.
void graph_session_set_share (graph_t *self, session_t *session, share_t *share);
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
//  Iterates over a session's tasks: *cursor starts at 0; returns NULL at the
//  end. The session must not gain tasks during the iteration.
task_t *graph_session_next_task (session_t *session, size_t *cursor);
//  The same over its objects (constants and task outputs).
object_t *graph_session_next_object (session_t *session, size_t *cursor);
//  The task's extra fields, allocated on first use; NULL if out of memory.
task_extra_t *graph_task_extra (task_t *task);

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
//  changed. Tasks overbooked behind it on its governor are stopped there
//  and wait again (task_stop hook), since their inputs will not be made
//  there now.
void graph_task_requeue (graph_t *self, task_t *task);
//  A governor reported the current attempt failed (SQ_FAIL_TASK: its own
//  code; SQ_FAIL_MEMORY: killed for using more memory than it asked for).
//  The retry policy as a state transition: killed for memory and fewer
//  than `allowed_failures` such kills so far, it asks for twice the memory
//  and goes back to be placed, away from `gov_id` if it can; its own
//  failure with retries left, it goes back likewise; otherwise it fails
//  (and its dependents with it). Returns which.
typedef enum {
    GRAPH_RETRY_MEMORY,
    GRAPH_RETRY,
    GRAPH_FAILED
} graph_outcome_t;
graph_outcome_t graph_task_attempt_failed (graph_t *self, task_t *task, uint32_t gov_id,
                                           uint32_t reason, const char *message,
                                           uint32_t allowed_failures);
void graph_task_assigned (graph_t *self, task_t *task, gov_t *gov);

//  A durable broker's restart (persist.c, reattach.c).
//  The task finished in an earlier life of the broker: attempt, output
//  sizes and the inline bytes the broker held (NULL where none; they are
//  taken over).
//  gov: the governor holding them (a reattach), or NULL (the journal).
void graph_task_restore_finished (graph_t *self, task_t *task, gov_t *gov, uint32_t attempt,
                                  const uint64_t *sizes, sq_blob_t **data, uint32_t n);
//  A reattached governor runs this attempt of a task the broker had not
//  placed anywhere: it is the task's assignment now. False (nothing
//  changed) unless the task was waiting for a governor.
bool graph_task_adopt (graph_t *self, task_t *task, gov_t *gov, uint32_t attempt, bool running);
//  Objects that count as finished but of which no copy is known (after a
//  restart, once governors had their chance to reattach): those still
//  needed are recomputed from lineage. Returns how many were lost.
size_t graph_recover_sweep (graph_t *self);

//  Client operations
int graph_keep (graph_t *self, object_t *object, bool keep);
//  Cancels a task (and, through failure propagation, its dependents).
void graph_cancel (graph_t *self, task_t *task);
//  The same, the cancel's message saying why.
void graph_cancel_why (graph_t *self, task_t *task, const char *message);
//  RESUBMIT: the failed and cancelled tasks[0..n) (of one job session) and
//  those failed or cancelled downstream of them (appended, up to cap) wait
//  again with a new attempt; their inputs are counted anew (one lost with
//  its governor is made again). Returns how many tasks wait again.
size_t graph_tasks_again (graph_t *self, task_t **tasks, size_t n, size_t cap);
//  Deletes a finished object now, whoever keeps it (a client's DELETE): its
//  copies are dropped everywhere, it fails with SQ_E_DELETED (root: the
//  object, `message`), and so does every task not done that needs it and
//  everything downstream of them. Never recomputed: a later loss that needs
//  it fails the same way. -1 if it is not a finished, unreleased object.
int graph_object_delete (graph_t *self, object_t *object, const char *message);

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
//  The same, for a copy that never was (an upload refused or never
//  confirmed): a constant left without a copy fails with `why`, not as
//  lost with a governor.
void graph_object_lost_why (graph_t *self, object_t *object, gov_t *gov, const char *why);
//  Whether an object is still needed: kept, or an unfinished task reads it.
bool graph_object_needed (const object_t *object);
//  Calls fn for every live object with a location (a copy, or one on its
//  way) on gov. Walks all objects: for rare events (a governor draining).
typedef void (graph_object_fn) (void *arg, object_t *object);
void graph_each_located (graph_t *self, gov_t *gov, graph_object_fn *fn, void *arg);

//  Actors (graph_actor.c): sends each actor's next call to the governor
//  running its host (through `assign`, which assigns it there), and fails
//  the calls its host's loss or end left behind. Call once per broker turn,
//  outside any other graph call. Returns the calls sent.
typedef void (graph_assign_fn) (void *arg, task_t *task, gov_t *gov);
size_t graph_actors_settle (graph_t *self, graph_assign_fn *assign, void *arg);
//  Whether graph_actors_settle has something to look at.
bool graph_actors_pending (graph_t *self);

//  Streams (graph_stream.c). A stream's consumers become ready when its
//  producer starts; the group (a producer and the consumers of its
//  streams, transitively) runs again together when one of its unfinished
//  members is lost or retried, since the bytes are gone (docs/protocol.md,
//  "Streams"). How many consumers the producer's governor should expect:
uint32_t graph_stream_consumers (const object_t *stream);
//  Whether a ready stream consumer can be placed now (every stream it
//  reads is open, its producer assigned or running).
bool graph_stream_placeable (const task_t *task);

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
//  Frees a session's job state (jobs.c); graph.c calls it as it frees the session.
void jobx_destroy (struct _jobx_t **self_p);
//  An array task's elements (jobs.c): made from its spec as graph_submit
//  creates the task (NULL: out of memory), freed with the task.
struct _jobarray_t *jobarray_new (task_t *task, const sq_task_spec_t *spec);
void jobarray_destroy (struct _jobarray_t **self_p);
//  Its spec's array fields (for a snapshot's SUBMIT), and its ELEMENT
//  records appended to a snapshot (-1: out of memory).
void jobarray_spec (const struct _jobarray_t *self, sq_task_spec_t *spec);
int jobarray_snapshot (const struct _jobarray_t *self, msgpack_sbuffer *buf, msgpack_packer *pk);
//  Replays an ELEMENT or RESUBMIT record; -1 if it names nothing known.
int jobs_replay (graph_t *graph, const void *record);
//  --after: the jobs a job waits for (NULL, 0: none left), for its journal
//  record; set again from it. 0, or -1 out of memory.
const uint32_t *jobs_after (const session_t *session);
uint32_t jobs_n_after (const session_t *session);
int jobs_set_after (session_t *session, const uint32_t *ids, uint32_t n);
//  Array elements take ids from here up that the session does not use (a
//  client numbers from 1; one that uses such an id later gets SQ_E_DUPLICATE_ID).
#define GRAPH_ELEMENT_IDS 0xC0000000u
//  Makes element `element` of an array task a task of its session with id
//  `id` and this config: its inputs, resources, priority, retries and
//  timeout are the array task's; it becomes ready (task_ready hook) when
//  its inputs are. NULL: out of memory.
task_t *graph_element_new (graph_t *self, task_t *parent, uint32_t id, uint32_t element,
                           const uint8_t *config, size_t config_size);
//  ADOPT (jobs.c): a `noop` task `id` of `session` whose one input is
//  `object`, an object of another session of the same tenant (a task's
//  child), and whose output, id + 1, kept, stands for it in `session`: it
//  is made on a governor holding `object` once that is finished (the
//  bytes never pass through the broker nor the parent), and fails or is
//  cancelled with it. The caller keeps `object`'s session open while
//  this task exists. NULL: out of memory.
task_t *graph_adopt (graph_t *self, session_t *session, uint32_t id, object_t *object);

#endif
