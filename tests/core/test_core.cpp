// Core: arena alignment and zeroing, tensor views, the counter-based random draws, error
// lines on stderr, and the atomic writer's message for a missing folder.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/check.h"
#include "core/file.h"
#include "core/json_parse.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/threads.h"

namespace vit {

TEST(Arena, AlignedZeroedAndGrowsOnlyWhenNeeded) {
  Arena a(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a.data()[i], 0.f);
  a.data()[3] = 5.f;
  float* before = a.data();
  a.resize(50);  // smaller: same memory
  EXPECT_EQ(a.data(), before);
  a.zero();
  EXPECT_EQ(a.data()[3], 0.f);
  a.resize(1000);
  EXPECT_EQ(a.size(), 1000u);
}

// release(): the range reads zero, its neighbours keep their values, and in a mapped arena the
// pages wholly inside are no longer resident (mincore), so the memory really went back.
TEST(Arena, ReleaseZeroesARangeAndGivesItsPagesBack) {
  for (size_t n : {size_t(100), size_t(1) << 20}) {  // malloc'd and mapped
    Arena a(n);
    std::fill(a.data(), a.data() + n, 1.f);
    const size_t lo = n / 10 + 3, len = n / 2;
    a.release(lo, len);
    if (n * sizeof(float) >= (size_t(1) << 20)) {  // before anything reads the range again
      const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
      const uintptr_t mid = (reinterpret_cast<uintptr_t>(a.data() + lo + len / 2)) / page * page;
      unsigned char resident = 1;
      ASSERT_EQ(mincore(reinterpret_cast<void*>(mid), page, &resident), 0);
      EXPECT_EQ(resident & 1, 0) << "a released page is still resident";
    }
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(a.data()[i], i >= lo && i < lo + len ? 0.f : 1.f) << "n=" << n << " i=" << i;
  }
}

// stdout and stderr both into one pipe, as mpirun or a shell's 2>&1 collects them: text
// left in stdout's buffer comes before the error line, and the line arrives whole, with
// its newline.
TEST(ErrorLine, FlushesStdoutFirstAndWritesTheLineWhole) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::fflush(stdout);
  std::cout.flush();
  const int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
  ASSERT_GE(saved_out, 0);
  ASSERT_GE(saved_err, 0);
  dup2(fds[1], STDOUT_FILENO);
  dup2(fds[1], STDERR_FILENO);
  std::cout << "header line\n";  // stdout is a pipe now: fully buffered, not yet written
  std::printf("printf part ");
  print_error_line("vit: error: rank 1: loading the data: no such directory");
  print_error_line("second\n");
  std::fflush(stdout);
  dup2(saved_out, STDOUT_FILENO);
  dup2(saved_err, STDERR_FILENO);
  close(saved_out);
  close(saved_err);
  close(fds[1]);
  std::string got;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, size_t(n));
  close(fds[0]);
  EXPECT_EQ(got,
            "header line\nprintf part vit: error: rank 1: loading the data: no such directory\nsecond\n");
}

TEST(Tensor, ReshapeAndShapeErrors) {
  float buf[24];
  Tensor t(buf, {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(reshape(t, {6, 4}).dim(0), 6);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_THROW(reshape(t, {5, 5}), Error);
  try {
    check_shape(t, {2, 3, 5}, "thing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "thing: expected shape [2, 3, 5], got [2, 3, 4]");
  }
}

TEST(Rng, CounterDrawsAreUniformAndKeyed) {
  const uint64_t k1 = rng_key(1, 0, 5), k2 = rng_key(1, 1, 5), k3 = rng_key(1, 0, 6);
  EXPECT_NE(k1, k2);
  EXPECT_NE(k1, k3);
  double s = 0;
  int same = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = uniform_at(k1, i);
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    s += u;
    same += u == uniform_at(k2, i);
  }
  EXPECT_NEAR(s / n, 0.5, 0.005);  // std of the mean: 0.29/sqrt(n) ~ 9e-4
  EXPECT_LT(same, 50);
  EXPECT_EQ(uniform_at(k1, 77), uniform_at(k1, 77));
}

TEST(Rng, SequentialNormalMoments) {
  Rng r(3);
  double s = 0, s2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double v = r.normal();
    s += v;
    s2 += v * v;
  }
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.015);
  for (int i = 0; i < 1000; ++i) {
    const double t = r.trunc_normal(1.0, -0.5, 0.5);
    ASSERT_GE(t, -0.5);
    ASSERT_LE(t, 0.5);
  }
}

