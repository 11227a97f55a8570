# SPDX-License-Identifier: Apache-2.0
# The plugin driver (tally_driver: drives a built plugin the way NCCL does; used by the demo and
# the functional tests), the cluster commands (tally_commands: launch, plan, doctor) and the
# `tally` command itself.
file(GLOB tally_driver_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/driver/*.cc)
add_library(tally_driver STATIC ${tally_driver_sources})
target_include_directories(tally_driver PUBLIC ${PROJECT_SOURCE_DIR})
# Only the kernels (ring all-reduce's local combine) and common; the plugin itself is dlopen'ed.
target_link_libraries(tally_driver PUBLIC tally_model tally_kernels tally_common ${CMAKE_DL_LIBS}
                      PRIVATE tally_warnings)

file(GLOB tally_commands_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/commands/*.cc)
add_library(tally_commands STATIC ${tally_commands_sources})
target_include_directories(tally_commands PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(tally_commands
  PUBLIC tally_driver tally_model tally_worker_client tally_transport tally_common tally_cli
         CLI11::CLI11
         nlohmann_json::nlohmann_json
  PRIVATE ${TALLY_YAML_CPP} tally_warnings)
# Installed plugin is found at <bin>/../<libdir>/libnccl-net-tally.so.
target_compile_definitions(tally_commands PRIVATE TALLY_INSTALL_LIBDIR="${CMAKE_INSTALL_LIBDIR}")

# `tally bench` (tools/bench/bench*.cc; kernels_bench.cc there is tally-kernels-bench's) and its
# `tally demo` preset.
file(GLOB tally_bench_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/bench/bench*.cc)
add_executable(tally ${CMAKE_CURRENT_SOURCE_DIR}/tally_main.cc ${CMAKE_CURRENT_SOURCE_DIR}/demo.cc
                     ${tally_bench_sources})
target_link_libraries(tally PRIVATE tally_commands tally_driver tally_cli CLI11::CLI11
                      nlohmann_json::nlohmann_json Threads::Threads tally_warnings)
install(TARGETS tally RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
