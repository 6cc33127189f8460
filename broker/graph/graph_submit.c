/*  graph_submit: a SUBMIT checked as a whole (ids, inputs, outputs, kinds,
    configs, resources, cycles) and only then committed to its session:
    all or nothing.

    Over 800 lines: every one of those checks (streams and actors too)
    reads the one index of the submit's items built here, and the commit
    relies on all of them having passed. */
#include "graph_internal.h"

//  --------------------------------------------------------------------------
//  Submit: validate everything, then commit. Nothing enters the graph
//  unless the whole submit is valid.

//  Index of a submit's items by id: value = (index << 1 | is_task) + 1.
//  Ids of one submit are usually consecutive: then an array from the
//  smallest indexes them, else a map.
typedef struct {
    uint32_t base;
    uint32_t span;
    uintptr_t *dense;
    sq_idmap_t *map;
} s_ids_t;

static int
s_ids_init (s_ids_t *self, const sq_submit_t *sub)
{
    memset (self, 0, sizeof *self);
    uint64_t n = (uint64_t) sub->n_objects + sub->n_tasks;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t id = i < sub->n_objects? sub->objects [i].id: sub->tasks [i - sub->n_objects].id;
        lo = id < lo? id: lo;
        hi = id > hi? id: hi;
    }
    if (n && (uint64_t) hi - lo < 2 * n + 1024) {
        self->base = lo;
        self->span = hi - lo + 1;
        self->dense = (uintptr_t *) calloc (self->span, sizeof (uintptr_t));
        return self->dense? 0: -1;
    }
    self->map = sq_idmap_new ();
    return self->map && sq_idmap_reserve (self->map, n) == 0? 0: -1;
}

static void
s_ids_destroy (s_ids_t *self)
{
    free (self->dense);
    sq_idmap_destroy (&self->map);
}

static uintptr_t
s_ids_get (s_ids_t *self, uint32_t id)
{
    if (self->dense)
        return id - self->base < self->span? self->dense [id - self->base]: 0;
    return (uintptr_t) sq_idmap_lookup (self->map, id);
}

//  0, or -1 if the id is there already (room was reserved by s_ids_init).
static int
s_ids_put (s_ids_t *self, uint32_t id, uintptr_t value)
{
    if (self->dense) {
        if (self->dense [id - self->base])
            return -1;
        self->dense [id - self->base] = value;
        return 0;
    }
    return sq_idmap_insert (self->map, id, (void *) value);
}

typedef struct {
    s_ids_t ids;
    const sq_submit_t *submit;
    int32_t *producer;          //  per object: index of the producing task, -1
    //  per task, allocated at the first actor's task: 0, S_HOST, or the id
    //  of the host a call calls
    uint32_t *actor;
} s_check_t;

#define S_HOST UINT32_MAX

static int
s_refuse (char *message, size_t size, uint32_t *bad_id, uint32_t id, int code,
          const char *format, ...) __attribute__ ((format (printf, 6, 7)));

static int
s_refuse (char *message, size_t size, uint32_t *bad_id, uint32_t id, int code,
          const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (message, size, format, args);
    va_end (args);
    *bad_id = id;
    return code;
}

static inline uintptr_t s_entry (uint32_t index, bool task) { return (((uintptr_t) index << 1) | task) + 1; }

//  An actor's host, or a call naming a host of this session submitted
//  before it (in an earlier submit, or earlier in this one).
static int
s_check_actor (session_t *session, s_check_t *check, uint32_t t, const sq_taskconf_t *conf,
               char *msg, size_t msg_size, uint32_t *bad_id)
{
    const sq_task_spec_t *task = &check->submit->tasks [t];
    if (!check->actor
    &&  !(check->actor = (uint32_t *) calloc (check->submit->n_tasks, sizeof (uint32_t))))
        return s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");
    if (conf->actor) {
        check->actor [t] = S_HOST;
        return SQ_OK;
    }
    uint32_t host = conf->call;
    uintptr_t entry = s_ids_get (&check->ids, host);
    bool ok;
    if (entry)
        ok = ((entry - 1) & 1) && (uint32_t) ((entry - 1) >> 1) < t
          && check->actor [(entry - 1) >> 1] == S_HOST;
    else {
        task_t *old = gx_as_task (gx_item (session, host));
        ok = old && old->actor_host;
    }
    if (!ok)
        return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_BAD_CONFIG,
                         "task %u: 'call' %u is not an actor of session %u submitted before "
                         "it (a py task with 'actor' true)", task->id, host, session->id);
    if (task->timeout_ms)
        return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_BAD_CONFIG,
                         "task %u: an actor's call cannot have a timeout (stopping it would "
                         "stop the actor)", task->id);
    check->actor [t] = host;
    return SQ_OK;
}

static const sq_object_spec_t *
s_spec_of (s_check_t *check, uint32_t id)
{
    uintptr_t entry = s_ids_get (&check->ids, id);
    return entry && !((entry - 1) & 1)? &check->submit->objects [(entry - 1) >> 1]: NULL;
}