// The threaded fill gives the sequential loop's values and leaves the same state, on any
// thread count: with no value rejected (timm's +-2 at std 0.02), and with many (+-0.5 at std
// 1: 62% rejected, so most of the fill is redraws), across the 65536 values it threads from.
TEST(Rng, FillTruncNormalIsTheSequentialLoopOnAnyThreadCount) {
  const int before = num_threads();
  for (const auto& [sd, bound] : {std::pair{0.02, 2.0}, std::pair{1.0, 0.5}})
    for (const int64_t n : {int64_t(1000), int64_t(200000)}) {
      Rng seq(11);
      std::vector<float> want(static_cast<size_t>(n));
      for (auto& v : want) v = float(seq.trunc_normal(sd, -bound, bound));
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        Rng par(11);
        std::vector<float> got(static_cast<size_t>(n), -7.f);
        par.fill_trunc_normal(got.data(), n, sd, -bound, bound);
        int64_t diff = 0, first = -1;
        for (int64_t i = 0; i < n; ++i)
          if (std::memcmp(&got[size_t(i)], &want[size_t(i)], sizeof(float)) != 0 && diff++ == 0) first = i;
        EXPECT_EQ(diff, 0) << diff << " of " << n << " values differ, the first at " << first << " (std "
                           << sd << ", +-" << bound << ", " << threads << " threads)";
        EXPECT_EQ(par.state(), seq.state()) << "std " << sd << ", n " << n << ", " << threads << " threads";
      }
    }
  set_num_threads(before);
}

// A write into a folder that does not exist names the folder, not the temporary file
// (PATH.tmp.PID) that could not be made; nothing is created.
TEST(AtomicFile, AMissingFolderIsNamed) {
  const std::string dir = "/tmp/vitcpp_missing_" + std::to_string(::getpid()) + "/sub";
  try {
    write_file_atomic(dir + "/f.bin", "x");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), (dir + "/f.bin: the folder " + dir + " does not exist (create it first)").c_str());
  }
  EXPECT_NE(::access(dir.c_str(), F_OK), 0);
}

// The temporaries of files being written are what a stop signal's handler removes
// (remove_live_temporaries): those open now go, a committed file stays, and a file written
// after the removal still commits.
TEST(AtomicFile, LiveTemporariesAreRemovedOnRequestAndCommittedFilesStay) {
  namespace fs = std::filesystem;
  const std::string dir = "/tmp/vitcpp_live_" + std::to_string(::getpid());
  fs::create_directories(dir);
  write_file_atomic(dir + "/done.bin", "kept");
  {
    AtomicFile a(dir + "/a.bin"), b(dir + "/b.bin");
    a.write("partial");
    const std::string tmp_a = dir + "/a.bin.tmp." + std::to_string(::getpid());
    ASSERT_TRUE(fs::exists(tmp_a));
    remove_live_temporaries();
    EXPECT_FALSE(fs::exists(tmp_a));
    EXPECT_FALSE(fs::exists(dir + "/b.bin.tmp." + std::to_string(::getpid())));
  }
  EXPECT_EQ(read_text_file(dir + "/done.bin"), "kept");
  AtomicFile c(dir + "/c.bin");
  c.write("whole");
  c.commit();
  remove_live_temporaries();
  EXPECT_EQ(read_text_file(dir + "/c.bin"), "whole");
  fs::remove_all(dir);
}

