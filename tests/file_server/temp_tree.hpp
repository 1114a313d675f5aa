// A temporary directory tree for file tests, removed with everything in it on destruction.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace niox::http::testing {

class TempTree {
 public:
  TempTree() {
    auto pattern = (std::filesystem::temp_directory_path() / "niox-fs-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    path_ = pattern;
  }
  ~TempTree() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view rel) const { return path_ / rel; }

  void write(std::string_view rel, std::string_view content) const {
    auto p = path_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
  }
  void mkdir(std::string_view rel) const { std::filesystem::create_directories(path_ / rel); }
  void symlink(std::string_view target, std::string_view rel) const {
    std::filesystem::create_symlink(target, path_ / rel);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace niox::http::testing
