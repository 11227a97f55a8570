# Debian package of the installed tree, built with CPack: `cpack -G DEB` in a build folder.
#
# The package holds exactly what `cmake --install` installs (bin/tally, bin/tally-reducer,
# <libdir>/libnccl-net-tally.so with its libnccl-net.so link, share/doc/tally,
# share/tally/examples), under /usr. The library folder is the one this build was configured
# with, because `tally` finds the plugin at <bin>/../<libdir> (tools/commands/paths.h): configure
# with -DCMAKE_INSTALL_PREFIX=/usr and GNUInstallDirs picks Debian's multiarch folder
# (lib/x86_64-linux-gnu); any other prefix gives plain lib, which the loader also searches.
# docs/packaging.md has the whole procedure.

set(TALLY_PACKAGE_MAINTAINER "Tally maintainers <tally@example.org>"
    CACHE STRING "Maintainer field of the Debian package")
set(TALLY_PACKAGE_HOMEPAGE "https://example.org/tally"
    CACHE STRING "Homepage field of the Debian package")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tally)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Tally")
set(CPACK_PACKAGE_CONTACT "${TALLY_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "reduction server and CollNet plugin for NCCL")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Release binaries without their debug sections; the plugin's dynamic symbols stay.
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_PACKAGE_NAME tally)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # tally_<version>_<arch>.deb, what the Dockerfiles copy
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${TALLY_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${TALLY_PACKAGE_HOMEPAGE}")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The long description; CPack puts the summary above it and indents it for the control file.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
"Tally lets NCCL run all-reduce through a pool of CPU-only reducer hosts: each
GPU worker sends every buffer once, the reducers sum the slices and send the
sums back.
.
This package has the NCCL net plugin libnccl-net-tally.so (with a
libnccl-net.so link, the name NCCL loads by default), the reducer
tally-reducer, and the tally command (launch, plan, doctor, demo).")
# Depends from the binaries' shared libraries (dpkg-shlibdeps from dpkg-dev, and file).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Loaded at run time only when asked for, so not in Depends: ISA-L for TALLY_CHECKSUM=1 (CRC32C),
# libfabric and libibverbs for the RDMA transports (TALLY_TRANSPORT), OpenSSL's libcrypto for a
# job token's HMAC (TALLY_JOB_TOKEN, --token-file).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libisal2, libfabric1, libibverbs1, libssl3")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# CPack itself adds postinst/postrm scripts that run ldconfig: the plugin is in a loader folder.

include(CPack)

message(STATUS "Debian package: cpack -G DEB gives tally_${PROJECT_VERSION}_<arch>.deb with the "
               "plugin in /usr/${CMAKE_INSTALL_LIBDIR}")
