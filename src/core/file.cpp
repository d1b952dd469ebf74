#include "core/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <system_error>
#include <utility>

#include "core/check.h"
#include "core/utf8.h"

namespace vit {

void check_not_directory(const std::string& path) {
  struct stat sb {};
  VIT_CHECK(::stat(path.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode), path,
            ": a directory, where a file is meant");
}

std::vector<char> read_file_bytes(const std::string& path,
                                  const std::function<void(const char*, size_t)>& check_head) {
  check_not_directory(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string what = detail::concat(path, ": cannot open for reading (", std::strerror(err), ")");
    if (err == EMFILE || err == ENFILE || err == ENOMEM || err == EIO) throw ResourceError(what);
    throw Error(what);
  }
  struct stat sb {};
  // A regular file is read at its size (and one byte more, to meet its end); a pipe, FIFO or
  // device (<(cat f), /dev/stdin) in growing pieces to its end. With check_head, its first
  // bytes come first.
  const bool regular = ::fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
  const size_t whole = regular ? size_t(sb.st_size) + 1 : size_t(65536);
  bool checked = !check_head;
  std::vector<char> buf;
  size_t n = 0;
  try {
    buf.resize(checked ? whole : kHeadBytes);
    for (;;) {
      if (n == buf.size()) {
        if (!checked) {
          check_head(buf.data(), n);
          checked = true;
        }
        buf.resize(std::max(whole, 2 * buf.size()));
      }
      const ssize_t r = ::read(fd, buf.data() + n, buf.size() - n);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw ResourceError(detail::concat(path, ": read failed (", std::strerror(errno), ")"));
      if (r == 0) break;
      n += size_t(r);
    }
    if (!checked) check_head(buf.data(), n);
  } catch (const std::bad_alloc&) {
    ::close(fd);
    throw ResourceError(
        detail::concat(path, ": out of memory reading it (", regular ? sb.st_size : off_t(n), " bytes)"));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  buf.resize(n);
  return buf;
}

MappedFile::~MappedFile() {
  ::munmap(const_cast<char*>(data_), size_);
}

std::shared_ptr<const MappedFile> map_file(const std::string& path, bool populate) {
  struct stat sb {};
  // Only regular files are opened: opening a FIFO here and closing it would end its writer
  // (SIGPIPE) before read_file_bytes reads it.
  if (::stat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) return nullptr;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = MAP_FAILED;
  if (::fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0)
    p = ::mmap(nullptr, size_t(sb.st_size), PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
  ::close(fd);  // the mapping keeps the file open
  if (p == MAP_FAILED) return nullptr;
  return std::make_shared<const MappedFile>(static_cast<const char*>(p), size_t(sb.st_size));
}

std::string read_text_file(const std::string& path) {
  auto b = read_file_bytes(path);
  return std::string(b.begin(), b.end());
}

std::vector<std::string> read_lines(const std::string& path, const std::string& why) {
  std::string text = read_text_file(path);
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  std::vector<std::string> lines;
  int64_t number = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    std::string line = text.substr(at, end - at);
    at = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    VIT_CHECK(is_utf8(line), path, ": line ", number, " is not UTF-8 text (", why,
              "; convert the file, e.g. iconv -f latin1 -t utf-8)");
    if (!line.empty()) lines.push_back(std::move(line));
  }
  return lines;
}

namespace {
// The process's own descriptor that p names (/dev/stdout, /dev/stderr, /dev/fd/N,
// /proc/self/fd/N), else -1.
int own_descriptor(const std::string& p) {
  if (p == "/dev/stdout") return 1;
  if (p == "/dev/stderr") return 2;
  for (const std::string prefix : {"/dev/fd/", "/proc/self/fd/"})
    if (p.size() > prefix.size() && p.compare(0, prefix.size(), prefix) == 0 &&
        p.find_first_not_of("0123456789", prefix.size()) == std::string::npos && p.size() - prefix.size() < 9)
      return std::stoi(p.substr(prefix.size()));
  return -1;
}
}  // namespace

namespace {
// The live temporaries: a slot is claimed (CAS), its path copied, then marked ready; a signal
// handler unlinks the ready ones. Paths longer than the buffer are not tracked.
constexpr int kLiveSlots = 16;
constexpr size_t kLivePath = 4096;
std::atomic<int> live_state[kLiveSlots];  // 0 free, 1 claimed, 2 ready
char live_path[kLiveSlots][kLivePath];

int track_temporary(const std::string& tmp) {
  if (tmp.size() >= kLivePath) return -1;
  for (int i = 0; i < kLiveSlots; ++i) {
    int free = 0;
    if (!live_state[i].compare_exchange_strong(free, 1)) continue;
    std::memcpy(live_path[i], tmp.c_str(), tmp.size() + 1);
    live_state[i].store(2, std::memory_order_release);
    return i;
  }
  return -1;
}

void untrack_temporary(int slot) {
  if (slot >= 0) live_state[slot].store(0, std::memory_order_release);
}
}  // namespace

std::string absolute_path(const std::string& path) {
  const std::filesystem::path a = std::filesystem::absolute(path);
  for (const auto& part : a)
    if (part == "..") return a.string();
  return a.lexically_normal().string();
}

std::string shell_word(const std::string& path) {
  const bool plain = !path.empty() && path.find_first_not_of(
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                          "0123456789_./:=@%+,-") == std::string::npos;
  if (plain) return path;
  std::string out = "'";
  for (char c : path) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string temporary_name(const std::string& path) {
  const std::string suffix = ".tmp." + std::to_string(::getpid());
  constexpr size_t kNameMax = 255;  // NAME_MAX of Linux's file systems
  const size_t slash = path.rfind('/');
  const size_t start = slash == std::string::npos ? 0 : slash + 1;
  const size_t name = path.size() - start;
  if (name + suffix.size() <= kNameMax) return path + suffix;
  return path.substr(0, start + kNameMax - suffix.size()) + suffix;
}

void remove_live_temporaries() {
  for (int i = 0; i < kLiveSlots; ++i)
    if (live_state[i].load(std::memory_order_acquire) == 2) ::unlink(live_path[i]);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // The links from path_, walked by hand, not normalized ("dir/../x" is the kernel's to
  // resolve: dir may be a link). One of them to /dev/stdout and its kind: the descriptor
  // itself, written where it stands (a redirected stdout keeps what was printed around it).
  std::string p = path_;
  for (int hops = 0; hops < 40; ++hops) {
    if (const int n = own_descriptor(p); n >= 0) {
      std::cout.flush();
      std::fflush(nullptr);
      fd_ = ::fcntl(n, F_DUPFD_CLOEXEC, 0);
      VIT_CHECK(fd_ >= 0, path_, ": cannot write to descriptor ", n, " (", std::strerror(errno), ")");
      return;  // tmp_ stays empty: nothing to rename or remove
    }
    if (!fs::is_symlink(p, ec)) break;
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) break;
    p = (to.is_absolute() ? to : fs::path(p).parent_path() / to).string();
  }
  check_not_directory(path_);
  // Not a regular file (/dev/null, a FIFO, through any links): written in place, as a shell's
  // `>` does. Renaming over it would replace the device or pipe with a file.
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    VIT_CHECK(fd_ >= 0, path_, ": cannot open for writing (", std::strerror(errno), ")");
    return;
  }
  // A symbolic link to a file, or to none yet, is written through: its target (where the walk
  // above ended) is replaced and the link stays (as `sed -i --follow-symlinks`). Renaming over
  // the link made it a file.
  path_ = p;
  tmp_ = temporary_name(path_);
  // 0666 less the umask, as the shell's `>`, Python's open and torch.save make files (0644
  // ignored a shared folder's umask 002: the group could not edit summary.csv).
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ >= 0) {
    slot_ = track_temporary(tmp_);
    // The file it replaces keeps its mode (a private 0600 file stayed private) and group;
    // best effort, as the owner may not be ours to give.
    if (::stat(path_.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      [[maybe_unused]] const int owned = ::fchown(fd_, uid_t(-1), st.st_gid);
      ::fchmod(fd_, st.st_mode & 07777);
    }
    return;
  }
  const int err = errno;
  // A missing folder is the usual cause: name it, rather than the temporary file's path.
  const auto slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, std::max<size_t>(slash, 1));
  struct stat sb {};
  VIT_CHECK(err != ENOENT || ::stat(dir.c_str(), &sb) == 0, path_, ": the folder ", dir,
            " does not exist (create it first)");
  throw Error(detail::concat(path_, ": cannot create ", tmp_, " (", std::strerror(err), ")"));
}

