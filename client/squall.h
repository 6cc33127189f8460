/*  squall.h: the squall client library (libsquall), the one public header.

    A client connects to a broker, opens sessions, builds graphs of tasks and
    data objects, submits them (any number of times per session), waits for
    them and fetches results. docs/protocol.md describes the wire protocol
    this library speaks, for clients in other languages.

    Threading: a client and its sessions belong to one thread at a time; use
    one client per thread. No call keeps a background thread.

    Ownership: sq_client_new / sq_session_new return objects the caller owns
    and frees with the matching _destroy (which nulls the pointer). Buffers
    returned through out-parameters (fetch data, info JSON, content types) are
    owned by the caller and freed with sq_free.

    Errors: every call that can fail returns 0 or a positive sq_err_t code; the
    client then holds a readable message (sq_client_errmsg) and, when the
    error is about one task or object, its id (sq_client_errid).

    Ids: tasks and data objects share one id space per session; the library
    allocates them. A task made with n outputs has id T and outputs
    T+1 .. T+n (sq_output).
*/
#ifndef SQUALL_H
#define SQUALL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

//  Versions and error codes (shared with the broker and governors).
#include "squall_codes.h"

//  Short name of an error code ("task failed", ...). Never NULL.
const char *sq_strerror (int code);

typedef struct _sq_client_t sq_client_t;
typedef struct _sq_session_t sq_session_t;

//  --------------------------------------------------------------------------
//  Client

//  Creates an unconnected client. NULL only when out of memory.
sq_client_t *sq_client_new (void);
//  Says goodbye (the broker closes the client's sessions at once) and frees.
void sq_client_destroy (sq_client_t **self_p);
//  Connects and says HELLO. timeout_ms < 0 waits for ever. A broker that is
//  not there gives SQ_E_CONNECTION after the timeout.
int sq_client_connect (sq_client_t *self, const char *endpoint, int timeout_ms);
//  Authenticates and encrypts every connection of this client with CurveZMQ
//  (docs/security.md): secret_key_file is this client's key pair (NAME.key
//  from `squall keygen`), broker_key_file the broker's public key (its .pub).
//  Call before sq_client_connect. 0, or SQ_E_INVALID with a message.
//  Without this call, sq_client_connect uses $SQUALL_SECRET_KEY and
//  $SQUALL_BROKER_KEY when both are set.
int sq_client_set_keys (sq_client_t *self, const char *secret_key_file,
                        const char *broker_key_file);
//  When the connection to the broker is lost (a broken link, a broker
//  restart), the library reconnects and resumes its sessions for up to
//  timeout_ms (default 60000; 0: the call fails with SQ_E_CONNECTION at
//  once), and the call that was waiting goes on. A session the broker no
//  longer knows gives SQ_E_SESSION, naming it.
void sq_client_set_resume (sq_client_t *self, int timeout_ms);
//  Large constants for a governor on this host go as memory files handed
//  to its socket in `dir` (the governors' --stream-dir; LocalCluster's and
//  `squall start`'s, which prints it as SQUALL_LOCAL_DIR) instead of PUT
//  over the network: no copy through a socket, no encryption. The
//  directory must be this user's and closed to others (mode 0700), or
//  SQ_E_INVALID. Without this call, sq_client_connect uses
//  $SQUALL_LOCAL_DIR when set, or in a Slurm job ($SLURM_JOB_ID) the
//  directory squall's Slurm governors of this user use on this node
//  (${XDG_RUNTIME_DIR:-/tmp}/squall-streams-UID) when it is this user's
//  alone. A governor elsewhere (no socket of its
//  there) is uploaded to by PUT as ever (docs/security.md, "Uploads on one
//  host").
int sq_client_set_local_dir (sq_client_t *self, const char *dir);
//  The constant cache: with a local directory, the memory files of this
//  client's recent large constants (1 MiB or more) are kept, and a later
//  constant of exactly the same bytes (same size, then compared byte for
//  byte with the file) is handed over as that file again, in any session,
//  instead of being written into a new one. Sealed memory files never
//  change, so a governor given the same file twice holds two equal
//  objects. At most `bytes` (default 256 MiB; 0: off) in at most 64
//  files, least recently used evicted first; the cache holds a reference,
//  so up to that much stays in memory after the cluster freed the objects
//  (freed by sq_client_destroy, or with the process). Without this call,
//  sq_client_new takes $SQUALL_CONSTANT_CACHE (bytes, or with K, M, G, T:
//  "64M"); one that is not such a size makes sq_client_connect fail with
//  SQ_E_INVALID naming it, unless this call set the bound since.
void sq_client_set_constant_cache (sq_client_t *self, uint64_t bytes);
//  What the constant cache did (counts since sq_client_new) and holds.
//  Constants written into memory files count as misses whether the cache
//  is on or off.
typedef struct {
    uint64_t hits;              //  constants that reused a cached file
    uint64_t misses;            //  constants written into a new file
    uint64_t collisions;        //  cached files of the same size and sampled
                                //  bytes whose other bytes differed
    uint64_t bytes_reused;      //  not written, thanks to hits
    uint64_t bytes_written;     //  by misses
    uint64_t entries;           //  files held now
    uint64_t bytes;             //  bytes held now (<= limit)
    uint64_t limit;
} sq_constant_cache_stats_t;
int sq_client_constant_cache_stats (sq_client_t *self, sq_constant_cache_stats_t *stats);
//  Makes a CurveZMQ key pair: DIR/NAME.key (secret, mode 0600) and
//  DIR/NAME.pub, in CZMQ's certificate format. role: "client", "governor",
//  "admin" or "broker"; tenant NULL: a client is its own tenant, NAME. 0, or
//  SQ_E_INVALID with a message in err (err_size bytes).
int sq_keygen (const char *name, const char *dir, const char *role, const char *tenant,
               char *err, size_t err_size);
