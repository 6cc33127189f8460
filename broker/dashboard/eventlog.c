/*  eventlog: the event file, the dashboard's rings and the counters behind
    /metrics. See eventlog.h and docs/eventlog.md. */
#include "eventlog.h"
#include "graph.h"
#include "gov.h"
#include "taskconf.h"
#include "log.h"
#include "private.h"
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

//  A large buffer: at thousands of tasks a second the file costs one write
//  per reactor turn, not one per event.
#define S_FILE_BUFFER (1 << 20)

typedef struct {
    eventlog_event_t *items;
    size_t cap;
    uint64_t total;             //  events ever put in
} s_ring_t;

struct _eventlog_t {
    FILE *file;
    char *buffer;
    bool dirty;
    uint64_t seq;
    s_ring_t tasks;
    s_ring_t errors;
    eventlog_stats_t stats;
    int64_t mono_us;            //  clocks at the last eventlog_tick
    int64_t wall_us;
};

static const char *s_type_names [EV_TYPE_COUNT_] = {
    "governor_joined", "governor_left", "submit", "task_assigned", "task_started",
    "task_finished", "task_failed", "object_copy", "object_located"
};

//  Upper bounds of the scheduling latency buckets, seconds.
static const double s_bounds [EVENTLOG_LATENCY_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10
};

const char *
eventlog_type_name (eventlog_type_t type)
{
    return type < EV_TYPE_COUNT_? s_type_names [type]: "unknown";
}

const double *
eventlog_latency_bounds (void)
{
    return s_bounds;
}

static int
s_ring_init (s_ring_t *ring, size_t cap)
{
    ring->items = (eventlog_event_t *) calloc (cap, sizeof *ring->items);
    ring->cap = cap;
    return ring->items? 0: -1;
}

static void
s_ring_put (s_ring_t *ring, const eventlog_event_t *event)
{
    ring->items [ring->total % ring->cap] = *event;
    ring->total++;
}

eventlog_t *
eventlog_new (const char *path)
{
    eventlog_t *self = (eventlog_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    if (s_ring_init (&self->tasks, EVENTLOG_RING) || s_ring_init (&self->errors, EVENTLOG_ERRORS)) {
        eventlog_destroy (&self);
        return NULL;
    }
    if (path) {
        //  Every tenant's task names and errors: the owner's alone.
        char err [600] = "out of memory";
        int fd = sq_open_private (path, O_WRONLY | O_APPEND | O_CREAT, err, sizeof err);
        self->file = fd >= 0? fdopen (fd, "a"): NULL;
        if (fd >= 0 && !self->file)
            close (fd);
        self->buffer = (char *) malloc (S_FILE_BUFFER);
        if (!self->file || !self->buffer) {
            sq_error ("cannot open the event log: %s", err);
            eventlog_destroy (&self);
            return NULL;
        }
        setvbuf (self->file, self->buffer, _IOFBF, S_FILE_BUFFER);
    }
    eventlog_tick (self);
    return self;
}

void
eventlog_destroy (eventlog_t **self_p)
{
    eventlog_t *self = *self_p;
    if (!self)
        return;
    if (self->file)
        fclose (self->file);    //  flushes; the buffer is still ours here
    free (self->buffer);
    free (self->tasks.items);
    free (self->errors.items);
    free (self);
    *self_p = NULL;
}

static void
s_json_string (FILE *out, const char *s)
{
    fputc ('"', out);
    for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf (out, "\\%c", *p);
        else
        if (*p < 0x20)
            fprintf (out, "\\u%04x", *p);
        else
            fputc (*p, out);
    }
    fputc ('"', out);
}

