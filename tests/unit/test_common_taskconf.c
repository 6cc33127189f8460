/*  Unit test of common/taskconf: each built-in kind's config accepted and
    refused (unknown keys, missing fields, arity, unsafe execute paths,
    stdin/stdout indexes). */
#include "taskconf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_failures = 0;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        s_failures++; \
    } \
} while (0)

static sq_wbuf_t s_w;

static msgpack_packer *
s_new (void)
{
    sq_wbuf_reset (&s_w);
    return &s_w.pk;
}

static void
s_strings (msgpack_packer *pk, const char *const *items, size_t n)
{
    msgpack_pack_array (pk, n);
    for (size_t i = 0; i < n; i++)
        sq_pack_cstr (pk, items [i]);
}

//  Decodes what s_w holds; the message (if refused) goes to last_error.
static char s_last_error [256];

static int
s_decode (sq_kind_t kind, uint32_t n_in, uint32_t n_out, sq_taskconf_t *conf)
{
    sq_errbuf_t err;
    err.text [0] = 0;
    int rc = sq_taskconf_decode (conf, kind, (const uint8_t *) s_w.buf.data, s_w.buf.size,
                                 n_in, n_out, &err);
    snprintf (s_last_error, sizeof s_last_error, "%s", err.text);
    if (rc == 0)
        CHECK (conf->kind == kind);
    return rc;
}

//  Accepted (and released), or refused with a message containing `expect`.
static bool
s_accepts (sq_kind_t kind, uint32_t n_in, uint32_t n_out)
{
    sq_taskconf_t conf;
    int rc = s_decode (kind, n_in, n_out, &conf);
    if (rc == 0)
        sq_taskconf_release (&conf);
    return rc == 0;
}

static bool
s_refuses (sq_kind_t kind, uint32_t n_in, uint32_t n_out, const char *expect)
{
    sq_taskconf_t conf;
    if (s_decode (kind, n_in, n_out, &conf) == 0) {
        sq_taskconf_release (&conf);
        return false;
    }
    if (!strstr (s_last_error, expect)) {
        fprintf (stderr, "refused with '%s', expected '%s'\n", s_last_error, expect);
        return false;
    }
    return true;
}

static void
s_test_kinds (void)
{
    for (int k = 0; k < SQ_KIND_COUNT_; k++) {
        const char *name = sq_kind_name ((sq_kind_t) k);
        mpr_str_t s = { name, (uint32_t) strlen (name) };
        CHECK (sq_kind_lookup (s) == k);
    }
    mpr_str_t unknown = { "nope", 4 }, prefix = { "exec", 4 };
    CHECK (sq_kind_lookup (unknown) == -1);
    CHECK (sq_kind_lookup (prefix) == -1);
    CHECK (strcmp (sq_kind_name (SQ_KIND_COUNT_), "?") == 0);
}

static void
s_test_noop_concat (void)
{
    sq_taskconf_t conf;
    //  No config at all, nil, or an empty map
    sq_wbuf_reset (&s_w);
    CHECK (sq_taskconf_decode (&conf, SQ_KIND_NOOP, NULL, 0, 3, 2, NULL) == 0);
    msgpack_pack_nil (s_new ());
    CHECK (s_accepts (SQ_KIND_NOOP, 0, 5));
    CHECK (s_accepts (SQ_KIND_CONCAT, 4, 1));
    msgpack_pack_map (s_new (), 0);
    CHECK (s_accepts (SQ_KIND_NOOP, 1, 1));
    //  concat has exactly one output
    msgpack_pack_nil (s_new ());
    CHECK (s_refuses (SQ_KIND_CONCAT, 2, 2, "output"));
    //  Unknown keys are refused
    msgpack_packer *pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "seconds");
    msgpack_pack_double (pk, 1);
    CHECK (s_refuses (SQ_KIND_NOOP, 1, 1, "unknown key 'seconds'"));
    //  Not a map
    msgpack_pack_array (s_new (), 0);
    CHECK (s_refuses (SQ_KIND_NOOP, 1, 1, "map"));
}

