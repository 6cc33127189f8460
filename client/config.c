/*  config: the built-in task configurations, for libsquall's callers.

    The encoders are common/taskconf.c's; every encoded config is checked with the same decoder the broker and the
    governors use (common/taskconf.c), so a helper never hands out a config
    the cluster would refuse. */
#include "sq_client_private.h"
#include "taskconf.h"
#include <stdlib.h>
#include <string.h>

//  Checks the encoded config against its kind and hands the buffer over,
//  or frees it and returns NULL.
static void *
s_finish (msgpack_sbuffer *buf, sq_kind_t kind, uint32_t n_inputs, uint32_t n_outputs,
          size_t *size)
{
    sq_taskconf_t conf;
    sq_errbuf_t err;
    if (!buf->data
    ||  sq_taskconf_decode (&conf, kind, (const uint8_t *) buf->data, buf->size,
                            n_inputs, n_outputs, &err)) {
        msgpack_sbuffer_destroy (buf);
        return NULL;
    }
    sq_taskconf_release (&conf);
    if (size)
        *size = buf->size;
    return msgpack_sbuffer_release (buf);
}

void *
sq_config_sleep (double seconds, size_t *size)
{
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init (&buf);
    msgpack_packer_init (&pk, &buf, msgpack_sbuffer_write);
    sq_taskconf_pack_sleep (&pk, seconds);
    return s_finish (&buf, SQ_KIND_SLEEP, 0, 0, size);
}

void *
sq_config_slice (uint64_t start, int64_t end, size_t *size)
{
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init (&buf);
    msgpack_packer_init (&pk, &buf, msgpack_sbuffer_write);
    sq_taskconf_pack_slice (&pk, start, end);
    return s_finish (&buf, SQ_KIND_SLICE, 1, 1, size);
}

void *
sq_config_path (const char *path, size_t *size)
{
    if (!path)
        return NULL;
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init (&buf);
    msgpack_packer_init (&pk, &buf, msgpack_sbuffer_write);
    sq_taskconf_pack_path (&pk, path);
    return s_finish (&buf, SQ_KIND_LOAD, 0, 1, size);
}

void *
sq_config_execute (const char *const *args, size_t n_args,
                   const char *const *in_paths, size_t n_inputs, int stdin_input,
                   const char *const *out_paths, size_t n_outputs, int stdout_output,
                   const char *const *env, size_t *size)
{
    if (!args || n_args == 0 || n_args > UINT32_MAX
    ||  (n_inputs && !in_paths) || n_inputs > UINT32_MAX
    ||  (n_outputs && !out_paths) || n_outputs > UINT32_MAX)
        return NULL;
    for (size_t i = 0; i < n_args; i++)
        if (!args [i])
            return NULL;
    for (size_t i = 0; i < n_inputs; i++)
        if (!in_paths [i])
            return NULL;
    for (size_t i = 0; i < n_outputs; i++)
        if (!out_paths [i])
            return NULL;
    size_t n_env = 0;
    if (env)
        while (env [n_env])
            n_env++;
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init (&buf);
    msgpack_packer_init (&pk, &buf, msgpack_sbuffer_write);
    sq_taskconf_pack_execute (&pk, args, n_args, env, n_env, in_paths, n_inputs, stdin_input,
                              out_paths, n_outputs, stdout_output);
    return s_finish (&buf, SQ_KIND_EXECUTE, (uint32_t) n_inputs, (uint32_t) n_outputs, size);
}
