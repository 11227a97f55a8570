# tally_metrics: Prometheus metrics for tally-reducer --metrics (tools/metrics/): a
# reducer::ServerObserver kept in prometheus-cpp metrics and served over HTTP. Only the
# tally-reducer executable (and its tests) link it; tally_reducer and the plugin stay free of
# prometheus-cpp and civetweb.
find_package(prometheus-cpp CONFIG REQUIRED)
file(GLOB tally_metrics_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/metrics/*.cc)
add_library(tally_metrics STATIC ${tally_metrics_sources})
target_include_directories(tally_metrics PUBLIC ${PROJECT_SOURCE_DIR})
# core is PUBLIC: latency_histogram.h hands out prometheus types.
target_link_libraries(tally_metrics PUBLIC tally_reducer prometheus-cpp::core
                      PRIVATE prometheus-cpp::pull tally_warnings)