// A replaced file keeps its permission bits: a private 0600 results file became 0644 (the
// temporary's mode), readable by everyone.
TEST(AtomicFile, AReplacedFileKeepsItsMode) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("vitcpp_mode_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string f = (dir / "private.csv").string(), g = (dir / "shared.csv").string();
  write_file_atomic(f, "old");
  write_file_atomic(g, "old");
  ::chmod(f.c_str(), 0600);
  ::chmod(g.c_str(), 0664);
  write_file_atomic(f, "new");
  write_file_atomic(g, "new");
  struct stat sf {
  }, sg{};
  ASSERT_EQ(::stat(f.c_str(), &sf), 0);
  ASSERT_EQ(::stat(g.c_str(), &sg), 0);
  EXPECT_EQ(sf.st_mode & 07777, 0600u);
  EXPECT_EQ(sg.st_mode & 07777, 0664u);
  EXPECT_EQ(read_text_file(f), "new");
  // A new file is 0666 less the umask, as the shell's `>` and Python's open make it (it was
  // 0644 whatever the umask: a group's shared folder, umask 002, got files it could not edit).
  for (const mode_t mask : {mode_t(002), mode_t(022), mode_t(077)}) {
    const mode_t old = ::umask(mask);
    const std::string h = (dir / ("new" + std::to_string(mask))).string();
    write_file_atomic(h, "x");
    ::umask(old);
    struct stat sh {};
    ASSERT_EQ(::stat(h.c_str(), &sh), 0);
    EXPECT_EQ(sh.st_mode & 07777, 0666u & ~mask) << "umask " << std::oct << mask;
  }
  fs::remove_all(dir);
}

// A legal name of 255 bytes is written: its temporary (NAME.tmp.PID) was past the file
// system's limit ("File name too long"). The temporary's name is cut instead.
TEST(AtomicFile, ALongestNameIsWritten) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("vitcpp_long_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string name = std::string(243, 'q') + ".safetensors";  // 255 bytes
  write_file_atomic((dir / name).string(), "long");
  EXPECT_EQ(read_text_file((dir / name).string()), "long");
  const std::string tmp = temporary_name((dir / name).string());
  EXPECT_EQ(fs::path(tmp).filename().string().size(), 255u) << tmp;
  EXPECT_EQ(fs::path(tmp).parent_path(), dir);
  EXPECT_NE(tmp.find(".tmp." + std::to_string(::getpid())), std::string::npos);
  EXPECT_EQ(temporary_name("a/b.csv"), "a/b.csv.tmp." + std::to_string(::getpid()));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
  fs::remove_all(dir);
}