//  Message and ids of the last error on this client (or its sessions).
const char *sq_client_errmsg (sq_client_t *self);
int sq_client_errcode (sq_client_t *self);
//  Id of the task or object the last error was about (0 if none), and, for
//  SQ_E_UPSTREAM_FAILED, the id of the task that failed first (root cause).
uint32_t sq_client_errid (sq_client_t *self);
uint32_t sq_client_errroot (sq_client_t *self);
//  Asks the broker about the cluster; *json receives a JSON document
//  (governors, their resources and load; task counts by state).
int sq_client_info (sq_client_t *self, char **json);
//  Drains a governor (its id from sq_client_info): it takes no new task,
//  its queued ones go elsewhere, running ones finish, objects only it
//  holds are copied away, then it leaves (docs/protocol.md, RETIRE).
//  Returns once the drain started. With keys, only an admin key may.
int sq_client_retire (sq_client_t *self, uint32_t governor);
//  A task's output: its stdout (stream SQ_LOG_STDOUT) or stderr
//  (SQ_LOG_STDERR) as the governor that ran it keeps it, from byte `offset`
//  of attempt `attempt` (-1: the latest) of task `task` of `session` (any
//  session of this client's tenant). Past the governor's --log-limit (or
//  the task's `log_limit`) only the head and the tail are kept, and a
//  marker line says how many bytes were dropped between. *data (freed
//  with sq_free, NUL-terminated; NULL when nothing came) holds at most
//  `max` bytes (0: 4 MiB) plus a marker; read on from *next. *attempt_out
//  (if not NULL) is the attempt read; *state: SQ_LOG_WAITING (not started:
//  nothing yet), SQ_LOG_RUNNING (more may come: call again from *next),
//  SQ_LOG_DONE (the attempt ended and everything was read), SQ_LOG_NONE
//  (it ended without running on a governor this broker knows). A log of
//  a governor that died fails with SQ_E_LOST ("log lost with governor N").
//  Returns SQ_OK or the error code (sq_client_errmsg says why).
#define SQ_LOG_STDOUT 1
#define SQ_LOG_STDERR 2
#define SQ_LOG_WAITING 0
#define SQ_LOG_RUNNING 1
#define SQ_LOG_DONE 2
#define SQ_LOG_NONE 3
int sq_client_log (sq_client_t *self, uint32_t session, uint32_t task, int64_t attempt,
                   int stream, uint64_t offset, size_t max, char **data, size_t *size,
                   uint64_t *next, uint32_t *attempt_out, int *state);
