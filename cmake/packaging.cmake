# SPDX-License-Identifier: Apache-2.0
# Debian packages of the installed tree, built with CPack: `cpack -G DEB` in a build folder gives
# three packages, one for each install component:
#
#   tally-nccl-plugin  <libdir>/libnccl-net-tally.so (component plugin). Depends on libc6 only:
#                      what a GPU worker image needs, without the reducer's prometheus-cpp.
#   tally-reducer      bin/tally-reducer and its man page (component reducer).
#   tally-tools        bin/tally, its man pages (tally(1), tally-bench(1), ...), README and
#                      docs/*.md (docs/README.md as index.md), the example job specs (component
#                      tools). Depends on tally-nccl-plugin:
#                      `tally` finds the plugin at <bin>/../<libdir> (tools/commands/paths.h).
#
# Each has a DEP-5 copyright file and a changelog.Debian.gz in share/doc/<package>. The plugin is
# installed under its own name only: libnccl-net.so, the name NCCL opens when NCCL_NET_PLUGIN is
# unset, would take over every NCCL process on the host, so that link is the user's opt-in
# (docs/packaging.md). The library folder is the one this build was configured with: configure
# with -DCMAKE_INSTALL_PREFIX=/usr and GNUInstallDirs picks Debian's multiarch folder
# (lib/x86_64-linux-gnu); any other prefix gives plain lib, which the loader also searches.
# docs/packaging.md has the whole procedure; test/system/packaging/deb_test.sh runs lintian on them.

# The project has no mailing address or web site of its own yet: the Maintainer names the
# project at an address in .invalid (RFC 2606: never delivered), and there is no Homepage field.
# Whoever builds packages to distribute sets both.
set(TALLY_PACKAGE_MAINTAINER "Tally project maintainers <maintainers@tally.invalid>"
    CACHE STRING "Maintainer field of the Debian packages")
set(TALLY_PACKAGE_HOMEPAGE ""
    CACHE STRING "Homepage field of the Debian packages (none when empty)")
set(TALLY_PACKAGE_RELEASE 1 CACHE STRING "Debian revision of the packages (VERSION-RELEASE)")
set(TALLY_PACKAGE_LICENSE_FILE "${PROJECT_SOURCE_DIR}/LICENSE"
    CACHE FILEPATH "License text for the packages' copyright files")
set(TALLY_PACKAGE_LICENSE "Apache-2.0"
    CACHE STRING "DEP-5 short name of the license in TALLY_PACKAGE_LICENSE_FILE")

set(TALLY_DEB_VERSION "${PROJECT_VERSION}-${TALLY_PACKAGE_RELEASE}")
# The copyright file's Source field (with the line break that ends it), only with a homepage.
set(TALLY_PACKAGE_SOURCE_FIELD "")
if(TALLY_PACKAGE_HOMEPAGE)
  set(TALLY_PACKAGE_SOURCE_FIELD "Source: ${TALLY_PACKAGE_HOMEPAGE}\n")
