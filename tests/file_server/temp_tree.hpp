// A temporary directory tree for file tests, removed with everything in it on destruction.
#pragma once

#include "../support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <string_view>

namespace niox::http::testing {

class TempTree : public niox::test::TempDir {
 public:
  void write(std::string_view rel, std::string_view content) const {
    auto p = *this / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
  }
  void mkdir(std::string_view rel) const { std::filesystem::create_directories(*this / rel); }
  void symlink(std::string_view target, std::string_view rel) const {
    std::filesystem::create_symlink(target, *this / rel);
  }
};

}  // namespace niox::http::testing
