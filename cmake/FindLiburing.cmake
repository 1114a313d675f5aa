# Defines Liburing::liburing.
include(${CMAKE_CURRENT_LIST_DIR}/NioxFindPkgConfigLibrary.cmake)
niox_find_pkg_config_library(Liburing liburing liburing.h uring Liburing::liburing)