static bool
s_is_stream (s_check_t *check, uint32_t id)
{
    const sq_object_spec_t *spec = s_spec_of (check, id);
    return spec && (spec->flags & SQ_OBJ_STREAM);
}

//  A task's streams: only kinds that read or write as they go may, only
//  where they can (execute: stdin, stdout), a stream once per reader, and
//  only one of this submit (its consumers come with its producer: it
//  opens once).
static int
s_check_task_streams (session_t *session, s_check_t *check, uint32_t t,
                      const sq_taskconf_t *conf, char *msg, size_t msg_size, uint32_t *bad_id)
{
    const sq_task_spec_t *task = &check->submit->tasks [t];
    uint32_t reads = 0, writes = 0;
    for (uint32_t i = 0; i < task->n_inputs; i++)
        reads += s_is_stream (check, task->inputs [i]);
    for (uint32_t i = 0; i < task->n_outputs; i++)
        writes += s_is_stream (check, task->outputs [i]);
    if (reads > 1 || writes > 1)
        return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_INVALID,
                         "task %u %s %u streams: a task reads at most one and writes at "
                         "most one", task->id, reads > 1? "reads": "writes",
                         reads > 1? reads: writes);
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        uint32_t id = task->inputs [i];
        if (!s_spec_of (check, id)) {
            object_t *old = gx_as_object (gx_item (session, id));
            if (old && old->stream)
                return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_INVALID,
                                 "task %u: input %u is a stream of an earlier submit; a "
                                 "stream's consumers are submitted with its producer", task->id, id);
            continue;
        }
        if (!s_is_stream (check, id))
            continue;
        if (!sq_taskconf_streams (conf, true, i))
            return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_BAD_CONFIG,
                             "task %u: input %u is a stream, which a '%s' task cannot read there "
                             "(an execute task reads one as its stdin, a py task as an iterator)",
                             task->id, id, sq_kind_name (conf->kind));
        for (uint32_t k = 0; k < i; k++)
            if (task->inputs [k] == id)
                return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_INVALID,
                                 "task %u reads stream %u twice", task->id, id);
    }
    for (uint32_t i = 0; i < task->n_outputs; i++)
        if (s_is_stream (check, task->outputs [i]) && !sq_taskconf_streams (conf, false, i))
            return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_BAD_CONFIG,
                             "task %u: output %u is a stream, which a '%s' task cannot write "
                             "there (an execute task writes one from its stdout, a py task by returning an "
                             "iterable of chunks)", task->id, task->outputs [i], sq_kind_name (conf->kind));
    return SQ_OK;
}

//  Whether task index `t` depends on task index `target` through the
//  submit (both tasks of it). `stamp` marks what this search visited.
static bool
s_depends_on (s_check_t *check, uint32_t t, uint32_t target, uint32_t *seen, uint32_t stamp,
              uint32_t *stack)
{
    const sq_submit_t *sub = check->submit;
    size_t n = 0;
    stack [n++] = t;
    seen [t] = stamp;
    while (n > 0) {
        const sq_task_spec_t *task = &sub->tasks [stack [--n]];
        for (uint32_t i = 0; i < task->n_inputs; i++) {
            uintptr_t entry = s_ids_get (&check->ids, task->inputs [i]);
            int32_t p = entry? check->producer [(entry - 1) >> 1]: -1;
            if (p < 0 || seen [p] == stamp)
                continue;
            if ((uint32_t) p == target)
                return true;
            seen [p] = stamp;
            stack [n++] = (uint32_t) p;
        }
    }
    return false;
}

