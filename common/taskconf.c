/*  taskconf: decoding and checking built-in task configurations. */
#include "taskconf.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_kinds [SQ_KIND_COUNT_] = {
    "noop", "sleep", "concat", "slice", "load", "store", "execute", "py"
};

int
sq_kind_lookup (mpr_str_t name)
{
    for (int i = 0; i < SQ_KIND_COUNT_; i++)
        if (mpr_str_eq (name, s_kinds [i]))
            return i;
    return -1;
}

const char *
sq_kind_name (sq_kind_t kind)
{
    return kind < SQ_KIND_COUNT_? s_kinds [kind]: "?";
}

static int
s_fail (sq_errbuf_t *err, const char *kind, const char *text)
{
    snprintf (err->text, sizeof err->text, "%s config: %s", kind, text);
    return -1;
}

static int
s_str_array (mpr_t *r, mpr_str_t **out, uint32_t *n_out)
{
    uint32_t n;
    if (mpr_array (r, &n))
        return -1;
    //  A key given twice is refused by the caller after it was read: the
    //  first array must not leak.
    free (*out);
    *out = (mpr_str_t *) calloc (n + 1, sizeof (mpr_str_t));
    if (!*out)
        return mpr_fail (r, "out of memory");
    *n_out = n;
    for (uint32_t i = 0; i < n; i++)
        if (mpr_str (r, &(*out) [i], SQ_MAX_CONFIG))
            return -1;
    return 0;
}

//  A relative path inside the task's working directory: no absolute paths,
//  no "..", no empty components, no NUL.
static bool
s_safe_path (mpr_str_t p)
{
    if (p.len == 0 || p.ptr [0] == '/' || memchr (p.ptr, 0, p.len))
        return false;
    uint32_t start = 0;
    for (uint32_t i = 0; i <= p.len; i++) {
        if (i == p.len || p.ptr [i] == '/') {
            uint32_t len = i - start;
            if (len == 0 || (len == 2 && p.ptr [start] == '.' && p.ptr [start + 1] == '.'))
                return false;
            start = i + 1;
        }
    }
    return true;
}

static bool
s_no_nul (mpr_str_t s)
{
    return s.len == 0 || memchr (s.ptr, 0, s.len) == NULL;
}

static int
s_arity (sq_errbuf_t *err, const char *kind, uint32_t n_in, uint32_t n_out,
         int want_in, int want_out)
{
    if ((want_in >= 0 && n_in != (uint32_t) want_in)
    ||  (want_out >= 0 && n_out != (uint32_t) want_out)) {
        snprintf (err->text, sizeof err->text,
                  "%s takes %d input(s) and %d output(s), got %u and %u",
                  kind, want_in, want_out, n_in, n_out);
        return -1;
    }
    return 0;
}

//  --------------------------------------------------------------------------
//  The kinds, one row each: how many inputs and outputs, whether the config
//  may be nil, and two functions: `key` reads one key of the config map
//  (returns its bit, 0 for a key the kind does not have), `check` says what
//  is wrong once all keys are read (NULL: nothing). Adding a kind is one
//  row and its two functions here, and its runner on the governor.

typedef unsigned (s_key_fn) (sq_taskconf_t *self, mpr_t *r, mpr_str_t key,
                             uint32_t n_in, uint32_t n_out);
typedef const char *(s_check_fn) (sq_taskconf_t *self, unsigned have,
                                  uint32_t n_in, uint32_t n_out);

static unsigned
s_sleep_key (sq_taskconf_t *self, mpr_t *r, mpr_str_t key, uint32_t n_in, uint32_t n_out)
{
    (void) n_in; (void) n_out;
    if (!mpr_str_eq (key, "seconds"))
        return 0;
    mpr_field (r, "seconds");
    if (mpr_double (r, &self->seconds) == 0
    && (!isfinite (self->seconds) || self->seconds < 0 || self->seconds > 1e7))
        mpr_fail (r, "must be between 0 and 1e7");
    return 1;
}

static const char *
s_sleep_check (sq_taskconf_t *self, unsigned have, uint32_t n_in, uint32_t n_out)
{
    (void) self; (void) n_in; (void) n_out;
    return have & 1? NULL: "'seconds' is required";
}

