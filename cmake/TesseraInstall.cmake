# TesseraInstall.cmake -- what `cmake --install` puts under the prefix, so a program of one's own
# builds out of the tree with find_package(tessera) (docs/install.md):
#   bin/tessera
#   lib/libtessera_*.a                       the libraries in TESSERA_LIBRARIES
#   include/tessera/{runtime,policies,launcher,actors}/...   headers, same paths as in the tree
#   lib/cmake/tessera/                       tesseraConfig.cmake, its version file, the exported
#                                            targets (tessera::<name>) and the find modules
#                                            the config needs (FindCAF, FindCOIN)
# Included at the end of the top-level CMakeLists.txt, once every target exists.
include(CMakePackageConfigHelpers)

# A library named in TESSERA_LIBRARY_CANDIDATES but defined below that list would miss its alias
# and its install rule: say so instead of installing a package without it.
foreach(lib IN LISTS TESSERA_LIBRARY_CANDIDATES)
  if(TARGET ${lib} AND NOT lib IN_LIST TESSERA_LIBRARIES)
    message(FATAL_ERROR "${lib} is defined after TESSERA_LIBRARY_CANDIDATES is read: "
                        "define it above that list in CMakeLists.txt")
  endif()
endforeach()

set(TESSERA_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/tessera")

# The installed binary keeps the run path to libraries outside the system's (CUDA, NCCL, MPI
# installed elsewhere), which the build tree's binary has.
set_target_properties(tessera PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS ${TESSERA_LIBRARIES} tessera
  EXPORT tesseraTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT tesseraTargets NAMESPACE tessera:: DESTINATION ${TESSERA_CMAKE_DIR})

# Headers of the layers this configuration builds; actors/ needs CAF, like its library.
set(TESSERA_HEADER_DIRS runtime policies launcher)
if(TESSERA_WITH_ACTORS)
  list(APPEND TESSERA_HEADER_DIRS actors)
endif()
foreach(dir IN LISTS TESSERA_HEADER_DIRS)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
endforeach()

# The package config re-finds what the exported targets link (Debian's CAF and COIN-OR ship no
# CMake config, hence the project's find modules beside it).
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tesseraConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tesseraConfig.cmake
  INSTALL_DESTINATION ${TESSERA_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tesseraConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/tesseraConfig.cmake
  ${PROJECT_BINARY_DIR}/tesseraConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindCAF.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindCOIN.cmake
  DESTINATION ${TESSERA_CMAKE_DIR})
