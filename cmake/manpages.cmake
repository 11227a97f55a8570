# SPDX-License-Identifier: Apache-2.0
# Man pages made from a program's `--help` and `--version` with help2man, gzipped. Used by
# packaging.cmake; test/cmake/manpages builds it with each CMake generator.
find_program(TALLY_HELP2MAN help2man)
find_program(TALLY_GZIP gzip)

# tally_man_page(TARGET SUMMARY OUT_VAR [COMMAND NAME] [INCLUDE FILE]): a rule that writes
# <build>/man/PAGE.1.gz from the built TARGET, and its path in OUT_VAR. PAGE is TARGET, or
# TARGET-NAME with COMMAND: the page of one command of TARGET, made from `TARGET NAME --help`
# (help2man runs its help option through the shell), its version line naming the page. FILE, in
# help2man's --include format, adds what --help does not say (ENVIRONMENT, EXIT STATUS,
# EXAMPLES). The folder is made by the rule itself: Ninja makes an output's folder, Unix
# Makefiles do not.
function(tally_man_page target summary out_var)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "COMMAND;INCLUDE" "")
  set(dir "${PROJECT_BINARY_DIR}/man")
  set(name ${target})
  set(options)
  if(arg_COMMAND)
    set(name "${target}-${arg_COMMAND}")
    list(APPEND options "--help-option=${arg_COMMAND} --help"
                        "--version-string=${name} ${PROJECT_VERSION}")
  endif()
  set(depends ${target})
  if(arg_INCLUDE)
    list(APPEND options "--include=${arg_INCLUDE}")
    list(APPEND depends "${arg_INCLUDE}")
  endif()
  set(page "${dir}/${name}.1")
  add_custom_command(OUTPUT "${page}.gz"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${dir}"
    COMMAND "${TALLY_HELP2MAN}" --no-info --name "${summary}" ${options} --output "${page}"
            "$<TARGET_FILE:${target}>"
    COMMAND "${TALLY_GZIP}" -9n -f "${page}"
    DEPENDS ${depends} VERBATIM)
  set(${out_var} "${page}.gz" PARENT_SCOPE)
endfunction()
