# Debian packages by CPack, from the install components (cpack -G DEB in the
# build folder; test/package/check_deb.sh builds and installs them):
#   libcorolock-dev  component dev: headers, CMake and pkg-config files, and
#                    the library (static; with BUILD_SHARED_LIBS the .so
#                    link, its libcorolockN holding libcorolock.so.N)
#   corolock         component cli: the tool, its man page and completion
# The tool's Depends come from dpkg-shlibdeps; libcorolock-dev's are the -dev
# packages of what its headers include and, for a static library, of the
# libraries it links.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME corolock)
set(CPACK_PACKAGE_VENDOR corolock)
set(CPACK_PACKAGE_CONTACT "corolock developers <corolock@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed locks on Redis, etcd, ZooKeeper and PostgreSQL")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_CLI_PACKAGE_NAME corolock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_CLI_DESCRIPTION
  "a distributed flock(1): corolock run, status, list and break on Redis, etcd, ZooKeeper or PostgreSQL")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libcorolock-dev)
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "C++20 coroutine client for distributed locks on Boost.Asio (headers and library)")
# Debian names Boost's -dev packages by version (libboost-system1.81-dev);
# the unversioned ones are its default Boost, 1.74 on Debian 12.
set(boost_dev "${Boost_VERSION_MAJOR}.${Boost_VERSION_MINOR}-dev")
set(dev_depends "libboost-system${boost_dev}, libssl-dev, libspdlog-dev")
if(COROLOCK_STATIC_LIBRARY)
  string(APPEND dev_depends ", libboost-json${boost_dev}")
  if(COROLOCK_HAVE_POSTGRESQL)
    string(APPEND dev_depends ", libpq-dev")
  endif()
  if(COROLOCK_HAVE_ZOOKEEPER)
    string(APPEND dev_depends ", libzookeeper-st-dev")
  endif()
  set(CPACK_COMPONENTS_ALL dev)
else()
  set(runtime_package libcorolock${PROJECT_VERSION_MAJOR})
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ${runtime_package})
  set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "C++20 coroutine client for distributed locks (shared library)")
  string(APPEND dev_depends ", ${runtime_package} (= ${PROJECT_VERSION})")
  set(CPACK_COMPONENTS_ALL runtime dev)
endif()
# The tool's package only when the tool is built (COROLOCK_BUILD_TOOLS).
if(TARGET corolock_cli)
  list(APPEND CPACK_COMPONENTS_ALL cli)
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${dev_depends}")
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
include(CPack)
