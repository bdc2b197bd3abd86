// output_file.cpp — see output_file.h. The walk keeps an open descriptor of the folder reached so
// far and decides on each component from what fstatat/fstat say of that very entry; nothing is
// looked up again by its path once decided.
#include "output/output_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

namespace dlhost::output {

namespace {

// As the kernel's path walk: more links than this in one path is a loop.
constexpr int kMaxLinks = 40;
// How often an open that met something put in place since the walk walks again.
constexpr int kMaxAttempts = 8;

// An owned file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw OutputError(path + ": " + why);
}

[[noreturn]] void fail_errno(const std::string& path, const std::string& doing) {
  fail(path, doing + ": " + std::strerror(errno));
}

std::string join(const std::string& folder, const std::string& name) {
  if (folder.empty()) return name;
  return folder.back() == '/' ? folder + name : folder + "/" + name;
}

// The path's components, "" and "." left out ("a//./b" is a, b).
std::deque<std::string> components(const std::string& path) {
  std::deque<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (!part.empty() && part != ".") out.push_back(std::move(part));
    start = end + 1;
  }
  return out;
}

std::string kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "symbolic link";
  if (S_ISDIR(mode)) return "folder";
  if (S_ISREG(mode)) return "file";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISSOCK(mode)) return "socket";
  return "device file";
}

// A folder anyone may create entries in, where only an entry's owner (or the folder's) may
// remove it: /tmp, /var/tmp, a shared drop folder.
bool shared_folder(const struct stat& folder) {
  return (folder.st_mode & S_ISVTX) != 0 && (folder.st_mode & S_IWOTH) != 0;
}

// The kernel's protected_symlinks / protected_regular rule: refuses `entry` (shown as `shown`)
// in `folder` (shown as `folder_shown`) when the folder is shared and the entry is owned by
// neither this user nor the folder's owner.
void check_owner(const struct stat& folder, const std::string& folder_shown,
                 const std::string& shown, const struct stat& entry) {
  if (!shared_folder(folder)) return;
  if (entry.st_uid == ::geteuid() || entry.st_uid == folder.st_uid) return;
  fail(shown, "refused: a " + kind_of(entry.st_mode) + " owned by " + user_text(entry.st_uid) +
                  ", in " + (folder_shown.empty() ? "." : folder_shown) +
                  ", a sticky folder anyone can write, and owned by neither you nor that "
                  "folder's owner: another user may have put it there to have dlhost write "
                  "where it should not (the kernel's protected_symlinks / protected_regular "
                  "rule, applied whatever the sysctls say); remove it, or write elsewhere");
}

bool on_procfs(int fd) {
  struct statfs fs {};
  return ::fstatfs(fd, &fs) == 0 && static_cast<unsigned long>(fs.f_type) == PROC_SUPER_MAGIC;
}