//  Fresh Python executors for this client's tenant on every governor
//  (docs/protocol.md, RESTART): its idle ones stop now, busy ones once
//  their task ends, and its next tasks start new ones. Tasks and results
//  are not touched. Returns once every governor confirmed (REFRESHED),
//  waiting up to 30 s.
int sq_client_restart (sq_client_t *self);
//  The same, returning once every governor said its executors of the tenant
//  that ran tasks before are gone (SQ_E_TIMEOUT after timeout_ms, naming
//  the governors that did not; sq_client_restart waits 30 s).
int sq_client_restart_wait (sq_client_t *self, int timeout_ms);
//  Runs fn (opaque bytes, at most 1 MiB: Python's pickled call) on every
//  live Python executor of this client's tenant on every governor
//  (docs/protocol.md, RUN), waiting up to timeout_ms (SQ_E_TIMEOUT naming
//  the governors that did not answer). *out (freed with sq_free) holds
//  *out_size bytes: per executor, little-endian u32 governor id, u64 pid,
//  u8 ok, u32 length, then that many bytes (its answer). The answers are
//  read from the governors that keep them (RUNREAD); a governor's that
//  cannot be read (gone) are one answer of pid 0, not ok, saying why.
int sq_client_run (sq_client_t *self, int timeout_ms, const void *fn, size_t size,
                   char **out, size_t *out_size);
//  Closes a session by its id, whichever connection has it (its tasks are
//  cancelled, its objects freed): one a killed client left detached, or
//  another client's of the same tenant (with keys; an admin key: any).
//  docs/protocol.md, SESSION_CLOSE. Not for a session this client holds
//  as an sq_session_t (sq_session_destroy closes those).
int sq_client_close_session (sq_client_t *self, uint32_t session);
//  Frees a buffer this library returned (only sq_free may: the buffers of
//  big fetched objects are kept, at most 2 and 256 MiB, for the next
//  fetches, whose pages are then already in memory; the last
//  sq_client_destroy frees them).
void sq_free (void *ptr);

//  --------------------------------------------------------------------------
//  Sessions: a namespace of tasks and objects with one life time. Closing a
//  session cancels its unfinished tasks and frees all its objects.

//  Opens a session on the broker; NULL on error (see the client's errmsg).
sq_session_t *sq_session_new (sq_client_t *client);
//  Closes the session on the broker (if still connected) and frees it.
void sq_session_destroy (sq_session_t **self_p);
uint32_t sq_session_id (sq_session_t *self);

//  Graph building. These calls only record locally; sq_submit sends what was
//  recorded since the last submit. They return the new id, or 0 on invalid
//  arguments or out of memory (see errmsg).

//  A constant data object; `data` is copied. content_type may be NULL ("").
uint32_t sq_blob (sq_session_t *self, const void *data, size_t size,
                  const char *content_type);
//  The same, its bytes the n_parts parts one after the other (copied once:
//  a value pickled with out-of-band buffers needs no joined copy first).
uint32_t sq_blob_gather (sq_session_t *self, const void *const *parts, const size_t *sizes,
                         size_t n_parts, const char *content_type);
//  A task of `kind` taking `inputs` (object ids of this session, constants
//  or outputs of other tasks, in this or earlier submits) and producing
//  n_outputs new objects. `config` is the task's configuration encoded as
//  msgpack (NULL for none; see the sq_config_* helpers). Returns the task id.
uint32_t sq_task (sq_session_t *self, const char *kind,
                  const uint32_t *inputs, size_t n_inputs, uint32_t n_outputs,
                  const void *config, size_t config_size);
//  Id of output i of a task.
uint32_t sq_output (uint32_t task_id, uint32_t i);

//  Adds n tasks like `model` (a task of the unsubmitted batch: same kind,
//  inputs, number of outputs, name, resources, priority, retries, timeout,
//  and its outputs' content types and keep flags), task i with config
//  bytes [ends[i-1], ends[i]) of `configs` (ends[-1] being 0). The new
//  tasks' ids are consecutive, from *first, each 1 + n_outputs after the
//  previous one (its outputs in between). One call instead of several per
//  task: Python's client.map adds its tasks so.
int sq_tasks_like (sq_session_t *self, uint32_t model, size_t n, const void *configs,
                   const size_t *ends, uint32_t *first);
//  Options of a task recorded in the current (unsubmitted) batch.
int sq_task_set_name (sq_session_t *self, uint32_t task, const char *name);
//  A resource request ("cpus", "memory", "gpus" or a custom name), default
//  cpus=1; set cpus to 0 for tasks that only wait.
int sq_task_set_resource (sq_session_t *self, uint32_t task,
                          const char *name, uint64_t amount);
