# programs.cmake - the programs of both CMake consumers: C11, C++11 and
# C++17, each linked with sluice::sluice (shared) and with
# sluice::sluice_static, as c-shared, c++11-static, ...; and the event-loop
# adapters from C++11 and C++17, compiled only (loops.cpp).
set(lib_shared sluice::sluice)
set(lib_static sluice::sluice_static)
foreach(kind shared static)
  add_executable(c-${kind} ${SRC}/consumer.c)
  set_target_properties(c-${kind} PROPERTIES C_STANDARD 11
    C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  set(programs c-${kind})
  foreach(std 11 17)
    add_executable(c++${std}-${kind} ${SRC}/consumer.cpp)
    set_target_properties(c++${std}-${kind} PROPERTIES CXX_STANDARD ${std}
      CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
    list(APPEND programs c++${std}-${kind})
  endforeach()
  foreach(p ${programs})
    target_compile_options(${p} PRIVATE -Wall -Wextra -Wpedantic -Werror)
    target_link_libraries(${p} PRIVATE ${lib_${kind}})
  endforeach()
endforeach()

# C++ services build with these too: old-style casts (and, with g++, casts
# to the type already there) in sluice's headers would fail them.
set(cxx_warnings -Wold-style-cast)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND cxx_warnings -Wuseless-cast)
endif()
foreach(kind shared static)
  foreach(std 11 17)
    target_compile_options(c++${std}-${kind} PRIVATE ${cxx_warnings})
  endforeach()
endforeach()
find_package(PkgConfig REQUIRED)
pkg_check_modules(LOOPS REQUIRED IMPORTED_TARGET libevent libuv)
foreach(std 11 17)
  add_library(loops-c++${std} OBJECT ${SRC}/loops.cpp)
  set_target_properties(loops-c++${std} PROPERTIES CXX_STANDARD ${std}
    CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  target_compile_options(loops-c++${std} PRIVATE -Wall -Wextra -Wpedantic
    -Werror ${cxx_warnings})
  # An object library links nothing: this gives it the include directories.
  target_link_libraries(loops-c++${std} PRIVATE ${lib_shared}
    PkgConfig::LOOPS)
endforeach()
