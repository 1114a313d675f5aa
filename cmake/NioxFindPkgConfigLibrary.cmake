# For a library that ships a pkg-config file but no CMake package: finds its header and library
# (in the places pkg-config names, where it knows the library), reports the result as
# find_package() expects and defines <target> as an imported library.
#   niox_find_pkg_config_library(<package> <pkg-config module> <header> <library> <target>)
# A macro, so that <package>_FOUND and <package>_VERSION land in the calling Find module's scope.
include_guard(GLOBAL)
include(FindPackageHandleStandardArgs)

macro(niox_find_pkg_config_library package module header library target)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(PC_${package} QUIET ${module})
  endif()
  find_path(${package}_INCLUDE_DIR ${header} HINTS ${PC_${package}_INCLUDE_DIRS})
  find_library(${package}_LIBRARY ${library} HINTS ${PC_${package}_LIBRARY_DIRS})
  set(${package}_VERSION ${PC_${package}_VERSION})
  find_package_handle_standard_args(${package}
    REQUIRED_VARS ${package}_LIBRARY ${package}_INCLUDE_DIR VERSION_VAR ${package}_VERSION)
  if(${package}_FOUND AND NOT TARGET ${target})
    add_library(${target} UNKNOWN IMPORTED)
    set_target_properties(${target} PROPERTIES
      IMPORTED_LOCATION "${${package}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${${package}_INCLUDE_DIR}")
  endif()
  mark_as_advanced(${package}_INCLUDE_DIR ${package}_LIBRARY)
endmacro()
