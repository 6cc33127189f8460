/*  reattach: settling a reattaching governor's inventory. */
#include "reattach.h"
#include "log.h"
#include "grow.h"
#include <stdlib.h>
#include <string.h>

#define S_MAX_LISTED 10000000   //  entries one inventory may hold back

typedef struct {
    uint64_t key;
    uint32_t version;           //  HELD: the object's; RUNNING: the attempt
    uint64_t size;
} s_entry_t;

struct _inventory_t {
    s_entry_t *held;            //  objects of tasks not known finished
    size_t n_held, cap_held;
    s_entry_t *running;
    size_t n_running, cap_running;
    reattach_stats_t stats;
};

int
reattach_begin (gov_t *gov)
{
    if (gov->inventory)
        return 0;
    gov->inventory = (inventory_t *) calloc (1, sizeof (inventory_t));
    return gov->inventory? 0: -1;
}

void
inventory_destroy (inventory_t **self_p)
{
    inventory_t *self = *self_p;
    if (self) {
        free (self->held);
        free (self->running);
        free (self);
        *self_p = NULL;
    }
}

static int
s_push (s_entry_t **list, size_t *n, size_t *cap, uint64_t key, uint32_t version, uint64_t size)
{
    if (*n >= S_MAX_LISTED)
        return -1;
    if (*n == *cap && sq_grow ((void **) list, cap, *n + 1, sizeof **list, 64, S_MAX_LISTED))
        return -1;
    (*list) [(*n)++] = (s_entry_t) { key, version, size };
    return 0;
}

void
reattach_held (graph_t *graph, gov_t *gov, uint64_t key, uint32_t version, uint64_t size)
{
    inventory_t *inv = gov->inventory;
    object_t *object = graph_object (graph, key);
    if (object && object->state == OBJ_FINISHED && !object->released
    &&  object->size == size && object->version == version) {
        graph_object_add_location (graph, object, gov, true);
        inv->stats.located++;
        return;
    }
    task_t *producer = object? object->producer: NULL;
    if (producer && object->state == OBJ_UNFINISHED
    &&  (producer->state == TASK_READY || producer->state == TASK_WAITING)
    &&  s_push (&inv->held, &inv->n_held, &inv->cap_held, key, version, size) == 0)
        return;                 //  settled at the end: all its outputs, or none
    gov_order_drop (gov, key);
    inv->stats.dropped++;
}

void
reattach_running (gov_t *gov, uint64_t key, uint32_t attempt)
{
    inventory_t *inv = gov->inventory;
    if (s_push (&inv->running, &inv->n_running, &inv->cap_running, key, attempt, 0)) {
        gov_order_stop (gov, key, attempt);
        inv->stats.stopped++;
    }
}

static int
s_by_key (const void *a, const void *b)
{
    uint64_t x = ((const s_entry_t *) a)->key, y = ((const s_entry_t *) b)->key;
    return x < y? -1: x > y;
}

static s_entry_t *
s_find (inventory_t *inv, uint64_t key)
{
    s_entry_t probe = { key, 0, 0 };
    return inv->n_held? (s_entry_t *) bsearch (&probe, inv->held, inv->n_held, sizeof probe,
                                                s_by_key): NULL;
}

//  The producer finished on this governor if it holds every output at one
//  version (sizes as it reports them).
static bool
s_finish_there (graph_t *graph, gov_t *gov, inventory_t *inv, task_t *task)
{
    uint64_t sizes_small [16];
    sq_blob_t *data_small [16] = { NULL };
    uint64_t *sizes = task->n_outputs <= 16? sizes_small
                    : (uint64_t *) malloc (task->n_outputs * sizeof *sizes);
    sq_blob_t **data = task->n_outputs <= 16? data_small
                     : (sq_blob_t **) calloc (task->n_outputs, sizeof *data);
    bool whole = sizes && data;
    uint32_t version = 0;
    for (uint32_t i = 0; whole && i < task->n_outputs; i++) {
        s_entry_t *e = s_find (inv, task->io [task->n_inputs + i]->key);
        whole = e && (i == 0 || e->version == version);
        if (whole) {
            version = e->version;
            sizes [i] = e->size;
        }
    }
    if (whole)
        graph_task_restore_finished (graph, task, gov, version, sizes, data, task->n_outputs);
    if (sizes != sizes_small)
        free (sizes);
    if (data != data_small)
        free (data);
    return whole;
}

void
reattach_end (graph_t *graph, gov_t *gov, reattach_stats_t *stats)
{
    inventory_t *inv = gov->inventory;
    if (!inv) {
        memset (stats, 0, sizeof *stats);
        return;
    }
    if (inv->n_held)            //  qsort of NULL is undefined even for 0 items
        qsort (inv->held, inv->n_held, sizeof (s_entry_t), s_by_key);
    for (size_t i = 0; i < inv->n_held; i++) {
        object_t *object = graph_object (graph, inv->held [i].key);
        task_t *producer = object? object->producer: NULL;
        if (producer && object->state == OBJ_UNFINISHED
        &&  (producer->state == TASK_READY || producer->state == TASK_WAITING)
        &&  s_finish_there (graph, gov, inv, producer)) {
            inv->stats.finished++;
            inv->stats.located += producer->n_outputs;
        }
        else
        if (!object || object->state != OBJ_FINISHED || !graph_object_location (object, gov)) {
            gov_order_drop (gov, inv->held [i].key);
            inv->stats.dropped++;
        }
    }
    for (size_t i = 0; i < inv->n_running; i++) {
        s_entry_t *e = &inv->running [i];
        task_t *task = graph_task (graph, e->key);
        if (task && graph_task_adopt (graph, task, gov, e->version, true)
        &&  gov_task_add (gov, task) == 0)
            inv->stats.adopted++;
        else {
            if (task && task->gov == gov && task->attempt == e->version)
                continue;       //  adopted, but the map is out of memory: it reports anyway
            gov_order_stop (gov, e->key, e->version);
            inv->stats.stopped++;
        }
    }
    *stats = inv->stats;
    inventory_destroy (&gov->inventory);
}
