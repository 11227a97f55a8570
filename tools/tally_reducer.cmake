# tally-reducer: the reduction server a job's CollNet ranks connect to (reducer/server.h), with
# its Prometheus endpoint (--metrics, tally_metrics.cmake).
add_executable(tally-reducer ${CMAKE_CURRENT_SOURCE_DIR}/reducer_main.cc)
target_link_libraries(tally-reducer PRIVATE tally_reducer tally_metrics CLI11::CLI11 tally_warnings)
install(TARGETS tally-reducer RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT reducer)
