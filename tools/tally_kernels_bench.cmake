# SPDX-License-Identifier: Apache-2.0
# tally-kernels-bench: Google Benchmark for the reduction kernels (tools/bench/kernels_bench.cc),
# sums of 2, 4 and 8 inputs per type against memcpy in the same run (docs/performance.md).
# Built with the tools, not installed: it is a developer's measuring tool.
find_package(benchmark REQUIRED)

add_executable(tally-kernels-bench ${CMAKE_CURRENT_SOURCE_DIR}/bench/kernels_bench.cc)
target_link_libraries(tally-kernels-bench PRIVATE tally_kernels benchmark::benchmark
                      tally_warnings)
