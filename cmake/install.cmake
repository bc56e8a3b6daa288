# `cmake --install BUILD --prefix P`: the tbc command, the compiler library
# (libtbc.so), the runtime (libtbcrt.so and libtbcrt.a), the public headers,
# a pkg-config file for each library and a CMake package:
#   find_package(tbc) -> tbc::tbc, tbc::tbcrt, tbc::tbcrt_static
# Everything is relocatable: the .pc files find their prefix from where
# they are (${pcfiledir}), the CMake package from its own location.
include(CMakePackageConfigHelpers)

install(TARGETS tbc_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS tbc_shared tbcrt_shared tbcrt EXPORT tbcTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/tbc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

set(TBC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tbc)
install(EXPORT tbcTargets NAMESPACE tbc:: DESTINATION ${TBC_CMAKE_DIR})
configure_package_config_file(cmake/tbcConfig.cmake.in ${CMAKE_BINARY_DIR}/tbcConfig.cmake
                              INSTALL_DESTINATION ${TBC_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/tbcConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/tbcConfig.cmake ${CMAKE_BINARY_DIR}/tbcConfigVersion.cmake
        DESTINATION ${TBC_CMAKE_DIR})

set(TBC_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH TBC_PC_TO_PREFIX /prefix/${TBC_PC_DIR} /prefix)
string(REGEX REPLACE "/$" "" TBC_PC_TO_PREFIX "${TBC_PC_TO_PREFIX}")
set(TBC_PC_PREFIX "\${pcfiledir}/${TBC_PC_TO_PREFIX}")
foreach(pc tbc tbcrt)
  configure_file(cmake/${pc}.pc.in ${CMAKE_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/${pc}.pc DESTINATION ${TBC_PC_DIR})
endforeach()