static unsigned
s_slice_key (sq_taskconf_t *self, mpr_t *r, mpr_str_t key, uint32_t n_in, uint32_t n_out)
{
    (void) n_in; (void) n_out;
    if (mpr_str_eq (key, "start")) {
        mpr_field (r, "start");
        mpr_uint (r, &self->start);
        return 1;
    }
    if (mpr_str_eq (key, "end")) {
        mpr_field (r, "end");
        if (mpr_int (r, &self->end) == 0 && self->end < -1)
            mpr_fail (r, "must be -1 or a byte offset");
        return 2;
    }
    return 0;
}

static const char *
s_slice_check (sq_taskconf_t *self, unsigned have, uint32_t n_in, uint32_t n_out)
{
    (void) have; (void) n_in; (void) n_out;
    return self->end >= 0 && (uint64_t) self->end < self->start? "'end' is before 'start'": NULL;
}

static unsigned
s_path_key (sq_taskconf_t *self, mpr_t *r, mpr_str_t key, uint32_t n_in, uint32_t n_out)
{
    (void) n_in; (void) n_out;
    if (!mpr_str_eq (key, "path"))
        return 0;
    mpr_field (r, "path");
    if (mpr_str (r, &self->path, SQ_MAX_NAME) == 0
    && (self->path.len == 0 || !s_no_nul (self->path)))
        mpr_fail (r, "must be a non-empty path");
    return 1;
}

static const char *
s_path_check (sq_taskconf_t *self, unsigned have, uint32_t n_in, uint32_t n_out)
{
    (void) self; (void) n_in; (void) n_out;
    return have & 1? NULL: "'path' is required";
}

static unsigned s_log_key (sq_taskconf_t *self, mpr_t *r, mpr_str_t key);

static unsigned
s_execute_key (sq_taskconf_t *self, mpr_t *r, mpr_str_t key, uint32_t n_in, uint32_t n_out)
{
    if (mpr_str_eq (key, "args")) {
        mpr_field (r, "args");
        s_str_array (r, &self->args, &self->n_args);
        return 1;
    }
    if (mpr_str_eq (key, "env")) {
        mpr_field (r, "env");
        if (!mpr_try_nil (r))
            s_str_array (r, &self->env, &self->n_env);
        return 2;
    }
    if (mpr_str_eq (key, "in_paths")) {
        mpr_field (r, "in_paths");
        s_str_array (r, &self->in_paths, &self->n_in_paths);
        return 4;
    }
    if (mpr_str_eq (key, "out_paths")) {
        mpr_field (r, "out_paths");
        s_str_array (r, &self->out_paths, &self->n_out_paths);
        return 8;
    }
    if (mpr_str_eq (key, "cwd")) {
        mpr_field (r, "cwd");
        if (mpr_str (r, &self->cwd, 4096) == 0
        &&  (self->cwd.len == 0 || !s_no_nul (self->cwd)
             || (self->cwd.ptr [0] != '/' && !s_safe_path (self->cwd))))
            mpr_fail (r, "must be an absolute path, or a relative one without '..'");
        return 64;
    }
    if (mpr_str_eq (key, "log_limit") || mpr_str_eq (key, "stdout_path")
    ||  mpr_str_eq (key, "stderr_path"))
        return s_log_key (self, r, key);
    if (mpr_str_eq (key, "done")) {
        bool done = false;
        mpr_field (r, "done");
        if (mpr_bool (r, &done) == 0 && done && n_out == 0)
            mpr_fail (r, "the task has no output for it");
        self->done_output = done? (int32_t) n_out - 1: -1;
        return 128;
    }
    bool in = mpr_str_eq (key, "stdin");
    if (!in && !mpr_str_eq (key, "stdout"))
        return 0;
    int64_t v = -1;
    mpr_field (r, in? "stdin": "stdout");
    if (!mpr_try_nil (r) && mpr_int (r, &v) == 0
    && (v < -1 || v >= (int64_t) (in? n_in: n_out)))
        mpr_fail (r, in? "not an input index": "not an output index");
    if (in)
        self->stdin_input = (int32_t) v;
    else
        self->stdout_output = (int32_t) v;
    return in? 16: 32;
}