void
eventlog_write_json (const eventlog_event_t *e, FILE *out)
{
    fprintf (out, "{\"seq\":%llu,\"time\":%lld.%06lld,\"event\":\"%s\"",
             (unsigned long long) e->seq, (long long) (e->time_us / 1000000),
             (long long) (e->time_us % 1000000), eventlog_type_name ((eventlog_type_t) e->type));
    if (e->session)
        fprintf (out, ",\"session\":%u", e->session);
    if (e->id)
        fprintf (out, ",\"id\":%u", e->id);
    if (e->gov) {
        fprintf (out, ",\"governor\":%u", e->gov);
        if (e->gov_name [0]) {
            fputs (",\"governor_name\":", out);
            s_json_string (out, e->gov_name);
        }
    }
    switch ((eventlog_type_t) e->type) {
        case EV_GOV_JOINED:
            fprintf (out, ",\"cpus\":%u", e->count);
            break;
        case EV_GOV_LEFT:
            fputs (",\"reason\":", out);
            s_json_string (out, e->message);
            break;
        case EV_SUBMIT:
            fprintf (out, ",\"tasks\":%u,\"objects\":%u", e->count, e->count2);
            break;
        case EV_TASK_ASSIGNED:
            fprintf (out, ",\"attempt\":%u,\"wait_us\":%lld", e->attempt, (long long) e->wait_us);
            break;
        case EV_TASK_STARTED:
            fprintf (out, ",\"attempt\":%u", e->attempt);
            break;
        case EV_TASK_FINISHED:
        case EV_TASK_FAILED:
            fprintf (out, ",\"attempt\":%u,\"run_us\":%lld", e->attempt, (long long) e->run_us);
            if (e->type == EV_TASK_FAILED) {
                fputs (",\"message\":", out);
                s_json_string (out, e->message);
            }
            break;
        case EV_OBJECT_COPY:
            fprintf (out, ",\"from\":%u,\"size\":%llu", e->from_gov, (unsigned long long) e->size);
            break;
        case EV_OBJECT_LOCATED:
            fprintf (out, ",\"size\":%llu", (unsigned long long) e->size);
            break;
        default:
            break;
    }
    if (e->kind [0]) {
        fputs (",\"kind\":", out);
        s_json_string (out, e->kind);
    }
    if (e->name [0]) {
        fputs (",\"name\":", out);
        s_json_string (out, e->name);
    }
    fputc ('}', out);
}

void
eventlog_emit (eventlog_t *self, eventlog_event_t *event)
{
    event->seq = ++self->seq;
    event->time_us = self->wall_us;
    eventlog_stats_t *stats = &self->stats;
    if (event->type < EV_TYPE_COUNT_)
        stats->events [event->type]++;
    switch ((eventlog_type_t) event->type) {
        case EV_TASK_STARTED:
        case EV_TASK_FINISHED:
            s_ring_put (&self->tasks, event);
            break;
        case EV_TASK_FAILED:
            s_ring_put (&self->tasks, event);
            s_ring_put (&self->errors, event);
            break;
        case EV_GOV_LEFT:
            s_ring_put (&self->errors, event);
            break;
        case EV_TASK_ASSIGNED: {
            double seconds = (double) event->wait_us / 1e6;
            for (int i = 0; i < EVENTLOG_LATENCY_BUCKETS; i++)
                if (seconds <= s_bounds [i])
                    stats->latency_buckets [i]++;
            stats->latency_count++;
            stats->latency_sum += seconds;
            break;
        }
        case EV_OBJECT_COPY:
            stats->bytes_ordered += event->size;
            break;
        case EV_OBJECT_LOCATED:
            stats->bytes_moved += event->size;
            break;
        default:
            break;
    }
    if (self->file) {
        eventlog_write_json (event, self->file);
        fputc ('\n', self->file);
        self->dirty = true;
    }
}

void
eventlog_flush (eventlog_t *self)
{
    if (self->file && self->dirty) {
        if (fflush (self->file))
            sq_warn ("event log: %s", strerror (errno));
        self->dirty = false;
    }
}

static size_t
s_ring_since (s_ring_t *ring, uint64_t since, const eventlog_event_t **out, size_t max)
{
    size_t held = ring->total < ring->cap? (size_t) ring->total: ring->cap;
    uint64_t first = ring->total - held;
    //  Events are in seq order: skip the ones the reader has seen.
    while (first < ring->total && ring->items [first % ring->cap].seq <= since)
        first++;
    size_t n = 0;
    for (uint64_t k = first; k < ring->total && n < max; k++)
        out [n++] = &ring->items [k % ring->cap];
    return n;
}

size_t
eventlog_task_events (eventlog_t *self, uint64_t since,
                      const eventlog_event_t **out, size_t max)
{
    return s_ring_since (&self->tasks, since, out, max);
}

size_t
eventlog_errors (eventlog_t *self, const eventlog_event_t **out, size_t max)
{
    return s_ring_since (&self->errors, 0, out, max);
}

const eventlog_stats_t *
eventlog_stats (eventlog_t *self)
{
    return &self->stats;
}

//  --------------------------------------------------------------------------
//  Helpers for the broker's hooks

