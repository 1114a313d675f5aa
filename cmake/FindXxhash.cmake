# libxxhash ships a pkg-config file but no CMake package; wrap the former.
# Defines Xxhash::xxhash (the shared library: its XXH3 dispatch picks AVX2 or SSE2 at run time).
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_XXHASH QUIET libxxhash)
endif()
find_path(Xxhash_INCLUDE_DIR xxh_x86dispatch.h HINTS ${PC_XXHASH_INCLUDE_DIRS})
find_library(Xxhash_LIBRARY xxhash HINTS ${PC_XXHASH_LIBRARY_DIRS})
set(Xxhash_VERSION ${PC_XXHASH_VERSION})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Xxhash
  REQUIRED_VARS Xxhash_LIBRARY Xxhash_INCLUDE_DIR VERSION_VAR Xxhash_VERSION)
if(Xxhash_FOUND AND NOT TARGET Xxhash::xxhash)
  add_library(Xxhash::xxhash UNKNOWN IMPORTED)
  set_target_properties(Xxhash::xxhash PROPERTIES
    IMPORTED_LOCATION "${Xxhash_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Xxhash_INCLUDE_DIR}")
endif()
mark_as_advanced(Xxhash_INCLUDE_DIR Xxhash_LIBRARY)
