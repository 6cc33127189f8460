/*  make_corpus: writes the seed corpus of fuzz_proto, valid encodings of
    every message made with the proto.h encoders (and the task configs of
    every built-in kind made with the client's sq_config_* helpers).
    Over 800 lines: a seed for every selector of fuzz_targets.h, each one
    call of its encoder, in the selectors' order.

    Usage: make_corpus DIR   (DIR new or empty)
    Each file is [selector byte] [frame], the selector from fuzz_targets.h;
    the file name says what it holds. The committed corpus under
    tests/fuzz/corpus/ is this program's output: regenerate it when a
    message changes (the ctest "fuzz_corpus_current" checks it decodes).
*/
#include "proto.h"
#include "taskconf.h"
#include "record.h"
#include "keys.h"
#include "squall.h"
#include "fuzz_targets.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *s_dir;
static int s_files;

static mpr_str_t
s_mstr (const char *s)
{
    mpr_str_t m = { s, (uint32_t) strlen (s) };
    return m;
}

static void
s_write (uint8_t target, const char *name, const void *data, size_t size)
{
    char path [1024];
    snprintf (path, sizeof path, "%s/%02u-%s", s_dir, target, name);
    FILE *f = fopen (path, "wbx");    //  two seeds of one name: a bug here
    if (!f) {
        fprintf (stderr, "make_corpus: %s: %s\n", path, strerror (errno));
        exit (1);
    }
    if (fwrite (&target, 1, 1, f) != 1 || (size && fwrite (data, 1, size, f) != size)
    ||  fclose (f)) {
        fprintf (stderr, "make_corpus: %s: write failed\n", path);
        exit (1);
    }
    s_files++;
}

//  Writes the wbuf under target (and as an mpr and peek seed), then resets it
static void
s_emit (uint8_t target, const char *name, sq_wbuf_t *w)
{
    s_write (target, name, w->buf.data, w->buf.size);
    char other [256];
    snprintf (other, sizeof other, "%s-%s", target == FZ_TASKCONF? "config": "msg", name);
    s_write (FZ_MPR, other, w->buf.data, w->buf.size);
    if (target != FZ_TASKCONF)
        s_write (FZ_PEEK, other, w->buf.data, w->buf.size);
    sq_wbuf_reset (w);
}

//  A task config seed: [kind] [n_inputs] [n_outputs] [config]
static void
s_config (const char *name, sq_kind_t kind, uint8_t n_in, uint8_t n_out,
          const void *config, size_t size)
{
    uint8_t *buf = (uint8_t *) malloc (size + 3);
    buf [0] = (uint8_t) kind;
    buf [1] = n_in;
    buf [2] = n_out;
    if (size)
        memcpy (buf + 3, config, size);
    //  must be valid, else the seed is wrong
    sq_taskconf_t conf;
    sq_errbuf_t err;
    if (sq_taskconf_decode (&conf, kind, (const uint8_t *) config, size, n_in, n_out, &err)) {
        fprintf (stderr, "make_corpus: config %s does not decode: %s\n", name, err.text);
        exit (1);
    }
    sq_taskconf_release (&conf);
    s_write (FZ_TASKCONF, name, buf, size + 3);
    s_write (FZ_MPR, name, config, size);
    free (buf);
}

//  An example of a message of the table, from its fields' kinds: a value
//  within each field's bounds, every optional field present.
static void
s_table_example (const sq_msg_desc_t *d, void *msg)
{
    static uint32_t ids [] = { 3, 5 };
    static const char bytes [64] = "0123456789abcdef0123456789abcdef0123456789abcdef012345678";
    memset (msg, 0, d->size);
    if (d->request) {
        ((sq_request_t *) msg)->type = d->type;
        ((sq_request_t *) msg)->req = 9;
    }
    for (uint32_t i = 0; i < d->n_fields; i++) {
        const sq_field_desc_t *f = &d->fields [i];
        char *at = (char *) msg + f->offset;
        sq_request_t *q = (sq_request_t *) msg;
        switch (f->kind) {
            case SQK_U32: *(uint32_t *) at = f->max? (uint32_t) f->max: 3; break;
            case SQK_U64: *(uint64_t *) at = f->max? f->max: 0x100000003ull; break;
            case SQK_I64: *(int64_t *) at = f->max? f->min: 10000; break;
            case SQK_BOOL: *(bool *) at = true; break;
            case SQK_STR: *(mpr_str_t *) at = s_mstr ("text/plain"); break;
            case SQK_NAME: case SQK_OSTR: *(mpr_str_t *) at = s_mstr ("acme"); break;
            case SQK_OU32: *(uint32_t *) at = 7; break;
            case SQK_OU64: *(uint64_t *) at = 9; break;
            case SQK_OINT: *(sq_opt_int_t *) at = (sq_opt_int_t) { true, f->max? f->min: 5 }; break;
            case SQK_ESTR: *(mpr_str_t *) at = s_mstr ("exited"); break;
            case SQK_TSTATE: *(uint32_t *) at = 2; break;           //  running
            case SQK_KEYLIST: {
                static const uint8_t *key [1] = { (const uint8_t *) bytes };
                *(sq_keylist_t *) at = (sq_keylist_t) { key, 1 };
                break;
            }
            case SQK_OWHERE: case SQK_WHERE:
                ((sq_where_t *) at)->endpoint = s_mstr ("tcp://127.0.0.1:5");
                break;
            case SQK_RESOURCES:
                *(sq_resources_t *) at = (sq_resources_t) { 1, { { s_mstr ("cpus"), 2 } } };
                break;
            case SQK_PREVIOUS: *(sq_previous_t *) at = (sq_previous_t) { s_mstr ("acme"), 3 }; break;
            case SQK_BIN: case SQK_OBIN:
                *(mpr_str_t *) at = (mpr_str_t) { bytes, f->min? (uint32_t) f->min: 8 };
                break;
            case SQK_IDS: q->ids = ids; q->n_ids = 2; break;
            case SQK_OPTIONS: q->detached = true;       //  and a name
            /* FALLTHRU */
            case SQK_JOB: q->has_name = true; q->name = s_mstr ("nightly"); break;
            //  Events' kinds (UPDATE's seeds are written by hand below)
            case SQK_OUTPUTS: case SQK_EXIT: break;
            case SQK_RAW: {
                static const uint8_t empty_map [] = { 0x80 };
                *(sq_raw_t *) at = (sq_raw_t) { empty_map, 1 };
                break;
            }
            //  ASSIGN's tasks' lists (its seed is written by hand below)
            case SQK_INPUTS: case SQK_OUTDECLS: break;
            //  SUBMIT's (its seeds are written by hand above): no objects,
            //  no tasks
            case SQK_OBJECTS: case SQK_TASKS: break;
            case SQK_I32: case SQK_FRAME: case SQK_IDLIST: case SQK_RESLIST: case SQK_ARRAY:
            case SQK_TOPTIONS: break;
            case SQK_BODY: break;               //  REPLY's: an empty FAULT (code 3)
        }
    }
}

