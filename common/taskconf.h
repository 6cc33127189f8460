/*  taskconf: the built-in task kinds and their configurations.

    One decoder serves the broker (which refuses a bad config at submit, with
    the task id in the error) and the governor (which runs the task), so the
    two can never disagree about what a config means. Configs are msgpack
    maps with string keys (docs/protocol.md: Built-in tasks); unknown keys
    are refused so that a typo is an error, not a silent default.

    Ownership: string fields point into the config bytes; the arrays are
    owned by the struct and freed by sq_taskconf_release. */
#ifndef SQ_TASKCONF_H
#define SQ_TASKCONF_H

#include "proto.h"

typedef enum {
    SQ_KIND_NOOP,
    SQ_KIND_SLEEP,
    SQ_KIND_CONCAT,
    SQ_KIND_SLICE,
    SQ_KIND_LOAD,
    SQ_KIND_STORE,
    SQ_KIND_EXECUTE,
    SQ_KIND_PY,                 //  a Python function run by a governor's executors
    SQ_KIND_COUNT_
} sq_kind_t;

//  -1 for a kind nobody knows.
int sq_kind_lookup (mpr_str_t name);
const char *sq_kind_name (sq_kind_t kind);

typedef struct {
    sq_kind_t kind;
    double seconds;             //  sleep
    uint64_t start;             //  slice
    int64_t end;                //  slice, -1: to the end
    mpr_str_t path;             //  load, store
    //  execute
    uint32_t n_args;
    mpr_str_t *args;
    uint32_t n_env;
    mpr_str_t *env;             //  "NAME=value"
    uint32_t n_in_paths;
    mpr_str_t *in_paths;
    int32_t stdin_input;        //  -1: none
    uint32_t n_out_paths;
    mpr_str_t *out_paths;
    int32_t stdout_output;      //  -1: none
    //  config "done": the task's last output, one more than out_paths
    //  lists, made empty when the program exits well: what tasks that
    //  only wait for this one read; -1: none
    int32_t done_output;
    //  the program's working directory, where in_paths and out_paths are
    //  too: empty the task's own directory; relative, inside that one
    //  (made); absolute, a directory that must exist
    mpr_str_t cwd;
    //  py: opaque to C, read by the Python executor (bindings/python)
    mpr_str_t fn;               //  cloudpickled function, non-empty; or
    bool fn_in;                 //  the function is the task's first input instead
    mpr_str_t py_args;          //  pickled (args, kwargs) template, may be empty
    //  The task does not change its inputs (a Dask node): its executor may
    //  keep them unpickled for later tasks and hand it those it keeps
    //  (governor/pyexec.c, "Input cache"), shared rather than copied.
    bool share_inputs;
    //  py actors: `actor` true starts one (fn is the class, no outputs);
    //  `call` is the id of the task that started the actor whose method
    //  `method` this task calls (docs/protocol.md, "Actors")
    bool actor;
    uint32_t call;              //  0: not a call
    mpr_str_t method;
    //  execute and py: bytes of stdout and of stderr kept (0: the governor's);
    //  files (absolute paths, or for execute beginning with %{CWD}) they
    //  are written to instead, or empty
    uint64_t log_limit;
    mpr_str_t stdout_path;
    mpr_str_t stderr_path;
} sq_taskconf_t;

//  Decodes and checks a config against the task's kind and its numbers of
//  inputs and outputs. 0, or -1 with err filled.
int sq_taskconf_decode (sq_taskconf_t *self, sq_kind_t kind,
                        const uint8_t *config, size_t size,
                        uint32_t n_inputs, uint32_t n_outputs, sq_errbuf_t *err);
void sq_taskconf_release (sq_taskconf_t *self);
//  Whether a task can read its input `index` (is_input) or write its
//  output `index` as a stream (docs/protocol.md, "Streams"): execute's
//  stdin and stdout; a py task's inputs and outputs (an iterator of
//  chunks, a generator's), except an actor's or its calls'. A task reads
//  at most one stream and writes at most one (the broker checks).
bool sq_taskconf_streams (const sq_taskconf_t *self, bool is_input, uint32_t index);

//  Encoders, one per kind with a config (libsquall's sq_config_* check
//  what they make with the decoder above). Strings are NUL-terminated;
//  env NULL packs nil.
void sq_taskconf_pack_sleep (msgpack_packer *pk, double seconds);
void sq_taskconf_pack_slice (msgpack_packer *pk, uint64_t start, int64_t end);
void sq_taskconf_pack_path (msgpack_packer *pk, const char *path);
void sq_taskconf_pack_execute (msgpack_packer *pk, const char *const *args, size_t n_args,
                               const char *const *env, size_t n_env,
                               const char *const *in_paths, size_t n_inputs, int stdin_input,
                               const char *const *out_paths, size_t n_outputs,
                               int stdout_output);

#endif
