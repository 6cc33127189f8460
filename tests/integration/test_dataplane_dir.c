/*  Directory objects (content type "dir"): `load` packs a tree on g0, an
    `execute` on g1 takes it as an input directory and produces a changed
    copy as an output directory, `store` on g0 writes that back; the tree
    that comes out has the same files, modes, relative links and empty
    directories, plus the program's change. Hostile archives (a path with
    "..", a link escaping the tree, a file written through a link) are
    refused by `store` with a message, and nothing is written outside. */
#include "harness.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_tmp [256];
static sq_client_t *s_client;

static void
s_write (const char *rel, const char *text, mode_t mode)
{
    char path [512];
    snprintf (path, sizeof path, "%s/%s", s_tmp, rel);
    FILE *file = fopen (path, "w");
    CHECK (file, "create %s", path);
    fputs (text, file);
    fclose (file);
    CHECK (chmod (path, mode) == 0, "chmod %s", path);
}

static void
s_mkdir (const char *rel, mode_t mode)
{
    char path [512];
    snprintf (path, sizeof path, "%s/%s", s_tmp, rel);
    CHECK (mkdir (path, mode) == 0, "mkdir %s", path);
    CHECK (chmod (path, mode) == 0, "chmod %s", path);
}

static void
s_link (const char *target, const char *rel)
{
    char path [512];
    snprintf (path, sizeof path, "%s/%s", s_tmp, rel);
    CHECK (symlink (target, path) == 0, "symlink %s", path);
}

//  Compares one path of two trees: type, mode, content or target.
static void
s_same (const char *a_root, const char *b_root, const char *rel)
{
    char a [1100], b [1100];
    snprintf (a, sizeof a, "%s/%s", a_root, rel);
    snprintf (b, sizeof b, "%s/%s", b_root, rel);
    struct stat sa, sb;
    CHECK (lstat (a, &sa) == 0 && lstat (b, &sb) == 0, "both have %s", rel);
    CHECK ((sa.st_mode & S_IFMT) == (sb.st_mode & S_IFMT), "%s: same type", rel);
    if (!S_ISLNK (sa.st_mode))
        CHECK ((sa.st_mode & 07777) == (sb.st_mode & 07777), "%s: mode %o vs %o", rel,
               (unsigned) (sa.st_mode & 07777), (unsigned) (sb.st_mode & 07777));
    if (S_ISLNK (sa.st_mode)) {
        char ta [512] = "", tb [512] = "";
        CHECK (readlink (a, ta, sizeof ta - 1) > 0 && readlink (b, tb, sizeof tb - 1) > 0, "readlink");
        CHECK (strcmp (ta, tb) == 0, "%s: link %s vs %s", rel, ta, tb);
    }
    if (S_ISREG (sa.st_mode)) {
        CHECK (sa.st_size == sb.st_size, "%s: size", rel);
        static char ca [400000], cb [400000];
        FILE *fa = fopen (a, "r"), *fb = fopen (b, "r");
        CHECK (fa && fb, "open %s", rel);
        size_t na = fread (ca, 1, sizeof ca, fa), nb = fread (cb, 1, sizeof cb, fb);
        fclose (fa);
        fclose (fb);
        CHECK (na == nb && memcmp (ca, cb, na) == 0, "%s: same content", rel);
    }
}

static void
s_append_entry (uint8_t *buf, size_t *n, char type, uint32_t mode, const char *path,
                const char *content)
{
    buf [(*n)++] = (uint8_t) type;
    for (int i = 0; i < 4; i++)
        buf [(*n)++] = (uint8_t) (mode >> (8 * i));
    uint32_t len = (uint32_t) strlen (path);
    for (int i = 0; i < 4; i++)
        buf [(*n)++] = (uint8_t) (len >> (8 * i));
    memcpy (buf + *n, path, len);
    *n += len;
    if (type == 'f') {
        uint64_t size = strlen (content);
        for (int i = 0; i < 8; i++)
            buf [(*n)++] = (uint8_t) (size >> (8 * i));
        memcpy (buf + *n, content, size);
        *n += size;
    }
    if (type == 'l') {
        uint32_t tlen = (uint32_t) strlen (content);
        for (int i = 0; i < 4; i++)
            buf [(*n)++] = (uint8_t) (tlen >> (8 * i));
        memcpy (buf + *n, content, tlen);
        *n += tlen;
    }
}

//  A store of a hand-made archive must fail with `expect` in its message.
static void
s_hostile (sq_session_t *session, const uint8_t *archive, size_t size, const char *where,
           const char *expect)
{
    uint32_t c = sq_blob (session, archive, size, "dir");
    CHECK (c, "blob");
    char target [512];
    snprintf (target, sizeof target, "%s/%s", s_tmp, where);
    size_t config_size;
    void *config = sq_config_path (target, &config_size);
    uint32_t task = harness_task (session, "store", &c, 1, 0, config, config_size);
    CHECK_RC (sq_submit (session), SQ_OK, "submit hostile");
    CHECK_RC (sq_wait (session, &task, 1, 30000), SQ_E_TASK_FAILED, "hostile archive %s", where);
    const char *message = sq_client_errmsg (s_client);
    CHECK (strstr (message, expect), "hostile archive %s: message '%s' lacks '%s'", where,
           message, expect);
    harness_note ("hostile archive refused: %s", message);
}