//  Every stream has readers (at most SQ_MAX_STREAM_CONSUMERS), and no
//  reader waits for anything its stream's producer makes otherwise: the
//  producer waits for all its readers, so that would never end.
static int
s_check_streams (s_check_t *check, char *msg, size_t msg_size, uint32_t *bad_id)
{
    const sq_submit_t *sub = check->submit;
    bool any = false;
    for (uint32_t i = 0; i < sub->n_objects && !any; i++)
        any = (sub->objects [i].flags & SQ_OBJ_STREAM) != 0;
    if (!any)
        return SQ_OK;
    uint32_t *readers = (uint32_t *) calloc (sub->n_objects + 1, sizeof (uint32_t));
    uint32_t *seen = (uint32_t *) calloc (sub->n_tasks + 1, sizeof (uint32_t));
    uint32_t *stack = (uint32_t *) malloc ((sub->n_tasks + 1) * sizeof (uint32_t));
    int rc = SQ_OK;
    uint32_t stamp = 0;
    if (!readers || !seen || !stack)
        rc = s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");
    for (uint32_t t = 0; rc == SQ_OK && t < sub->n_tasks; t++) {
        const sq_task_spec_t *task = &sub->tasks [t];
        for (uint32_t i = 0; rc == SQ_OK && i < task->n_inputs; i++) {
            if (!s_is_stream (check, task->inputs [i]))
                continue;
            uintptr_t entry = s_ids_get (&check->ids, task->inputs [i]);
            uint32_t object = (uint32_t) ((entry - 1) >> 1);
            readers [object]++;
            uint32_t producer = (uint32_t) check->producer [object];
            //  Its other inputs must not come from the producer.
            for (uint32_t k = 0; rc == SQ_OK && k < task->n_inputs; k++) {
                if (k == i)
                    continue;
                uintptr_t other = s_ids_get (&check->ids, task->inputs [k]);
                int32_t p = other? check->producer [(other - 1) >> 1]: -1;
                if (p < 0)
                    continue;
                if ((uint32_t) p == producer
                ||  s_depends_on (check, (uint32_t) p, producer, seen, ++stamp, stack))
                    rc = s_refuse (msg, msg_size, bad_id, task->id, SQ_E_INVALID,
                                   "task %u reads stream %u and input %u, which needs that "
                                   "stream's producer (task %u) to finish: the producer "
                                   "waits for its readers, so neither would ever run",
                                   task->id, task->inputs [i], task->inputs [k],
                                   sub->tasks [producer].id);
            }
        }
    }
    for (uint32_t i = 0; rc == SQ_OK && i < sub->n_objects; i++) {
        if (!(sub->objects [i].flags & SQ_OBJ_STREAM))
            continue;
        if (readers [i] == 0)
            rc = s_refuse (msg, msg_size, bad_id, sub->objects [i].id, SQ_E_INVALID,
                           "stream %u has no reader in its submit: a stream cannot be "
                           "kept or fetched, only read while it is written", sub->objects [i].id);
        else
        if (readers [i] > SQ_MAX_STREAM_CONSUMERS)
            rc = s_refuse (msg, msg_size, bad_id, sub->objects [i].id, SQ_E_TOO_LARGE,
                           "stream %u has %u readers, at most %u are allowed",
                           sub->objects [i].id, readers [i], SQ_MAX_STREAM_CONSUMERS);
    }
    free (readers);
    free (seen);
    free (stack);
    return rc;
}

