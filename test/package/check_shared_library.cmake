# Checks a shared libcorolock: its SONAME carries the major version, and it
# exports the API (what include/corolock/export.hpp's COROLOCK_API marks)
# and nothing of the library's private layers; then runs CONSUMER, a program
# linked against it, when given.
#   cmake -DLIBRARY=.../libcorolock.so.X.Y.Z -DSONAME=libcorolock.so.X
#         [-DCONSUMER=program] -P check_shared_library.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var LIBRARY SONAME)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()

find_program(READELF readelf REQUIRED)
find_program(NM nm REQUIRED)
execute_process(COMMAND ${READELF} -d ${LIBRARY} OUTPUT_VARIABLE dynamic COMMAND_ERROR_IS_FATAL ANY)
if(NOT dynamic MATCHES "\\(SONAME\\)[^\n]*\\[([^]]+)\\]")
  message(FATAL_ERROR "${LIBRARY} has no SONAME")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL SONAME)
  message(FATAL_ERROR "${LIBRARY}: SONAME ${CMAKE_MATCH_1}, expected ${SONAME}")
endif()

execute_process(COMMAND ${NM} -D -C --defined-only ${LIBRARY}
  OUTPUT_VARIABLE symbols COMMAND_ERROR_IS_FATAL ANY)
string(REPLACE ";" "," symbols "${symbols}")
string(REPLACE "\n" ";" symbols "${symbols}")
# The API: a public class's constructor, a public free function.
foreach(api "corolock::mutex::mutex(" "corolock::client::client(" "corolock::error_category()")
  string(FIND "${symbols}" "${api}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${LIBRARY} does not export ${api}")
  endif()
endforeach()
# Of corolock::detail, only what the installed headers declare and their
# templates call may be exported.
set(allowed_detail lock_handle initiate_drain canonical_names remaining_wait guard_executor
  execute_locked_impl lock_status_impl break_lock_impl release_owner_impl list_locks_impl
  check_token_impl fenced_exec_impl fence_install_impl
  campaign_impl leader_impl proclaim_impl resign_impl election_executor term_executor)
list(JOIN allowed_detail "|" allowed)
set(exported 0)
set(detail 0)
foreach(line IN LISTS symbols)
  # "ADDRESS TYPE NAME": the name, without "typeinfo for " and the like.
  if(NOT line MATCHES "^[0-9a-f]+ [A-Za-z] (.*)$")
    continue()
  endif()
  set(name "${CMAKE_MATCH_1}")
  string(REGEX REPLACE "^(typeinfo name for|typeinfo for|vtable for|VTT for|guard variable for) " ""
    name "${name}")
  if(name MATCHES "^corolock::")
    math(EXPR exported "${exported} + 1")
  endif()
  if(name MATCHES "^corolock::detail::")
    math(EXPR detail "${detail} + 1")
    if(NOT name MATCHES "^corolock::detail::(${allowed})[:(]")
      message(FATAL_ERROR "${LIBRARY} exports a private symbol: ${name}")
    endif()
  endif()
endforeach()
message(STATUS "${LIBRARY}: SONAME ${SONAME}, ${exported} corolock symbols exported, "
  "${detail} of them the detail types the public headers name")

if(CONSUMER)
  execute_process(COMMAND ${CONSUMER} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${CONSUMER} failed (${rc}): ${out}${err}")
  endif()
  message(STATUS "consumer of the shared library: ${out}")
endif()