static const char *
s_execute_check (sq_taskconf_t *self, unsigned have, uint32_t n_in, uint32_t n_out)
{
    if (!(have & 1) || self->n_args == 0)
        return "'args' must name a program";
    if ((have & 4? self->n_in_paths: 0) != n_in)
        return "'in_paths' must have one entry per input";
    if ((have & 8? self->n_out_paths: 0) + (self->done_output >= 0) != n_out)
        return self->done_output >= 0
             ? "'out_paths' must have one entry per output but the last ('done')"
             : "'out_paths' must have one entry per output";
    if (self->done_output >= 0 && self->done_output == self->stdout_output)
        return "'stdout' cannot be the 'done' output";
    for (uint32_t i = 0; i < self->n_args; i++)
        if (!s_no_nul (self->args [i]))
            return "arguments must not contain NUL";
    for (uint32_t i = 0; i < self->n_env; i++)
        if (!s_no_nul (self->env [i]) || !memchr (self->env [i].ptr, '=', self->env [i].len)
        ||  self->env [i].ptr [0] == '=')
            return "env entries must be NAME=value";
    for (uint32_t i = 0; i < self->n_in_paths; i++)
        if (!(self->in_paths [i].len == 0 && (int32_t) i == self->stdin_input)
        &&  !s_safe_path (self->in_paths [i]))
            return "input paths must be relative, without '..' (\"\" only for the stdin input)";
    for (uint32_t i = 0; i < self->n_out_paths; i++)
        if (!(self->out_paths [i].len == 0 && (int32_t) i == self->stdout_output)
        &&  !s_safe_path (self->out_paths [i]))
            return "output paths must be relative, without '..' (\"\" only for the stdout output)";
    return NULL;
}

//  Keys every kind that runs code has: `log_limit`, the bytes of each of
//  stdout and stderr its governor keeps (head and tail), 0 the governor's
//  --log-limit.
#define S_LOG_LIMIT_MAX (1ull << 40)
static unsigned
s_log_key (sq_taskconf_t *self, mpr_t *r, mpr_str_t key)
{
    bool out = mpr_str_eq (key, "stdout_path");
    if (out || mpr_str_eq (key, "stderr_path")) {
        //  Written there instead of kept: an absolute path on the governor,
        //  opened as the task; an execute task's may begin with %{CWD}, its
        //  working directory, which only the governor knows.
        mpr_str_t *path = out? &self->stdout_path: &self->stderr_path;
        mpr_field (r, out? "stdout_path": "stderr_path");
        if (mpr_str (r, path, 4096) == 0
        &&  (path->len == 0 || !s_no_nul (*path)
             || !(path->ptr [0] == '/'
                  || (self->kind == SQ_KIND_EXECUTE && path->len >= 6
                      && memcmp (path->ptr, "%{CWD}", 6) == 0))))
            mpr_fail (r, self->kind == SQ_KIND_EXECUTE
                      ? "must be an absolute path (or begin with %{CWD}) without NUL"
                      : "must be an absolute path without NUL");
        return out? 0x200: 0x400;
    }
    if (!mpr_str_eq (key, "log_limit"))
        return 0;
    mpr_field (r, "log_limit");
    if (mpr_uint (r, &self->log_limit) == 0 && self->log_limit > S_LOG_LIMIT_MAX)
        mpr_fail (r, "over 1 TiB");
    return 0x100;
}