static int
s_validate (session_t *session, s_check_t *check, size_t n_payloads,
            graph_resource_fn *resource_ok, void *resource_arg,
            char *msg, size_t msg_size, uint32_t *bad_id)
{
    const sq_submit_t *sub = check->submit;
    //  Ids: unique within the submit and new to the session
    for (uint32_t i = 0; i < sub->n_objects + sub->n_tasks; i++) {
        bool is_task = i >= sub->n_objects;
        uint32_t index = is_task? i - sub->n_objects: i;
        uint32_t id = is_task? sub->tasks [index].id: sub->objects [index].id;
        if (gx_item (session, id))
            return s_refuse (msg, msg_size, bad_id, id, SQ_E_DUPLICATE_ID,
                             "id %u is already used in session %u", id, session->id);
        if (s_ids_put (&check->ids, id, s_entry (index, is_task)))
            return s_refuse (msg, msg_size, bad_id, id, SQ_E_DUPLICATE_ID,
                             "id %u appears twice in the submit", id);
    }
    for (uint32_t i = 0; i < sub->n_objects; i++) {
        const sq_object_spec_t *o = &sub->objects [i];
        check->producer [i] = -1;
        if (o->frame == 0 || (o->frame > 0 && (size_t) o->frame > n_payloads))
            return s_refuse (msg, msg_size, bad_id, o->id, SQ_E_INVALID,
                             "object %u refers to payload frame %d, the message has %zu",
                             o->id, o->frame, n_payloads);
        if (o->flags & ~(uint32_t) (SQ_OBJ_KEEP | SQ_OBJ_STREAM))
            return s_refuse (msg, msg_size, bad_id, o->id, SQ_E_INVALID,
                             "object %u has unknown flags %u", o->id, o->flags);
        if ((o->flags & SQ_OBJ_STREAM) && (o->flags & SQ_OBJ_KEEP))
            return s_refuse (msg, msg_size, bad_id, o->id, SQ_E_INVALID,
                             "object %u is a stream and cannot be kept: it exists only while "
                             "it flows (store it with a consumer)", o->id);
        if ((o->flags & SQ_OBJ_STREAM) && o->frame != -1)
            return s_refuse (msg, msg_size, bad_id, o->id, SQ_E_INVALID,
                             "object %u is a stream and cannot have data: a task writes it", o->id);
    }
    for (uint32_t t = 0; t < sub->n_tasks; t++) {
        const sq_task_spec_t *task = &sub->tasks [t];
        int kind = sq_kind_lookup (task->kind);
        if (kind < 0)
            return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_UNKNOWN_KIND,
                             "task %u has unknown kind '%.*s'", task->id,
                             (int) (task->kind.len > 100? 100: task->kind.len), task->kind.ptr);
        sq_taskconf_t conf;
        sq_errbuf_t err;
        if (sq_taskconf_decode (&conf, (sq_kind_t) kind, task->config, task->config_size,
                                task->n_inputs, task->n_outputs, &err))
            return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_BAD_CONFIG,
                             "task %u: %s", task->id, err.text);
        sq_taskconf_release (&conf);
        if (task->array && kind != SQ_KIND_EXECUTE)
            return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_INVALID,
                             "task %u: only an execute task may be an array", task->id);
        if (task->array && task->n_outputs)
            return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_INVALID,
                             "task %u: an array task has no outputs (its elements write "
                             "files)", task->id);
        if (task->array && (conf.stdin_input >= 0 || task->n_inputs))
            return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_INVALID,
                             "task %u: an array task reads no inputs", task->id);
        int rc = s_check_task_streams (session, check, t, &conf, msg, msg_size, bad_id);
        if (rc)
            return rc;
        if (conf.actor || conf.call) {
            int rc = s_check_actor (session, check, t, &conf, msg, msg_size, bad_id);
            if (rc)
                return rc;
        }
        for (uint32_t i = 0; i < task->n_inputs; i++) {
            uint32_t id = task->inputs [i];
            uintptr_t entry = s_ids_get (&check->ids, id);
            if (entry && ((entry - 1) & 1))
                return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_UNKNOWN_ID,
                                 "task %u: input %u is a task, not a data object", task->id, id);
            if (!entry) {
                if (gx_as_task (gx_item (session, id)))
                    return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_UNKNOWN_ID,
                                     "task %u: input %u is a task, not a data object", task->id, id);
                object_t *old = gx_as_object (gx_item (session, id));
                if (!old || old->released)
                    //  The reply names the task, as for every other
                    //  fault of a task's spec (docs/protocol.md).
                    return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_UNKNOWN_ID,
                                     "task %u: input %u is not an object of session %u "
                                     "(never declared, or already released because nobody kept it)",
                                     task->id, id, session->id);
            }
        }
        for (uint32_t i = 0; i < task->n_outputs; i++) {
            uint32_t id = task->outputs [i];
            uintptr_t entry = s_ids_get (&check->ids, id);
            if (!entry || ((entry - 1) & 1))
                return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_UNKNOWN_ID,
                                 "task %u: output %u must be an object declared in the same submit",
                                 task->id, id);
            uint32_t index = (uint32_t) ((entry - 1) >> 1);
            if (sub->objects [index].frame != -1)
                return s_refuse (msg, msg_size, bad_id, id, SQ_E_INVALID,
                                 "object %u has data and is also the output of task %u", id, task->id);
            if (check->producer [index] >= 0)
                return s_refuse (msg, msg_size, bad_id, id, SQ_E_DUPLICATE_ID,
                                 "object %u is the output of two tasks (%u and %u)", id,
                                 sub->tasks [check->producer [index]].id, task->id);
            check->producer [index] = (int32_t) t;
        }
        for (uint32_t r = 0; r < task->n_resources; r++) {
            const sq_resource_t *res = &task->resources [r];
            if (resource_ok && !resource_ok (resource_arg, res->name, res->amount)) {
                char one [96];
                sq_resource_format (res, one, sizeof one);
                return s_refuse (msg, msg_size, bad_id, task->id, SQ_E_RESOURCES,
                                 "task %u needs %s but no governor has ever offered that much",
                                 task->id, one);
            }
        }
    }
    for (uint32_t i = 0; i < sub->n_objects; i++)
        if (sub->objects [i].frame == -1 && check->producer [i] < 0)
            return s_refuse (msg, msg_size, bad_id, sub->objects [i].id, SQ_E_NO_PRODUCER,
                             "object %u has neither data nor a task producing it",
                             sub->objects [i].id);
    return SQ_OK;
}

