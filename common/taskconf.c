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
    const char *name = sq_kind_name (kind);
    switch (kind) {
        case SQ_KIND_NOOP: case SQ_KIND_SLEEP: break;
        case SQ_KIND_CONCAT: if (s_arity (err, name, n_in, n_out, -1, 1)) return -1; break;
        case SQ_KIND_SLICE: if (s_arity (err, name, n_in, n_out, 1, 1)) return -1; break;
        case SQ_KIND_LOAD: if (s_arity (err, name, n_in, n_out, 0, 1)) return -1; break;
        case SQ_KIND_STORE: if (s_arity (err, name, n_in, n_out, 1, 0)) return -1; break;
        case SQ_KIND_EXECUTE: case SQ_KIND_PY: break;
        default: return s_fail (err, name, "unknown kind");
    }
    mpr_t r;
    mpr_init (&r, config, size);
    if (size == 0 || mpr_try_nil (&r)) {
        if (kind == SQ_KIND_NOOP || kind == SQ_KIND_CONCAT)
            return 0;
        return s_fail (err, name, "a configuration map is required");
    }
    uint32_t n;
    if (mpr_map (&r, &n))
        return s_fail (err, name, "must be a map");
    bool have_seconds = false, have_path = false, have_args = false;
    bool have_in = false, have_out = false, have_fn = false;
    //  A repeated key is refused: it would overwrite (and leak) the first.
    static const char *keys [] = {
        "seconds", "start", "end", "path", "args", "env", "in_paths",
        "out_paths", "stdin", "stdout", "fn", "args"
    };
    uint32_t seen = 0;
    for (uint32_t i = 0; i < n && mpr_ok (&r); i++) {
        mpr_str_t key;
        if (mpr_str (&r, &key, 64))
            break;
        for (uint32_t k = 0; k < sizeof keys / sizeof keys [0]; k++)
            if (mpr_str_eq (key, keys [k])) {
                if (seen & (1u << k)) {
                    snprintf (err->text, sizeof err->text, "%s config: key '%s' given twice",
                              name, keys [k]);
                    sq_taskconf_release (self);
                    return -1;
                }
                seen |= 1u << k;
            }
        bool known = false;
        if (kind == SQ_KIND_SLEEP && mpr_str_eq (key, "seconds")) {
            known = have_seconds = true;
            mpr_field (&r, "seconds");
            if (mpr_double (&r, &self->seconds) == 0
            && (!isfinite (self->seconds) || self->seconds < 0 || self->seconds > 1e7))
                mpr_fail (&r, "must be between 0 and 1e7");
        }
        else
        if (kind == SQ_KIND_SLICE && mpr_str_eq (key, "start")) {
            known = true;
            mpr_field (&r, "start");
            mpr_uint (&r, &self->start);
        }
        else
        if (kind == SQ_KIND_SLICE && mpr_str_eq (key, "end")) {
            known = true;
            mpr_field (&r, "end");
            if (mpr_int (&r, &self->end) == 0 && self->end < -1)
                mpr_fail (&r, "must be -1 or a byte offset");
        }
        else
        if ((kind == SQ_KIND_LOAD || kind == SQ_KIND_STORE) && mpr_str_eq (key, "path")) {
            known = have_path = true;
            mpr_field (&r, "path");
            if (mpr_str (&r, &self->path, SQ_MAX_NAME) == 0
            && (self->path.len == 0 || !s_no_nul (self->path)))
                mpr_fail (&r, "must be a non-empty path");
        }
        else
        if (kind == SQ_KIND_EXECUTE && mpr_str_eq (key, "args")) {
            known = have_args = true;
            mpr_field (&r, "args");
            s_str_array (&r, &self->args, &self->n_args);
        }
        else
        if (kind == SQ_KIND_EXECUTE && mpr_str_eq (key, "env")) {
            known = true;
            mpr_field (&r, "env");
            if (!mpr_try_nil (&r))
                s_str_array (&r, &self->env, &self->n_env);
        }
        else
        if (kind == SQ_KIND_EXECUTE && mpr_str_eq (key, "in_paths")) {
            known = have_in = true;
            mpr_field (&r, "in_paths");
            s_str_array (&r, &self->in_paths, &self->n_in_paths);
        }
        else
        if (kind == SQ_KIND_EXECUTE && mpr_str_eq (key, "out_paths")) {
            known = have_out = true;
            mpr_field (&r, "out_paths");
            s_str_array (&r, &self->out_paths, &self->n_out_paths);
        }
        else
        if (kind == SQ_KIND_EXECUTE && (mpr_str_eq (key, "stdin") || mpr_str_eq (key, "stdout"))) {
            known = true;
            bool in = mpr_str_eq (key, "stdin");
            int64_t v = -1;
            mpr_field (&r, in? "stdin": "stdout");
            if (!mpr_try_nil (&r) && mpr_int (&r, &v) == 0
            && (v < -1 || v >= (int64_t) (in? n_in: n_out)))
                mpr_fail (&r, in? "not an input index": "not an output index");
            if (in)
                self->stdin_input = (int32_t) v;
            else
                self->stdout_output = (int32_t) v;
        }
        else
        if (kind == SQ_KIND_PY && mpr_str_eq (key, "fn")) {
            known = have_fn = true;
            mpr_field (&r, "fn");
            if (mpr_bin (&r, &self->fn, SQ_MAX_CONFIG) == 0 && self->fn.len == 0)
                mpr_fail (&r, "must not be empty");
        }
        else
        if (kind == SQ_KIND_PY && mpr_str_eq (key, "args")) {
            known = true;
            mpr_field (&r, "args");
            if (!mpr_try_nil (&r))
                mpr_bin (&r, &self->py_args, SQ_MAX_CONFIG);
        }
        if (!known && mpr_ok (&r)) {
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
    const char *missing = NULL;
    if (kind == SQ_KIND_SLEEP && !have_seconds)
        missing = "'seconds' is required";
    if ((kind == SQ_KIND_LOAD || kind == SQ_KIND_STORE) && !have_path)
        missing = "'path' is required";
    if (kind == SQ_KIND_SLICE && self->end >= 0 && (uint64_t) self->end < self->start)
        missing = "'end' is before 'start'";
    if (kind == SQ_KIND_PY && !have_fn)
        missing = "'fn' is required";
    if (kind == SQ_KIND_EXECUTE) {
        if (!have_args || self->n_args == 0)
            missing = "'args' must name a program";
        else
        if ((have_in? self->n_in_paths: 0) != n_in)
            missing = "'in_paths' must have one entry per input";
        else
        if ((have_out? self->n_out_paths: 0) != n_out)
            missing = "'out_paths' must have one entry per output";
        for (uint32_t i = 0; !missing && i < self->n_args; i++)
            if (!s_no_nul (self->args [i]))
                missing = "arguments must not contain NUL";
        for (uint32_t i = 0; !missing && i < self->n_env; i++)
            if (!s_no_nul (self->env [i]) || !memchr (self->env [i].ptr, '=', self->env [i].len)
            ||  self->env [i].ptr [0] == '=')
                missing = "env entries must be NAME=value";
        for (uint32_t i = 0; !missing && i < self->n_in_paths; i++)
            if (!(self->in_paths [i].len == 0 && (int32_t) i == self->stdin_input)
            &&  !s_safe_path (self->in_paths [i]))
                missing = "input paths must be relative, without '..' (\"\" only for the stdin input)";
        for (uint32_t i = 0; !missing && i < self->n_out_paths; i++)
            if (!(self->out_paths [i].len == 0 && (int32_t) i == self->stdout_output)
            &&  !s_safe_path (self->out_paths [i]))
                missing = "output paths must be relative, without '..' (\"\" only for the stdout output)";
    }
    if (missing) {
        sq_taskconf_release (self);
        return s_fail (err, name, missing);
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
