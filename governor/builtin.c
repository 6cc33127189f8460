/*  builtin: noop, sleep, concat, slice, load, store. */
#include "builtin.h"
#include "dirobj.h"
#include "files.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static sq_blob_t *
s_input (task_t *task, store_t *store, uint32_t i)
{
    return store_get (store, task->inputs [i], NULL);
}

static int
s_noop (task_t *task, store_t *store, char *err, size_t err_size)
{
    for (uint32_t i = 0; i < task->n_outputs; i++) {
        task->results [i] = i < task->n_inputs
            ? sq_blob_ref (s_input (task, store, i))
            : sq_blob_new (0);
        if (!task->results [i]) {
            snprintf (err, err_size, "out of memory");
            return -1;
        }
    }
    return 0;
}

static int
s_concat (task_t *task, store_t *store, char *err, size_t err_size)
{
    size_t total = 0;
    for (uint32_t i = 0; i < task->n_inputs; i++)
        total += sq_blob_size (s_input (task, store, i));
    //  One input is the common case of a concat used as a copy: share it.
    if (task->n_inputs == 1) {
        task->results [0] = sq_blob_ref (s_input (task, store, 0));
        return 0;
    }
    sq_blob_t *out = sq_blob_new (total);
    if (!out) {
        snprintf (err, err_size, "concat: out of memory for %zu bytes", total);
        return -1;
    }
    char *p = (char *) sq_blob_wdata (out);
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        sq_blob_t *in = s_input (task, store, i);
        sq_blob_read (in, 0, p, sq_blob_size (in));
        p += sq_blob_size (in);
    }
    task->results [0] = out;
    return 0;
}

static int
s_slice (task_t *task, store_t *store, char *err, size_t err_size)
{
    sq_blob_t *in = s_input (task, store, 0);
    uint64_t size = sq_blob_size (in);
    uint64_t start = task->conf.start;
    uint64_t end = task->conf.end < 0? size: (uint64_t) task->conf.end;
    if (start > size || end > size) {
        snprintf (err, err_size, "slice: [%" PRIu64 ", %" PRId64 ") is beyond the input's "
                  "%" PRIu64 " bytes", start, task->conf.end, size);
        return -1;
    }
    if (end < start)
        end = start;
    task->results [0] = sq_blob_new (end - start);
    if (task->results [0])
        sq_blob_read (in, start, sq_blob_wdata (task->results [0]), end - start);
    else {
        snprintf (err, err_size, "slice: out of memory");
        return -1;
    }
    return 0;
}

static int
s_load (task_t *task, char *err, size_t err_size)
{
    char *path = mpr_strdup (task->conf.path);
    if (!path) {
        snprintf (err, err_size, "load: out of memory");
        return -1;
    }
    struct stat st;
    int rc = 0;
    if (stat (path, &st)) {
        snprintf (err, err_size, "load: cannot read '%s': %s", path, strerror (errno));
        rc = -1;
    }
    else
    if (S_ISDIR (st.st_mode) && dirobj_is (task->out_types [0])) {
        task->results [0] = dirobj_pack (path, err, err_size);
        rc = task->results [0]? 0: -1;
    }
    else
    if (S_ISDIR (st.st_mode)) {
        snprintf (err, err_size, "load: '%s' is a directory (declare the output's content "
                  "type \"dir\" to load it as a directory object)", path);
        rc = -1;
    }
    else
    if (!S_ISREG (st.st_mode)) {
        snprintf (err, err_size, "load: '%s' is not a regular file", path);
        rc = -1;
    }
    else
    if (!(task->results [0] = sq_blob_map_file (path))) {
        snprintf (err, err_size, "load: cannot read '%s': %s", path, strerror (errno));
        rc = -1;
    }
    free (path);
    return rc;
}

static int
s_store (task_t *task, store_t *store, char *err, size_t err_size)
{
    char *path = mpr_strdup (task->conf.path);
    if (!path) {
        snprintf (err, err_size, "store: out of memory");
        return -1;
    }
    const char *type = NULL;
    sq_blob_t *in = store_get (store, task->inputs [0], &type);
    int rc;
    if (dirobj_is (type)) {
        in = store_get_flat (store, task->inputs [0], NULL);
        if (in)
            rc = dirobj_unpack (sq_blob_data (in), sq_blob_size (in), path, err, err_size);
        else {
            snprintf (err, err_size, "store: out of memory");
            rc = -1;
        }
    }
    else {
        rc = files_write (path, in);
        if (rc)
            snprintf (err, err_size, "store: cannot write '%s': %s", path, strerror (errno));
    }
    free (path);
    return rc;
}

int
builtin_run (task_t *task, store_t *store, char *err, size_t err_size)
{
    switch (task->kind) {
        case SQ_KIND_NOOP:
        case SQ_KIND_SLEEP: return s_noop (task, store, err, err_size);
        case SQ_KIND_CONCAT: return s_concat (task, store, err, err_size);
        case SQ_KIND_SLICE: return s_slice (task, store, err, err_size);
        case SQ_KIND_LOAD: return s_load (task, err, err_size);
        case SQ_KIND_STORE: return s_store (task, store, err, err_size);
        default:
            snprintf (err, err_size, "%s is not a built-in kind", sq_kind_name (task->kind));
            return -1;
    }
}