//  gpus as a fraction of a device (0.5: half of one, shared with other
//  tasks) or whole devices: the task runs with CUDA_VISIBLE_DEVICES naming
//  the devices it got on a governor started with --gpus. Fractions are in
//  thousandths, below 1; sq_task_set_resource "gpus" takes whole devices.
int sq_task_set_gpus (sq_session_t *self, uint32_t task, double gpus);
int sq_task_set_priority (sq_session_t *self, uint32_t task, int32_t priority);
int sq_task_set_max_retries (sq_session_t *self, uint32_t task, uint32_t retries);
int sq_task_set_timeout (sq_session_t *self, uint32_t task, double seconds);
//  The governors (INFO ids, at most 64) the task may run on; n 0: any (the
//  default). With `loose` they are only preferred: it runs elsewhere when
//  none of them is connected or has room (Dask's allow_other_workers).
int sq_task_set_governors (sq_session_t *self, uint32_t task, const uint32_t *governors,
                           size_t n, bool loose);
//  Content type of an object produced in the current batch ("" by default).
int sq_object_set_content_type (sq_session_t *self, uint32_t object,
                                const char *content_type);
//  Makes an output of the current batch a stream (docs/protocol.md,
//  "Streams"): read by its consumers while its producer writes it, never
//  stored, so it cannot be kept or fetched. Its consumers must be in the
//  same batch; an execute task writes one from its stdout and reads one
//  as its stdin.
int sq_object_set_stream (sq_session_t *self, uint32_t object);
//  Puts a constant of the current batch straight on governor `governor`
//  (an id from INFO) when the batch is submitted, whatever its size: no
//  lineage, so if every copy is lost the tasks needing it fail with
//  SQ_E_LOST naming it. The submit fails if that governor cannot take it.
int sq_object_set_governor (sq_session_t *self, uint32_t object, uint32_t governor);
//  Like sq_object_set_governor for a constant of 64 KiB or more (smaller
//  ones ride in the SUBMIT), but only preferred: if that governor cannot take it, it goes
//  where it would have gone without (an actor's calls put their large
//  arguments on the actor's governor this way). 0: no preference.
int sq_object_prefer_governor (sq_session_t *self, uint32_t object, uint32_t governor);

//  Keeps an object so it can be fetched (and outlives its consumers). Before
//  submit this marks the object; after, it asks the broker (an object that
//  was already released gives SQ_E_UNKNOWN_ID).
int sq_keep (sq_session_t *self, uint32_t object);
int sq_unkeep (sq_session_t *self, uint32_t object);
//  Unkeeps many objects in one request (the broker checks them all before
//  changing anything: an id not of the session fails the whole call).
int sq_unkeep_many (sq_session_t *self, const uint32_t *objects, size_t n);

//  Sends the recorded batch. On error nothing of it entered the graph; the
//  batch is discarded and errmsg / errid name the offending task or object.
int sq_submit (sq_session_t *self);

//  Waits until all the given tasks / objects are finished. timeout_ms < 0
//  waits for ever. A failure gives SQ_E_TASK_FAILED or SQ_E_UPSTREAM_FAILED
//  with errid / errroot and the task's message.
int sq_wait (sq_session_t *self, const uint32_t *ids, size_t n, int timeout_ms);
//  Waits for every task submitted in the session so far.
int sq_wait_all (sq_session_t *self, int timeout_ms);
//  Waits until at least one of ids is done; done[] (room for n) receives the
//  ids that are, *n_done their count. Failed ones count as done; check them
//  with sq_wait.
int sq_wait_some (sq_session_t *self, const uint32_t *ids, size_t n,
                  int timeout_ms, uint32_t *done, size_t *n_done);
//  Fetches a kept object's content, waiting for it to be finished. *data
//  (and *content_type if not NULL) are the caller's, freed with sq_free.
int sq_fetch (sq_session_t *self, uint32_t object, int timeout_ms,
              void **data, size_t *size, char **content_type);