int
main (void)
{
    snprintf (s_tmp, sizeof s_tmp, "/tmp/squall-dirtest-XXXXXX");
    CHECK (mkdtemp (s_tmp), "mkdtemp");
    s_mkdir ("tree", 0755);
    s_write ("tree/run.sh", "#!/bin/sh\necho hi\n", 0755);
    s_write ("tree/secret", "private\n", 0600);
    s_mkdir ("tree/empty", 0700);
    s_mkdir ("tree/sub", 0750);
    s_mkdir ("tree/sub/deeper", 0755);
    s_write ("tree/sub/deeper/data.txt", "deep data\n", 0644);
    s_write ("tree/sub/ro", "read only\n", 0444);
    s_link ("sub/deeper/data.txt", "tree/link");
    s_link ("../secret", "tree/sub/up");
    s_link ("sub", "tree/dirlink");
    //  Big enough (over inline_max) that the tree moves on the data plane.
    char *big = (char *) malloc (300001);
    for (size_t i = 0; i < 300000; i++)
        big [i] = (char) ('a' + i % 26);
    big [300000] = 0;
    s_write ("tree/sub/big", big, 0640);
    free (big);

    const char *g0 [] = { "--resource", "src=1", NULL };
    const char *g1 [] = { "--resource", "dst=1", NULL };
    const char *const *govs [] = { g0, g1 };
    harness_t *harness = harness_new_govs (2, 2, NULL, govs);
    sq_client_t *client = harness_client (harness);
    s_client = client;
    sq_session_t *session = sq_session_new (client);

    char path [512];
    snprintf (path, sizeof path, "%s/tree", s_tmp);
    size_t config_size;
    void *config = sq_config_path (path, &config_size);
    uint32_t load = harness_task (session, "load", NULL, 0, 1, config, config_size);
    CHECK_RC (sq_task_set_resource (session, load, "src", 1), SQ_OK, "src");
    uint32_t tree = sq_output (load, 0);
    CHECK_RC (sq_object_set_content_type (session, tree, "dir"), SQ_OK, "dir type");

    const char *args [] = { "sh", "-c", "cp -a in out && echo added > out/added && mkdir out/new-empty" };
    const char *in_paths [] = { "in" };
    const char *out_paths [] = { "out" };
    config = sq_config_execute (args, 3, in_paths, 1, -1, out_paths, 1, -1, NULL, &config_size);
    uint32_t exec = harness_task (session, "execute", &tree, 1, 1, config, config_size);
    CHECK_RC (sq_task_set_resource (session, exec, "dst", 1), SQ_OK, "dst");
    uint32_t changed = sq_output (exec, 0);
    CHECK_RC (sq_object_set_content_type (session, changed, "dir"), SQ_OK, "dir type");
    CHECK_RC (sq_keep (session, changed), SQ_OK, "keep");

    snprintf (path, sizeof path, "%s/result", s_tmp);
    config = sq_config_path (path, &config_size);
    uint32_t store = harness_task (session, "store", &changed, 1, 0, config, config_size);
    CHECK_RC (sq_task_set_resource (session, store, "src", 1), SQ_OK, "src");
    CHECK_RC (sq_submit (session), SQ_OK, "submit");
    CHECK_RC (sq_wait (session, &store, 1, 60000), SQ_OK, "load, execute and store a tree");

    char a [512], b [512];
    snprintf (a, sizeof a, "%s/tree", s_tmp);
    snprintf (b, sizeof b, "%s/result", s_tmp);
    const char *paths [] = {
        "run.sh", "secret", "empty", "sub", "sub/deeper", "sub/deeper/data.txt", "sub/ro",
        "link", "sub/up", "dirlink", "sub/big"
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths [0]; i++)
        s_same (a, b, paths [i]);
    struct stat st;
    snprintf (path, sizeof path, "%s/result/new-empty", s_tmp);
    CHECK (stat (path, &st) == 0 && S_ISDIR (st.st_mode), "the program's empty dir came back");
    snprintf (path, sizeof path, "%s/result/added", s_tmp);
    CHECK (stat (path, &st) == 0 && st.st_size == 6, "the program's file came back");
    harness_note ("a directory tree went load (g0) -> execute (g1) -> store (g0) intact");

    //  The packed object is fetched like any other (magic first).
    void *data = NULL;
    size_t size = 0;
    CHECK_RC (sq_fetch (session, changed, 10000, &data, &size, NULL), SQ_OK, "fetch dir");
    CHECK (size > 8 && memcmp (data, "SQDIR001", 8) == 0, "archive header");
    sq_free (data);

    //  Hostile archives.
    uint8_t buf [1024];
    size_t n = 0;
    memcpy (buf, "SQDIR001", 8);
    n = 8;
    s_append_entry (buf, &n, 'f', 0644, "../escaped", "x");
    s_hostile (session, buf, n, "h1", "refused path");
    n = 8;
    s_append_entry (buf, &n, 'l', 0777, "l", "../../etc");
    s_hostile (session, buf, n, "h2", "outside");
    n = 8;
    s_append_entry (buf, &n, 'l', 0777, "a", ".");
    s_append_entry (buf, &n, 'f', 0644, "a/x", "through a link");
    s_hostile (session, buf, n, "h3", "not under");
    n = 8;
    s_append_entry (buf, &n, 'f', 0644, "f", "");
    buf [n - 1] = 9;        //  truncated size field
    s_hostile (session, buf, n, "h4", "truncated");
    snprintf (path, sizeof path, "%s/escaped", s_tmp);
    CHECK (access (path, F_OK) != 0, "nothing was written outside the tree");

    sq_session_destroy (&session);
    harness_client_destroy (&client);
    CHECK (harness_destroy (&harness) == 0, "clean shutdown");
    char cmd [600];
    snprintf (cmd, sizeof cmd, "chmod -R u+rwx '%s' && rm -rf '%s'", s_tmp, s_tmp);
    if (system (cmd) != 0)
        harness_note ("could not remove %s", s_tmp);
    printf ("test_dataplane_dir: OK\n");
    return 0;
}
