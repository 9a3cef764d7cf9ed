# layers.cmake - the build checks that headers do not leak layers: files
# are compiled once more, apart, with an include directory put first whose
# headers stop the compiler (#error), so that an include of them, direct or
# through a header, fails the build and names the file.
#
#   no-transport: mem://, the deny cache and the stats need neither hiredis
#   nor OpenSSL (<hiredis/...>, <openssl/...> are poisoned).
#   net: src/net/ includes nothing above it: every private header of src/
#   but internal.h and net/*.h is poisoned (named from src/, as included).
#   config: src/config/ (limits files read into a form) includes only
#   internal.h and its own headers, and neither hiredis nor OpenSSL: it
#   knows no handle, so a handle may hold its form.
set(SLUICE_LAYERS_DIR ${CMAKE_CURRENT_BINARY_DIR}/layers)

function(sluice_poison dir header why)
  file(WRITE ${dir}/${header}
    "#error \"${header} is not for this file: ${why} (cmake/layers.cmake)\"\n")
endfunction()

foreach(h hiredis/hiredis.h hiredis/read.h hiredis/sds.h hiredis/async.h
          openssl/ssl.h openssl/err.h openssl/x509v3.h)
  sluice_poison(${SLUICE_LAYERS_DIR}/no-transport ${h}
    "mem://, the deny cache and the stats build without the transport")
endforeach()

file(GLOB_RECURSE SLUICE_PRIVATE_HEADERS RELATIVE ${CMAKE_CURRENT_SOURCE_DIR}/src
  ${CMAKE_CURRENT_SOURCE_DIR}/src/*.h)
foreach(h ${SLUICE_PRIVATE_HEADERS})
  if(NOT h STREQUAL "internal.h" AND NOT h MATCHES "^net/")
    sluice_poison(${SLUICE_LAYERS_DIR}/net ${h}
      "src/net/ includes only internal.h and its own headers")
  endif()
  if(NOT h STREQUAL "internal.h" AND NOT h MATCHES "^config/")
    sluice_poison(${SLUICE_LAYERS_DIR}/config ${h}
      "src/config/ includes only internal.h and its own headers")
  endif()
endforeach()
foreach(h hiredis/hiredis.h hiredis/read.h hiredis/sds.h hiredis/async.h
          openssl/ssl.h openssl/err.h openssl/x509v3.h)
  sluice_poison(${SLUICE_LAYERS_DIR}/config ${h}
    "src/config/ reads files: no transport")
endforeach()

function(sluice_layer_check name poison)
  add_library(${name} OBJECT ${ARGN})
  target_compile_definitions(${name} PRIVATE SLUICE_BUILDING
    _POSIX_C_SOURCE=200809L)
  target_compile_options(${name} PRIVATE ${SLUICE_WARNINGS})
  target_include_directories(${name} BEFORE PRIVATE ${poison}
    ${CMAKE_CURRENT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/src)
endfunction()

sluice_layer_check(sluice_layers_no_transport
  ${SLUICE_LAYERS_DIR}/no-transport
  src/backends/memory.c src/backends/memtab.c src/features/denycache.c
  src/features/stats.c src/features/prometheus.c)
# The net files themselves need hiredis and OpenSSL, after the poison.
file(GLOB SLUICE_NET_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/src/net/*.c)
sluice_layer_check(sluice_layers_net ${SLUICE_LAYERS_DIR}/net
  ${SLUICE_NET_SOURCES})
target_include_directories(sluice_layers_net SYSTEM PRIVATE
  ${HIREDIS_INCLUDE_DIRS} ${OPENSSL_INCLUDE_DIRS})
file(GLOB SLUICE_CONFIG_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/src/config/*.c)
sluice_layer_check(sluice_layers_config ${SLUICE_LAYERS_DIR}/config
  ${SLUICE_CONFIG_SOURCES})
target_include_directories(sluice_layers_config SYSTEM PRIVATE
  ${YAML_INCLUDE_DIRS})
