/*
 * outfile.h: how every shipped tool (the trace and profile tools,
 * mscclpp-trace-merge, mscclpp-perf-plot, the perf tool's reports) creates
 * the file it writes, with the library's rules for MSCCLPP_DEBUG_FILE: the
 * file is created new with mode 0600 (O_CREAT|O_EXCL), never through a
 * symbolic link (O_NOFOLLOW), and an existing file is replaced only when it
 * is a regular file of this user; another user's file or a link at the name
 * is refused with a message naming it. A write error (a full disk) is
 * reported, the partial file is removed and the caller fails: never a short
 * or empty file and a success. Header-only C because the tools are C
 * programs and libraries that share no object file.
 */
#ifndef MSCCLPP_TOOLS_OUTFILE_H
#define MSCCLPP_TOOLS_OUTFILE_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* outCreate opens path for writing as described above; NULL after printing
 * "tool: refusing path: why" or "tool: cannot create path: error" on stderr. */
static FILE* outCreate(const char* tool, const char* path)
{
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd >= 0) {
      FILE* f = fdopen(fd, "w");
      if (f == NULL) {
        fprintf(stderr, "%s: cannot write %s: %s\n", tool, path, strerror(errno));
        close(fd);
        unlink(path);
      }
      return f;
    }
    if (errno != EEXIST) break;
    struct stat st;
    if (lstat(path, &st) != 0) continue; /* removed meanwhile: try once more */
    if (S_ISLNK(st.st_mode)) {
      fprintf(stderr, "%s: refusing %s: it is a symbolic link; nothing written\n", tool, path);
      return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
      fprintf(stderr, "%s: refusing %s: it exists and is not a regular file; nothing written\n", tool, path);
      return NULL;
    }
    if (st.st_uid != geteuid()) {
      fprintf(stderr, "%s: refusing %s: it belongs to uid %u, not to this user (uid %u); nothing written\n", tool, path,
              (unsigned)st.st_uid, (unsigned)geteuid());
      return NULL;
    }
    if (unlink(path) != 0 && errno != ENOENT) break; /* this user's earlier output: replaced */
  }
  fprintf(stderr, "%s: cannot create %s: %s\n", tool, path, strerror(errno));
  return NULL;
}

/* outClose flushes and closes f (from outCreate); 0 on success, else -1
 * after printing the error and removing path, so no partial file is left. */
static int outClose(const char* tool, FILE* f, const char* path)
{
  int bad = fflush(f) != 0 || ferror(f);
  int err = errno;
  if (fclose(f) != 0 && !bad) {
    bad = 1;
    err = errno;
  }
  if (!bad) return 0;
  fprintf(stderr, "%s: cannot write %s: %s; the partial file is removed\n", tool, path, strerror(err ? err : EIO));
  unlink(path);
  return -1;
}

#endif
