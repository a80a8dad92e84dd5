# Configures test/package/subproject, which add_subdirectory()s corolock's
# source tree, and checks that no corolock test was registered; with
# BUILD=ON also builds and runs its consumer (the whole library again, so
# the extended run does that).
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... [-DBUILD=ON] -P check_subproject.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/test/package/subproject -B ${WORK_DIR}
  -DCOROLOCK_SOURCE_DIR=${SOURCE_DIR} -DCMAKE_BUILD_TYPE=Debug)
run(${CMAKE_CTEST_COMMAND} -N --test-dir ${WORK_DIR})
if(NOT last_output MATCHES "Total Tests: 0")
  message(FATAL_ERROR "add_subdirectory(corolock) registered tests:\n${last_output}")
endif()
message(STATUS "add_subdirectory: configured with the library alone, no tests")
if(BUILD)
  run(${CMAKE_COMMAND} --build ${WORK_DIR} --target consumer)
  run(${WORK_DIR}/consumer)
  message(STATUS "add_subdirectory consumer: ${last_output}")
endif()
