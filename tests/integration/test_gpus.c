/*  test_gpus: the C API of gpus on a governor with --gpus 0,1 (issue 27).
    sq_task_set_resource "gpus" takes whole devices, sq_task_set_gpus a
    fraction; the program sees the devices it holds in CUDA_VISIBLE_DEVICES
    and SQUALL_GPUS, over its own env; a task without gpus sees none; copies
    made by sq_tasks_like ask for what their model asked; bad fractions are
    refused before anything is sent; a request above every governor is
    refused at submit (a broker with no --resource-wait), naming it as the
    user wrote it. */
#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  An execute task printing "ok" when `test` (sh) holds of its devices,
//  else what it saw. env: NULL-terminated or NULL.
static void *
s_check_config (const char *test, const char *const *env, size_t *size)
{
    char script [512];
    snprintf (script, sizeof script,
              "if %s; then echo ok; else echo \"saw [$CUDA_VISIBLE_DEVICES] [$SQUALL_GPUS]\"; fi",
              test);
    const char *args [] = { "sh", "-c", script };
    const char *out_paths [] = { "" };
    void *config = sq_config_execute (args, 3, NULL, 0, -1, out_paths, 1, 0, env, size);
    CHECK (config, "execute config");
    return config;
}

static uint32_t
s_check (sq_session_t *session, const char *test, const char *const *env)
{
    size_t size;
    void *config = s_check_config (test, env, &size);
    uint32_t task = harness_task (session, "execute", NULL, 0, 1, config, size);
    CHECK_RC (sq_keep (session, sq_output (task, 0)), SQ_OK, "keep");
    return task;
}

#define ONE "{ [ \"$CUDA_VISIBLE_DEVICES\" = 0 ] || [ \"$CUDA_VISIBLE_DEVICES\" = 1 ]; } " \
            "&& [ \"$SQUALL_GPUS\" = \"$CUDA_VISIBLE_DEVICES\" ]"

int
main (void)
{
    //  No resource wait: a request above every offer is refused at submit
    //  rather than left waiting for a governor that may join.
    const char *broker_args [] = { "--resource-wait", "0", NULL };
    harness_t *h = harness_new_args (0, 2, broker_args);
    const char *gpus [] = { "--gpus", "0,1", NULL };
    harness_add_governor_args (h, "gpu-box", 4, gpus);
    sq_client_t *client = harness_client (h);
    sq_session_t *session = sq_session_new (client);

    //  Bad fractions: refused at once, nothing recorded.
    uint32_t bad = s_check (session, "true", NULL);
    CHECK_RC (sq_task_set_gpus (session, bad, 1.5), SQ_E_INVALID, "1.5 gpus");
    CHECK_RC (sq_task_set_gpus (session, bad, 0.0001), SQ_E_INVALID, "0.0001 gpus");
    CHECK_RC (sq_task_set_gpus (session, bad, -1), SQ_E_INVALID, "-1 gpus");
    CHECK (strstr (sq_client_errmsg (client), "sq_task_set_gpus"), "%s", sq_client_errmsg (client));

    //  Above every governor: refused at submit, as written.
    CHECK_RC (sq_task_set_resource (session, bad, "gpus", 3), SQ_OK, "3 gpus");
    CHECK_RC (sq_submit (session), SQ_E_RESOURCES, "3 gpus on a 2-device cluster");
    CHECK (strstr (sq_client_errmsg (client), "gpus=3"), "%s", sq_client_errmsg (client));
    harness_note ("refused: %s", sq_client_errmsg (client));

    //  bad went with the refused batch: a fresh one.
    uint32_t none = s_check (session, "[ -z \"$CUDA_VISIBLE_DEVICES$SQUALL_GPUS\" ] "
                             "&& env | grep -q '^CUDA_VISIBLE_DEVICES=$'", NULL);
    uint32_t whole = s_check (session, ONE, NULL);
    CHECK_RC (sq_task_set_resource (session, whole, "gpus", 1), SQ_OK, "1 gpu");
    const char *own [] = { "CUDA_VISIBLE_DEVICES=7", NULL };
    uint32_t mine = s_check (session, ONE, own);
    CHECK_RC (sq_task_set_gpus (session, mine, 1), SQ_OK, "1.0 gpu");
    uint32_t both = s_check (session, "[ \"$CUDA_VISIBLE_DEVICES\" = 0,1 ]", NULL);
    CHECK_RC (sq_task_set_resource (session, both, "gpus", 2), SQ_OK, "2 gpus");
    uint32_t half = s_check (session, ONE, NULL);
    CHECK_RC (sq_task_set_gpus (session, half, 0.5), SQ_OK, "0.5 gpus");
    //  Three copies of the half: each asks for 0.5, not 500 devices.
    size_t size;
    void *config = s_check_config (ONE, NULL, &size);
    uint8_t *configs = (uint8_t *) malloc (3 * size);
    CHECK (configs, "malloc");
    size_t ends [3];
    for (int i = 0; i < 3; i++) {
        memcpy (configs + i * size, config, size);
        ends [i] = (i + 1) * size;
    }
    sq_free (config);
    uint32_t first;
    CHECK_RC (sq_tasks_like (session, half, 3, configs, ends, &first), SQ_OK, "tasks_like");
    free (configs);
    uint32_t copies [3];
    for (int i = 0; i < 3; i++) {
        copies [i] = first + (uint32_t) i * 2;
        CHECK_RC (sq_keep (session, sq_output (copies [i], 0)), SQ_OK, "keep copy");
    }
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    uint32_t all [] = { none, whole, mine, both, half, copies [0], copies [1], copies [2] };
    for (size_t i = 0; i < sizeof all / sizeof all [0]; i++)
        FETCH_EXPECT (session, sq_output (all [i], 0), "ok\n", 3);
    harness_note ("devices named: none, one, one over the task's own env, two, halves");

    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&h) == 0, "processes exited cleanly");
    printf ("test_gpus: all checks passed\n");
    return 0;
}
