file(GLOB tally_reducer_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
# kernels*.cc and float_formats*.cc belong to tally_kernels (kernels.cmake).
list(FILTER tally_reducer_sources EXCLUDE REGEX "/(kernels|float_formats)[^/]*\\.cc$")
add_library(tally_reducer STATIC ${tally_reducer_sources})
target_include_directories(tally_reducer PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(tally_reducer PUBLIC tally_kernels tally_transport tally_common
                      PRIVATE tally_warnings)
