# Man pages made from a program's `--help` and `--version` with help2man, gzipped. Used by
# packaging.cmake; test/cmake/manpages builds it with each CMake generator.
find_program(TALLY_HELP2MAN help2man)
find_program(TALLY_GZIP gzip)

# tally_man_page(TARGET SUMMARY OUT_VAR): a rule that writes <build>/man/TARGET.1.gz from the
# built TARGET, and its path in OUT_VAR. The folder is made by the rule itself: Ninja makes an
# output's folder, Unix Makefiles do not.
function(tally_man_page target summary out_var)
  set(dir "${PROJECT_BINARY_DIR}/man")
  set(page "${dir}/${target}.1")
  add_custom_command(OUTPUT "${page}.gz"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${dir}"
    COMMAND "${TALLY_HELP2MAN}" --no-info --name "${summary}" --output "${page}"
            "$<TARGET_FILE:${target}>"
    COMMAND "${TALLY_GZIP}" -9n -f "${page}"
    DEPENDS ${target} VERBATIM)
  set(${out_var} "${page}.gz" PARENT_SCOPE)
endfunction()
