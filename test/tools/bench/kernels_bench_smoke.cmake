# SPDX-License-Identifier: Apache-2.0
# Runs tally-kernels-bench (path in BENCH) on one small case, through reduce and reduceMany,
# with a tiny min time, and checks that it exits 0, ran the sum and the copy baseline beside it,
# and printed the summary with the sum's fraction of copy bandwidth and its target.
execute_process(
  COMMAND ${BENCH} --benchmark_filter=/bfloat16/8in/256KiB$ --benchmark_min_time=0.01
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 50)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tally-kernels-bench exited with '${rc}'")
endif()
foreach(pattern
    "sum/bfloat16/8in/256KiB(_median)? +[0-9]"
    "copy/8in/256KiB(_median)? +[0-9]"
    "Summary: sums on (generic|avx2|avx512)"
    "256KiB +memcpy +- +8 +[0-9.]+ +[0-9.]+ +1\\.00"
    "256KiB +reduce +bfloat16 +8 +[0-9.]+ +[0-9.]+ +[0-9]+\\.[0-9][0-9] +>= 0\\.50 (met|NOT MET)")
  if(NOT out MATCHES "${pattern}")
    message(FATAL_ERROR "output lacks /${pattern}/")
  endif()
endforeach()
# Only the one sum and the copy baselines ran.
if(out MATCHES "float32|32MiB")
  message(FATAL_ERROR "the filter was not applied")
endif()
