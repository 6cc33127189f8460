/*  task: copying an ASSIGN entry into a self-contained task. */
#include "task.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t
task_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

task_t *
task_new (const sq_assign_t *assign, sq_errbuf_t *err)
{
    int kind = sq_kind_lookup (assign->kind);
    if (kind < 0) {
        snprintf (err->text, sizeof err->text, "unknown task kind '%.*s'",
                  (int) (assign->kind.len > 200? 200: assign->kind.len), assign->kind.ptr);
        return NULL;
    }
    task_t *self = (task_t *) calloc (1, sizeof *self);
    if (!self)
        goto nomem;
    self->key = assign->key;
    self->attempt = assign->attempt;
    self->kind = (sq_kind_t) kind;
    self->cpus = assign->cpus;
    self->timeout_ms = assign->timeout_ms;
    for (uint32_t i = 0; i < assign->n_resources; i++) {
        if (mpr_str_eq (assign->resources [i].name, SQ_RES_GPUS))
            self->gpus = assign->resources [i].amount;
        if (mpr_str_eq (assign->resources [i].name, "memory")) {
            self->memory = assign->resources [i].amount;
            continue;
        }
        sq_resource_t *mine = &self->resources [self->n_resources];
        mine->name.ptr = mpr_strdup (assign->resources [i].name);
        if (!mine->name.ptr)
            goto nomem;
        mine->name.len = assign->resources [i].name.len;
        mine->amount = assign->resources [i].amount;
        self->n_resources++;
    }
    self->heap_index = SIZE_MAX;
    self->n_inputs = assign->n_inputs;
    self->n_outputs = assign->n_outputs;
    self->config = (uint8_t *) malloc (assign->config_size? assign->config_size: 1);
    self->name = mpr_strdup (assign->name);
    self->tenant = mpr_strdup (assign->tenant);
    self->inputs = (uint64_t *) calloc (assign->n_inputs + 1, sizeof (uint64_t));
    self->outputs = (uint64_t *) calloc (assign->n_outputs + 1, sizeof (uint64_t));
    self->out_types = (char **) calloc (assign->n_outputs + 1, sizeof (char *));
    self->results = (sq_blob_t **) calloc (assign->n_outputs + 1, sizeof (sq_blob_t *));
    if (!self->config || !self->name || !self->tenant || !self->inputs || !self->outputs
    ||  !self->out_types || !self->results)
        goto nomem;
    if (assign->config_size)
        memcpy (self->config, assign->config, assign->config_size);
    for (uint32_t i = 0; i < assign->n_inputs; i++)
        self->inputs [i] = assign->inputs [i].key;
    for (uint32_t i = 0; i < assign->n_outputs; i++) {
        self->outputs [i] = assign->outputs [i].key;
        self->out_types [i] = mpr_strdup (assign->outputs [i].content_type);
        if (!self->out_types [i])
            goto nomem;
    }
    if (sq_taskconf_decode (&self->conf, self->kind, self->config, assign->config_size,
                            assign->n_inputs, assign->n_outputs, err)) {
        task_destroy (&self);
        return NULL;
    }
    self->stream_in = self->stream_out = -1;
    for (uint32_t i = 0; i < assign->n_inputs; i++) {
        if (assign->inputs [i].frame != SQ_FRAME_STREAM)
            continue;
        if (self->stream_in >= 0 || !sq_taskconf_streams (&self->conf, true, i)) {
            snprintf (err->text, sizeof err->text, "input %u is a stream, which this task "
                      "cannot read there", i);
            task_destroy (&self);
            return NULL;
        }
        self->stream_in = (int32_t) i;
        self->stream_in_version = assign->inputs [i].size > UINT32_MAX
                                ? UINT32_MAX: (uint32_t) assign->inputs [i].size;
    }
    for (uint32_t i = 0; i < assign->n_outputs; i++) {
        if (!assign->outputs [i].stream)
            continue;
        if (self->stream_out >= 0 || !sq_taskconf_streams (&self->conf, false, i)) {
            snprintf (err->text, sizeof err->text, "output %u is a stream, which this task "
                      "cannot write there", i);
            task_destroy (&self);
            return NULL;
        }
        self->stream_out = (int32_t) i;
        self->stream_consumers = assign->outputs [i].consumers;
    }
    return self;
nomem:
    snprintf (err->text, sizeof err->text, "out of memory on the governor");
    task_destroy (&self);
    return NULL;
}

void
task_destroy (task_t **self_p)
{
    task_t *self = *self_p;
    if (!self)
        return;
    if (self->exec)
        self->exec_destroy (&self->exec);
    sq_taskconf_release (&self->conf);
    for (uint32_t i = 0; self->results && i < self->n_outputs; i++)
        sq_blob_unref (&self->results [i]);
    for (uint32_t i = 0; self->out_types && i < self->n_outputs; i++)
        free (self->out_types [i]);
    free (self->results);
    free (self->out_types);
    free (self->outputs);
    free (self->inputs);
    free (self->name);
    free (self->tenant);
    free (self->config);
    for (uint32_t i = 0; i < self->n_resources; i++)
        free ((char *) self->resources [i].name.ptr);
    free (self->gpu_names);
    free (self);
    *self_p = NULL;
}
