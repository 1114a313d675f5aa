#include "output_file.hpp"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <utility>

#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace niox::transfer {
namespace {

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) {
    return ".";
  }
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Read rather than set-and-restore with umask(2), which would race with other threads.
mode_t current_umask() {
  FILE* f = std::fopen("/proc/self/status", "re");
  unsigned mask = 022;
  if (f != nullptr) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::sscanf(line, "Umask: %o", &mask) == 1) {
        break;
      }
    }
    std::fclose(f);
  }
  return static_cast<mode_t>(mask);
}

std::string random_suffix() {
  static constexpr char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::random_device rd;
  std::string s(8, '0');
  for (auto& c : s) {
    c = digits[rd() % 36];
  }
  return s;
}

}  // namespace

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    discard();
    fd_ = std::move(other.fd_);
    final_path_ = std::move(other.final_path_);
    temp_path_ = std::move(other.temp_path_);
  }
  return *this;
}

OutputFile::~OutputFile() { discard(); }

OutputFile OutputFile::create(const std::string& destination, std::string_view name,
                              std::error_code& ec, bool allow_tmpfile) {
  ec.clear();
  OutputFile out;
  struct stat st {};
  if (::stat(destination.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    out.final_path_ = destination + (destination.ends_with('/') ? "" : "/") + std::string(name);
  } else {
    out.final_path_ = destination;
  }
  const std::string dir = parent_of(out.final_path_);
  if (allow_tmpfile) {
    std::error_code open_ec;
    out.fd_ = FileDescriptor::open(dir, O_TMPFILE | O_RDWR, 0644, open_ec);
    if (out.fd_) {
      return out;
    }
    // EOPNOTSUPP: the file system has no O_TMPFILE; EISDIR: the kernel predates it.
    if (open_ec.value() != EOPNOTSUPP && open_ec.value() != EISDIR) {
      ec.assign(open_ec.value(), std::system_category());
      return {};
    }
  }
  std::string temp = out.final_path_ + ".niox-part-XXXXXX";
  out.fd_.reset(::mkostemp(temp.data(), O_CLOEXEC));
  if (!out.fd_) {
    ec.assign(errno, std::system_category());
    return {};
  }
  // mkostemp creates 0600; give it the mode a new file would get.
  ::fchmod(out.fd_.get(), 0644 & ~current_umask());
  out.temp_path_ = std::move(temp);
  return out;
}

std::string OutputFile::destination_problem(const std::string& destination) {
  struct stat st {};
  const bool is_dir = ::stat(destination.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  const std::string dir = is_dir ? destination : parent_of(destination);
  if (!is_dir) {
    if (::stat(dir.c_str(), &st) != 0) {
      if (errno == ENOENT) {
        return "the directory '" + dir + "' does not exist";
      }
      if (errno == ENOTDIR) {
        return "the directory '" + dir + "' does not exist (part of its path is not a directory)";
      }
      return "cannot use the directory '" + dir + "': " + std::strerror(errno);
    }
    if (!S_ISDIR(st.st_mode)) {
      return "'" + dir + "' is not a directory";
    }
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    if (errno == EROFS) {
      return "the directory '" + dir + "' is on a read-only file system";
    }
    return "the directory '" + dir + "' is not writable";
  }
  return {};
}

std::error_code OutputFile::reserve(std::uint64_t offset, std::uint64_t length) noexcept {
  if (!fd_) {
    return std::make_error_code(std::errc::bad_file_descriptor);
  }
  if (length == 0) {
    return {};
  }
  int rc;
  do {
    rc = ::fallocate(fd_.get(), 0, static_cast<off_t>(offset), static_cast<off_t>(length));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EOPNOTSUPP && errno != ENOSYS) {
    return {errno, std::system_category()};
  }
  return {};
}

std::uint64_t OutputFile::available_space(std::error_code& ec) const noexcept {
  ec.clear();
  struct statvfs v {};
  if (::fstatvfs(fd_.get(), &v) != 0) {
    ec.assign(errno, std::system_category());
    return 0;
  }
  return static_cast<std::uint64_t>(v.f_bavail) * v.f_frsize;
}

void OutputFile::commit(std::error_code& ec) {
  ec.clear();
  if (!fd_) {
    ec = std::make_error_code(std::errc::bad_file_descriptor);
    return;
  }
  if (!temp_path_.empty()) {
    if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
      ec.assign(errno, std::system_category());
      return;
    }
    temp_path_.clear();
  } else {
    // linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the /proc/self/fd link works for anyone
    // (open(2), O_TMPFILE).
    const std::string self = "/proc/self/fd/" + std::to_string(fd_.get());
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, final_path_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      if (errno != EEXIST) {
        ec.assign(errno, std::system_category());
        return;
      }
      // Replace the existing file atomically: link under a fresh name, rename over.
      std::string temp;
      int rc = -1;
      for (int attempt = 0; attempt < 8 && rc != 0; ++attempt) {
        temp = final_path_ + ".niox-part-" + random_suffix();
        rc = ::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, temp.c_str(), AT_SYMLINK_FOLLOW);
        if (rc != 0 && errno != EEXIST) {
          break;
        }
      }
      if (rc != 0) {
        ec.assign(errno, std::system_category());
        return;
      }
      if (::rename(temp.c_str(), final_path_.c_str()) != 0) {
        ec.assign(errno, std::system_category());
        ::unlink(temp.c_str());
        return;
      }
    }
  }
  fd_.reset();
}

void OutputFile::discard() noexcept {
  if (!temp_path_.empty()) {
    ::unlink(temp_path_.c_str());
    temp_path_.clear();
  }
  fd_.reset();
}

}  // namespace niox::transfer
