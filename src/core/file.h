// Whole-file reads and crash-safe writes: data goes to a temporary file in the same
// directory, is flushed to disk, then renamed over the target, so a crash or a full disk
// never leaves a half-written file under the real name.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vit/core/error.h"

namespace vit {

// Throws vit::Error ("PATH: a directory, where a file is meant") when path is a directory:
// opened as a file it reads as nothing, or as a size of 2^63 bytes (std::bad_alloc).
void check_not_directory(const std::string& path);
// The whole file. check_head, when given, is shown the file's first bytes (kHeadBytes, or the
// whole file when shorter) before the rest is read or memory is taken for it, and throws to
// refuse the file: a 3 GB file that is no image failed only after it was read whole (and
// /dev/zero never). Memory that runs out is an error naming the file.
constexpr size_t kHeadBytes = 16;
std::vector<char> read_file_bytes(const std::string& path,
                                  const std::function<void(const char*, size_t)>& check_head = {});

// A whole file mapped read-only (pages read ahead at mapping time). Writers here replace
// files by rename, so a mapped file keeps its contents while it is in use.
class MappedFile {
 public:
  MappedFile(const char* data, size_t size) : data_(data), size_(size) {}
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const char* data_;
  size_t size_;
};
// A file that could not be read for want of a resource (file descriptors, memory) or for an
// I/O error, not for what it holds: --skip-bad-images must not take it for a bad image (a run
// under `ulimit -n` finished on 554 of its 600 images, exit 0).
class ResourceError : public Error {
 public:
  using Error::Error;
};

// Null where the file cannot be mapped (missing, not a regular file, empty, mmap refused):
// callers then use read_file_bytes, whose error names the problem. populate: read the whole
// file in at once (no page fault per page as it is copied); false for a file of which little
// is read (a checkpoint's header).
std::shared_ptr<const MappedFile> map_file(const std::string& path, bool populate = true);
std::string read_text_file(const std::string& path);
// The non-empty lines of a text file (class names, API keys), each without its \r (CRLF
// files) and the first without a UTF-8 byte-order mark (Windows' Notepad writes one: it became
// part of the first class's name, and evaluation by name then missed that class). A line that
// is not UTF-8 throws vit::Error naming the file, the line and `why` it must be text.
std::vector<std::string> read_lines(const std::string& path, const std::string& why);
// A file written piece by piece under a temporary name (PATH.tmp.PID) and renamed to PATH
// by commit(): for files too large to hold in memory. Destroyed without commit() (an
// exception, a crash), it removes the temporary file and PATH stays as it was. Errors throw
// vit::Error naming PATH. A file replaced keeps its permission bits (and its group where
// allowed), as `>` or Python's open would; a hard link to it keeps the old contents. A
// symbolic link is followed (its target replaced, the link kept);
// what is not a regular file (/dev/null, a FIFO, /dev/stdout and the process's other
// descriptors) is written in place, as a shell's `>` writes it; a directory is refused.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(std::string_view data);
  void commit();  // fsync, close, rename

 private:
  [[noreturn]] void fail(const char* what);
  std::string path_, tmp_;
  int fd_ = -1;
  int slot_ = -1;  // its entry among the live temporaries (remove_live_temporaries), or -1
};

// path made absolute, "." components dropped; a ".." is kept as given, since a link before
// it makes "lnk/../x" another file than "x" (lexically_normal's answer).
std::string absolute_path(const std::string& path);

// path as one word of a shell command a message suggests ("continue with: vit train --resume
// WORD"): as it is when it holds only characters the shell takes literally, else in single
// quotes ('runs/my run', 'it'\''s').
std::string shell_word(const std::string& path);

// The temporary name a file is written under before its rename: PATH.tmp.PID, the file name
// cut short where the suffix would take it past the file system's 255 bytes (a legal name of
// 246 to 255 bytes could not be written).
std::string temporary_name(const std::string& path);

// Removes the temporary files of the AtomicFiles being written now: for a SIGINT or SIGTERM
// handler (async-signal-safe: unlink(2) on fixed buffers), so that an interrupted `vit
// export` of a large model leaves no NAME.tmp.PID behind. At most 16 at once are tracked.
void remove_live_temporaries();

// Writes the concatenation of parts atomically; throws vit::Error naming the file on any
// failure (and removes the temporary file).
void write_file_atomic(const std::string& path, const std::vector<std::string_view>& parts);
inline void write_file_atomic(const std::string& path, std::string_view data) {
  write_file_atomic(path, std::vector<std::string_view>{data});
}

// dst becomes a copy of src, atomically: a hard link to src's file where the file system has
// them (writers here replace files by rename, so the two stay equal until src is replaced and
// dst then keeps the old contents), else a copy; under a temporary name renamed to dst.
void copy_file_atomic(const std::string& src, const std::string& dst);

}  // namespace vit
