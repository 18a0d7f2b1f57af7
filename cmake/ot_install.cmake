# `cmake --install <build> [--prefix <dir>]`: libot.a and libot.so (+ SONAME
# link), include/ot/*.h, the `ot` command, lib/pkgconfig/ot.pc and the CMake
# package lib/cmake/ot (find_package(ot): ot::ot = libot.so, ot::ot_static =
# libot.a). GNUInstallDirs layout under CMAKE_INSTALL_PREFIX.
include(CMakePackageConfigHelpers)
set(OT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ot)

# The installed library and command find dependencies outside the system
# directories (e.g. Open MPI's lib dir) where they were linked from.
set_target_properties(ot_shared PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS ot ot_shared EXPORT otTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${OT_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ot)
if(TARGET ot_cli)
  set_target_properties(ot_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS ot_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# ---- CMake package -------------------------------------------------------
install(EXPORT otTargets NAMESPACE ot:: FILE otTargets.cmake DESTINATION ${OT_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/otConfig.cmake.in
  ${CMAKE_BINARY_DIR}/otConfig.cmake INSTALL_DESTINATION ${OT_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/otConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/otConfig.cmake ${CMAKE_BINARY_DIR}/otConfigVersion.cmake
        DESTINATION ${OT_CMAKE_DIR})

# ---- pkg-config ------------------------------------------------------------
# Link flags for libraries (imported targets, paths, names, flags): -L<dir>
# (unless the compiler searches it anyway) -l<name>, duplicates dropped.
function(ot__pc_link_flags out_var)
  set(flags)
  foreach(lib ${ARGN})
    if(TARGET ${lib})
      get_target_property(loc ${lib} IMPORTED_LOCATION)
      if(NOT loc)
        get_target_property(cfgs ${lib} IMPORTED_CONFIGURATIONS)
        list(GET cfgs 0 cfg)
        get_target_property(loc ${lib} IMPORTED_LOCATION_${cfg})
      endif()
      if(NOT loc)
        message(FATAL_ERROR "ot.pc: no library file for target ${lib}")
      endif()
      set(lib ${loc})
    endif()
    if(lib MATCHES "^-")
      list(APPEND flags ${lib})
    elseif(IS_ABSOLUTE "${lib}")
      get_filename_component(dir ${lib} DIRECTORY)
      get_filename_component(file ${lib} NAME)
      string(REGEX REPLACE "^lib(.+)\\.(so|a|dylib)(\\..*)?$" "\\1" name "${file}")
      if(NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
        list(APPEND flags -L${dir})
      endif()
      list(APPEND flags -l${name})
    else()
      list(APPEND flags -l${lib})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES flags)
  string(REPLACE ";" " " flags "${flags}")
  set(${out_var} "${flags}" PARENT_SCOPE)
endfunction()

# Public headers include no dependency's header, so only a static link needs them.
ot__pc_link_flags(OT_PC_LIBS_PRIVATE DNNL::dnnl ${OpenMP_C_LIBRARIES} ${MPI_C_LIBRARIES} m pthread)
foreach(d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${d}}")
    set(OT_PC_${d} "${CMAKE_INSTALL_${d}}")
  else()
    set(OT_PC_${d} "\${prefix}/${CMAKE_INSTALL_${d}}")
  endif()
endforeach()
# The prefix is written at install time: `cmake --install --prefix` may change it.
set(OT_PC_PREFIX "@OT_PC_PREFIX@")
configure_file(${CMAKE_SOURCE_DIR}/cmake/ot.pc.in ${CMAKE_BINARY_DIR}/ot.pc.in @ONLY)
install(CODE "set(OT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${CMAKE_BINARY_DIR}/ot.pc.in\" \"${CMAKE_BINARY_DIR}/ot.pc\" @ONLY)")
install(FILES ${CMAKE_BINARY_DIR}/ot.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
