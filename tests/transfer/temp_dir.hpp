// A temporary directory for transfer tests, removed with its content on destruction: names in
// it come as strings, and files in it are written, read and listed whole.
#pragma once

#include "support/temp_dir.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace niox::transfer::testing {

class TempDir : public niox::test::TempDir {
 public:
  std::string operator/(const std::string& rel) const { return (path() / rel).string(); }
  std::string str() const { return path().string(); }

  void write(const std::string& rel, const std::string& content) const {
    std::ofstream(path() / rel, std::ios::binary) << content;
  }
  std::string read(const std::string& rel) const {
    std::ifstream in(path() / rel, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Names in the directory, sorted.
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    for (auto& e : std::filesystem::directory_iterator(path())) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
};

}  // namespace niox::transfer::testing