endif()
# The changelog's date: SOURCE_DATE_EPOCH when set (reproducible builds), else now.
string(TIMESTAMP TALLY_PACKAGE_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
string(TIMESTAMP TALLY_PACKAGE_YEAR "%Y" UTC)
if(TALLY_PACKAGE_LICENSE STREQUAL "Apache-2.0")
  # Debian ships this license's text; its copyright files point to it rather than repeat it.
  set(TALLY_PACKAGE_LICENSE_TEXT
" On Debian systems, the full text of the Apache License, Version 2.0 can be
 found in /usr/share/common-licenses/Apache-2.0; it is also the LICENSE file
 of the Tally sources.")
elseif(EXISTS "${TALLY_PACKAGE_LICENSE_FILE}")
  file(READ "${TALLY_PACKAGE_LICENSE_FILE}" tally_license)
  string(STRIP "${tally_license}" tally_license)
  # DEP-5 continuation lines: one space in front, an empty line written as " .".
  string(REGEX REPLACE "\n[ \t]*\n" "\n.\n" tally_license "${tally_license}")
  string(REPLACE "\n" "\n " TALLY_PACKAGE_LICENSE_TEXT " ${tally_license}")
else()
  set(TALLY_PACKAGE_LICENSE_TEXT
" The Tally sources state no license yet (no LICENSE file). Until the
 maintainers choose one, this package grants none: set TALLY_PACKAGE_LICENSE
 and TALLY_PACKAGE_LICENSE_FILE when building packages to distribute.")
  message(STATUS "No ${TALLY_PACKAGE_LICENSE_FILE}: the packages' copyright files say that no "
                 "license is granted")
endif()

# Man pages from `--help` and `--version`, with help2man (scripts/install-deps.sh installs it):
# one for each program and one for each command of `tally` (tally-bench(1), ...), each with the
# environment, exit status and examples of man/PAGE.h2m. test/docs/check_man_pages.py checks
# that every command has its page and every option of its --help is on it.
include(${PROJECT_SOURCE_DIR}/cmake/manpages.cmake)
set(tally_package_files)
if(TALLY_HELP2MAN AND TALLY_GZIP)
  # PROGRAM|COMMAND|SUMMARY
  foreach(page_spec IN ITEMS
      "tally||launch, plan and check Tally jobs"
      "tally|launch|container entrypoint for every pool of a Tally job"
      "tally|plan|check a job with a Tally reducer pool and size the pool"
      "tally|doctor|check that Tally will work on this GPU worker"
      "tally|bench|all-reduce bandwidth of the reduction server beside a ring and Gloo"
      "tally|demo|reducers and workers on loopback, all-reduce checked and timed"
      "tally|env|every TALLY_ variable, and the values the plugin would refuse"
      "tally-reducer||reduction server for Tally's NCCL CollNet plugin")
    string(REPLACE "|" ";" page_spec "${page_spec}")
    list(GET page_spec 0 prog)
    list(GET page_spec 1 command)
    list(GET page_spec 2 summary)
    if(NOT TARGET ${prog})
      continue()
    endif()
    set(name ${prog})
    set(command_args)
    if(command)
      set(name "${prog}-${command}")
      set(command_args COMMAND ${command})
    endif()
    tally_man_page(${prog} "${summary}" page ${command_args}
                   INCLUDE "${PROJECT_SOURCE_DIR}/man/${name}.h2m")
    list(APPEND tally_package_files "${page}")
    set(component tools)
    if(prog STREQUAL "tally-reducer")
      set(component reducer)
    endif()
    install(FILES "${page}" DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT ${component})
  endforeach()
else()
  message(STATUS "help2man or gzip not found: no man pages (apt-get install help2man)")
endif()

# copyright and changelog.Debian.gz of each package, in share/doc/<package>.
set(tally_deb_components plugin reducer tools)
set(tally_deb_packages tally-nccl-plugin tally-reducer tally-tools)
foreach(component package IN ZIP_LISTS tally_deb_components tally_deb_packages)
  set(dir "${PROJECT_BINARY_DIR}/debian/${package}")
  set(TALLY_DEB_PACKAGE ${package})
  configure_file(${CMAKE_CURRENT_LIST_DIR}/debian/copyright.in "${dir}/copyright" @ONLY)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/debian/changelog.in "${dir}/changelog.Debian" @ONLY)
  if(TALLY_GZIP)
    add_custom_command(OUTPUT "${dir}/changelog.Debian.gz"
      COMMAND "${TALLY_GZIP}" -9n -c "${dir}/changelog.Debian" > "${dir}/changelog.Debian.gz"
      DEPENDS "${dir}/changelog.Debian")
    list(APPEND tally_package_files "${dir}/changelog.Debian.gz")
    install(FILES "${dir}/changelog.Debian.gz"
            DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component})
  endif()
  install(FILES "${dir}/copyright"
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component})
  # lintian's overrides: debian/lintian-overrides (every package) and debian/<package>.lintian-
  # overrides, with "PACKAGE" standing for the package's name.
  file(READ ${CMAKE_CURRENT_LIST_DIR}/debian/lintian-overrides overrides)
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/debian/${package}.lintian-overrides)
    file(READ ${CMAKE_CURRENT_LIST_DIR}/debian/${package}.lintian-overrides more)
    string(APPEND overrides "${more}")
  endif()
  string(REPLACE "PACKAGE:" "${package}:" overrides "${overrides}")
  file(CONFIGURE OUTPUT "${dir}/lintian-overrides" CONTENT "${overrides}" @ONLY)
  install(FILES "${dir}/lintian-overrides" DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
          RENAME ${package} COMPONENT ${component})
