# The plugin driver (tally_driver: drives a built plugin the way NCCL does; used by the demo and
# the functional tests) and the `tally` command (demo, env).
file(GLOB tally_driver_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/driver/*.cc)
add_library(tally_driver STATIC ${tally_driver_sources})
target_include_directories(tally_driver PUBLIC ${PROJECT_SOURCE_DIR})
# Only the kernels (ring all-reduce's local combine) and common; the plugin itself is dlopen'ed.
target_link_libraries(tally_driver PUBLIC tally_kernels tally_common ${CMAKE_DL_LIBS}
                      PRIVATE tally_warnings)

add_executable(tally ${CMAKE_CURRENT_SOURCE_DIR}/tally_main.cc ${CMAKE_CURRENT_SOURCE_DIR}/demo.cc
                     ${CMAKE_CURRENT_SOURCE_DIR}/demo_worker.cc)
target_link_libraries(tally PRIVATE tally_driver CLI11::CLI11 tally_warnings)
# The demo looks for the plugin at <bin>/../<libdir>/libnccl-net-tally.so, as installed.
target_compile_definitions(tally PRIVATE TALLY_INSTALL_LIBDIR="${CMAKE_INSTALL_LIBDIR}")
install(TARGETS tally RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