static void
s_test_sleep (void)
{
    msgpack_packer *pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "seconds");
    msgpack_pack_double (pk, 0.25);
    sq_taskconf_t conf;
    CHECK (s_decode (SQ_KIND_SLEEP, 2, 2, &conf) == 0 && conf.seconds == 0.25);
    sq_taskconf_release (&conf);
    //  Integers are numbers too
    pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "seconds");
    msgpack_pack_uint32 (pk, 3);
    CHECK (s_decode (SQ_KIND_SLEEP, 0, 0, &conf) == 0 && conf.seconds == 3);
    sq_taskconf_release (&conf);
    //  Missing, negative, too large, wrong type, nil config
    msgpack_pack_map (s_new (), 0);
    CHECK (s_refuses (SQ_KIND_SLEEP, 0, 0, "'seconds' is required"));
    pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "seconds");
    msgpack_pack_double (pk, -1);
    CHECK (s_refuses (SQ_KIND_SLEEP, 0, 0, "seconds"));
    pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "seconds");
    msgpack_pack_double (pk, 1e9);
    CHECK (s_refuses (SQ_KIND_SLEEP, 0, 0, "seconds"));
    pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "seconds");
    sq_pack_cstr (pk, "1");
    CHECK (s_refuses (SQ_KIND_SLEEP, 0, 0, "'seconds'"));
    msgpack_pack_nil (s_new ());
    CHECK (s_refuses (SQ_KIND_SLEEP, 0, 0, "required"));
    //  Unknown key next to a valid one
    pk = s_new ();
    msgpack_pack_map (pk, 2);
    sq_pack_cstr (pk, "seconds");
    msgpack_pack_double (pk, 1);
    sq_pack_cstr (pk, "second");
    msgpack_pack_double (pk, 1);
    CHECK (s_refuses (SQ_KIND_SLEEP, 0, 0, "unknown key 'second'"));
    //  Trailing bytes after the map
    pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "seconds");
    msgpack_pack_double (pk, 1);
    msgpack_pack_nil (pk);
    CHECK (s_refuses (SQ_KIND_SLEEP, 0, 0, "trailing"));
    //  Every truncation of a valid config is refused
    pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "seconds");
    msgpack_pack_double (pk, 1);
    for (size_t cut = 1; cut < s_w.buf.size; cut++) {
        sq_errbuf_t err;
        CHECK (sq_taskconf_decode (&conf, SQ_KIND_SLEEP, (const uint8_t *) s_w.buf.data, cut, 0, 0, &err) == -1);
    }
}

static void
s_pack_slice (int64_t start, int64_t end, bool with_end)
{
    msgpack_packer *pk = s_new ();
    msgpack_pack_map (pk, with_end? 2: 1);
    sq_pack_cstr (pk, "start");
    msgpack_pack_int64 (pk, start);
    if (with_end) {
        sq_pack_cstr (pk, "end");
        msgpack_pack_int64 (pk, end);
    }
}

static void
s_test_slice (void)
{
    sq_taskconf_t conf;
    s_pack_slice (2, 10, true);
    CHECK (s_decode (SQ_KIND_SLICE, 1, 1, &conf) == 0 && conf.start == 2 && conf.end == 10);
    sq_taskconf_release (&conf);
    s_pack_slice (5, 0, false);
    CHECK (s_decode (SQ_KIND_SLICE, 1, 1, &conf) == 0 && conf.start == 5 && conf.end == -1);
    sq_taskconf_release (&conf);
    s_pack_slice (5, -1, true);
    CHECK (s_accepts (SQ_KIND_SLICE, 1, 1));
    s_pack_slice (5, 5, true);
    CHECK (s_accepts (SQ_KIND_SLICE, 1, 1));
    s_pack_slice (5, 4, true);
    CHECK (s_refuses (SQ_KIND_SLICE, 1, 1, "before"));
    s_pack_slice (0, -2, true);
    CHECK (s_refuses (SQ_KIND_SLICE, 1, 1, "'end'"));
    s_pack_slice (-1, 3, true);
    CHECK (s_refuses (SQ_KIND_SLICE, 1, 1, "'start'"));
    //  Arity: one input, one output
    s_pack_slice (0, 1, true);
    CHECK (s_refuses (SQ_KIND_SLICE, 2, 1, "1 input(s) and 1 output(s)"));
    CHECK (s_refuses (SQ_KIND_SLICE, 1, 0, "input"));
}