// Paths in suggested commands are one shell word each.
TEST(ReadFile, ShellWordsQuoteWhatTheShellWouldSplit) {
  EXPECT_EQ(shell_word("runs/a-1_b.c"), "runs/a-1_b.c");
  EXPECT_EQ(shell_word("runs/my run"), "'runs/my run'");
  EXPECT_EQ(shell_word("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_word("~/x"), "'~/x'");
  EXPECT_EQ(shell_word("runs/é"), "'runs/é'");
  EXPECT_EQ(shell_word(""), "''");
}

// A pipe or FIFO is read to its end (a checkpoint or image given as <(cat f)): the reader
// sought to the end for the size and failed with "Illegal seek".
TEST(ReadFile, APipeIsReadToItsEnd) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string big(200000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i * 7);
  std::thread writer([&] {
    size_t off = 0;
    while (off < big.size()) {
      const ssize_t w = ::write(fds[1], big.data() + off, big.size() - off);
      if (w <= 0) break;
      off += size_t(w);
    }
    ::close(fds[1]);
  });
  const std::string path = "/proc/self/fd/" + std::to_string(fds[0]);
  EXPECT_EQ(map_file(path), nullptr);
  const std::vector<char> got = read_file_bytes(path);
  writer.join();
  ::close(fds[0]);
  ASSERT_EQ(got.size(), big.size());
  EXPECT_EQ(std::memcmp(got.data(), big.data(), big.size()), 0);
}

// Paths kept for later (args.json) are absolute; "." goes, ".." stays: through a link "lnk/.."
// is not the folder "lnk" is in (lexically_normal made it so, and a resume read other data).
TEST(ReadFile, AbsolutePathsKeepWhatALinkMeans) {
  namespace fs = std::filesystem;
  const std::string cwd = fs::current_path().string();
  EXPECT_EQ(absolute_path("./data/./x"), cwd + "/data/x");
  EXPECT_EQ(absolute_path("/a/./b"), "/a/b");
  EXPECT_EQ(absolute_path("lnk/../mnist"), cwd + "/lnk/../mnist");
}

// What is not a plain file keeps what it is: a symbolic link is written through (the link
// stays, its target gets the bytes, also when it does not exist yet or is a chain), a pipe or
// device is written in place (`--out /dev/null` replaced the device with a file), and a
// directory is refused by name. Renaming a temporary file over each replaced it.
TEST(AtomicFile, LinksAndDevicesKeepWhatTheyAre) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("vitcpp_links_" + std::to_string(::getpid()));
  fs::create_directories(dir / "sub");
  fs::create_symlink("../target.txt", dir / "sub/link");  // relative, to nothing yet
  fs::create_symlink("sub/link", dir / "chain");
  write_file_atomic((dir / "chain").string(), "through");
  EXPECT_TRUE(fs::is_symlink(dir / "chain"));
  EXPECT_TRUE(fs::is_symlink(dir / "sub/link"));
  EXPECT_EQ(read_text_file((dir / "target.txt").string()), "through");
  write_file_atomic((dir / "sub/link").string(), "again");
  EXPECT_TRUE(fs::is_symlink(dir / "sub/link"));
  EXPECT_EQ(read_text_file((dir / "target.txt").string()), "again");

  // A pipe of the test's own (not /dev/null: the old code, run as root, replaced the
  // machine's device): opened for reading first, so the write does not wait.
  const std::string fifo = (dir / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  write_file_atomic(fifo, "piped");
  char got[16] = {};
  EXPECT_EQ(::read(reader, got, sizeof got), 5);
  EXPECT_STREQ(got, "piped");
  // Through a link, as /dev/stdout is one (to /proc/self/fd/1, to "pipe:[N]").
  fs::create_symlink("pipe", dir / "pipe_link");
  write_file_atomic((dir / "pipe_link").string(), "linked");
  char more[16] = {};
  EXPECT_EQ(::read(reader, more, sizeof more), 6);
  EXPECT_STREQ(more, "linked");
  ::close(reader);
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_symlink(dir / "pipe_link"));
  // A link's "..": the kernel's, after the linked folder (dlink/out is real/x/file, and a
  // textual "x/file" beside dlink must stay as it was).
  fs::create_directories(dir / "real/d");
  fs::create_directories(dir / "real/x");
  fs::create_directories(dir / "x");
  write_file_atomic((dir / "x/file").string(), "precious");
  fs::create_symlink("real/d", dir / "dlink");
  fs::create_symlink("../x/file", dir / "real/d/out");
  write_file_atomic((dir / "dlink/out").string(), "data");
  EXPECT_EQ(read_text_file((dir / "real/x/file").string()), "data");
  EXPECT_EQ(read_text_file((dir / "x/file").string()), "precious");
  // A descriptor of the process's own (/dev/stdout redirected to a file is one): written
  // where it stands, after what it holds, not replaced by a new file.
  const std::string log = (dir / "log.txt").string();
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "before ", 7), 7);
  fs::create_symlink("/dev/fd/" + std::to_string(fd), dir / "fd_link");
  write_file_atomic((dir / "fd_link").string(), "written");
  ASSERT_EQ(::write(fd, " after", 6), 6);
  ::close(fd);
  EXPECT_EQ(read_text_file(log), "before written after");
  std::string msg;
  try {
    write_file_atomic((dir / "sub").string(), "x");
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg, (dir / "sub").string() + ": a directory, where a file is meant");
  fs::remove_all(dir);
}

