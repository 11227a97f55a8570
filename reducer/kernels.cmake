# tally_kernels: the reduction loops and the narrow-float conversions.
#
# The loops (reducer/kernels_loops.h) are compiled once per instruction set, each in its own
# file with its own -m flags, and kernels.cc picks one at run time. Only those files get the
# flags, so nothing else in the library can use an instruction the CPU may lack. -O3 lets GCC
# and Clang vectorize the loops; -ffp-contract=off keeps every variant bit-identical.
set(tally_kernels_dir ${CMAKE_CURRENT_SOURCE_DIR})
# kernels_many.cc (reduceMany: the fused narrow-float loops) picks its variants with target
# attributes, so it needs no per-file flags.
set(tally_kernels_sources ${tally_kernels_dir}/kernels.cc ${tally_kernels_dir}/kernels_generic.cc
                          ${tally_kernels_dir}/kernels_many.cc ${tally_kernels_dir}/float_formats.cc)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(tally_kernels_x86 1)
  list(APPEND tally_kernels_sources ${tally_kernels_dir}/kernels_avx2.cc
       ${tally_kernels_dir}/kernels_avx512.cc)
  set_source_files_properties(${tally_kernels_dir}/kernels_avx2.cc PROPERTIES
                              COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  set_source_files_properties(${tally_kernels_dir}/kernels_avx512.cc PROPERTIES
      COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx2;-mfma;-mf16c;-mprefer-vector-width=512")
else()
  set(tally_kernels_x86 0)
endif()

add_library(tally_kernels STATIC ${tally_kernels_sources})
target_include_directories(tally_kernels PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(tally_kernels PUBLIC tally_common PRIVATE tally_warnings)
target_compile_definitions(tally_kernels PRIVATE TALLY_KERNELS_X86=${tally_kernels_x86})
target_compile_options(tally_kernels PRIVATE -O3 -ffp-contract=off -fno-trapping-math)
