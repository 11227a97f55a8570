# SPDX-License-Identifier: Apache-2.0
# Fuzz targets (test/system/fuzz/). Every target is built two ways:
#   always            <name>_replay: the target's code with a plain main (test/system/fuzz/replay_main.cc)
#                     that replays test/system/fuzz/corpus/<name>, test/system/fuzz/regressions/<name> and the
#                     freshly generated seeds; ctest runs it as fuzz.<name>, so the normal g++
#                     build keeps the targets compiling and replays every saved crash.
#   TALLY_FUZZ=ON     <name>: a libFuzzer binary (clang only: CC=clang CXX=clang++), with the whole
#                     project instrumented for coverage and built with ASan + UBSan. `make fuzz` and
#                     `make fuzz-run` use a build folder of their own for this.
# Included from the top-level CMakeLists.txt before cmake/sanitizers.cmake and before any target.
option(TALLY_FUZZ "Build the libFuzzer targets in test/system/fuzz (needs clang)" OFF)

if(TALLY_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang" OR NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TALLY_FUZZ=ON needs clang for libFuzzer: configure with "
                        "CC=clang CXX=clang++ (found ${CMAKE_CXX_COMPILER_ID})")
  endif()
  if(NOT TALLY_SANITIZE)
    set(TALLY_SANITIZE "address,undefined")
  elseif(TALLY_SANITIZE MATCHES "thread")
    message(FATAL_ERROR "TALLY_FUZZ=ON runs with address,undefined; not with ${TALLY_SANITIZE}")
  endif()
  # Coverage feedback from every library the targets link; the fuzzer runtime and main() are
  # linked into the fuzz binaries alone (-fsanitize=fuzzer in tally_add_fuzz_target).
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# tally_add_fuzz_target(<name> SOURCES <files...> LIBS <targets...>)
# Sources are relative to the calling folder and define LLVMFuzzerTestOneInput.
function(tally_add_fuzz_target name)
  cmake_parse_arguments(arg "" "" "SOURCES;LIBS" ${ARGN})
  set(fuzz_dir ${PROJECT_SOURCE_DIR}/test/system/fuzz)
  add_executable(${name}_replay ${arg_SOURCES} ${fuzz_dir}/replay_main.cc)
  target_link_libraries(${name}_replay PRIVATE ${arg_LIBS} tally_warnings)
  target_include_directories(${name}_replay PRIVATE ${fuzz_dir})
  add_test(NAME fuzz.${name}
           COMMAND ${name}_replay ${fuzz_dir}/corpus/${name} ${fuzz_dir}/regressions/${name}
                   ${CMAKE_BINARY_DIR}/fuzz-seeds/${name})
  set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT 300
                       FIXTURES_REQUIRED tally_fuzz_seeds)
  if(TALLY_FUZZ)
    add_executable(${name} ${arg_SOURCES})
    target_link_libraries(${name} PRIVATE ${arg_LIBS} tally_warnings)
    target_include_directories(${name} PRIVATE ${fuzz_dir})
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    set_property(GLOBAL APPEND PROPERTY TALLY_FUZZ_TARGETS ${name})
  endif()
endfunction()