//  Kahn's algorithm over the submitted tasks: edges run from a producer to
//  the tasks of this submit consuming its outputs. Objects of earlier
//  submits cannot depend on new tasks, so cycles can only lie inside.
static int
s_check_cycles (s_check_t *check, char *msg, size_t msg_size, uint32_t *bad_id)
{
    const sq_submit_t *sub = check->submit;
    uint32_t n = sub->n_tasks;
    if (n == 0)
        return SQ_OK;
    uint32_t *indegree = (uint32_t *) calloc (n, sizeof (uint32_t));
    uint32_t *queue = (uint32_t *) malloc (n * sizeof (uint32_t));
    //  consumers of each task, as a CSR adjacency list
    uint32_t *first = (uint32_t *) calloc (n + 1, sizeof (uint32_t));
    size_t n_edges = 0;
    for (uint32_t t = 0; t < n; t++)
        n_edges += sub->tasks [t].n_inputs;
    uint32_t *edges = (uint32_t *) malloc ((n_edges + 1) * sizeof (uint32_t));
    int rc = SQ_OK;
    if (!indegree || !queue || !first || !edges) {
        rc = s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");
        goto done;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t t = 0; t < n; t++) {
            const sq_task_spec_t *task = &sub->tasks [t];
            for (uint32_t i = 0; i < task->n_inputs; i++) {
                uintptr_t entry = s_ids_get (&check->ids, task->inputs [i]);
                if (!entry)
                    continue;   //  an object of an earlier submit
                int32_t producer = check->producer [(entry - 1) >> 1];
                if (producer < 0)
                    continue;   //  a constant
                if (pass == 0) {
                    first [producer + 1]++;
                    indegree [t]++;
                }
                else
                    edges [first [producer]++] = t;
            }
        }
        if (pass == 0)
            for (uint32_t t = 0; t < n; t++)
                first [t + 1] += first [t];
    }
    //  The second pass advanced first[p] to the end of p's edges.
    uint32_t head = 0, tail = 0;
    for (uint32_t t = 0; t < n; t++)
        if (indegree [t] == 0)
            queue [tail++] = t;
    while (head < tail) {
        uint32_t t = queue [head++];
        uint32_t begin = t == 0? 0: first [t - 1];
        for (uint32_t e = begin; e < first [t]; e++)
            if (--indegree [edges [e]] == 0)
                queue [tail++] = edges [e];
    }
    if (tail < n) {
        for (uint32_t t = 0; t < n; t++)
            if (indegree [t]) {
                rc = s_refuse (msg, msg_size, bad_id, sub->tasks [t].id, SQ_E_CYCLE,
                               "task %u is part of a dependency cycle", sub->tasks [t].id);
                break;
            }
    }
done:
    free (indegree);
    free (queue);
    free (first);
    free (edges);
    return rc;
}

static char *
s_strndup_or_null (mpr_str_t s)
{
    return s.len? mpr_strdup (s): NULL;
}

//  The rare fields of a task spec go out of line; *extra_p stays NULL when
//  all are defaults. On failure what was made is left for gx_task_destroy.
static int
s_extra_from_spec (task_extra_t **extra_p, const sq_task_spec_t *spec)
{
    bool needed = spec->name.len || spec->priority || spec->max_retries || spec->timeout_ms
               || spec->n_governors;
    for (uint32_t r = 0; r < spec->n_resources && !needed; r++)
        needed = !mpr_str_eq (spec->resources [r].name, SQ_RES_CPUS)
              || spec->resources [r].amount != 1;
    if (!needed)
        return 0;
    task_extra_t *extra = (task_extra_t *) malloc (sizeof *extra);
    if (!extra)
        return -1;
    *extra = task_extra_default;
    *extra_p = extra;
    extra->priority = spec->priority;
    extra->max_retries = spec->max_retries;
    extra->timeout_ms = spec->timeout_ms;
    extra->name = s_strndup_or_null (spec->name);
    if (spec->name.len && !extra->name)
        return -1;
    if (spec->n_governors) {
        extra->governors = (uint32_t *) malloc (spec->n_governors * sizeof (uint32_t));
        if (!extra->governors)
            return -1;
        memcpy (extra->governors, spec->governors, spec->n_governors * sizeof (uint32_t));
        extra->n_governors = spec->n_governors;
        extra->loose = spec->loose;
    }
    if (spec->n_resources) {
        extra->resources = (sq_resource_t *) calloc (spec->n_resources, sizeof (sq_resource_t));
        if (!extra->resources)
            return -1;
    }
    for (uint32_t r = 0; r < spec->n_resources; r++) {
        const sq_resource_t *res = &spec->resources [r];
        if (mpr_str_eq (res->name, SQ_RES_CPUS)) {
            extra->cpus = res->amount > UINT32_MAX? UINT32_MAX: (uint32_t) res->amount;
            continue;
        }
        char *name = mpr_strdup (res->name);
        if (!name)
            return -1;
        extra->resources [extra->n_resources].name.ptr = name;
        extra->resources [extra->n_resources].name.len = res->name.len;
        extra->resources [extra->n_resources].amount = res->amount;
        extra->n_resources++;
    }
    return 0;
}

//  A task in one block with its outputs, its io array and its config:
//  one allocation per task, and objects never freed before their producer
//  (both go when the session closes).
static task_t *
s_task_new (session_t *session, const sq_task_spec_t *spec)
{
    size_t n_io = (size_t) spec->n_inputs + spec->n_outputs;
    size_t config_size = spec->config_size == 1 && spec->config [0] == 0xc0? 0: spec->config_size;
    task_t *task = (task_t *) calloc (1, sizeof (task_t) + spec->n_outputs * sizeof (object_t)
                                         + n_io * sizeof (object_t *) + config_size);
    if (!task)
        return NULL;
    task->key = sq_key (session->id, spec->id);
    task->session = session;
    task->kind = (uint8_t) sq_kind_lookup (spec->kind);
    task->n_inputs = spec->n_inputs;
    task->n_outputs = spec->n_outputs;
    task->io = (object_t **) (gx_embedded (task) + spec->n_outputs);
    for (uint32_t i = 0; i < spec->n_outputs; i++) {
        object_t *output = &gx_embedded (task) [i];
        output->embedded = true;
        output->producer = task;
        output->producer_output = i;
        task->io [task->n_inputs + i] = output;
    }
    if (config_size)
        memcpy (task->io + n_io, spec->config, config_size);
    task->config_size = (uint32_t) config_size;
    if (s_extra_from_spec (&task->extra, spec))
        gx_task_destroy (&task);
    return task;
}

