// OutputFile — the receiver's file, invisible until the transfer is verified.
//
// The file is created nameless with O_TMPFILE in the destination's directory, and gets its name
// by linkat() only in commit(), after the checksum matched. Until then no other process can see a
// half-written file, and a broken transfer (checksum mismatch, peer gone, disk full, the process
// killed) leaves nothing: the kernel frees a nameless file when its last descriptor closes.
// Where O_TMPFILE is unsupported (some file systems, old kernels) the file is created under a
// temporary name "<final>.niox-part-XXXXXX" that commit() renames and discard() unlinks; only a
// killed process can then leave that temporary file behind.
//
// commit() replaces an existing file at the destination atomically, like mv. It does not fsync:
// durability against power loss is the caller's choice (fsync(fd()) first).
#pragma once

#include <niox/base/file_descriptor.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace niox::transfer {

class OutputFile {
 public:
  OutputFile() noexcept = default;
  OutputFile(OutputFile&& other) noexcept = default;
  // Discards this object's file first, then takes over `other`'s.
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  // Discards the file unless it was committed.
  ~OutputFile();

  // Prepares a file for `destination`; if `destination` is an existing directory, the file will
  // be `destination/name` (`name` must already be validated, see validate_name). Mode 0644 less
  // the umask. `allow_tmpfile` = false forces the temporary-name fallback (tests).
  static OutputFile create(const std::string& destination, std::string_view name,
                           std::error_code& ec, bool allow_tmpfile = true);

  // Why create() could not make a file for `destination`, in a user's words ("the directory
  // 'in/box' does not exist", "'in' is not a directory", "the directory 'in' is not
  // writable"); empty when its directory exists and this process may create files in it. For
  // checking a destination at start-up rather than when the first transfer arrives.
  static std::string destination_problem(const std::string& destination);

  // Opened for reading and writing (O_RDWR | O_CLOEXEC: the receiver hashes what it wrote),
  // owned by this object and lent: valid until commit() or discard() closes it, -1 after.
  int fd() const noexcept { return fd_.get(); }
  // The path the file gets on commit().
  const std::string& path() const noexcept { return final_path_; }
  bool is_nameless() const noexcept { return temp_path_.empty(); }

  // Allocates [offset, offset + length) of the file now (fallocate; the file grows to cover
  // it), so that a disk without room fails at once (ENOSPC, or EFBIG past RLIMIT_FSIZE) instead
  // of part way through, and the file system allocates large extents instead of a block at a
  // time as pages are written. A file system without fallocate is not an error.
  std::error_code reserve(std::uint64_t offset, std::uint64_t length) noexcept;
  // The bytes an unprivileged writer may still allocate on the file's file system (fstatvfs).
  std::uint64_t available_space(std::error_code& ec) const noexcept;
  // Gives the file its final name and closes it.
  void commit(std::error_code& ec);
  // Removes every trace of the file. Idempotent.
  void discard() noexcept;

 private:
  FileDescriptor fd_;
  std::string final_path_;
  std::string temp_path_;  // empty for an O_TMPFILE file
};

}  // namespace niox::transfer