static unsigned
s_py_key (sq_taskconf_t *self, mpr_t *r, mpr_str_t key, uint32_t n_in, uint32_t n_out)
{
    (void) n_in; (void) n_out;
    if (mpr_str_eq (key, "log_limit") || mpr_str_eq (key, "stdout_path")
    ||  mpr_str_eq (key, "stderr_path"))
        return s_log_key (self, r, key);
    if (mpr_str_eq (key, "fn")) {
        mpr_field (r, "fn");
        if (mpr_bin (r, &self->fn, SQ_MAX_CONFIG) == 0 && self->fn.len == 0)
            mpr_fail (r, "must not be empty");
        return 1;
    }
    if (mpr_str_eq (key, "args")) {
        mpr_field (r, "args");
        if (!mpr_try_nil (r))
            mpr_bin (r, &self->py_args, SQ_MAX_CONFIG);
        return 2;
    }
    if (mpr_str_eq (key, "fn_in")) {
        mpr_field (r, "fn_in");
        mpr_bool (r, &self->fn_in);
        return 4;
    }
    if (mpr_str_eq (key, "share_inputs")) {
        mpr_field (r, "share_inputs");
        mpr_bool (r, &self->share_inputs);
        return 64;
    }
    if (mpr_str_eq (key, "actor")) {
        mpr_field (r, "actor");
        mpr_bool (r, &self->actor);
        return 8;
    }
    if (mpr_str_eq (key, "call")) {
        mpr_field (r, "call");
        if (mpr_u32 (r, &self->call) == 0 && self->call == 0)
            mpr_fail (r, "must be a task id (not 0)");
        return 16;
    }
    if (mpr_str_eq (key, "method")) {
        mpr_field (r, "method");
        if (mpr_str (r, &self->method, 256) == 0 && self->method.len == 0)
            mpr_fail (r, "must not be empty");
        return 32;
    }
    return 0;
}

static const char *
s_py_check (sq_taskconf_t *self, unsigned have, uint32_t n_in, uint32_t n_out)
{
    if (self->call) {
        //  A call runs a method of an instance that already exists.
        if ((have & 1) || self->fn_in || self->actor)
            return "'call' excludes 'fn', 'fn_in' and 'actor'";
        if (!(have & 32))
            return "'call' needs 'method'";
        return NULL;
    }
    if (have & 32)
        return "'method' needs 'call'";
    if (self->actor && n_out != 0)
        return "an actor ('actor' true) has no outputs: its methods' calls have them";
    if ((have & 1) && self->fn_in)
        return "'fn' and 'fn_in' true exclude each other";
    if (!(have & 1) && !self->fn_in)
        return "'fn' (or 'fn_in' true) is required";
    if (self->fn_in && n_in == 0)
        return "'fn_in' true needs the function as input 0";
    return NULL;
}

static const struct {
    int inputs, outputs;        //  -1: any number
    bool nil_ok;                //  a nil (or absent) config is allowed
    s_key_fn *key;              //  NULL: the map must be empty
    s_check_fn *check;
} s_table [SQ_KIND_COUNT_] = {
    [SQ_KIND_NOOP] = { -1, -1, true, NULL, NULL },
    [SQ_KIND_SLEEP] = { -1, -1, false, s_sleep_key, s_sleep_check },
    [SQ_KIND_CONCAT] = { -1, 1, true, NULL, NULL },
    [SQ_KIND_SLICE] = { 1, 1, false, s_slice_key, s_slice_check },
    [SQ_KIND_LOAD] = { 0, 1, false, s_path_key, s_path_check },
    [SQ_KIND_STORE] = { 1, 0, false, s_path_key, s_path_check },
    [SQ_KIND_EXECUTE] = { -1, -1, false, s_execute_key, s_execute_check },
    [SQ_KIND_PY] = { -1, -1, false, s_py_key, s_py_check },
};