static void
s_pack_path (const char *path)
{
    msgpack_packer *pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "path");
    sq_pack_cstr (pk, path);
}

static void
s_test_load_store (void)
{
    sq_taskconf_t conf;
    //  Paths on the governor's file system may be absolute
    s_pack_path ("/data/in.bin");
    CHECK (s_decode (SQ_KIND_LOAD, 0, 1, &conf) == 0 && mpr_str_eq (conf.path, "/data/in.bin"));
    sq_taskconf_release (&conf);
    CHECK (s_accepts (SQ_KIND_STORE, 1, 0));
    CHECK (s_refuses (SQ_KIND_LOAD, 1, 1, "input"));
    CHECK (s_refuses (SQ_KIND_STORE, 1, 1, "output"));
    s_pack_path ("");
    CHECK (s_refuses (SQ_KIND_LOAD, 0, 1, "path"));
    msgpack_packer *pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "path");
    msgpack_pack_str (pk, 3);
    msgpack_pack_str_body (pk, "a\0b", 3);
    CHECK (s_refuses (SQ_KIND_STORE, 1, 0, "path"));
    msgpack_pack_map (s_new (), 0);
    CHECK (s_refuses (SQ_KIND_LOAD, 0, 1, "'path' is required"));
    msgpack_pack_nil (s_new ());
    CHECK (s_refuses (SQ_KIND_STORE, 1, 0, "required"));
    pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "file");
    sq_pack_cstr (pk, "x");
    CHECK (s_refuses (SQ_KIND_LOAD, 0, 1, "unknown key 'file'"));
    pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "path");
    msgpack_pack_uint32 (pk, 1);
    CHECK (s_refuses (SQ_KIND_LOAD, 0, 1, "'path'"));
}

typedef struct {
    const char *const *args;
    size_t n_args;
    const char *const *env;
    size_t n_env;               //  (size_t) -1: nil
    const char *const *in;
    size_t n_in;
    int64_t stdin_input;
    const char *const *out;
    size_t n_out;
    int64_t stdout_output;
    const char *extra_key;      //  an additional key, if any
} s_exec_t;

static void
s_pack_exec (const s_exec_t *e)
{
    msgpack_packer *pk = s_new ();
    msgpack_pack_map (pk, e->extra_key? 7: 6);
    sq_pack_cstr (pk, "args");
    s_strings (pk, e->args, e->n_args);
    sq_pack_cstr (pk, "env");
    if (e->n_env == (size_t) -1)
        msgpack_pack_nil (pk);
    else
        s_strings (pk, e->env, e->n_env);
    sq_pack_cstr (pk, "in_paths");
    s_strings (pk, e->in, e->n_in);
    sq_pack_cstr (pk, "stdin");
    msgpack_pack_int64 (pk, e->stdin_input);
    sq_pack_cstr (pk, "out_paths");
    s_strings (pk, e->out, e->n_out);
    sq_pack_cstr (pk, "stdout");
    msgpack_pack_int64 (pk, e->stdout_output);
    if (e->extra_key) {
        sq_pack_cstr (pk, e->extra_key);
        msgpack_pack_nil (pk);
    }
}