//  Fills an object record from its spec.
static int
s_object_init (object_t *o, session_t *session, const sq_object_spec_t *spec,
               zmq_msg_t *payloads)
{
    o->key = sq_key (session->id, spec->id);
    o->session = session;
    o->keep = (spec->flags & SQ_OBJ_KEEP) != 0;
    o->stream = (spec->flags & SQ_OBJ_STREAM) != 0;
    o->content_type = s_strndup_or_null (spec->content_type);
    if (spec->content_type.len && !o->content_type)
        return -1;
    if (spec->frame > 0) {
        zmq_msg_t copy;
        zmq_msg_init (&copy);
        if (zmq_msg_copy (&copy, &payloads [spec->frame - 1]))
            return -1;
        o->data = sq_blob_from_msg (&copy);
        if (!o->data)
            return -1;
        o->size = sq_blob_size (o->data);
        o->state = OBJ_FINISHED;
    }
    else
    if (spec->frame == SQ_FRAME_UPLOADED) {
        //  Data plane: already on a governor, which broker.c records as
        //  its location once the submit is committed.
        o->size = spec->size;
        o->state = OBJ_FINISHED;
    }
    return 0;
}

int
graph_submit (graph_t *self, session_t *session, const sq_submit_t *sub,
              zmq_msg_t *payloads, size_t n_payloads,
              graph_resource_fn *resource_ok, void *resource_arg,
              char *msg, size_t msg_size, uint32_t *bad_id)
{
    *bad_id = 0;
    s_check_t check = { .submit = sub };
    check.producer = (int32_t *) malloc ((sub->n_objects + 1) * sizeof (int32_t));
    int rc = SQ_OK;
    if (s_ids_init (&check.ids, sub) || !check.producer)
        rc = s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");
    if (rc == SQ_OK)
        rc = s_validate (session, &check, n_payloads, resource_ok, resource_arg,
                         msg, msg_size, bad_id);
    if (rc == SQ_OK)
        rc = s_check_cycles (&check, msg, msg_size, bad_id);
    if (rc == SQ_OK)
        rc = s_check_streams (&check, msg, msg_size, bad_id);
    if (rc == SQ_OK && gx_reserve (session, sub))
        rc = s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");

    //  Create every task (with its outputs) and constant; on allocation
    //  failure, undo.
    object_t **objects = NULL;
    task_t **tasks = NULL;
    if (rc == SQ_OK) {
        objects = (object_t **) calloc (sub->n_objects + 1, sizeof *objects);
        tasks = (task_t **) calloc (sub->n_tasks + 1, sizeof *tasks);
        if (!objects || !tasks)
            rc = s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");
    }
    for (uint32_t t = 0; rc == SQ_OK && t < sub->n_tasks; t++) {
        tasks [t] = s_task_new (session, &sub->tasks [t]);
        if (!tasks [t]) { rc = SQ_E_NOMEM; break; }
        if (sub->tasks [t].array) {
            task_extra_t *extra = graph_task_extra (tasks [t]);
            if (!extra || !(extra->array = jobarray_new (tasks [t], &sub->tasks [t]))) {
                rc = SQ_E_NOMEM;
                break;
            }
            tasks [t]->array_parent = true;
        }
        for (uint32_t i = 0; i < sub->tasks [t].n_outputs; i++) {
            uintptr_t entry = s_ids_get (&check.ids, sub->tasks [t].outputs [i]);
            objects [(entry - 1) >> 1] = &gx_embedded (tasks [t]) [i];
        }
    }
    for (uint32_t i = 0; rc == SQ_OK && i < sub->n_objects; i++) {
        if (!objects [i])
            objects [i] = (object_t *) calloc (1, sizeof (object_t));
        if (!objects [i] || s_object_init (objects [i], session, &sub->objects [i], payloads))
            rc = SQ_E_NOMEM;
    }
    //  Consumer lists of objects of earlier submits must grow without
    //  failing later: reserve first.
    for (uint32_t t = 0; rc == SQ_OK && t < sub->n_tasks; t++) {
        const sq_task_spec_t *spec = &sub->tasks [t];
        for (uint32_t i = 0; rc == SQ_OK && i < spec->n_inputs; i++) {
            uintptr_t entry = s_ids_get (&check.ids, spec->inputs [i]);
            object_t *o = entry? objects [(entry - 1) >> 1]
                               : gx_as_object (gx_item (session, spec->inputs [i]));
            tasks [t]->io [i] = o;
            if (gx_add_consumer (o, tasks [t]))
                rc = SQ_E_NOMEM;
        }
    }
    //  Actors: hosts are marked, calls join their host's queue (taken out
    //  again on undo) and run on the host's resources, never retried.
    uint32_t n_linked = 0;
    for (uint32_t t = 0; rc == SQ_OK && check.actor && t < sub->n_tasks; t++) {
        if (check.actor [t] == S_HOST)
            tasks [t]->actor_host = true;
        if (check.actor [t] == 0 || check.actor [t] == S_HOST)
            continue;
        uintptr_t entry = s_ids_get (&check.ids, check.actor [t]);
        task_t *host = entry? tasks [(entry - 1) >> 1]
                            : gx_as_task (gx_item (session, check.actor [t]));
        task_extra_t *extra = graph_task_extra (tasks [t]);
        if (!extra || gx_actor_reserve (host)) {
            rc = SQ_E_NOMEM;
            break;
        }
        for (uint32_t r = 0; r < extra->n_resources; r++)
            free ((char *) extra->resources [r].name.ptr);
        extra->n_resources = 0;
        extra->cpus = 0;
        extra->max_retries = 0;
        extra->host = host;
        tasks [t]->actor_call = true;
        gx_actor_append (host, tasks [t]);
        n_linked = t + 1;
    }
    if (rc == SQ_OK) {
        //  The submit is accepted from here on: nothing below can fail.
        for (uint32_t i = 0; i < sub->n_objects; i++) {
            if (sub->objects [i].id > session->max_id)
                session->max_id = sub->objects [i].id;
            //  Constants stay until their session closes (graph.c).
            if (!objects [i]->producer) {
                session->constants += objects [i]->size;
                if (session->share)
                    session->share->constants += objects [i]->size;
            }
        }
        for (uint32_t t = 0; t < sub->n_tasks; t++)
            if (sub->tasks [t].id > session->max_id)
                session->max_id = sub->tasks [t].id;
        for (uint32_t i = 0; i < sub->n_objects; i++) {
            gx_put (session, sub->objects [i].id, gx_item_object (objects [i]));
            session->n_objects++;
            self->live_objects++;
            session->live_objects++;
        }
        for (uint32_t t = 0; t < sub->n_tasks; t++) {
            task_t *task = tasks [t];
            gx_put (session, sub->tasks [t].id, task);
            session->n_tasks++;
            session->unfinished++;
            task->state = TASK_WAITING;
            self->counts [TASK_WAITING]++;
            session->counts [TASK_WAITING]++;
            for (uint32_t i = 0; i < task->n_inputs; i++) {
                task->io [i]->pending++;
                task->stream_in |= task->io [i]->stream;
                if (task->io [i]->state != OBJ_FINISHED)
                    task->unfinished++;
            }
            for (uint32_t i = 0; i < task->n_outputs; i++)
                task->stream_out |= task->io [task->n_inputs + i]->stream;
        }
        order_assign (tasks, sub->n_tasks, &self->next_order);
        //  A call of an actor that has ended fails at the next settle.
        for (uint32_t t = 0; check.actor && t < sub->n_tasks; t++)
            if (tasks [t]->actor_call)
                gx_actor_touch (self, tasks [t]);
        //  Tasks fed by failed objects of earlier submits fail now.
        for (uint32_t t = 0; t < sub->n_tasks; t++) {
            task_t *task = tasks [t];
            for (uint32_t i = 0; i < task->n_inputs && !gx_final (task); i++)
                if (task->io [i]->state == OBJ_FAILED)
                    gx_fail (self, task, task->io [i]->failure);
        }
        for (uint32_t t = 0; t < sub->n_tasks; t++) {
            task_t *task = tasks [t];
            if (task->state == TASK_WAITING && task->unfinished == 0) {
                gx_set_state (self, task, TASK_READY);
                self->hooks.task_ready (self->hooks.arg, task);
            }
        }
        for (uint32_t i = 0; i < sub->n_objects; i++)
            gx_queue_free_check (self, objects [i]);
        gx_flush_frees (self);
    }
    else {
        //  Undo: out of their hosts' queues (newest first), unlink from
        //  consumer lists of older objects, free the new (constants
        //  before tasks: task outputs live in the tasks).
        for (uint32_t t = n_linked; t-- > 0; )
            if (tasks [t]->actor_call)
                gx_actor_unappend (tasks [t]->extra->host, tasks [t]);
        for (uint32_t t = 0; tasks && t < sub->n_tasks && tasks [t]; t++)
            for (uint32_t i = 0; i < tasks [t]->n_inputs; i++) {
                object_t *o = tasks [t]->io [i];
                if (o && o->n_consumers && object_consumers (o) [o->n_consumers - 1] == tasks [t])
                    o->n_consumers--;
            }
        for (uint32_t i = 0; objects && i < sub->n_objects; i++)
            if (objects [i] && !objects [i]->embedded)
                gx_object_destroy (&objects [i]);
        for (uint32_t t = 0; tasks && t < sub->n_tasks; t++)
            gx_task_destroy (&tasks [t]);
        if (rc == SQ_E_NOMEM)
            s_refuse (msg, msg_size, bad_id, 0, SQ_E_NOMEM, "out of memory");
    }
    free (objects);
    free (tasks);
    free (check.producer);
    free (check.actor);
    s_ids_destroy (&check.ids);
    return rc;
}