//  Cancels tasks (n == 0: every unfinished task of the session).
int sq_cancel (sq_session_t *self, const uint32_t *ids, size_t n);
//  Deletes finished objects now, whoever keeps them (repartitioning): their
//  copies are dropped everywhere; tasks not done that need them fail with
//  SQ_E_DELETED naming the object, and so does a later fetch.
int sq_delete (sq_session_t *self, const uint32_t *ids, size_t n);
//  Replicates or moves a finished object, or says where it is: copies go to
//  every governor in `governors` and to more, least loaded first, until at
//  least `copies` governors hold it (at most every governor); with flags
//  SQ_PLACE_MOVE every other copy is then dropped. Returns once the copies
//  are there (timeout_ms < 0: however long it takes), with the governors
//  holding it in holders[0 .. min(*n_holders, max_holders)). Nothing asked
//  (no governors, copies 0): only where it is. An object only the broker
//  holds (small, or a constant sent inside the submit) has no holders and
//  travels with every task that needs it.
int sq_place (sq_session_t *self, uint32_t object, const uint32_t *governors, size_t n_governors,
              uint32_t copies, uint32_t flags, int timeout_ms,
              uint32_t *holders, size_t max_holders, size_t *n_holders);

//  --------------------------------------------------------------------------
//  Jobs: sessions that outlive their client (docs/protocol.md, "Jobs").

//  Job states, as bits of a filter (0: any).
#define SQ_JOB_RUNNING      1
#define SQ_JOB_FINISHED     2
#define SQ_JOB_FAILED       4
#define SQ_JOB_CANCELLED    8
//  Task states in job replies, as bits of a filter (0: any).
#define SQ_TASK_WAITING     1
#define SQ_TASK_RUNNING     2
#define SQ_TASK_FINISHED    4
#define SQ_TASK_FAILED      8
#define SQ_TASK_CANCELLED   16

//  A job (or session) as SESSIONS and SESSION_WAIT describe it. Plain data:
//  no pointers, so an array of them is one buffer (freed with sq_free).
typedef struct {
    uint32_t id;                //  the session
    char name [129];            //  "" if none
    uint32_t state;             //  one SQ_JOB_* bit
    bool detached;              //  a job (outlives its client)
    bool attached;              //  a client holds it now
    //  tasks by state, array elements one by one: waiting, running,
    //  finished, failed, cancelled
    uint64_t tasks [5];
    int64_t created_ms;         //  ms since the Unix epoch
    int64_t ended_ms;           //  0 while running
} sq_job_t;

//  One task (or array element) as TASKS describes it.
typedef struct {
    uint32_t id;                //  task id (an element's array task id)
    int64_t index;              //  element index, -1 for a plain task
    uint32_t state;             //  one SQ_TASK_* bit
    bool has_exit_code;
    int32_t exit_code;          //  negative: killed by that signal
    uint32_t governor;          //  0 if never placed
    uint32_t attempts;
    int64_t started_ms;         //  0 if not started
    int64_t ended_ms;           //  0 if not ended
    char error [512];           //  "" if none (truncated)
    char name [128];            //  "" if none (truncated)
    uint32_t task;              //  an element's own task id (sq_client_log
                                //  reads its output by it); 0: none yet
} sq_task_record_t;

//  Opens a session with a name (NULL: none; unique among the tenant's kept
//  sessions) that, when detached is true, outlives this client: a job. NULL
//  on error (SQ_E_DUPLICATE_ID for a name in use).
sq_session_t *sq_session_new_job (sq_client_t *client, const char *name, bool detached);
//  The same, its tasks held by the broker until the jobs `after` (ids, at
//  most 64) ended: run once all finished, cancelled (the message naming
//  the job) if one failed, was cancelled or was forgotten. A job of them
//  that ended so already refuses the open (SQ_E_INVALID), one not there
//  too (SQ_E_SESSION).
sq_session_t *sq_session_new_job_after (sq_client_t *client, const char *name, bool detached,
                                        const uint32_t *after, size_t n_after);
//  Takes a job onto this client by id (name NULL) or by name (session 0),
//  moving it from any other connection. Submits, waits, fetches and the rest
//  then work on it; its ids continue above those it has. sq_session_destroy
//  closes it (and forgets it); sq_session_detach leaves it running.
sq_session_t *sq_session_attach (sq_client_t *client, uint32_t session, const char *name);
//  On a session just attached: ids are given from 1 again, and a submit
//  leaves out the objects and tasks whose ids are at most the session's
//  largest id at attach (ATTACH's max_id): an earlier client made them, in
//  the same order (a task run again, docs/protocol.md "Jobs"). 0 or an
//  error code (SQ_E_INVALID once something was added or submitted).
int sq_session_replay (sq_session_t *self);
//  Inside a task, on its children's session ("nested/S/T", opened as
//  squall.get_client() does): the objects `ids` (at most 1024) become
//  objects of the task's own session S as well, kept there, readable and
//  usable as inputs by the task's caller once they are made (ADOPT,
//  docs/protocol.md "Jobs"). Fills *session with S and adopted[i] with
//  the id standing for ids[i] in S. 0 or an error code.
int sq_adopt (sq_session_t *self, const uint32_t *ids, size_t n, uint32_t *session,
              uint32_t *adopted);