static void
s_test_execute (void)
{
    const char *args [] = { "wc", "-l" };
    const char *env [] = { "LANG=C", "EMPTY=" };
    const char *in [] = { "", "data/in.txt" };
    const char *out [] = { "", "result.txt" };
    s_exec_t good = { args, 2, env, 2, in, 2, 0, out, 2, 0, NULL };
    sq_taskconf_t conf;
    s_pack_exec (&good);
    CHECK (s_decode (SQ_KIND_EXECUTE, 2, 2, &conf) == 0);
    CHECK (conf.n_args == 2 && mpr_str_eq (conf.args [1], "-l"));
    CHECK (conf.n_env == 2 && mpr_str_eq (conf.env [0], "LANG=C"));
    CHECK (conf.n_in_paths == 2 && mpr_str_eq (conf.in_paths [1], "data/in.txt"));
    CHECK (conf.stdin_input == 0 && conf.stdout_output == 0);
    CHECK (conf.n_out_paths == 2 && mpr_str_eq (conf.out_paths [1], "result.txt"));
    sq_taskconf_release (&conf);
    CHECK (conf.args == NULL && conf.n_args == 0);

    //  nil env, no stdin / stdout, no inputs or outputs
    s_exec_t minimal = { args, 1, NULL, (size_t) -1, NULL, 0, -1, NULL, 0, -1, NULL };
    s_pack_exec (&minimal);
    CHECK (s_decode (SQ_KIND_EXECUTE, 0, 0, &conf) == 0 && conf.stdin_input == -1 && conf.n_env == 0);
    sq_taskconf_release (&conf);

    //  stdin / stdout given as nil are "none"
    msgpack_packer *pk = s_new ();
    msgpack_pack_map (pk, 3);
    sq_pack_cstr (pk, "args");
    s_strings (pk, args, 1);
    sq_pack_cstr (pk, "stdin");
    msgpack_pack_nil (pk);
    sq_pack_cstr (pk, "stdout");
    msgpack_pack_nil (pk);
    CHECK (s_decode (SQ_KIND_EXECUTE, 0, 0, &conf) == 0 && conf.stdin_input == -1 && conf.stdout_output == -1);
    sq_taskconf_release (&conf);

    //  Output kept up to log_limit, or written to absolute files instead
    pk = s_new ();
    msgpack_pack_map (pk, 4);
    sq_pack_cstr (pk, "args");
    s_strings (pk, args, 1);
    sq_pack_cstr (pk, "log_limit");
    msgpack_pack_uint64 (pk, 4096);
    sq_pack_cstr (pk, "stdout_path");
    sq_pack_cstr (pk, "/var/out/a.txt");
    sq_pack_cstr (pk, "stderr_path");
    sq_pack_cstr (pk, "/var/out/a.err");
    CHECK (s_decode (SQ_KIND_EXECUTE, 0, 0, &conf) == 0 && conf.log_limit == 4096
           && mpr_str_eq (conf.stdout_path, "/var/out/a.txt")
           && mpr_str_eq (conf.stderr_path, "/var/out/a.err"));
    sq_taskconf_release (&conf);
    const char *bad_paths [] = { "relative/out", "", "/with\0nul" };
    for (size_t i = 0; i < 3; i++) {
        pk = s_new ();
        msgpack_pack_map (pk, 2);
        sq_pack_cstr (pk, "args");
        s_strings (pk, args, 1);
        sq_pack_cstr (pk, "stdout_path");
        msgpack_pack_str (pk, i == 2? 10: strlen (bad_paths [i]));
        msgpack_pack_str_body (pk, bad_paths [i], i == 2? 10: strlen (bad_paths [i]));
        CHECK (s_refuses (SQ_KIND_EXECUTE, 0, 0, "absolute path"));
    }
    //  A working directory: absolute, or relative without ".."; output
    //  files of an execute task may begin with %{CWD} (a py task's not)
    const char *good_cwds [] = { "/data/run", "sub/dir", "a" };
    for (size_t i = 0; i < 3; i++) {
        pk = s_new ();
        msgpack_pack_map (pk, 3);
        sq_pack_cstr (pk, "args");
        s_strings (pk, args, 1);
        sq_pack_cstr (pk, "cwd");
        sq_pack_cstr (pk, good_cwds [i]);
        sq_pack_cstr (pk, "stdout_path");
        sq_pack_cstr (pk, "%{CWD}/out.txt");
        CHECK (s_decode (SQ_KIND_EXECUTE, 0, 0, &conf) == 0
               && mpr_str_eq (conf.cwd, good_cwds [i])
               && mpr_str_eq (conf.stdout_path, "%{CWD}/out.txt"));
        sq_taskconf_release (&conf);
    }
    const char *bad_cwds [] = { "", "../up", "a/../../b", "a//b", "nul\0" };
    for (size_t i = 0; i < 5; i++) {
        pk = s_new ();
        msgpack_pack_map (pk, 2);
        sq_pack_cstr (pk, "args");
        s_strings (pk, args, 1);
        sq_pack_cstr (pk, "cwd");
        size_t len = i == 4? 5: strlen (bad_cwds [i]);
        char text [16];
        memcpy (text, bad_cwds [i], len);
        if (i == 4)
            text [3] = 0;
        msgpack_pack_str (pk, len);
        msgpack_pack_str_body (pk, text, len);
        CHECK (s_refuses (SQ_KIND_EXECUTE, 0, 0, "'cwd'"));
    }
    pk = s_new ();
    msgpack_pack_map (pk, 2);
    sq_pack_cstr (pk, "fn");
    msgpack_pack_bin (pk, 1);
    msgpack_pack_bin_body (pk, "f", 1);
    sq_pack_cstr (pk, "stdout_path");
    sq_pack_cstr (pk, "%{CWD}/out.txt");
    CHECK (s_refuses (SQ_KIND_PY, 0, 0, "absolute path"));
    //  share_inputs (the executors' input cache): a bool, false unless said.
    for (int share = 0; share < 3; share++) {
        pk = s_new ();
        msgpack_pack_map (pk, share? 2: 1);
        sq_pack_cstr (pk, "fn");
        msgpack_pack_bin (pk, 1);
        msgpack_pack_bin_body (pk, "f", 1);
        if (share == 1) {
            sq_pack_cstr (pk, "share_inputs");
            msgpack_pack_true (pk);
        }
        if (share == 2) {
            sq_pack_cstr (pk, "share_inputs");
            msgpack_pack_uint64 (pk, 1);
            CHECK (s_refuses (SQ_KIND_PY, 1, 1, "share_inputs"));
            continue;
        }
        sq_taskconf_t conf;
        CHECK (s_decode (SQ_KIND_PY, 1, 1, &conf) == 0);
        CHECK (conf.share_inputs == (share == 1));
        sq_taskconf_release (&conf);
    }
    pk = s_new ();
    msgpack_pack_map (pk, 2);
    sq_pack_cstr (pk, "args");
    s_strings (pk, args, 1);
    sq_pack_cstr (pk, "cwd");
    msgpack_pack_uint64 (pk, 7);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 0, 0, "'cwd'"));
    pk = s_new ();
    msgpack_pack_map (pk, 2);
    sq_pack_cstr (pk, "args");
    s_strings (pk, args, 1);
    sq_pack_cstr (pk, "log_limit");
    msgpack_pack_uint64 (pk, (1ull << 40) + 1);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 0, 0, "log_limit"));

    //  Arity must match the path lists
    s_pack_exec (&good);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 3, 2, "in_paths"));
    CHECK (s_refuses (SQ_KIND_EXECUTE, 2, 1, "out_paths"));

    //  No program
    s_exec_t e = good;
    e.n_args = 0;
    s_pack_exec (&e);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 2, 2, "'args'"));
    msgpack_pack_map (s_new (), 0);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 0, 0, "'args'"));

    //  Unsafe paths, inputs and outputs
    const char *unsafe [] = {
        "../x", "/etc/passwd", "a/../../b", "..", "a//b", "a/", "/", "x/.."
    };
    for (size_t i = 0; i < sizeof unsafe / sizeof unsafe [0]; i++) {
        const char *bad_in [] = { "", unsafe [i] };
        e = good;
        e.in = bad_in;
        s_pack_exec (&e);
        CHECK (s_refuses (SQ_KIND_EXECUTE, 2, 2, "input paths"));
        const char *bad_out [] = { "", unsafe [i] };
        e = good;
        e.out = bad_out;
        s_pack_exec (&e);
        CHECK (s_refuses (SQ_KIND_EXECUTE, 2, 2, "output paths"));
    }
    //  Names with dots that are not ".." are fine
    const char *dotty [] = { "", "..a/.b/c..d" };
    e = good;
    e.in = dotty;
    s_pack_exec (&e);
    CHECK (s_accepts (SQ_KIND_EXECUTE, 2, 2));
    //  "" only for the stdin input / stdout output
    e = good;
    e.stdin_input = 1;
    s_pack_exec (&e);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 2, 2, "input paths"));
    e = good;
    e.stdout_output = -1;
    s_pack_exec (&e);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 2, 2, "output paths"));
    //  A NUL in a path
    pk = s_new ();
    msgpack_pack_map (pk, 3);
    sq_pack_cstr (pk, "args");
    s_strings (pk, args, 1);
    sq_pack_cstr (pk, "in_paths");
    msgpack_pack_array (pk, 1);
    msgpack_pack_str (pk, 3);
    msgpack_pack_str_body (pk, "a\0b", 3);
    sq_pack_cstr (pk, "out_paths");
    msgpack_pack_array (pk, 0);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 1, 0, "input paths"));

    //  stdin / stdout index out of range
    const int64_t bad_index [] = { 2, 100, -2, INT64_MIN };
    for (size_t i = 0; i < 4; i++) {
        e = good;
        e.stdin_input = bad_index [i];
        s_pack_exec (&e);
        CHECK (s_refuses (SQ_KIND_EXECUTE, 2, 2, "stdin"));
        e = good;
        e.stdout_output = bad_index [i];
        s_pack_exec (&e);
        CHECK (s_refuses (SQ_KIND_EXECUTE, 2, 2, "stdout"));
    }
    //  stdin with no inputs at all
    e = minimal;
    e.stdin_input = 0;
    s_pack_exec (&e);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 0, 0, "not an input index"));

    //  Bad env entries
    const char *bad_env [][1] = { { "NOEQUALS" }, { "=value" }, { "" } };
    for (size_t i = 0; i < 3; i++) {
        e = good;
        e.env = bad_env [i];
        e.n_env = 1;
        s_pack_exec (&e);
        CHECK (s_refuses (SQ_KIND_EXECUTE, 2, 2, "env"));
    }
    //  Unknown key
    e = good;
    e.extra_key = "workdir";
    s_pack_exec (&e);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 2, 2, "unknown key 'workdir'"));
    //  A key of another kind is unknown here
    e = good;
    e.extra_key = "path";
    s_pack_exec (&e);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 2, 2, "unknown key 'path'"));
    //  args of the wrong type
    pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "args");
    sq_pack_cstr (pk, "ls -l");
    CHECK (s_refuses (SQ_KIND_EXECUTE, 0, 0, "'args'"));
    pk = s_new ();
    msgpack_pack_map (pk, 1);
    sq_pack_cstr (pk, "args");
    msgpack_pack_array (pk, 1);
    msgpack_pack_uint32 (pk, 1);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 0, 0, "'args'"));
    //  'done': one more output than out_paths lists, its last; not stdout
    const char *one_out [] = { "" };
    struct { size_t n_paths; int64_t stdout_output; int done; uint32_t n_out;
             const char *expect; } done_cases [] = {
        { 0, -1, 1, 1, NULL },                  //  the only output
        { 1, 0, 1, 2, NULL },                   //  after stdout's
        { 0, -1, 0, 0, NULL },                  //  false: none
        { 0, -1, 1, 0, "no output for it" },
        { 1, -1, 1, 1, "but the last ('done')" },
        { 0, -1, 1, 2, "but the last ('done')" },
        { 1, 1, 1, 2, "'stdout' cannot be the 'done' output" },
        { 0, -1, 2, 1, "'done'" },              //  not a bool
    };
    for (size_t i = 0; i < sizeof done_cases / sizeof done_cases [0]; i++) {
        pk = s_new ();
        msgpack_pack_map (pk, 4);
        sq_pack_cstr (pk, "args");
        s_strings (pk, args, 1);
        sq_pack_cstr (pk, "out_paths");
        s_strings (pk, one_out, done_cases [i].n_paths);
        sq_pack_cstr (pk, "stdout");
        msgpack_pack_int64 (pk, done_cases [i].stdout_output);
        sq_pack_cstr (pk, "done");
        if (done_cases [i].done == 2)
            msgpack_pack_int (pk, 0);
        else
        if (done_cases [i].done)
            msgpack_pack_true (pk);
        else
            msgpack_pack_false (pk);
        if (done_cases [i].expect)
            CHECK (s_refuses (SQ_KIND_EXECUTE, 0, done_cases [i].n_out, done_cases [i].expect));
        else {
            CHECK (s_decode (SQ_KIND_EXECUTE, 0, done_cases [i].n_out, &conf) == 0);
            CHECK (conf.done_output == (done_cases [i].done? (int32_t) done_cases [i].n_out - 1: -1));
            sq_taskconf_release (&conf);
        }
    }
    //  absent: none
    s_pack_exec (&good);
    CHECK (s_decode (SQ_KIND_EXECUTE, 2, 2, &conf) == 0 && conf.done_output == -1);
    sq_taskconf_release (&conf);
    //  Every truncation of a valid config is refused (and frees what it took)
    s_pack_exec (&good);
    for (size_t cut = 1; cut < s_w.buf.size; cut++) {
        sq_errbuf_t err;
        CHECK (sq_taskconf_decode (&conf, SQ_KIND_EXECUTE, (const uint8_t *) s_w.buf.data, cut, 2, 2, &err) == -1);
    }
}