// JSON from files vitcpp did not write stops at 64 levels of nesting (a 10 MB safetensors
// header of "[[[[..." took 400 MB to be refused, a 300 MB config.json 11 GB), whatever
// follows; 64 levels are read.
TEST(ParseJson, NestingPastTheLimitIsRefusedAtOnce) {
  auto nested = [](int levels, const std::string& tail) {
    return "{\"x\": " + std::string(size_t(levels - 1), '[') + std::string(size_t(levels - 1), ']') + tail +
           "}";
  };
  EXPECT_EQ(parse_json(nested(kMaxJsonDepth, ""), "f").size(), 1u);
  try {
    parse_json(nested(kMaxJsonDepth + 1, ""), "config.json");
    FAIL() << "65 levels were read";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: JSON nested deeper than 64 levels");
  }
  // Refused where the 65th level opens: the text after it (here not even JSON) is never read.
  const std::string deep = "[" + std::string(100000, '[') + "oops";
  EXPECT_THROW(parse_json(deep, "h"), Error);
  EXPECT_THROW(parse_json("{\"a\": [1, 2", "h"), nlohmann::json::parse_error);  // as json::parse
}

// read_file_bytes' check_head sees the first bytes before the rest is read: a large file that
// is refused from them is never read whole (3 GB were, for "not a PNG or JPEG file").
TEST(ReadFile, TheHeadIsCheckedBeforeTheRest) {
  const std::string path = (std::filesystem::temp_directory_path() / "vit_head_check.bin").string();
  const std::string body = "HEADER-0123456789" + std::string(1 << 20, 'x');
  write_file_atomic(path, body);
  std::string seen;
  EXPECT_THROW(read_file_bytes(path,
                               [&](const char* head, size_t n) {
                                 seen.assign(head, n);
                                 throw Error("refused");
                               }),
               Error);
  EXPECT_EQ(seen, body.substr(0, kHeadBytes));
  size_t calls = 0;
  const std::vector<char> all = read_file_bytes(path, [&](const char*, size_t) { ++calls; });
  EXPECT_EQ(calls, 1u);
  EXPECT_EQ(std::string(all.begin(), all.end()), body);
  write_file_atomic(path, "tiny");  // shorter than the head: shown whole, once
  seen.clear();
  EXPECT_EQ(read_file_bytes(path, [&](const char* head, size_t n) { seen.assign(head, n); }).size(), 4u);
  EXPECT_EQ(seen, "tiny");
  std::filesystem::remove(path);
}

// Text files of lines (class names, API keys): a UTF-8 byte-order mark (Notepad's) is not part
// of the first line (it became the first class's name: evaluation by name then missed that
// class), CRLF ends and blank lines are dropped, and a line that is not UTF-8 is named.
TEST(ReadFile, LinesLeaveOutTheByteOrderMarkAndLineEnds) {
  const std::string path = (std::filesystem::temp_directory_path() / "vit_lines.txt").string();
  write_file_atomic(path,
                    "\xEF\xBB\xBF"
                    "cat\r\ndog\r\n\r\n\xC3\xA9l\xC3\xA9phant\n");
  EXPECT_EQ(read_lines(path, "names"), (std::vector<std::string>{"cat", "dog", "\xC3\xA9l\xC3\xA9phant"}));
  write_file_atomic(path, "cat\nd\xE9j\xE0\n");
  try {
    read_lines(path, "class names go into JSON");
    FAIL() << "Latin-1 was read";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path +
                                         ": line 2 is not UTF-8 text (class names go into JSON; convert the "
                                         "file, e.g. iconv -f latin1 -t utf-8)");
  }
  std::filesystem::remove(path);
}

}  // namespace vit