task_t *
graph_element_new (graph_t *self, task_t *parent, uint32_t id, uint32_t element,
                   const uint8_t *config, size_t config_size)
{
    session_t *session = parent->session;
    const task_extra_t *pe = task_extra (parent);
    //  The array task's settings, as a spec: cpus travel as a resource.
    sq_resource_t resources [SQ_MAX_RESOURCES + 1];
    uint32_t n_res = 0;
    resources [n_res++] = (sq_resource_t) { { SQ_RES_CPUS, (uint32_t) strlen (SQ_RES_CPUS) },
                                            pe->cpus };
    for (uint32_t r = 0; r < pe->n_resources && n_res <= SQ_MAX_RESOURCES; r++)
        resources [n_res++] = pe->resources [r];
    const char *kind = sq_kind_name ((sq_kind_t) parent->kind);
    sq_task_spec_t spec = {
        .id = id, .kind = { kind, (uint32_t) strlen (kind) },
        .config = config, .config_size = config_size,
        .n_resources = n_res, .resources = resources,
        .priority = pe->priority, .max_retries = pe->max_retries, .timeout_ms = pe->timeout_ms,
        .name = { pe->name? pe->name: "", pe->name? (uint32_t) strlen (pe->name): 0 }
    };
    sq_submit_t one = { .n_tasks = 1, .tasks = &spec };
    if (gx_reserve (session, &one))
        return NULL;
    task_t *task = s_task_new (session, &spec);
    task_extra_t *extra = task? graph_task_extra (task): NULL;
    if (!extra) {
        gx_task_destroy (&task);
        return NULL;
    }
    extra->parent = parent;
    extra->element = element;
    task->array_element = true;
    task->order = parent->order;
    gx_put (session, id, task);
    session->n_tasks++;
    session->unfinished++;
    task->state = TASK_WAITING;
    self->counts [TASK_WAITING]++;
    session->counts [TASK_WAITING]++;
    gx_set_state (self, task, TASK_READY);
    self->hooks.task_ready (self->hooks.arg, task);
    return task;
}