//  A key given twice is refused, naming it, and the first array read for
//  it does not leak (the sanitizer build checks that).
static void
s_test_duplicate_keys (void)
{
    const char *args [] = { "true" };
    msgpack_packer *pk = s_new ();
    msgpack_pack_map (pk, 2);
    sq_pack_cstr (pk, "args");
    s_strings (pk, args, 1);
    sq_pack_cstr (pk, "args");
    s_strings (pk, args, 1);
    CHECK (s_refuses (SQ_KIND_EXECUTE, 0, 0, "args"));
    pk = s_new ();
    msgpack_pack_map (pk, 2);
    sq_pack_cstr (pk, "seconds");
    msgpack_pack_double (pk, 1);
    sq_pack_cstr (pk, "seconds");
    msgpack_pack_double (pk, 2);
    CHECK (s_refuses (SQ_KIND_SLEEP, 0, 0, "seconds"));
}

int
main (void)
{
    sq_wbuf_init (&s_w);
    s_test_kinds ();
    s_test_noop_concat ();
    s_test_sleep ();
    s_test_slice ();
    s_test_load_store ();
    s_test_execute ();
    s_test_duplicate_keys ();
    sq_wbuf_release (&s_w);
    if (s_failures) {
        fprintf (stderr, "test_common_taskconf: %d check(s) failed\n", s_failures);
        return 1;
    }
    printf ("test_common_taskconf: OK\n");
    return 0;
}
