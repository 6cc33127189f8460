/*  private: files only their owner may read (the journal, the event log:
    every tenant's graphs, task names and errors, RESUME tokens). */
#ifndef SQ_PRIVATE_H
#define SQ_PRIVATE_H

#include <stddef.h>

//  Opens `path` with `flags` (O_CREAT and the like; O_NOFOLLOW and
//  O_CLOEXEC are added): a symlink is refused, the file must be a regular
//  one, and its mode is made 0600 even if it existed with another. The
//  descriptor, or -1 with the reason in err.
int sq_open_private (const char *path, int flags, char *err, size_t err_size);

#endif