endforeach()
add_custom_target(tally_package_files ALL DEPENDS ${tally_package_files})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tally)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Tally")
set(CPACK_PACKAGE_CONTACT "${TALLY_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Release binaries without their debug sections; the plugin's dynamic symbols stay.
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL ${tally_deb_components})
set(CPACK_DEB_COMPONENT_INSTALL ON)

set(CPACK_DEBIAN_PACKAGE_RELEASE ${TALLY_PACKAGE_RELEASE})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <package>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${TALLY_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${TALLY_PACKAGE_HOMEPAGE}")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Depends from the binaries' shared libraries (dpkg-shlibdeps from dpkg-dev, and file).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Loaded at run time only when asked for, so not in Depends: ISA-L for TALLY_CHECKSUM=1 (CRC32C),
# libfabric and libibverbs for the RDMA transports (TALLY_TRANSPORT), OpenSSL's libcrypto for a
# job token's HMAC (TALLY_JOB_TOKEN, --token-file).
set(tally_dlopened "libisal2, libfabric1, libibverbs1, libssl3")
set(tally_about
"Tally lets NCCL run all-reduce through a pool of CPU-only reducer hosts: each
GPU worker sends every buffer once, the reducers sum the slices and send the
sums back.")

set(CPACK_DEBIAN_PLUGIN_PACKAGE_NAME tally-nccl-plugin)
set(CPACK_DEBIAN_PLUGIN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PLUGIN_PACKAGE_RECOMMENDS "${tally_dlopened}")
set(CPACK_DEBIAN_PLUGIN_PACKAGE_SUGGESTS tally-tools)
# No CPack shlibdeps here: with it CPack adds postinst/postrm scripts running ldconfig; the
# ldconfig trigger below is Debian's way. Depends comes from plugin_depends.cmake instead.
set(CPACK_DEBIAN_PLUGIN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PLUGIN_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/debian/triggers)
set(CPACK_COMPONENT_PLUGIN_DESCRIPTION "NCCL net and CollNet plugin of the Tally reduction server
${tally_about}

This package has the plugin, libnccl-net-tally.so. NCCL loads it only when
asked: NCCL_NET_PLUGIN=tally, or the tally launch command.")

set(CPACK_DEBIAN_REDUCER_PACKAGE_NAME tally-reducer)
set(CPACK_DEBIAN_REDUCER_PACKAGE_RECOMMENDS "${tally_dlopened}")
set(CPACK_DEBIAN_REDUCER_PACKAGE_SUGGESTS tally-tools)
set(CPACK_COMPONENT_REDUCER_DESCRIPTION "reduction server for NCCL all-reduce on CPU hosts
${tally_about}

This package has the reducer, tally-reducer, with its Prometheus endpoint.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME tally-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "tally-nccl-plugin (= ${TALLY_DEB_VERSION})")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS tally-reducer)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "command line tools of the Tally reduction server
${tally_about}

This package has the tally command (launch, plan, doctor, bench, demo), the
documentation and example job specs.")

# The plugin package's Depends, computed when cpack runs (the plugin is built by then).
set(TALLY_PLUGIN_FILE "$<TARGET_FILE:nccl-net-tally>")
configure_file(${CMAKE_CURRENT_LIST_DIR}/debian/plugin_depends.cmake.in
               "${PROJECT_BINARY_DIR}/debian/plugin_depends.cmake.in" @ONLY)
file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/debian/plugin_depends.cmake"
     INPUT "${PROJECT_BINARY_DIR}/debian/plugin_depends.cmake.in")
set(CPACK_PROJECT_CONFIG_FILE "${PROJECT_BINARY_DIR}/debian/plugin_depends.cmake")

include(CPack)

message(STATUS "Debian packages: cpack -G DEB gives tally-nccl-plugin, tally-reducer and "
               "tally-tools _${TALLY_DEB_VERSION}_<arch>.deb, the plugin in "
               "/usr/${CMAKE_INSTALL_LIBDIR}")