AtomicFile::~AtomicFile() {
  untrack_temporary(slot_);
  if (fd_ < 0) return;
  ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const char* what) {
  const int err = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  throw Error(detail::concat(path_, ": ", what, " failed (", std::strerror(err),
                             "); the previous file, if any, is untouched"));
}

void AtomicFile::write(std::string_view data) {
  VIT_CHECK(fd_ >= 0, path_, ": write after commit");
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t w = ::write(fd_, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("write");
    p += w;
    left -= size_t(w);
  }
}

void AtomicFile::commit() {
  VIT_CHECK(fd_ >= 0, path_, ": commit twice");
  if (tmp_.empty()) {  // a device or pipe, written in place (fsync does not apply)
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close");
    return;
  }
  if (::fsync(fd_) != 0) fail("fsync");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close");
  const bool renamed = std::rename(tmp_.c_str(), path_.c_str()) == 0;
  untrack_temporary(slot_);  // renamed: the name is the file's now, not to be removed
  slot_ = -1;
  if (!renamed) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw Error(detail::concat(path_, ": rename from ", tmp_, " failed (", std::strerror(err), ")"));
  }
}

void write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts) {
  AtomicFile f(path);
  for (auto part : parts) f.write(part);
  f.commit();
}

void copy_file_atomic(const std::string& src, const std::string& dst) {
  const std::string tmp = temporary_name(dst);
  ::unlink(tmp.c_str());
  if (::link(src.c_str(), tmp.c_str()) == 0) {
    if (std::rename(tmp.c_str(), dst.c_str()) == 0) return;
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(detail::concat(dst, ": rename from ", tmp, " failed (", std::strerror(err), ")"));
  }
  // No hard links here (another file system for dst, FAT, some network mounts): a copy.
  check_not_directory(src);
  std::ifstream in(src, std::ios::binary);
  VIT_CHECK(in, src, ": cannot open for reading (", std::strerror(errno), ")");
  AtomicFile out(dst);
  std::vector<char> buf(size_t(1) << 22);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    out.write(std::string_view(buf.data(), size_t(in.gcount())));
  }
  VIT_CHECK(in.eof(), src, ": read failed");
  out.commit();
}

}  // namespace vit
