// output_file.h — opening the files a user names for dlhost to write (the results file of
// `run -o`, `export -o`, the report folder, `conform --json`, `comm-bench --json`, `project
// --json`), so that a link or file another user planted in a shared folder is never written
// through. The one place every such writer goes through.
//
// The rule is the kernel's own protected_symlinks / protected_regular rule, applied whatever the
// sysctls fs.protected_symlinks and fs.protected_regular say: in a folder that is sticky and
// world-writable (/tmp), a symbolic link, file or folder owned by neither the user (the
// effective uid) nor the folder's owner is refused, naming it. It is applied to every component
// of the path, as the kernel applies protected_symlinks to every link of a walk. A link of the
// user's own (or anywhere outside such a folder) is followed as before.
//
// Race-free: the path is walked one component at a time from an open folder descriptor (openat
// with O_NOFOLLOW, links read with readlinkat and followed here, each decision made on fstat of
// what was opened); the final file is opened with O_NOFOLLOW and checked after it is open, before
// a byte is written; whole files are written to a temporary file in the target's folder and
// renamed over it (a rename replaces a link, it never follows one). The links of /proc
// (/dev/stdout -> /proc/self/fd/1) name open files, not paths: the kernel follows those.
// Thread-safe (no shared state).
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>

namespace dlhost::output {

// A path that must not or cannot be written; the message names the path and the reason.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Opens `path` for appending (`flags`: O_RDWR or O_WRONLY, with O_APPEND, O_NONBLOCK ... as the
// caller needs; never O_TRUNC), creating it (mode 0644, less the umask) and, when
// `make_folders`, its missing folders. Returns the descriptor (close-on-exec). Throws
// OutputError. What the descriptor is (a regular file, a FIFO) is for the caller to check.
int open_for_append(const std::string& path, int flags, bool make_folders);

// Writes `text` as the whole of `path`: a regular file (or none yet) is replaced by a temporary
// file of the same folder renamed over it (an existing file's permission bits are kept); a file
// that takes writes in place (a pipe, a terminal, /dev/stdout, /dev/full) is written in place.
// Throws OutputError, naming the path, when it cannot be written whole (a full disk, a folder).
void write_whole_file(const std::string& path, const std::string& text);

// Makes sure `path` is a folder dlhost may write files into, creating it and its parents when
// absent, with the rule above on every component. A folder that is itself sticky and
// world-writable is refused too: the files written in it (by dlhost, by gnuplot) would be
// exposed to links other users plant there. Throws OutputError.
void prepare_folder(const std::string& path);

// Writes the whole of `text` to `fd`, again after EINTR and a short write: 0, or the errno of the
// failure (ENOSPC for a write that took nothing). The one write loop of the host's writers.
int write_all(int fd, const std::string& text);

// A user as a message names it: "uid 1001 (mallory)", the name when the system knows one.
std::string user_text(uid_t uid);

}  // namespace dlhost::output
