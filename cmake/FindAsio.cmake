# Standalone (non-Boost) Asio is header-only; Debian's libasio-dev has no CMake package.
# Defines Asio::asio.
find_path(Asio_INCLUDE_DIR asio.hpp)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Asio REQUIRED_VARS Asio_INCLUDE_DIR)
if(Asio_FOUND AND NOT TARGET Asio::asio)
  add_library(Asio::asio INTERFACE IMPORTED)
  set_target_properties(Asio::asio PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${Asio_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS "ASIO_STANDALONE;ASIO_NO_DEPRECATED")
  target_link_libraries(Asio::asio INTERFACE Threads::Threads)
endif()
mark_as_advanced(Asio_INCLUDE_DIR)
