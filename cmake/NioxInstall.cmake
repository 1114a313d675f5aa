include(CMakePackageConfigHelpers)
install(TARGETS niox niox-collective EXPORT nioxTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/niox DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(NIOX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/niox)
install(EXPORT nioxTargets NAMESPACE niox:: DESTINATION ${NIOX_CMAKE_DIR})
configure_package_config_file(cmake/nioxConfig.cmake.in ${PROJECT_BINARY_DIR}/nioxConfig.cmake
  INSTALL_DESTINATION ${NIOX_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/nioxConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/nioxConfig.cmake ${PROJECT_BINARY_DIR}/nioxConfigVersion.cmake
              cmake/FindLiburing.cmake cmake/NioxFindPkgConfigLibrary.cmake
        DESTINATION ${NIOX_CMAKE_DIR})

# pkg-config: liburing and OpenSSL are private to a shared niox but needed to link a static one.
if(BUILD_SHARED_LIBS)
  set(NIOX_PC_REQUIRES "fmt")
  set(NIOX_PC_REQUIRES_PRIVATE "liburing openssl")
else()
  set(NIOX_PC_REQUIRES "fmt liburing openssl")
  set(NIOX_PC_REQUIRES_PRIVATE "")
endif()
# The .pc finds its prefix from its own place: one ".." per component of LIBDIR/pkgconfig.
file(RELATIVE_PATH NIOX_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(cmake/niox.pc.in ${PROJECT_BINARY_DIR}/niox.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/niox.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
