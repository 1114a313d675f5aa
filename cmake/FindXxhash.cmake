# Defines Xxhash::xxhash (the shared library: its XXH3 dispatch picks AVX2 or SSE2 at run time).
include(${CMAKE_CURRENT_LIST_DIR}/NioxFindPkgConfigLibrary.cmake)
niox_find_pkg_config_library(Xxhash libxxhash xxh_x86dispatch.h xxhash Xxhash::xxhash)
