# Keeps packaging/vcpkg and packaging/conan honest without building them
# (that needs the network): their version is CMakeLists.txt's; every
# COROLOCK_ option they set is an option of CMakeLists.txt; and the sources
# the Conan recipe exports are enough to configure the library alone, with
# the options both recipes set.
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -P check_recipes.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})

file(READ ${SOURCE_DIR}/CMakeLists.txt lists)
if(NOT lists MATCHES "project\\(corolock VERSION ([0-9.]+)")
  message(FATAL_ERROR "no project(corolock VERSION ...) in CMakeLists.txt")
endif()
set(version ${CMAKE_MATCH_1})

file(READ ${SOURCE_DIR}/packaging/vcpkg/corolock/vcpkg.json manifest)
string(JSON vcpkg_version GET "${manifest}" version)
file(READ ${SOURCE_DIR}/packaging/vcpkg/corolock/portfile.cmake portfile)
file(READ ${SOURCE_DIR}/packaging/conan/conanfile.py recipe)
if(NOT recipe MATCHES "\n    version = \"([^\"]+)\"")
  message(FATAL_ERROR "no version in conanfile.py")
endif()
set(conan_version ${CMAKE_MATCH_1})
foreach(recipe_version vcpkg_version conan_version)
  if(NOT ${recipe_version} STREQUAL version)
    message(FATAL_ERROR "${recipe_version} is ${${recipe_version}}, CMakeLists.txt's version ${version}")
  endif()
endforeach()

# The options: -DCOROLOCK_X=... in the port, variables["COROLOCK_X"] (and the
# COROLOCK_BUILD_{...} loop) in the recipe, and the port's feature options.
string(REGEX MATCHALL "COROLOCK_[A-Z_]+" port_options "${portfile}")
string(REGEX MATCHALL "COROLOCK_[A-Z_]+" conan_options "${recipe}")
if(recipe MATCHES "for part in \\(([^)]*)\\)")
  string(REGEX MATCHALL "[A-Z]+" parts "${CMAKE_MATCH_1}")
  foreach(part IN LISTS parts)
    list(APPEND conan_options COROLOCK_BUILD_${part})
  endforeach()
endif()
list(REMOVE_ITEM conan_options COROLOCK_BUILD_)
set(options ${port_options} ${conan_options})
list(REMOVE_DUPLICATES options)
foreach(option IN LISTS options)
  if(NOT lists MATCHES "option\\(${option} ")
    message(FATAL_ERROR "the recipes set ${option}, which CMakeLists.txt has no option for")
  endif()
endforeach()
foreach(option COROLOCK_BUILD_TESTS COROLOCK_BUILD_EXAMPLES COROLOCK_BUILD_TOOLS
        COROLOCK_BUILD_BENCH COROLOCK_WITH_ZOOKEEPER)
  if(NOT option IN_LIST port_options OR NOT option IN_LIST conan_options)
    message(FATAL_ERROR "a recipe does not set ${option}")
  endif()
endforeach()

# The exported sources: copied as the recipe's export_sources() does, then
# configured the way both recipes build.
if(NOT recipe MATCHES "corolock_sources = \\(([^)]*)\\)")
  message(FATAL_ERROR "no corolock_sources in conanfile.py")
endif()
string(REGEX MATCHALL "\"[^\"]+\"" patterns "${CMAKE_MATCH_1}")
set(tree ${WORK_DIR}/exported)
foreach(pattern IN LISTS patterns)
  string(REPLACE "\"" "" pattern "${pattern}")
  if(pattern MATCHES "^([^*]+)/\\*$")
    file(COPY ${SOURCE_DIR}/${CMAKE_MATCH_1} DESTINATION ${tree})
  else()
    file(COPY ${SOURCE_DIR}/${pattern} DESTINATION ${tree})
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${tree} -B ${WORK_DIR}/build
    -DCOROLOCK_BUILD_TESTS=OFF -DCOROLOCK_BUILD_EXAMPLES=OFF -DCOROLOCK_BUILD_TOOLS=OFF
    -DCOROLOCK_BUILD_BENCH=OFF -DCOROLOCK_WITH_ZOOKEEPER=OFF
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the sources conanfile.py exports do not configure:\n${out}\n${err}")
endif()
list(LENGTH options n_options)
message(STATUS "recipes: version ${version}; ${n_options} options, all CMakeLists.txt's; "
  "the exported sources (${patterns}) configure the library alone")
