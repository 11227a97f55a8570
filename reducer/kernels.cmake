add_library(tally_kernels STATIC ${CMAKE_CURRENT_SOURCE_DIR}/kernels.cc)
target_include_directories(tally_kernels PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(tally_kernels PUBLIC tally_common PRIVATE tally_warnings)
