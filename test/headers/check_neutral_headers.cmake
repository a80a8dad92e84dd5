# The backend-neutral public API: the lock headers compile nothing of the
# Redis client (client.hpp, config.hpp, command.hpp, reply.hpp) nor of the
# PostgreSQL-only locked statements (locked_sql.hpp), so that a user of
# etcd, ZooKeeper or PostgreSQL does not build them. Each header is run
# through the preprocessor alone (-M: its dependencies), which takes a
# fraction of a second.
#   cmake -DCXX=... -DINCLUDE_DIRS="a;b" -DSOURCE_DIR=... -P check_neutral_headers.cmake
set(neutral mutex fair_mutex shared_mutex semaphore multi_lock guard lock_options backend
    error metrics lock_holder lock_type admin election)
set(forbidden client.hpp config.hpp command.hpp reply.hpp locked_sql.hpp)
set(flags -std=c++20 -M -I${SOURCE_DIR}/include)
foreach(dir IN LISTS INCLUDE_DIRS)
  list(APPEND flags -I${dir})
endforeach()
set(failures "")
foreach(h IN LISTS neutral)
  set(header ${SOURCE_DIR}/include/corolock/${h}.hpp)
  if(NOT EXISTS ${header})
    message(FATAL_ERROR "no public header ${h}.hpp: update this list")
  endif()
  execute_process(COMMAND ${CXX} ${flags} -x c++ ${header}
    OUTPUT_VARIABLE deps ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${h}.hpp does not preprocess on its own:\n${err}")
  endif()
  foreach(f IN LISTS forbidden)
    if(deps MATCHES "include/corolock/${f}")
      string(APPEND failures "  corolock/${h}.hpp includes corolock/${f}\n")
    endif()
  endforeach()
endforeach()
# The core's headers, with what they include in turn: nothing of the Redis
# client's public headers.
file(GLOB core_headers ${SOURCE_DIR}/src/core/*.hpp)
foreach(header IN LISTS core_headers)
  execute_process(COMMAND ${CXX} ${flags} -I${SOURCE_DIR}/src -x c++ ${header}
    OUTPUT_VARIABLE deps ERROR_VARIABLE err RESULT_VARIABLE rc)
  get_filename_component(name ${header} NAME)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "src/core/${name} does not preprocess on its own:\n${err}")
  endif()
  foreach(f client.hpp config.hpp command.hpp reply.hpp)
    if(deps MATCHES "include/corolock/${f}")
      string(APPEND failures "  src/core/${name} reaches corolock/${f}\n")
    endif()
  endforeach()
endforeach()

# And the core: nothing in src/core includes a backend's folder or the
# Redis client's public headers (docs/architecture.md: every arrow points
# down). The PostgreSQL locked statements still pass through the seam
# (lock_backend::execute_locked), so locked_sql.hpp is not checked here yet.
file(GLOB core_files ${SOURCE_DIR}/src/core/*.hpp ${SOURCE_DIR}/src/core/*.cpp)
foreach(file IN LISTS core_files)
  file(STRINGS ${file} lines REGEX "^#include")
  foreach(line IN LISTS lines)
    if(line MATCHES "\"(redis|etcd|zk|pg|redlock)/" OR
       line MATCHES "corolock/(client|config|command|reply)\\.hpp")
      get_filename_component(name ${file} NAME)
      string(APPEND failures "  src/core/${name}: ${line}\n")
    endif()
  endforeach()
endforeach()
if(failures)
  message(FATAL_ERROR "backend-neutral code reaches backend-specific code:\n${failures}")
endif()
list(LENGTH neutral n)
list(LENGTH core_files m)
message(STATUS "${n} neutral public headers and ${m} files of src/core checked")