static int64_t
s_clock_us (clockid_t clock)
{
    struct timespec ts;
    clock_gettime (clock, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void
eventlog_tick (eventlog_t *self)
{
    self->mono_us = s_clock_us (CLOCK_MONOTONIC);
    self->wall_us = s_clock_us (CLOCK_REALTIME);
}

//  Bounded string copy; called several times per task, so no printf.
static void
s_copy (char *to, size_t size, const char *from)
{
    size_t n = from? strnlen (from, size - 1): 0;
    if (n)
        memcpy (to, from, n);
    to [n] = 0;
}

void
eventlog_task_ready (eventlog_t *self, task_t *task)
{
    task->stamp_us = self->mono_us;
}

//  run_us < 0: a task that ends is timed from its STARTED's receipt.
static void
s_task_event (eventlog_t *self, eventlog_type_t type, task_t *task, gov_t *gov,
              const char *message, size_t message_len, int64_t run_us)
{
    eventlog_event_t e;
    memset (&e, 0, sizeof e);
    int64_t now = self->mono_us;
    e.type = (uint8_t) type;
    e.session = sq_key_session (task->key);
    e.id = sq_key_id (task->key);
    e.attempt = task->attempt;
    if (gov) {
        e.gov = gov->id;
        s_copy (e.gov_name, sizeof e.gov_name, gov->name);
    }
    s_copy (e.kind, sizeof e.kind, sq_kind_name ((sq_kind_t) task->kind));
    s_copy (e.name, sizeof e.name, task_extra (task)->name);
    if (message && message_len)
        snprintf (e.message, sizeof e.message, "%.*s",
                  (int) (message_len < sizeof e.message? message_len: sizeof e.message - 1), message);
    //  One stamp serves both spans: the ready time is not needed once the
    //  task is assigned, the start time only from then on.
    if (type == EV_TASK_ASSIGNED) {
        e.wait_us = task->stamp_us? now - task->stamp_us: 0;
        task->stamp_us = 0;
    }
    else
    if (type == EV_TASK_STARTED)
        task->stamp_us = now;
    else {
        if (run_us >= 0)
            e.run_us = run_us;
        else
        if (task->stamp_us)
            e.run_us = now - task->stamp_us;
        task->stamp_us = 0;
    }
    eventlog_emit (self, &e);
}

void
eventlog_task (eventlog_t *self, eventlog_type_t type, task_t *task, gov_t *gov,
               const char *message, size_t message_len)
{
    s_task_event (self, type, task, gov, message, message_len, -1);
}

void
eventlog_task_ended (eventlog_t *self, eventlog_type_t type, task_t *task, gov_t *gov,
                     const char *message, size_t message_len, uint64_t run_us)
{
    s_task_event (self, type, task, gov, message, message_len,
                  run_us > INT64_MAX? INT64_MAX: (int64_t) run_us);
}

void
eventlog_governor (eventlog_t *self, eventlog_type_t type, gov_t *gov, const char *why)
{
    eventlog_event_t e;
    memset (&e, 0, sizeof e);
    e.type = (uint8_t) type;
    e.gov = gov->id;
    e.count = gov->cpus;
    s_copy (e.gov_name, sizeof e.gov_name, gov->name);
    if (why)
        snprintf (e.message, sizeof e.message, "governor %s %s: %s", gov->name,
                  strcmp (why, BX_GOODBYE) == 0? "left": "lost", why);
    eventlog_emit (self, &e);
}

void
eventlog_object (eventlog_t *self, eventlog_type_t type, object_t *object,
                 gov_t *to, gov_t *from)
{
    eventlog_event_t e;
    memset (&e, 0, sizeof e);
    e.type = (uint8_t) type;
    e.session = sq_key_session (object->key);
    e.id = sq_key_id (object->key);
    e.size = object->size;
    if (to) {
        e.gov = to->id;
        s_copy (e.gov_name, sizeof e.gov_name, to->name);
    }
    e.from_gov = from? from->id: 0;
    eventlog_emit (self, &e);
}

void
eventlog_submit (eventlog_t *self, uint32_t session, uint32_t tasks, uint32_t objects)
{
    eventlog_event_t e;
    memset (&e, 0, sizeof e);
    e.type = EV_SUBMIT;
    e.session = session;
    e.count = tasks;
    e.count2 = objects;
    eventlog_emit (self, &e);
}
