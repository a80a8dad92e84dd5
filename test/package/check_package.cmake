# Installs the built corolock into a scratch prefix, then configures, builds
# and runs test/package/consumer against it with find_package(CONFIG), and
# compiles the same program once more with the pkg-config file.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P check_package.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/corolock/corolock.hpp lib/cmake/corolock/corolockConfig.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

# A shared library (BUILD_SHARED_LIBS): its SONAME and its exports.
file(GLOB shared ${prefix}/lib*/libcorolock.so.*.*.*)
if(shared)
  string(REGEX REPLACE ".*/(libcorolock\\.so\\.[0-9]+)\\..*" "\\1" soname "${shared}")
  run(${CMAKE_COMMAND} -DLIBRARY=${shared} -DSONAME=${soname}
    -P ${SOURCE_DIR}/test/package/check_shared_library.cmake)
  message(STATUS "${last_output}")
endif()

# The installed headers: the umbrella names every public header; every
# corolock header an installed header includes is installed; and of detail/
# only what the public headers reach is installed (the rest is the library's
# own and stays out of users' builds).
set(inc ${prefix}/include)
file(READ ${inc}/corolock/corolock.hpp umbrella)
file(GLOB public RELATIVE ${inc} ${inc}/corolock/*.hpp)
list(REMOVE_ITEM public corolock/corolock.hpp)
foreach(h IN LISTS public)
  string(FIND "${umbrella}" "#include <${h}>" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "corolock/corolock.hpp does not include <${h}>")
  endif()
endforeach()
set(reached "")
set(todo ${public})
while(todo)
  list(POP_FRONT todo h)
  if(NOT EXISTS ${inc}/${h})
    message(FATAL_ERROR "not installed, but an installed header includes it: ${h}")
  endif()
  file(STRINGS ${inc}/${h} lines REGEX "^#include <corolock/")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^#include <([^>]+)>.*" "\\1" dep "${line}")
    if(NOT dep IN_LIST reached)
      list(APPEND reached ${dep})
      list(APPEND todo ${dep})
    endif()
  endforeach()
endwhile()
file(GLOB installed_detail RELATIVE ${inc} ${inc}/corolock/detail/*)
foreach(h IN LISTS installed_detail)
  if(NOT h IN_LIST reached)
    message(FATAL_ERROR "installed, but no public header includes it: ${h}")
  endif()
endforeach()
list(LENGTH public n_public)
list(LENGTH installed_detail n_detail)
message(STATUS "headers: ${n_public} public, all in the umbrella; ${n_detail} of detail/ installed, all reached")

# The consumer sets no C++ standard: the imported target must carry C++20.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/test/package/consumer -B ${WORK_DIR}/consumer
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run(${WORK_DIR}/consumer/consumer)
message(STATUS "find_package consumer: ${last_output}")

find_program(PKG_CONFIG pkg-config REQUIRED)
file(GLOB pc_dir LIST_DIRECTORIES true ${prefix}/lib*/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
run(${PKG_CONFIG} --cflags --libs corolock)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
# No -std here either: the pkg-config flags must carry C++20.
run(c++ ${SOURCE_DIR}/test/package/consumer/main.cpp ${flags}
    -Wl,-rpath,${prefix}/lib -o ${WORK_DIR}/consumer_pc)
run(${WORK_DIR}/consumer_pc)
message(STATUS "pkg-config consumer: ${last_output}")
