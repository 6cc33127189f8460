/*  files: recursive removal, parent creation, whole-file writes. */
#include "files.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int
s_remove_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st; (void) ftw;
    //  Keep going on errors: removing as much as possible beats stopping.
    if (flag == FTW_DP || flag == FTW_D)
        rmdir (path);
    else
        unlink (path);
    return 0;
}

int
files_rmtree (const char *path)
{
    struct stat st;
    if (lstat (path, &st))
        return errno == ENOENT? 0: -1;
    if (!S_ISDIR (st.st_mode))
        return unlink (path);
    nftw (path, s_remove_one, 16, FTW_DEPTH | FTW_PHYS);
    return access (path, F_OK) == 0? -1: 0;
}

int
files_mkparents (const char *path)
{
    char *copy = strdup (path);
    if (!copy)
        return -1;
    int rc = 0;
    //  Walk every '/' after the first character: each prefix is a directory.
    for (char *slash = strchr (copy + 1, '/'); slash; slash = strchr (slash + 1, '/')) {
        *slash = 0;
        if (mkdir (copy, 0755) && errno != EEXIST) {
            rc = -1;
            *slash = '/';
            break;
        }
        *slash = '/';
    }
    int saved = errno;
    free (copy);
    errno = saved;
    return rc;
}

int
files_write_fd (int fd, const sq_blob_t *blob)
{
    size_t offset = 0, size = sq_blob_size (blob);
    while (offset < size) {
        size_t len;
        const char *p = (const char *) sq_blob_span (blob, offset, &len);
        ssize_t n = write (fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ENOSPC;
            return -1;
        }
        offset += (size_t) n;
    }
    return 0;
}

int
files_write (const char *path, const sq_blob_t *blob)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    if (files_write_fd (fd, blob)) {
        int saved = errno;
        close (fd);
        errno = saved;
        return -1;
    }
    if (close (fd))
        return -1;
    return 0;
}