//  Frees the handle without closing the session on the broker: a job goes on
//  (a plain session is closed after --session-grace).
void sq_session_detach (sq_session_t **self_p);
//  Makes a task of the current batch an array task (an execute task without
//  outputs): elements first, first+step, .. up to last, or one per item
//  (items are copied; indices 0 .. n-1). docs/protocol.md, "Array tasks".
int sq_task_set_array (sq_session_t *self, uint32_t task,
                       uint32_t first, uint32_t last, uint32_t step);
int sq_task_set_array_items (sq_session_t *self, uint32_t task,
                             const char *const *items, size_t n);
//  Lists the jobs and sessions this client may see whose state is in
//  `states` (0: any); session non-zero or name non-NULL: only that one.
//  *jobs (an array of *n, freed with sq_free; NULL when *n is 0).
int sq_client_jobs (sq_client_t *self, uint32_t states, uint32_t session,
                    const char *name, sq_job_t **jobs, size_t *n);
//  Waits until every task of a session has ended (timeout_ms < 0: for
//  ever; SQ_E_TIMEOUT at the timeout); *job (if not NULL) receives it then.
int sq_client_job_wait (sq_client_t *self, uint32_t session, int timeout_ms, sq_job_t *job);
//  A session's tasks whose state is in `states` (0: any), from `offset`, at
//  most `limit` (0: 10000). *tasks freed with sq_free; *total: how many match.
int sq_client_tasks (sq_client_t *self, uint32_t session, uint32_t states,
                     uint64_t offset, uint32_t limit,
                     sq_task_record_t **tasks, size_t *n, uint64_t *total);
//  Runs again the failed and cancelled tasks and elements among ids (n 0:
//  all of the session's) and those downstream; *again (if not NULL): how many.
int sq_client_resubmit (sq_client_t *self, uint32_t session,
                        const uint32_t *ids, size_t n, uint64_t *again);
//  Cancels every unfinished task of a session, keeping its record.
int sq_client_job_cancel (sq_client_t *self, uint32_t session);
//  Closes a session if open and drops its record (its name is free again).
int sq_client_forget (sq_client_t *self, uint32_t session);

//  --------------------------------------------------------------------------
//  Configuration of the built-in task kinds, encoded as msgpack. Each returns
//  a buffer (free with sq_free) and its size, or NULL on invalid arguments.
//
//  noop     inputs n, outputs m: output i is input i (or empty past n)
//  sleep    like noop, after `seconds`
//  concat   inputs n, outputs 1: the inputs joined
//  slice    inputs 1, outputs 1: bytes [start, end) (end < 0: to the end)
//  load     inputs 0, outputs 1: a file on the governor
//  store    inputs 1, outputs 0: writes its input to a path on the governor
//  execute  runs a program in a private working directory (see below)

void *sq_config_sleep (double seconds, size_t *size);
void *sq_config_slice (uint64_t start, int64_t end, size_t *size);
void *sq_config_path (const char *path, size_t *size);      //  load / store
//  args: argv (args[0] is looked up in PATH); in_paths[i]: file name under
//  the working directory where input i is written ("" = not written, as for
//  an input only used as stdin); stdin_input: index of the input given as
//  standard input, or -1; out_paths[j]: file read back as output j after the
//  program exits; stdout_output: index of the output that receives standard
//  output instead of a file, or -1; env: NULL-terminated "NAME=value" list
//  added to the governor's environment (may be NULL).
void *sq_config_execute (const char *const *args, size_t n_args,
                         const char *const *in_paths, size_t n_inputs,
                         int stdin_input,
                         const char *const *out_paths, size_t n_outputs,
                         int stdout_output,
                         const char *const *env, size_t *size);

#ifdef __cplusplus
}
#endif
#endif