Fd open_start(const std::string& path, bool root) {
  Fd fd(::open(root ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) fail_errno(path, root ? "cannot open /" : "cannot open the current folder");
  return fd;
}

std::string read_link(int dir, const std::string& name, const std::string& shown) {
  std::vector<char> buffer(4096);
  for (;;) {
    ssize_t n = ::readlinkat(dir, name.c_str(), buffer.data(), buffer.size());
    if (n < 0) fail_errno(shown, "cannot read the link");
    if (static_cast<size_t>(n) < buffer.size()) return std::string(buffer.data(), n);
    buffer.resize(buffer.size() * 2);
  }
}

// Where a path leads: the folder holding its final entry, open, and that entry.
struct Place {
  Fd dir;
  struct stat dir_st {};
  std::string folder;  // the folder as shown in messages
  std::string name;    // the final entry's name in it; "" when the path names the folder itself
  bool exists = false;
  struct stat st {};         // the final entry, not followed, when it exists
  bool kernel_link = false;  // a /proc link: the kernel follows it
};

// Makes the folder `next` (shown as `shown`) the one the walk is in.
void enter(Place& p, Fd next, const std::string& shown) {
  p.dir = std::move(next);
  p.folder = shown;
}

// Ends the walk at `comp`, which is there (`exists`, as `st`) or not.
Place& end_at(Place& p, const std::string& comp, bool exists, const struct stat& st) {
  p.name = comp;
  p.exists = exists;
  p.st = st;
  return p;
}

// Follows the link `comp` of the walk's folder (the owner rule has allowed it): its target's
// components go before `rest`, from / when it is absolute.
void follow_link(Place& p, const std::string& path, const std::string& comp,
                 const std::string& shown, std::deque<std::string>& rest) {
  const std::string target = read_link(p.dir.get(), comp, shown);
  if (target.empty()) fail(shown, "an empty symbolic link");
  std::deque<std::string> parts = components(target);
  rest.insert(rest.begin(), parts.begin(), parts.end());
  if (target[0] == '/') enter(p, open_start(path, true), "/");
}

// Opens the folder `comp` of the walk's folder, without following a link, and enters it when the
// owner rule allows what was opened. False when it was replaced since it was looked at.
bool into_folder(Place& p, const std::string& comp, const std::string& shown) {
  Fd next(::openat(p.dir.get(), comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat opened {};
  if (next.get() < 0 || ::fstat(next.get(), &opened) != 0) {
    if (errno != ENOTDIR && errno != ELOOP && errno != ENOENT) fail_errno(shown, "cannot open");
    return false;
  }
  check_owner(p.dir_st, p.folder, shown, opened);  // what was opened is what counts
  enter(p, std::move(next), shown);
  return true;
}

// Walks `path` from / or the current folder. Every component but the last (every one, for a
// folder) must lead to a folder, created when absent and `make_folders`; links are followed here
// after the owner rule allows them. The last component is not opened: its folder and what it is
// (or that it is absent) are returned, the owner rule applied to it.
Place walk(const std::string& path, bool make_folders, bool to_folder) {
  if (path.empty()) fail("''", "an empty path");
  Place p;
  enter(p, open_start(path, path[0] == '/'), path[0] == '/' ? "/" : "");
  std::deque<std::string> rest = components(path);
  int links = 0, retries = 0;
  while (!rest.empty()) {
    std::string comp = std::move(rest.front());
    rest.pop_front();
    const bool last = rest.empty() && !to_folder;
    const std::string shown = join(p.folder, comp);
    if (::fstat(p.dir.get(), &p.dir_st) != 0) fail_errno(p.folder, "cannot stat");
    if (comp == "..") {
      if (last) fail(path, "is a folder");
      Fd up(::openat(p.dir.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (up.get() < 0) fail_errno(shown, "cannot open");
      enter(p, std::move(up), shown);
      continue;
    }
    struct stat st {};
    if (::fstatat(p.dir.get(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) fail_errno(shown, "cannot reach");
      if (last) return std::move(end_at(p, comp, false, st));
      if (!make_folders) fail(shown, "no such folder");
      if (::mkdirat(p.dir.get(), comp.c_str(), 0777) != 0 && errno != EEXIST)
        fail_errno(shown, "cannot create the folder");
      if (++retries > kMaxAttempts) fail(shown, "keeps changing while dlhost creates it");
      rest.push_front(comp);  // decided on again, as what is there now
      continue;
    }
    check_owner(p.dir_st, p.folder, shown, st);
    if (S_ISLNK(st.st_mode) && on_procfs(p.dir.get())) {
      // /proc/self/fd/1 and its like name an open file (a pipe, a socket): only the kernel can
      // follow them, and /proc holds no folder another user writes.
      if (last) {
        p.kernel_link = true;
        return std::move(end_at(p, comp, true, st));
      }
      Fd next(::openat(p.dir.get(), comp.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (next.get() < 0) fail_errno(shown, "cannot open");
      enter(p, std::move(next), shown);
    } else if (S_ISLNK(st.st_mode)) {
      if (++links > kMaxLinks) fail(path, "too many levels of symbolic links");
      follow_link(p, path, comp, shown, rest);
      if (rest.empty() && !to_folder) fail(path, "is a folder");
    } else if (last) {
      return std::move(end_at(p, comp, true, st));
    } else if (!S_ISDIR(st.st_mode)) {
      fail(shown, "not a folder (a " + kind_of(st.st_mode) + ")");
    } else if (!into_folder(p, comp, shown)) {
      if (++retries > kMaxAttempts) fail(shown, "keeps changing while dlhost opens it");
      rest.push_front(comp);  // replaced since fstatat: decided on again
    }
  }
  if (!to_folder) fail(path, "is a folder");
  if (::fstat(p.dir.get(), &p.dir_st) != 0) fail_errno(p.folder, "cannot stat");
  return p;
}

// Writes `text` into the file of `p` in place (a pipe, a device, a /proc link). False when what
// was opened turned out to be a regular file put there since the walk: walk again.
bool write_in_place(const Place& p, const std::string& path, const std::string& text) {
  const int flags = O_WRONLY | O_CLOEXEC | (p.kernel_link ? O_TRUNC : O_NOFOLLOW);
  Fd fd(::openat(p.dir.get(), p.name.c_str(), flags));
  if (fd.get() < 0) {
    if (errno == ELOOP) return false;
    fail_errno(path, "cannot open for writing");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail_errno(path, "cannot stat");
  if (!p.kernel_link) {
    if (S_ISREG(st.st_mode)) return false;
    check_owner(p.dir_st, p.folder, path, st);
  }
  if (int err = write_all(fd.get(), text); err != 0) {
    errno = err;
    fail_errno(path, "cannot write");
  }
  if (::close(fd.release()) != 0) fail_errno(path, "cannot write");
  return true;
}

// Writes `text` to a new temporary file in the folder of `p` and renames it over the entry.
void write_by_rename(const Place& p, const std::string& path, const std::string& text) {
  static std::atomic<unsigned> counter{0};
  std::string temp;
  Fd fd;
  for (int i = 0; fd.get() < 0; ++i) {
    temp = ".dlhost-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".tmp";
    fd.reset(::openat(p.dir.get(), temp.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
    if (fd.get() < 0 && (errno != EEXIST || i > 100))
      fail_errno(path, "cannot create a temporary file in " + (p.folder.empty() ? "." : p.folder));
  }
  auto give_up = [&](const std::string& doing) {
    const int err = errno;
    ::unlinkat(p.dir.get(), temp.c_str(), 0);
    errno = err;
    fail_errno(path, doing);
  };
  if (p.exists && ::fchmod(fd.get(), p.st.st_mode & 07777) != 0) give_up("cannot set its mode");
  if (int err = write_all(fd.get(), text); err != 0) {
    errno = err;
    give_up("cannot write");
  }
  if (::fsync(fd.get()) != 0 && errno != EINVAL) give_up("cannot write");
  if (::close(fd.release()) != 0) give_up("cannot write");
  if (::renameat(p.dir.get(), temp.c_str(), p.dir.get(), p.name.c_str()) != 0)
    give_up("cannot rename the temporary file " + temp + " into place");
}

}  // namespace

std::string user_text(uid_t uid) {
  std::string text = "uid " + std::to_string(uid);
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(uid, &pw, buffer.data(), buffer.size(), &found) == 0 && found != nullptr)
    text += " (" + std::string(found->pw_name) + ")";
  return text;
}

int open_for_append(const std::string& path, int flags, bool make_folders) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    Place p = walk(path, make_folders, false);
    if (p.exists && S_ISDIR(p.st.st_mode)) fail(path, "is a folder");
    Fd fd(p.kernel_link ? ::openat(p.dir.get(), p.name.c_str(), flags | O_CLOEXEC)
                        : ::openat(p.dir.get(), p.name.c_str(),
                                   flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.get() < 0) {
      if (errno == ELOOP && !p.kernel_link) continue;  // a link put there since the walk
      fail_errno(path, "cannot open");
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) fail_errno(path, "cannot stat");
    if (!p.kernel_link) check_owner(p.dir_st, p.folder, path, st);
    return fd.release();
  }
  fail(path, "kept changing while dlhost opened it");
}

void write_whole_file(const std::string& path, const std::string& text) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    Place p = walk(path, false, false);
    if (p.exists && S_ISDIR(p.st.st_mode)) fail(path, "is a folder");
    if (p.kernel_link || (p.exists && !S_ISREG(p.st.st_mode))) {
      if (write_in_place(p, path, text)) return;
      continue;
    }
    write_by_rename(p, path, text);
    return;
  }
  fail(path, "kept changing while dlhost wrote it");
}

void prepare_folder(const std::string& path) {
  Place p = walk(path, true, true);
  if (shared_folder(p.dir_st))
    fail(path,
         "refused: a sticky folder anyone can write (like /tmp): another user could put links "
         "there under the names of the files written into it; name a folder of your own, e.g. " +
             join(path, "report"));
}

int write_all(int fd, const std::string& text) {
  const char* data = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    data += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace dlhost::output