int
sq_taskconf_decode (sq_taskconf_t *self, sq_kind_t kind, const uint8_t *config,
                    size_t size, uint32_t n_in, uint32_t n_out, sq_errbuf_t *err)
{
    sq_errbuf_t scratch;
    if (!err)
        err = &scratch;
    memset (self, 0, sizeof *self);
    self->kind = kind;
    self->end = -1;
    self->stdin_input = -1;
    self->stdout_output = -1;
    self->done_output = -1;
    const char *name = sq_kind_name (kind);
    if ((unsigned) kind >= SQ_KIND_COUNT_)
        return s_fail (err, name, "unknown kind");
    if (s_arity (err, name, n_in, n_out, s_table [kind].inputs, s_table [kind].outputs))
        return -1;
    mpr_t r;
    mpr_init (&r, config, size);
    if (size == 0 || mpr_try_nil (&r)) {
        if (s_table [kind].nil_ok)
            return 0;
        return s_fail (err, name, "a configuration map is required");
    }
    uint32_t n;
    if (mpr_map (&r, &n))
        return s_fail (err, name, "must be a map");
    unsigned have = 0;
    for (uint32_t i = 0; i < n && mpr_ok (&r); i++) {
        mpr_str_t key;
        if (mpr_str (&r, &key, 64))
            break;
        unsigned bit = s_table [kind].key? s_table [kind].key (self, &r, key, n_in, n_out): 0;
        if (bit && (have & bit)) {
            //  A repeated key is refused: it would overwrite (and leak) the first.
            snprintf (err->text, sizeof err->text, "%s config: key '%.*s' given twice",
                      name, (int) key.len, key.ptr);
            sq_taskconf_release (self);
            return -1;
        }
        have |= bit;
        if (!bit && mpr_ok (&r)) {
            snprintf (err->text, sizeof err->text, "%s config: unknown key '%.*s'",
                      name, (int) key.len, key.ptr);
            sq_taskconf_release (self);
            return -1;
        }
    }
    if (mpr_ok (&r))
        mpr_field (&r, NULL);
    if (mpr_end (&r)) {
        if (r.field)
            snprintf (err->text, sizeof err->text, "%s config: '%s': %s", name, r.field, r.error);
        else
            snprintf (err->text, sizeof err->text, "%s config: %s", name, r.error);
        sq_taskconf_release (self);
        return -1;
    }
    const char *wrong = s_table [kind].check? s_table [kind].check (self, have, n_in, n_out): NULL;
    if (wrong) {
        sq_taskconf_release (self);
        return s_fail (err, name, wrong);
    }
    return 0;
}

void
sq_taskconf_release (sq_taskconf_t *self)
{
    free (self->args);
    free (self->env);
    free (self->in_paths);
    free (self->out_paths);
    self->args = self->env = self->in_paths = self->out_paths = NULL;
    self->n_args = self->n_env = self->n_in_paths = self->n_out_paths = 0;
}

//  --------------------------------------------------------------------------
//  Encoders

static void
s_pack_strings (msgpack_packer *pk, const char *const *items, size_t n)
{
    msgpack_pack_array (pk, n);
    for (size_t i = 0; i < n; i++)
        sq_pack_cstr (pk, items [i]);
}

void
sq_taskconf_pack_sleep (msgpack_packer *pk, double seconds)
{
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "seconds");
    msgpack_pack_double (pk, seconds);
}

void
sq_taskconf_pack_slice (msgpack_packer *pk, uint64_t start, int64_t end)
{
    msgpack_pack_map (pk, 2);
    sq_pack_cstr (pk, "start");
    msgpack_pack_uint64 (pk, start);
    sq_pack_cstr (pk, "end");
    msgpack_pack_int64 (pk, end);
}

void
sq_taskconf_pack_path (msgpack_packer *pk, const char *path)
{
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "path");
    sq_pack_cstr (pk, path);
}

void
sq_taskconf_pack_execute (msgpack_packer *pk, const char *const *args, size_t n_args,
                          const char *const *env, size_t n_env,
                          const char *const *in_paths, size_t n_inputs, int stdin_input,
                          const char *const *out_paths, size_t n_outputs, int stdout_output)
{
    msgpack_pack_map (pk, 6);
    sq_pack_cstr (pk, "args");
    s_pack_strings (pk, args, n_args);
    sq_pack_cstr (pk, "env");
    if (env)
        s_pack_strings (pk, env, n_env);
    else
        msgpack_pack_nil (pk);
    sq_pack_cstr (pk, "in_paths");
    s_pack_strings (pk, in_paths, n_inputs);
    sq_pack_cstr (pk, "stdin");
    msgpack_pack_int (pk, stdin_input);
    sq_pack_cstr (pk, "out_paths");
    s_pack_strings (pk, out_paths, n_outputs);
    sq_pack_cstr (pk, "stdout");
    msgpack_pack_int (pk, stdout_output);
}

bool
sq_taskconf_streams (const sq_taskconf_t *self, bool is_input, uint32_t index)
{
    if (self->kind == SQ_KIND_EXECUTE)
        return is_input? self->stdin_input == (int32_t) index
                       : self->stdout_output == (int32_t) index;
    if (self->kind == SQ_KIND_PY)
        return !self->actor && !self->call && !(is_input && self->fn_in && index == 0);
    return false;
}
