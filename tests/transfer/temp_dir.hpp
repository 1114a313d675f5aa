// A temporary directory for transfer tests, removed with its content on destruction.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace niox::transfer::testing {

class TempDir {
 public:
  TempDir() {
    auto pattern = (std::filesystem::temp_directory_path() / "niox-xfer-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string operator/(const std::string& rel) const { return (path_ / rel).string(); }
  std::string str() const { return path_.string(); }

  void write(const std::string& rel, const std::string& content) const {
    std::ofstream(path_ / rel, std::ios::binary) << content;
  }
  std::string read(const std::string& rel) const {
    std::ifstream in(path_ / rel, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Names in the directory, sorted.
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    for (auto& e : std::filesystem::directory_iterator(path_)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace niox::transfer::testing
