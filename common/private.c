/*  private: files only their owner may read. See private.h. */
#include "private.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int
sq_open_private (const char *path, int flags, char *err, size_t err_size)
{
    int fd = open (path, flags | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf (err, err_size, "cannot open %s: %s", path,
                  errno == ELOOP? "it is a symbolic link": strerror (errno));
        return -1;
    }
    struct stat st;
    const char *why = NULL;
    if (fstat (fd, &st) || !S_ISREG (st.st_mode))
        why = "not a regular file";
    else
    if ((st.st_mode & 07777) != 0600 && fchmod (fd, 0600))
        why = strerror (errno);
    if (why) {
        snprintf (err, err_size, "%s: %s%s", path, S_ISREG (st.st_mode)? "cannot make it private "
                  "(mode 0600): ": "", why);
        close (fd);
        return -1;
    }
    return fd;
}
