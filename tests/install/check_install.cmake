# Installs the built niox into a scratch prefix, then configures, builds and runs a consumer
# project against it twice: once through find_package(niox), once through pkg-config.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${NIOX_BINARY_DIR} --prefix ${prefix})
run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/cmake-build -G ${CMAKE_GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run(${WORK_DIR}/cmake-build/consumer)
message(STATUS "find_package consumer: ${last_output}")
if(NOT last_output MATCHES "ByteBuffer\\[pos=4 lim=16 cap=16\\]")
  message(FATAL_ERROR "unexpected consumer output: ${last_output}")
endif()

run(${WORK_DIR}/cmake-build/collective_consumer)
message(STATUS "find_package collective consumer: ${last_output}")
if(NOT last_output MATCHES "collective: 1 rank")
  message(FATAL_ERROR "unexpected collective consumer output: ${last_output}")
endif()

# pkg-config route: compile the same source with the flags niox.pc gives.
find_program(PKG_CONFIG pkg-config REQUIRED)
find_program(CXX NAMES c++ g++ clang++ REQUIRED)
file(GLOB_RECURSE pcs ${prefix}/*/niox.pc)
get_filename_component(pcdir "${pcs}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pcdir}")
run(${PKG_CONFIG} --cflags --libs niox)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CXX} ${CONSUMER_SOURCE_DIR}/main.cpp -o ${WORK_DIR}/pc-consumer ${flags})
run(${WORK_DIR}/pc-consumer)
message(STATUS "pkg-config consumer: ${last_output}")