typedef struct {
    const char *name;
    sq_kind_t kind;
    uint8_t n_in, n_out;
    void *config;
    size_t size;
} s_conf_t;

int
main (int argc, char **argv)
{
    if (argc != 2) {
        fprintf (stderr, "usage: make_corpus DIR\n");
        return 2;
    }
    s_dir = argv [1];
    mkdir (s_dir, 0755);

    //  Configs of every kind
    static const uint8_t nil [] = { 0xc0 }, empty_map [] = { 0x80 };
    const char *exec_args [] = { "sh", "-c", "sha256sum | cut -c1-64" };
    const char *in_paths [] = { "", "b/in.dat" };
    const char *out_paths [] = { "", "out/x.bin" };
    const char *env [] = { "LC_ALL=C", "SQUALL_X=1", NULL };
    const char *tr_args [] = { "tr", "a-z", "A-Z" };
    const char *tr_in [] = { "" }, *tr_out [] = { "" };
    s_conf_t confs [] = {
        { "noop-nil", SQ_KIND_NOOP, 2, 2, (void *) nil, 1 },
        { "noop-map", SQ_KIND_NOOP, 0, 1, (void *) empty_map, 1 },
        { "concat-nil", SQ_KIND_CONCAT, 3, 1, (void *) nil, 1 },
        { "concat-map", SQ_KIND_CONCAT, 1, 1, (void *) empty_map, 1 },
        { "sleep", SQ_KIND_SLEEP, 1, 1, NULL, 0 },
        { "sleep-int", SQ_KIND_SLEEP, 0, 0, NULL, 0 },
        { "slice", SQ_KIND_SLICE, 1, 1, NULL, 0 },
        { "slice-open", SQ_KIND_SLICE, 1, 1, NULL, 0 },
        { "load", SQ_KIND_LOAD, 0, 1, NULL, 0 },
        { "store", SQ_KIND_STORE, 1, 0, NULL, 0 },
        { "execute", SQ_KIND_EXECUTE, 2, 2, NULL, 0 },
        { "execute-tr", SQ_KIND_EXECUTE, 1, 1, NULL, 0 },
        { "py", SQ_KIND_PY, 2, 1, NULL, 0 },
    };
    confs [4].config = sq_config_sleep (0.25, &confs [4].size);
    confs [5].config = sq_config_sleep (3, &confs [5].size);
    confs [6].config = sq_config_slice (10, 4096, &confs [6].size);
    confs [7].config = sq_config_slice (7, -1, &confs [7].size);
    confs [8].config = sq_config_path ("/tmp/input.dat", &confs [8].size);
    confs [9].config = sq_config_path ("/tmp/output.dat", &confs [9].size);
    confs [10].config = sq_config_execute (exec_args, 3, in_paths, 2, 0, out_paths, 2, 0,
                                           env, &confs [10].size);
    confs [11].config = sq_config_execute (tr_args, 3, tr_in, 1, 0, tr_out, 1, 0,
                                           NULL, &confs [11].size);
    {
        //  py: {"fn": bin, "args": bin}, the bytes being stand-ins for pickles
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_sbuffer_init (&sb);
        msgpack_packer_init (&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map (&pk, 2);
        sq_pack_cstr (&pk, "fn");
        msgpack_pack_bin (&pk, 6);
        msgpack_pack_bin_body (&pk, "\x80\x05\x95\x00N.", 6);
        sq_pack_cstr (&pk, "args");
        msgpack_pack_bin (&pk, 3);
        msgpack_pack_bin_body (&pk, "\x80\x05N", 3);
        confs [12].config = malloc (sb.size);
        memcpy (confs [12].config, sb.data, sb.size);
        confs [12].size = sb.size;
        msgpack_sbuffer_destroy (&sb);
    }
    size_t n_confs = sizeof confs / sizeof confs [0];
    for (size_t i = 0; i < n_confs; i++) {
        if (!confs [i].config) {
            fprintf (stderr, "make_corpus: config %s not made\n", confs [i].name);
            return 1;
        }
        s_config (confs [i].name, confs [i].kind, confs [i].n_in, confs [i].n_out,
                  confs [i].config, confs [i].size);
    }

    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_resource_t res [] = { { s_mstr ("cpus"), 2 }, { s_mstr ("memory"), 1ull << 33 },
                             { s_mstr ("gpus"), 1 } };

    //  HELLO
    sq_hello_encode_client (&w, 1, "example");
    s_emit (FZ_HELLO, "client", &w);
    sq_hello_encode_governor (&w, 1, "gov1", 1732180000123ull, "tcp://10.0.0.5:41001",
                              "tcp://10.0.0.5:41002", res, 3, NULL, 0);
    s_emit (FZ_HELLO, "governor", &w);
    sq_hello_encode_governor (&w, 7, "", 0, "", "", NULL, 0, NULL, 0);
    s_emit (FZ_HELLO, "governor-nil-resources", &w);
    msgpack_pack_array (&w.pk, 5);
    msgpack_pack_uint32 (&w.pk, SQ_MSG_HELLO);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, SQUALL_PROTOCOL_VERSION + 1);
    sq_pack_cstr (&w.pk, "client");
    sq_pack_cstr (&w.pk, "future");
    s_emit (FZ_HELLO, "version-next", &w);
    sq_hello_encode_governor (&w, 1, "gov1", 1732180000123ull, "tcp://10.0.0.5:41001",
                              "tcp://10.0.0.5:41002", res, 2, "0123456789abcdef0123456789abcdef", 3);
    s_emit (FZ_HELLO, "governor-reattach", &w);

    //  REPLY: ok bodies of every request, and errors
    sq_reply_begin (&w, 1);
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 1000);
    msgpack_pack_uint32 (&w.pk, 4096);
    s_emit (FZ_REPLY, "hello-governor", &w);
    sq_reply_begin (&w, 2);
    msgpack_pack_nil (&w.pk);
    s_emit (FZ_REPLY, "nil", &w);
    sq_reply_begin (&w, 4);
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_array (&w.pk, 4);
    msgpack_pack_uint32 (&w.pk, 2); msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_nil (&w.pk); msgpack_pack_nil (&w.pk);
    msgpack_pack_array (&w.pk, 4);
    msgpack_pack_uint32 (&w.pk, 5); msgpack_pack_uint32 (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, 4); sq_pack_cstr (&w.pk, "exit status 1");
    s_emit (FZ_REPLY, "wait", &w);
    sq_reply_begin (&w, 5);
    msgpack_pack_array (&w.pk, 3);
    msgpack_pack_uint32 (&w.pk, 20000);
    sq_pack_cstr (&w.pk, "text/plain");
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint32 (&w.pk, 1);
    sq_pack_cstr (&w.pk, "tcp://10.0.0.5:41002");
    s_emit (FZ_REPLY, "fetch-where", &w);
    sq_reply_begin (&w, 6);
    msgpack_pack_map (&w.pk, 2);
    sq_pack_cstr (&w.pk, "sessions");
    msgpack_pack_uint32 (&w.pk, 3);
    sq_pack_cstr (&w.pk, "load");
    msgpack_pack_double (&w.pk, 0.5);
    s_emit (FZ_REPLY, "info-map", &w);
    sq_reply_encode_error (&w, 6, SQ_E_UNKNOWN_ID, "task 4: input 9 is not an object", 4, 0);
    s_emit (FZ_REPLY, "error", &w);
    sq_reply_encode_error (&w, 9, SQ_E_UPSTREAM_FAILED, "exit status 2", 12, 7);
    s_emit (FZ_REPLY, "error-root", &w);

    //  Client requests
    uint32_t ids [] = { 3, 5, 70000 };
    struct { const char *name; uint32_t type, mode, n; int64_t timeout; } reqs [] = {
        { "open", SQ_MSG_SESSION_OPEN, 0, 0, 0 }, { "close", SQ_MSG_SESSION_CLOSE, 0, 0, 0 },
        { "keep", SQ_MSG_KEEP, 0, 3, 0 }, { "unkeep", SQ_MSG_UNKEEP, 0, 1, 0 },
        { "cancel-all", SQ_MSG_CANCEL, 0, 0, 0 }, { "cancel", SQ_MSG_CANCEL, 0, 2, 0 },
        { "wait-session", SQ_MSG_WAIT, SQ_WAIT_SESSION, 0, -1 },
        { "wait-all", SQ_MSG_WAIT, SQ_WAIT_ALL, 3, 10000 },
        { "wait-some", SQ_MSG_WAIT, SQ_WAIT_SOME, 2, 100 },
        { "fetch", SQ_MSG_FETCH, 0, 0, 30000 }, { "info", SQ_MSG_INFO, 0, 0, 0 },
        { "ping", SQ_MSG_PING, 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs [0]; i++) {
        sq_request_t q = { .type = reqs [i].type, .req = (uint32_t) i + 1, .session = 1,
                           .mode = reqs [i].mode, .id = 3, .timeout_ms = reqs [i].timeout,
                           .n_ids = reqs [i].n, .ids = ids };
        sq_request_encode (&w, &q);
        s_emit (FZ_REQUEST, reqs [i].name, &w);
    }
    sq_request_t retire = { .type = SQ_MSG_RETIRE, .req = 40, .governor = 3 };
    sq_request_encode (&w, &retire);
    s_emit (FZ_REQUEST, "retire", &w);
    sq_request_t restart = { .type = SQ_MSG_RESTART, .req = 43, .timeout_ms = 5000 };
    sq_request_encode (&w, &restart);
    s_emit (FZ_REQUEST, "restart", &w);
    sq_request_t del = { .type = SQ_MSG_DELETE, .req = 41, .session = 1, .n_ids = 2, .ids = ids };
    sq_request_encode (&w, &del);
    s_emit (FZ_REQUEST, "delete", &w);
    sq_request_t place = { .type = SQ_MSG_PLACE, .req = 42, .session = 1, .id = 5, .n_ids = 2,
                           .ids = ids, .copies = 3, .flags = SQ_PLACE_MOVE, .timeout_ms = -1 };
    sq_request_encode (&w, &place);
    s_emit (FZ_REQUEST, "place", &w);
    sq_request_t log = { .type = SQ_MSG_LOG, .req = 43, .session = 1, .id = 5, .attempt = -1,
                         .stream = SQ_LOG_STDERR };
    sq_request_encode (&w, &log);
    s_emit (FZ_REQUEST, "log", &w);
    sq_pack_holders (&w.pk, ids, 3);
    s_emit (FZ_REPLIES, "holders", &w);
    //  Jobs (docs/protocol.md, "Jobs")
    sq_request_t jobs [] = {
        { .type = SQ_MSG_SESSION_OPEN, .req = 50, .has_name = true, .name = s_mstr ("nightly"),
          .detached = true },
        { .type = SQ_MSG_SESSION_OPEN, .req = 58, .detached = true, .n_ids = 2, .ids = ids },
        { .type = SQ_MSG_SESSIONS, .req = 51, .states = 5, .has_name = true,
          .name = s_mstr ("nightly") },
        { .type = SQ_MSG_ATTACH, .req = 52, .session = 3 },
        { .type = SQ_MSG_SESSION_WAIT, .req = 53, .session = 3, .timeout_ms = 1000 },
        { .type = SQ_MSG_TASKS, .req = 54, .session = 3, .states = 8, .offset = 10, .limit = 100 },
        { .type = SQ_MSG_RESUBMIT, .req = 55, .session = 3, .n_ids = 2, .ids = ids },
        { .type = SQ_MSG_FORGET, .req = 56, .session = 3 },
        { .type = SQ_MSG_JOB_CANCEL, .req = 57, .session = 3 },
        { .type = SQ_MSG_ADOPT, .req = 58, .session = 4, .n_ids = 2, .ids = ids },
    };
    const char *job_names [] = { "open-job", "open-job-after", "sessions", "attach",
                                 "session-wait", "tasks", "resubmit", "forget", "job-cancel",
                                 "adopt" };
    for (size_t i = 0; i < sizeof jobs / sizeof jobs [0]; i++) {
        sq_request_encode (&w, &jobs [i]);
        s_emit (FZ_REQUEST, job_names [i], &w);
    }
    sq_job_info_t job = { .id = 3, .name = s_mstr ("nightly"), .state = SQ_JOBSTATE_FAILED,
                          .detached = true, .tasks = { 1, 0, 997, 2, 0 }, .created_ms = 1,
                          .ended_ms = 2 };
    msgpack_pack_array (&w.pk, 1);
    sq_pack_job (&w.pk, &job);
    s_emit (FZ_REPLIES, "jobs-reply", &w);
    sq_task_info_t info = { .id = 2, .index = { true, 517 }, .state = 8,
                            .exit_code = { true, 3 }, .governor = 1, .attempts = 1,
                            .started_ms = 1, .ended_ms = 2, .error = s_mstr ("exited"),
                            .name = s_mstr ("sim"), .task = 0xC0000205 };
    sq_pack_tasks_head (&w.pk, 1000, 1);
    sq_pack_task_info (&w.pk, &info);
    s_emit (FZ_REPLIES, "tasks-reply", &w);

    //  SUBMIT: the example of docs/protocol.md, then one with every kind
    uint32_t in1 [] = { 1 }, out3 [] = { 3 };
    sq_pack_submit_begin (&w.pk, 3, 1);
    msgpack_pack_array (&w.pk, 2);
    sq_pack_object_spec (&w.pk, 1, 0, "text/plain", 1, "greeting");
    sq_pack_object_spec (&w.pk, 3, SQ_OBJ_KEEP, "text/plain", -1, "");
    msgpack_pack_array (&w.pk, 1);
    sq_task_spec_t join = { .id = 2, .kind = s_mstr ("concat"), .n_inputs = 1, .inputs = in1,
                            .n_outputs = 1, .outputs = out3, .name = s_mstr ("join") };
    sq_pack_task_spec (&w.pk, &join);
    s_emit (FZ_SUBMIT, "example", &w);

    sq_pack_submit_begin (&w.pk, 4, 2);
    msgpack_pack_array (&w.pk, 2 + (uint32_t) n_confs * 2);
    sq_pack_object_spec (&w.pk, 1, 0, "application/octet-stream", 1, "a");
    sq_pack_object_spec (&w.pk, 2, SQ_OBJ_KEEP, "", 2, "b");
    for (size_t i = 0; i < n_confs; i++) {
        sq_pack_object_spec (&w.pk, 1000 + (uint32_t) i * 10 + 1, SQ_OBJ_KEEP, "", -1, "");
        sq_pack_object_spec (&w.pk, 1000 + (uint32_t) i * 10 + 2, 0, "text/plain", -1, "o2");
    }
    msgpack_pack_array (&w.pk, (uint32_t) n_confs);
    uint32_t govs [] = { 1, 2 };
    for (size_t i = 0; i < n_confs; i++) {
        uint32_t ins [] = { 1, 2, 1, 2, 1, 2, 1, 2 };
        uint32_t outs [] = { 1000 + (uint32_t) i * 10 + 1, 1000 + (uint32_t) i * 10 + 2 };
        sq_task_spec_t t = { .id = 1000 + (uint32_t) i * 10,
                             .kind = s_mstr (sq_kind_name (confs [i].kind)),
                             .n_inputs = confs [i].n_in, .inputs = ins,
                             .n_outputs = confs [i].n_out, .outputs = outs,
                             .config = (const uint8_t *) confs [i].config,
                             .config_size = confs [i].size, .n_resources = i % 3,
                             .resources = res, .priority = (int32_t) i - 3,
                             .max_retries = (uint32_t) i % 4, .timeout_ms = (uint32_t) i * 1000,
                             .name = s_mstr (confs [i].name), .n_governors = (uint32_t) i % 3,
                             .governors = govs, .loose = i % 2 == 1 };
        sq_pack_task_spec (&w.pk, &t);
    }
    s_emit (FZ_SUBMIT, "submit-every-kind", &w);

    //  Array tasks: a range and items (docs/protocol.md, "Array tasks")
    sq_pack_submit_begin (&w.pk, 5, 3);
    sq_pack_submit_objects (&w.pk, 0);
    sq_pack_submit_tasks (&w.pk, 2);
    const char *array_argv [] = { "sh", "-c", "echo %{TASK_ID} %{ITEM}" };
    size_t argv_size;
    void *exec = sq_config_execute (array_argv, 3, NULL, 0, -1, NULL, 0, -1, NULL, &argv_size);
    sq_task_spec_t ranged = { .id = 2, .kind = s_mstr ("execute"), .config = exec,
                              .config_size = argv_size, .name = s_mstr ("sim"),
                              .array = SQ_ARRAY_RANGE, .array_first = 1, .array_last = 10000,
                              .array_step = 1 };
    sq_pack_task_spec (&w.pk, &ranged);
    const uint8_t items [] = { 0x92, 0xa5, 'a', '.', 'c', 's', 'v', 0xa5, 'b', '.', 'c', 's', 'v' };
    ranged.id = 3;
    ranged.array = SQ_ARRAY_ITEMS;
    ranged.array_items = items;
    ranged.array_items_size = sizeof items;
    sq_pack_task_spec (&w.pk, &ranged);
    s_emit (FZ_SUBMIT, "submit-arrays", &w);
    free (exec);

    //  UPDATE: every event
    sq_output_ref_t outs [] = { { sq_key (1, 3), 14, 1 }, { sq_key (1, 4), 1 << 20, -1 } };
    sq_batch_header (&w, SQ_MSG_UPDATE, 9);
    sq_pack_started (&w.pk, sq_key (1, 2), 1);
    sq_pack_finished (&w.pk, sq_key (1, 2), 1, outs, 2, 1234);
    sq_pack_finished (&w.pk, sq_key (1, 9), 0, NULL, 0, 0);
    sq_pack_failed (&w.pk, sq_key (2, 7), 3, "exit status 1", 99);
    sq_pack_located (&w.pk, sq_key (1, 4), 1 << 20);
    sq_pack_located_in (&w.pk, sq_key (1, 4), 12 << 20, 9000);
    sq_pack_lost (&w.pk, sq_key (1, 4));
    sq_pack_retracted (&w.pk, sq_key (1, 5), 2);
    sq_pack_uploaded (&w.pk, sq_key (1, 6), 5 << 20);
    s_emit (FZ_UPDATE, "every-event", &w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 0);
    s_emit (FZ_UPDATE, "empty", &w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    sq_pack_streamed (&w.pk, sq_key (1, 7), 3 << 20);
    s_emit (FZ_UPDATE, "streamed", &w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    sq_pack_streamlocal (&w.pk, sq_key (1, 7));
    s_emit (FZ_UPDATE, "streamlocal", &w);
    const uint8_t task_key [32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30 };
    sq_batch_header (&w, SQ_MSG_UPDATE, 3);
    sq_pack_seceded (&w.pk, sq_key (1, 8), 1, true);
    sq_pack_seceded (&w.pk, sq_key (1, 8), 1, false);
    sq_pack_taskkey (&w.pk, sq_key (1, 8), 1, task_key);
    s_emit (FZ_UPDATE, "nested", &w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    sq_pack_refreshed (&w.pk, 3);
    s_emit (FZ_UPDATE, "refreshed", &w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    sq_pack_logtail_event (&w.pk, sq_key (1, 7), 2, 9, "last line\n", 10);
    s_emit (FZ_UPDATE, "logtail", &w);
    sq_batch_header (&w, SQ_MSG_UPDATE, 1);
    sq_pack_ran (&w.pk, 12, 2, 4u << 20);
    s_emit (FZ_UPDATE, "ran", &w);
    //  LOGTAIL (broker -> governor) shares the GREAD target too.
    sq_logtail_t logtail = { 9, sq_key (1, 7), 2, SQ_LOG_STDERR };
    sq_logtail_encode (&w, &logtail);
    s_emit (FZ_GREAD, "logtail-order", &w);

    //  LOAD, HEARTBEAT, BYE
    sq_load_t load = { 2, 10, 1ull << 30, 12345, 77, 1000, 3, 1ull << 29 };
    sq_load_encode (&w, &load);
    s_emit (FZ_LOAD, "load", &w);
    sq_bare_encode (&w, SQ_MSG_HEARTBEAT);
    s_emit (FZ_BARE, "heartbeat", &w);
    sq_bare_encode (&w, SQ_MSG_BYE);
    s_emit (FZ_BARE, "bye", &w);
    sq_bare_encode (&w, SQ_MSG_DRAIN);
    s_emit (FZ_BARE, "drain", &w);
    sq_bare_encode (&w, SQ_MSG_LEAVE);
    s_emit (FZ_BARE, "leave", &w);
    sq_refresh_encode (&w, "tenant-a");
    s_emit (FZ_BARE, "refresh", &w);

    //  ASSIGN: every kind, inputs inline and remote
    sq_input_ref_t ains [8];
    for (int i = 0; i < 8; i++) {
        ains [i].key = sq_key (1, 1 + (uint32_t) i);
        ains [i].size = i % 2? 1 << 20: 14;
        ains [i].frame = i % 2? -1: 1;
        ains [i].content_type = s_mstr (i % 2? "": "text/plain");
    }
    sq_out_decl_t aouts [] = { { sq_key (1, 20), s_mstr ("text/plain"), false, 0 },
                               { sq_key (1, 21), s_mstr (""), true, 2 } };
    sq_batch_header (&w, SQ_MSG_ASSIGN, (uint32_t) n_confs);
    for (size_t i = 0; i < n_confs; i++) {
        sq_assign_t t = { .key = sq_key (1, 100 + (uint32_t) i), .attempt = (uint32_t) i % 3,
                          .kind = s_mstr (sq_kind_name (confs [i].kind)),
                          .config = (const uint8_t *) confs [i].config,
                          .config_size = confs [i].size,
                          .n_inputs = confs [i].n_in, .inputs = ains,
                          .n_outputs = confs [i].n_out, .outputs = aouts, .cpus = 1,
                          .name = s_mstr (confs [i].name),
                          .tenant = s_mstr (i % 2? "team-a": "") };
        if (i % 2) {
            t.n_resources = 2;
            t.resources [0] = (sq_resource_t) { s_mstr ("memory"), 1 << 20 };
            t.resources [1] = (sq_resource_t) { s_mstr ("gpus"), 1 };
        }
        sq_pack_assign (&w.pk, &t);
    }
    s_emit (FZ_ASSIGN, "assign-every-kind", &w);

    //  SEND, DROP, STOP
    sq_batch_header (&w, SQ_MSG_SEND, 2);
    sq_pack_send (&w.pk, sq_key (1, 4), 1, 2, "tcp://10.213.0.12:41001", NULL);
    sq_pack_send (&w.pk, sq_key (3, 9), 0, 3, "tcp://127.0.0.1:5555", NULL);
    s_emit (FZ_SEND, "send", &w);
    sq_batch_header (&w, SQ_MSG_DROP, 3);
    msgpack_pack_uint64 (&w.pk, sq_key (1, 4));
    msgpack_pack_uint64 (&w.pk, sq_key (1, 5));
    msgpack_pack_uint64 (&w.pk, sq_key (0xffffffffu, 0xffffffffu));
    s_emit (FZ_DROP, "drop", &w);
    sq_batch_header (&w, SQ_MSG_STOP, 2);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint64 (&w.pk, sq_key (1, 2));
    msgpack_pack_uint32 (&w.pk, 1);
    msgpack_pack_array (&w.pk, 2);
    msgpack_pack_uint64 (&w.pk, sq_key (7, 2));
    msgpack_pack_uint32 (&w.pk, 0);
    s_emit (FZ_STOP, "stop", &w);

    //  OBJECT, GFETCH
    sq_object_msg_t obj = { sq_key (1, 4), 2, 1 << 20, s_mstr ("application/octet-stream"), 3 };
    sq_object_encode (&w, &obj);
    s_emit (FZ_OBJECT, "object", &w);
    sq_gfetch_encode (&w, 7, sq_key (1, 3), NULL, 0);
    s_emit (FZ_GFETCH, "gfetch", &w);

    //  Chunked copies and ranged reads
    sq_chunk_t chunk = { 9, sq_key (1, 4), 1, 1 << 20, 4 << 20, s_mstr ("text/plain"), 2,
                         s_mstr ("tcp://10.213.0.11:41001") };
    sq_chunk_encode (&w, &chunk);
    s_emit (FZ_CHUNK, "chunk", &w);
    sq_credit_t credit = { 9, sq_key (1, 4), 4 };
    sq_credit_encode (&w, &credit);
    s_emit (FZ_CREDIT, "credit", &w);
    credit.credits = 0;
    sq_credit_encode (&w, &credit);
    s_emit (FZ_CREDIT, "credit-cancel", &w);
    //  Streams
    sq_batch_header (&w, SQ_MSG_STREAM, 2);
    uint8_t stream_key [32] = { 1, 2, 3 };
    sq_pack_stream (&w.pk, sq_key (1, 7), 1, sq_key (1, 9), 2, "tcp://10.213.0.12:41001", NULL);
    sq_pack_stream (&w.pk, sq_key (1, 7), 1, sq_key (1, 10), 3, "tcp://10.213.0.13:41001",
                    stream_key);
    s_emit (FZ_STREAM, "stream", &w);
    sq_batch_header (&w, SQ_MSG_UNSTREAM, 1);
    sq_pack_unstream (&w.pk, sq_key (1, 7), 1, sq_key (1, 11));
    s_emit (FZ_STREAM, "unstream", &w);
    sq_schunk_t schunk = { sq_key (1, 7), 1, sq_key (1, 9), 3 << 20, false, 2,
                           s_mstr ("tcp://10.213.0.11:41001"), { NULL, 0 } };
    sq_schunk_encode (&w, &schunk);
    s_emit (FZ_SCHUNK, "schunk", &w);
    schunk.end = true;
    sq_schunk_encode (&w, &schunk);
    s_emit (FZ_SCHUNK, "schunk-end", &w);
    schunk.end = false;
    schunk.offset = 0;
    schunk.token = (mpr_str_t) { "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10", 16 };
    sq_schunk_encode (&w, &schunk);
    s_emit (FZ_SCHUNK, "schunk-token", &w);
    sq_scredit_t scredit = { sq_key (1, 7), 1, sq_key (1, 9), 1 };
    sq_scredit_encode (&w, &scredit);
    s_emit (FZ_SCREDIT, "scredit", &w);
    sq_gread_t gread = { 8, sq_key (1, 3), 4096, 1 << 20, { NULL, 0 } };
    sq_gread_encode (&w, &gread);
    s_emit (FZ_GREAD, "gread", &w);
    //  LOGREAD shares the GREAD target (fuzz_proto tries both decoders).
    sq_logread_t logread = { 9, sq_key (1, 5), 2, SQ_LOG_STDOUT, 524288, 1 << 20, { NULL, 0 } };
    sq_logread_encode (&w, &logread);
    s_emit (FZ_GREAD, "logread", &w);
    //  RUNREAD too.
    sq_runread_t runread = { 10, 12, 4u << 20, 1 << 20, { NULL, 0 } };
    sq_runread_encode (&w, &runread);
    s_emit (FZ_GREAD, "runread", &w);

    sq_put_t put = { 11, sq_key (2, 1), 65536, 1 << 20, s_mstr ("application/octet-stream"),
                     { NULL, 0 } };
    sq_put_encode (&w, &put);
    s_emit (FZ_PUT, "put", &w);
    put.offset = 0;
    put.content_type = s_mstr ("");
    sq_put_encode (&w, &put);
    s_emit (FZ_PUT, "put-first", &w);

    //  Security and durability: ZAP requests (frames as [length, bytes]),
    //  key files, KEYS, welcomes, where, journal records.
    {
        static const uint8_t key [32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                          17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32 };
        const char *frames [] = { "1.0", "1", "serve", "127.0.0.1", "", "CURVE" };
        uint8_t zap [256];
        size_t n = 0;
        for (size_t i = 0; i < 6; i++) {
            zap [n++] = (uint8_t) strlen (frames [i]);
            memcpy (zap + n, frames [i], strlen (frames [i]));
            n += strlen (frames [i]);
        }
        zap [n++] = 32;
        memcpy (zap + n, key, 32);
        s_write (FZ_ZAP, "curve", zap, n + 32);
        zap [n - 1 - 5 - 1] = 4;        //  mechanism "NULL", no credentials
        memcpy (zap + n - 5 - 1 + 1, "NULL", 4);
        s_write (FZ_ZAP, "null", zap, n - 1);

        char cert [1024];
        int len;
        //  A fixed pair: the corpus must not change from run to run.
        const char *fixed_public = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
        const char *fixed_secret = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6";
        len = snprintf (cert, sizeof cert, "#   ZeroMQ CURVE **Secret** Certificate\n\n"
                        "metadata\n    role = \"client\"\n    tenant = \"alice\"\n"
                        "curve\n    public-key = \"%s\"\n    secret-key = \"%s\"\n",
                        fixed_public, fixed_secret);
        s_write (FZ_CERT, "secret", cert, (size_t) len);
        len = snprintf (cert, sizeof cert, "metadata\n    role = governor\ncurve\n"
                        "    public-key = \"%s\"\n", fixed_public);
        s_write (FZ_CERT, "public", cert, (size_t) len);

        const uint8_t *keys [2] = { key, key };
        sq_keyset_encode (&w, keys, 1, keys, 2);
        s_emit (FZ_KEYS, "keys", &w);
        sq_keyset_encode (&w, NULL, 0, NULL, 0);
        s_emit (FZ_KEYS, "keys-none", &w);

        sq_wbuf_t body;
        sq_wbuf_init (&body);
        sq_welcome_encode_client (&body, 1, 3, 4096, "0123456789abcdef0123456789abcdef", 2, "alice");
        sq_reply_t reply;
        sq_errbuf_t err;
        sq_reply_decode (&reply, body.buf.data, body.buf.size, &err);
        s_write (FZ_WELCOME, "client", reply.body, reply.body_size);
        sq_wbuf_reset (&body);
        sq_welcome_encode_governor (&body, 1, 4, 1000, 4096, "0123456789abcdef0123456789abcdef", 2,
                                    true, key, 1764000000000ull);
        sq_reply_decode (&reply, body.buf.data, body.buf.size, &err);
        s_write (FZ_WELCOME, "governor", reply.body, reply.body_size);
        sq_pack_session_opened (&w.pk, 5, key);
        s_write (FZ_WELCOME, "session-opened", w.buf.data, w.buf.size);
        sq_wbuf_reset (&w);
        sq_wbuf_release (&body);

        msgpack_pack_array (&w.pk, 3);
        msgpack_pack_uint64 (&w.pk, 20000);
        sq_pack_cstr (&w.pk, "text/plain");
        sq_pack_where (&w.pk, 1, "tcp://10.0.0.5:41002", key, key, 32);
        s_write (FZ_WHERE, "fetched", w.buf.data, w.buf.size);
        sq_wbuf_reset (&w);
        sq_pack_where (&w.pk, 2, "tcp://10.0.0.6:41002", NULL, NULL, 0);
        s_write (FZ_WHERE, "where", w.buf.data, w.buf.size);
        sq_wbuf_reset (&w);
        sq_pack_logwhere_head (&w.pk, 1, "running");
        sq_pack_where (&w.pk, 2, "tcp://10.0.0.6:41002", key, key, 32);
        s_write (FZ_WHERE, "logwhere", w.buf.data, w.buf.size);
        sq_wbuf_reset (&w);
        sq_pack_logwhere_head (&w.pk, 0, "waiting");
        msgpack_pack_nil (&w.pk);
        s_write (FZ_WHERE, "logwhere-waiting", w.buf.data, w.buf.size);
        sq_wbuf_reset (&w);
        sq_pack_logpart (&w.pk, 1048576, 10485760, true);
        s_write (FZ_REPLIES, "logpart", w.buf.data, w.buf.size);
        //  RUN's reply body and the answers RUNREAD reads
        sq_wbuf_reset (&w);
        msgpack_pack_array (&w.pk, 2);
        msgpack_pack_uint64 (&w.pk, 12);
        msgpack_pack_map (&w.pk, 2);
        sq_pack_ran_where (&w.pk, 2, 2, 4u << 20, "tcp://10.0.0.6:41002", key, key, 32);
        sq_pack_ran_where (&w.pk, 3, 0, 0, "", NULL, NULL, 0);
        s_write (FZ_REPLIES, "run-reply", w.buf.data, w.buf.size);
        sq_wbuf_reset (&w);
        msgpack_pack_array (&w.pk, 2);
        sq_pack_ran_result (&w.pk, 4242, true, "\x80\x04K\x01.", 5);
        sq_pack_ran_result (&w.pk, 4243, false, "too large", 9);
        s_write (FZ_REPLIES, "run-answers", w.buf.data, w.buf.size);
        sq_wbuf_reset (&w);
        sq_pack_wait_head (&w.pk, 1, 1, 2);
        sq_pack_done (&w.pk, 2, SQ_STATE_FINISHED, 0, NULL);
        sq_pack_done (&w.pk, 4, SQ_STATE_FAILED, 4, "exit status 1");
        s_write (FZ_REPLIES, "wait", w.buf.data, w.buf.size);
        sq_wbuf_reset (&w);
        sq_record_pack (&w.pk, SQ_REC_RESUMED, &(sq_resumed_t) { 13 });
        s_write (FZ_REPLIES, "resumed", w.buf.data, w.buf.size);
        sq_wbuf_reset (&w);
        sq_record_pack (&w.pk, SQ_REC_SERVED, &(sq_served_t) { 20000, { "text/plain", 10 } });
        s_write (FZ_REPLIES, "served", w.buf.data, w.buf.size);
        sq_wbuf_reset (&w);
        msgpack_pack_map (&w.pk, 2);
        sq_pack_cstr (&w.pk, "tasks");
        msgpack_pack_array (&w.pk, 3);
        msgpack_pack_double (&w.pk, 1.5);
        msgpack_pack_bin (&w.pk, 2);
        msgpack_pack_bin_body (&w.pk, "\x01\xff", 2);
        msgpack_pack_nil (&w.pk);
        msgpack_pack_uint32 (&w.pk, 7);
        msgpack_pack_true (&w.pk);
        s_write (FZ_REPLIES, "info", w.buf.data, w.buf.size);
        sq_wbuf_reset (&w);

        //  A journal: every record type once.
        msgpack_sbuffer journal;
        msgpack_packer jp;
        msgpack_sbuffer_init (&journal);
        msgpack_packer_init (&jp, &journal, msgpack_sbuffer_write);
        size_t at;
        at = sq_rec_begin (&journal); sq_rec_pack_header (&jp, "0123456789abcdef0123456789abcdef", 1); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_epoch (&jp, 2); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_session (&jp, 1, key, "alice", fixed_public); sq_rec_end (&journal, at);
        sq_wbuf_t submit;
        sq_wbuf_init (&submit);
        sq_pack_submit_begin (&submit.pk, 3, 1);
        msgpack_pack_array (&submit.pk, 2);
        sq_pack_object_spec (&submit.pk, 1, 0, "text/plain", 1, "greeting");
        sq_pack_object_spec (&submit.pk, 3, 1, "text/plain", -1, "");
        msgpack_pack_array (&submit.pk, 1);
        uint32_t in [1] = { 1 }, out [1] = { 3 };
        sq_task_spec_t t = { .id = 2, .kind = s_mstr ("concat"), .n_inputs = 1, .inputs = in,
                             .n_outputs = 1, .outputs = out, .name = s_mstr ("join") };
        sq_pack_task_spec (&submit.pk, &t);
        const void *payload [1] = { "hello, squall\n" };
        size_t payload_size [1] = { 14 };
        at = sq_rec_begin (&journal);
        sq_rec_pack_submit (&jp, 1, submit.buf.data, submit.buf.size, payload, payload_size, 1);
        sq_rec_end (&journal, at);
        sq_wbuf_release (&submit);
        uint32_t ids [2] = { 3, 1 };
        at = sq_rec_begin (&journal); sq_rec_pack_ids (&jp, SQ_REC_KEEP, 1, ids, 2); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_ids (&jp, SQ_REC_UNKEEP, 1, ids, 1); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_ids (&jp, SQ_REC_CANCEL, 1, NULL, 0); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal);
        sq_rec_pack_finished_begin (&jp, sq_key (1, 2), 0, 2);
        sq_rec_pack_output (&jp, 14, "hello, squall\n", 14);
        sq_rec_pack_output (&jp, 1 << 20, NULL, 0);
        sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_ids (&jp, SQ_REC_DELETE, 1, ids, 1); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_failed (&jp, sq_key (1, 4), 1, SQ_E_TASK_FAILED, "boom"); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_attempt (&jp, sq_key (1, 4), 2, 1, 0, 1 << 30); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_governor (&jp, 2, 99, "gov1", fixed_public); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_gone (&jp, 2); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_ids_counters (&jp, 7, 9); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_job (&jp, 1, "nightly", true, 5, NULL, 0); sq_rec_end (&journal, at);
        {
            uint32_t after [] = { 1, 7 };
            at = sq_rec_begin (&journal); sq_rec_pack_job (&jp, 2, "later", true, 6, after, 2);
            sq_rec_end (&journal, at);
        }
        sq_rec_t element = { .type = SQ_REC_ELEMENT, .session = 1, .id = 4, .k = 517, .state = 2,
                             .has_exit_code = true, .exit_code = 3, .governor = 2, .attempts = 1,
                             .started_ms = 5, .ended_ms = 6 };
        at = sq_rec_begin (&journal); sq_rec_pack_element (&jp, &element); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_ids (&jp, SQ_REC_RESUBMIT, 1, ids, 1); sq_rec_end (&journal, at);
        element.type = SQ_REC_ENDED;
        element.key = sq_key (1, 4);
        at = sq_rec_begin (&journal); sq_rec_pack_ended (&jp, &element); sq_rec_end (&journal, at);
        at = sq_rec_begin (&journal); sq_rec_pack_close (&jp, 1); sq_rec_end (&journal, at);
        s_write (FZ_RECORD, "journal", journal.data, journal.size);
        //  A torn tail: the last record cut short.
        s_write (FZ_RECORD, "journal-torn", journal.data, journal.size - 3);
        msgpack_sbuffer_destroy (&journal);
    }

    //  A few plain values for the cursor
    msgpack_pack_array (&w.pk, 8);
    msgpack_pack_float (&w.pk, 1.5f);
    msgpack_pack_double (&w.pk, -2.25);
    msgpack_pack_int64 (&w.pk, INT64_MIN);
    msgpack_pack_uint64 (&w.pk, UINT64_MAX);
    msgpack_pack_bin (&w.pk, 3);
    msgpack_pack_bin_body (&w.pk, "abc", 3);
    msgpack_pack_ext (&w.pk, 4, 1);
    msgpack_pack_ext_body (&w.pk, "wxyz", 4);
    msgpack_pack_true (&w.pk);
    msgpack_pack_map (&w.pk, 1);
    msgpack_pack_nil (&w.pk);
    msgpack_pack_false (&w.pk);
    s_emit (FZ_MPR, "values", &w);

    //  One of every message of the table (proto_messages.def), by name
    {
        size_t n_descs;
        const sq_msg_desc_t *descs = sq_msg_descs (&n_descs);
        union { sq_request_t request; uint64_t words [64]; } msg;
        for (size_t i = 0; i < n_descs; i++) {
            if (!descs [i].fields)
                continue;
            s_table_example (&descs [i], &msg);
            sq_msg_encode (&w, descs [i].type, &msg);
            char name [64];
            snprintf (name, sizeof name, "table-%s", descs [i].name);
            for (char *c = name; *c; c++)
                *c = (char) (*c == '_'? '-': *c >= 'A' && *c <= 'Z'? *c - 'A' + 'a': *c);
            s_emit (FZ_TABLE, name, &w);
        }
    }

    sq_wbuf_release (&w);
    for (size_t i = 0; i < n_confs; i++)
        if (confs [i].config != nil && confs [i].config != empty_map)
            sq_free (confs [i].config);
    printf ("make_corpus: %d files in %s\n", s_files, s_dir);
    return 0;
}
