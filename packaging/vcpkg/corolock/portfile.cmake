# An overlay port built from this source tree (there is no release archive
# to download yet):
#   vcpkg install corolock --overlay-ports=<corolock>/packaging/vcpkg
# The library alone; the ZooKeeper backend needs the ZooKeeper C client,
# which vcpkg does not have, so it is left out (zk:// URLs are then refused
# with error::invalid_url). test/package/check_recipes.cmake keeps the
# version and the options in step with CMakeLists.txt.
get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

vcpkg_check_features(OUT_FEATURE_OPTIONS FEATURE_OPTIONS
  FEATURES postgresql COROLOCK_WITH_POSTGRESQL)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    ${FEATURE_OPTIONS}
    -DCOROLOCK_WITH_ZOOKEEPER=OFF
    -DCOROLOCK_BUILD_TESTS=OFF
    -DCOROLOCK_BUILD_EXAMPLES=OFF
    -DCOROLOCK_BUILD_TOOLS=OFF
    -DCOROLOCK_BUILD_BENCH=OFF
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(CONFIG_PATH lib/cmake/corolock)
vcpkg_fixup_pkgconfig()
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/debug/include" "${CURRENT_PACKAGES_DIR}/debug/share")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/README.md")