task_t *
graph_adopt (graph_t *self, session_t *session, uint32_t id, object_t *object)
{
    sq_resource_t cpus = { { SQ_RES_CPUS, (uint32_t) strlen (SQ_RES_CPUS) }, 1 };
    //  Run again where a governor died with it, as a client's task would be.
    sq_task_spec_t spec = {
        .id = id, .kind = { "noop", 4 }, .n_inputs = 1, .n_outputs = 1,
        .n_resources = 1, .resources = &cpus, .max_retries = 3,
        .name = { "adopt", 5 }
    };
    sq_object_spec_t out = { .id = id + 1, .flags = SQ_OBJ_KEEP, .frame = -1 };
    sq_submit_t one = { .n_objects = 1, .objects = &out, .n_tasks = 1, .tasks = &spec };
    if (id >= UINT32_MAX - 1 || gx_reserve (session, &one))
        return NULL;
    task_t *task = s_task_new (session, &spec);
    if (!task)
        return NULL;
    object_t *output = &gx_embedded (task) [0];
    output->key = sq_key (session->id, id + 1);
    output->session = session;
    output->keep = true;
    if (object->content_type && !(output->content_type = strdup (object->content_type))) {
        gx_task_destroy (&task);
        return NULL;
    }
    task->io [0] = object;
    if (gx_add_consumer (object, task)) {
        gx_task_destroy (&task);
        return NULL;
    }
    //  Not in max_id: that is the client's numbering (RESUME, ATTACH).
    gx_put (session, id, task);
    gx_put (session, id + 1, gx_item_object (output));
    session->n_objects++;
    self->live_objects++;
    session->live_objects++;
    session->n_tasks++;
    session->unfinished++;
    task->state = TASK_WAITING;
    self->counts [TASK_WAITING]++;
    session->counts [TASK_WAITING]++;
    object->pending++;
    if (object->state != OBJ_FINISHED)
        task->unfinished++;
    order_assign (&task, 1, &self->next_order);
    if (object->state == OBJ_FAILED)
        gx_fail (self, task, object->failure);
    else
    if (task->unfinished == 0) {
        gx_set_state (self, task, TASK_READY);
        self->hooks.task_ready (self->hooks.arg, task);
    }
    gx_flush_frees (self);
    return task;
}
