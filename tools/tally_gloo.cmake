# SPDX-License-Identifier: Apache-2.0
# tally-gloo-bench: Gloo's ring-chunked and halving-doubling all-reduce, the baseline `tally bench`
# runs beside Tally (docs/gloo.md). Needs Gloo (Debian: libgloo-dev, which installs GlooConfig).
#   TALLY_WITH_GLOO=AUTO  build it when Gloo is found, otherwise say so and skip it (default)
#   TALLY_WITH_GLOO=ON    fail the configure without Gloo
#   TALLY_WITH_GLOO=OFF   never build it
set(TALLY_WITH_GLOO AUTO CACHE STRING "Build tally-gloo-bench: AUTO, ON or OFF")
set_property(CACHE TALLY_WITH_GLOO PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${TALLY_WITH_GLOO}" tally_with_gloo)
if(NOT tally_with_gloo MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TALLY_WITH_GLOO must be AUTO, ON or OFF, not '${TALLY_WITH_GLOO}'")
endif()

if(NOT tally_with_gloo STREQUAL "OFF")
  find_package(Gloo CONFIG QUIET)
  if(Gloo_FOUND AND TARGET gloo)
    # Debian's GlooConfig gives an imported `gloo` target (libgloo.so, headers in /usr/include).
    # Its own dependencies (hiredis, ibverbs) are NEEDED entries of libgloo.so, not ours.
    message(STATUS "Gloo ${GLOO_VERSION} found: building tally-gloo-bench")
    add_executable(tally-gloo-bench
      ${CMAKE_CURRENT_SOURCE_DIR}/gloo/gloo_bench.cc
      ${CMAKE_CURRENT_SOURCE_DIR}/gloo/gloo_runner.cc
      ${CMAKE_CURRENT_SOURCE_DIR}/gloo/gloo_options.cc)
    target_link_libraries(tally-gloo-bench PRIVATE gloo tally_common CLI11::CLI11
                          nlohmann_json::nlohmann_json Threads::Threads tally_warnings)
    # Not installed: a benchmark baseline, run from the build tree (build/tools/, next to
    # `tally`), so the package and the images never depend on Gloo.
  elseif(tally_with_gloo STREQUAL "ON")
    message(FATAL_ERROR "TALLY_WITH_GLOO=ON but Gloo was not found (apt-get install libgloo-dev, "
                        "or set Gloo_DIR to the folder holding GlooConfig.cmake)")
  else()
    message(STATUS "Gloo not found: tally-gloo-bench is not built (apt-get install libgloo-dev)")
  endif()
endif()
