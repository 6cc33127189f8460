/*  replay: runs fuzz_proto's entry point over files and directories without
    libFuzzer, so any compiler (and the ASan build) checks the seed corpus and
    every saved crash input (tests/fuzz/regressions/) as a plain test.

    Usage: fuzz_replay PATH...   (files, or directories of files) */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static int s_runs;

static int
s_run_file (const char *path)
{
    FILE *f = fopen (path, "rb");
    if (!f) {
        perror (path);
        return -1;
    }
    uint8_t *buf = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap? cap * 2: 4096;
            uint8_t *p = (uint8_t *) realloc (buf, cap);
            if (!p) {
                free (buf);
                fclose (f);
                return -1;
            }
            buf = p;
        }
        size_t got = fread (buf + size, 1, cap - size, f);
        if (got == 0)
            break;
        size += got;
    }
    fclose (f);
    //  exact-size copy so that ASan sees reads past the end
    uint8_t *exact = (uint8_t *) malloc (size? size: 1);
    if (size)
        memcpy (exact, buf, size);
    free (buf);
    LLVMFuzzerTestOneInput (exact, size);
    free (exact);
    s_runs++;
    return 0;
}

static int
s_run_path (const char *path)
{
    struct stat st;
    if (stat (path, &st)) {
        perror (path);
        return -1;
    }
    if (!S_ISDIR (st.st_mode))
        return s_run_file (path);
    DIR *dir = opendir (path);
    if (!dir) {
        perror (path);
        return -1;
    }
    int rc = 0;
    struct dirent *entry;
    while ((entry = readdir (dir))) {
        if (entry->d_name [0] == '.')
            continue;
        char child [4096];
        snprintf (child, sizeof child, "%s/%s", path, entry->d_name);
        if (s_run_path (child))
            rc = -1;
    }
    closedir (dir);
    return rc;
}

int
main (int argc, char **argv)
{
    int rc = 0;
    for (int i = 1; i < argc; i++)
        if (s_run_path (argv [i]))
            rc = 1;
    printf ("fuzz_replay: %d inputs run, %s\n", s_runs, rc? "errors": "ok");
    return rc;
}
